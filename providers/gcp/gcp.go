package gcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

var _ providers.Provider = (*Provider)(nil)

// labelCount records a launch's count on its VMs, so a token reused with
// another count is caught.
const labelCount = "gangway-count"

// instancesAPI is the part of the Compute instances client the provider
// uses. *compute.InstancesClient implements it.
type instancesAPI interface {
	Insert(ctx context.Context, req *computepb.InsertInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
	Get(ctx context.Context, req *computepb.GetInstanceRequest, opts ...gax.CallOption) (*computepb.Instance, error)
	Delete(ctx context.Context, req *computepb.DeleteInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
	List(ctx context.Context, req *computepb.ListInstancesRequest, opts ...gax.CallOption) *compute.InstanceIterator
}

// MachineType is one row of the machine type table.
type MachineType struct {
	Name     string // "a2-highgpu-1g", "n1-standard-8"
	GPUModel string // "A100"
	GPUs     int
	// Accelerator is the accelerator type to attach ("nvidia-tesla-v100")
	// for N1 machine types; "" for types with built-in GPUs (A2, A3, G2).
	Accelerator string
	// InterruptionRate is the spot preemption rate per instance-hour.
	InterruptionRate float64
}

// Price is what one machine type costs per hour in one region, GPUs
// included. The Compute API does not serve prices; they come from config.
type Price struct {
	MachineType string
	Region      string
	Spot        float64 // 0: no spot offers
	OnDemand    float64 // 0: no on-demand offers
}

// Options configures the provider.
type Options struct {
	Name    string // provider name; "" means "gcp"
	Project string
	// Zones are where offers are made and ListByTag looks.
	Zones        []string
	MachineTypes []MachineType
	Prices       []Price
	// Image is the boot disk's source image
	// ("projects/P/global/images/family/F").
	Image      string
	DiskSizeGB int64 // 0 means 100
	// Network and Subnetwork are URLs or partial paths; "" uses the
	// project's default network.
	Network, Subnetwork string
	// ServiceAccount is the instances' service account email; "" for none.
	ServiceAccount string
	Log            *slog.Logger
}

// Provider launches Compute Engine VMs, spot or standard.
type Provider struct {
	api    instancesAPI
	opts   Options
	types  map[string]MachineType
	prices map[[2]string]Price // machine type, region
}

// New builds a provider on an instances client
// (compute.NewInstancesRESTClient).
func New(client *compute.InstancesClient, opts Options) (*Provider, error) {
	return newProvider(client, opts)
}

func newProvider(api instancesAPI, opts Options) (*Provider, error) {
	if opts.Name == "" {
		opts.Name = "gcp"
	}
	if opts.DiskSizeGB == 0 {
		opts.DiskSizeGB = 100
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.Project == "":
		return nil, errors.New("gcp: options: project is required")
	case len(opts.Zones) == 0:
		return nil, errors.New("gcp: options: zones: give at least one")
	case opts.Image == "":
		return nil, errors.New("gcp: options: image is required")
	case len(opts.MachineTypes) == 0:
		return nil, errors.New("gcp: options: machineTypes: give at least one")
	}
	p := &Provider{api: api, opts: opts, types: map[string]MachineType{}, prices: map[[2]string]Price{}}
	for i, mt := range opts.MachineTypes {
		switch {
		case mt.Name == "":
			return nil, fmt.Errorf("gcp: options: machineTypes[%d].name is required", i)
		case mt.GPUs <= 0 || mt.GPUModel == "":
			return nil, fmt.Errorf("gcp: options: machineTypes[%d] (%s): gpus and gpuModel are required", i, mt.Name)
		case mt.InterruptionRate < 0:
			return nil, fmt.Errorf("gcp: options: machineTypes[%d] (%s): interruptionRate must not be negative", i, mt.Name)
		case p.types[mt.Name].Name != "":
			return nil, fmt.Errorf("gcp: options: machineTypes[%d]: %s given twice", i, mt.Name)
		}
		p.types[mt.Name] = mt
	}
	for i, pr := range opts.Prices {
		switch {
		case p.types[pr.MachineType].Name == "":
			return nil, fmt.Errorf("gcp: options: prices[%d]: machine type %q is not in machineTypes", i, pr.MachineType)
		case pr.Region == "":
			return nil, fmt.Errorf("gcp: options: prices[%d]: region is required", i)
		case pr.Spot < 0 || pr.OnDemand < 0:
			return nil, fmt.Errorf("gcp: options: prices[%d]: prices must not be negative", i)
		}
		p.prices[[2]string{pr.MachineType, pr.Region}] = pr
	}
	return p, nil
}

// Name is the provider's name.
func (p *Provider) Name() string { return p.opts.Name }

// Offers lists, per zone and machine type with a price for the zone's
// region, a spot and an on-demand offer. It makes no API call.
func (p *Provider) Offers(ctx context.Context) ([]gangway.Offer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gcp: offers: %w", err)
	}
	var offers []gangway.Offer
	for _, mt := range p.opts.MachineTypes {
		for _, zone := range p.opts.Zones {
			pr, ok := p.prices[[2]string{mt.Name, region(zone)}]
			if !ok {
				continue
			}
			for _, o := range []struct {
				ct    gangway.CapacityType
				price float64
				rate  float64
			}{{gangway.CapacitySpot, pr.Spot, mt.InterruptionRate}, {gangway.CapacityOnDemand, pr.OnDemand, 0}} {
				if o.price > 0 {
					offers = append(offers, gangway.Offer{
						Provider: p.opts.Name, Pool: providers.PoolName(p.opts.Name, zone, mt.Name, o.ct),
						Region: region(zone), Zone: zone, InstanceType: mt.Name, GPUModel: mt.GPUModel, GPUsPerInstance: mt.GPUs,
						CapacityType: o.ct, PricePerHour: o.price, InterruptionRate: o.rate,
					})
				}
			}
		}
	}
	return offers, nil
}

// region is the region of a zone: "us-central1-a" → "us-central1".
func region(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

// Launch inserts one VM per instance, named <token>-<i>, each with its own
// requestId (providers.TokenUUID(token, i)), and waits for the insert
// operations. A retry with the same token finds each VM again, through
// GCE's requestId deduplication or, after that window, the name already
// taken (409), so it never launches twice. When fewer than req.Min()
// come up it deletes the ones that did and returns the cause
// (ErrNoCapacity for a stockout).
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("gcp: launch: %w", err)
	}
	mt, ok := p.types[req.Offer.InstanceType]
	if !ok {
		return nil, fmt.Errorf("gcp: launch: %w: machine type %q is not in the table", providers.ErrInvalid, req.Offer.InstanceType)
	}
	zone := req.Offer.Zone
	if !slices.Contains(p.opts.Zones, zone) {
		return nil, fmt.Errorf("gcp: launch: %w: zone %q is not configured", providers.ErrInvalid, zone)
	}
	if req.Offer.CapacityType == gangway.CapacitySpot && req.MaxPricePerHour > 0 {
		// GCE spot VMs take no bid; the configured price stands in for one.
		if pr := p.prices[[2]string{mt.Name, region(zone)}]; pr.Spot > req.MaxPricePerHour {
			return nil, fmt.Errorf("gcp: launch in %s: %w: $%.4f/h > max $%.4f/h", zone, providers.ErrPriceTooLow, pr.Spot, req.MaxPricePerHour)
		}
	}
	pool := req.Offer.Pool
	if pool == "" {
		pool = providers.PoolName(p.opts.Name, zone, mt.Name, req.Offer.CapacityType)
	}
	tags := req.InstanceTags()
	tags[providers.TagPool] = pool
	tags[labelCount] = fmt.Sprint(req.Count)
	// GCE does not check that a repeated requestId repeats the request,
	// and names are unique per zone only: look for an earlier launch of
	// this token first, as EC2 does with IdempotentParameterMismatch.
	earlier, err := p.ListByTag(ctx, providers.TagToken, req.Token)
	if err != nil {
		return nil, err
	}
	for _, in := range earlier {
		if in.Zone != zone || in.InstanceType != mt.Name || in.CapacityType != req.Offer.CapacityType || in.Tags[labelCount] != tags[labelCount] {
			return nil, fmt.Errorf("gcp: launch: %w: token %s was used for %s × %s %s in %s", providers.ErrInvalid,
				req.Token, in.Tags[labelCount], in.InstanceType, in.CapacityType, in.Zone)
		}
	}
	script := providers.BootScript(req.Join, providers.Boot{
		JobID: req.JobID, Attempt: req.Attempt, Pool: pool, GPUModel: mt.GPUModel, GPUs: mt.GPUs,
		NodeIDCommand: metadata("instance/name"), AddrCommand: metadata("instance/network-interfaces/0/ip"),
	})

	var (
		up       []string // names that exist
		ops      []*compute.Operation
		opNames  []string
		shortage error // why some did not come up
	)
	for i := range req.Count {
		name := fmt.Sprintf("%s-%d", req.Token, i)
		op, err := p.api.Insert(ctx, &computepb.InsertInstanceRequest{
			Project: p.opts.Project, Zone: zone, RequestId: proto.String(providers.TokenUUID(req.Token, i)),
			InstanceResource: p.resource(name, zone, mt, req.Offer.CapacityType, tags, script),
		})
		switch {
		case err == nil:
			ops, opNames = append(ops, op), append(opNames, name)
		case isAlreadyExists(err):
			up = append(up, name) // a previous try of this launch made it
		default:
			err = mapError(fmt.Sprintf("insert %s in %s", name, zone), err, nil)
			if providers.Retryable(err) {
				// The caller retries with the same token and adopts what
				// this call inserted.
				return nil, err
			}
			shortage = err
		}
		if shortage != nil {
			break
		}
	}
	for i, op := range ops {
		err := op.Wait(ctx)
		if err == nil && op.Proto().GetError() == nil {
			up = append(up, opNames[i])
			continue
		}
		if err == nil {
			err = errors.New(op.Proto().GetError().String())
		}
		err = mapError(fmt.Sprintf("insert %s in %s", opNames[i], zone), err, op.Proto())
		if providers.Retryable(err) {
			return nil, err
		}
		shortage = cmp.Or(shortage, err)
	}
	if len(up) < req.Min() {
		if len(up) > 0 {
			p.deleteNames(ctx, zone, up)
		}
		return nil, fmt.Errorf("gcp: launch %d × %s in %s: %d came up, want at least %d: %w", req.Count, mt.Name, zone, len(up), req.Min(), shortage)
	}
	ids := make([]string, len(up))
	for i, name := range up {
		ids[i] = zone + "/" + name
	}
	launched, err := p.Describe(ctx, ids)
	if err != nil {
		return nil, err
	}
	p.opts.Log.Info("gcp: launched", "job_id", req.JobID, "attempt", req.Attempt, "token", req.Token,
		"pool", pool, "asked", req.Count, "launched", len(launched))
	return launched, nil
}

// metadata is a shell command that prints a GCE metadata item.
func metadata(item string) string {
	return "curl -sf -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/" + item
}

func (p *Provider) resource(name, zone string, mt MachineType, ct gangway.CapacityType, tags map[string]string, script string) *computepb.Instance {
	labels := make(map[string]string, len(tags))
	for k, v := range tags {
		labels[labelKey(k)] = labelValue(v)
	}
	// GPUs cannot live-migrate: host maintenance stops the VM either way.
	sched := &computepb.Scheduling{OnHostMaintenance: proto.String("TERMINATE")}
	if ct == gangway.CapacitySpot {
		sched.ProvisioningModel = proto.String("SPOT")
		sched.InstanceTerminationAction = proto.String("DELETE")
		sched.AutomaticRestart = proto.Bool(false)
	} else {
		sched.ProvisioningModel = proto.String("STANDARD")
		sched.AutomaticRestart = proto.Bool(true)
	}
	in := &computepb.Instance{
		Name:        proto.String(name),
		MachineType: proto.String(fmt.Sprintf("zones/%s/machineTypes/%s", zone, mt.Name)),
		Labels:      labels,
		Scheduling:  sched,
		Metadata: &computepb.Metadata{Items: []*computepb.Items{
			{Key: proto.String("startup-script"), Value: proto.String(script)},
		}},
		Disks: []*computepb.AttachedDisk{{
			Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{
				SourceImage: proto.String(p.opts.Image), DiskSizeGb: proto.Int64(p.opts.DiskSizeGB),
			},
		}},
		NetworkInterfaces: []*computepb.NetworkInterface{{}},
	}
	if p.opts.Network != "" {
		in.NetworkInterfaces[0].Network = proto.String(p.opts.Network)
	}
	if p.opts.Subnetwork != "" {
		in.NetworkInterfaces[0].Subnetwork = proto.String(p.opts.Subnetwork)
	}
	if mt.Accelerator != "" {
		in.GuestAccelerators = []*computepb.AcceleratorConfig{{
			AcceleratorType:  proto.String(fmt.Sprintf("zones/%s/acceleratorTypes/%s", zone, mt.Accelerator)),
			AcceleratorCount: proto.Int32(int32(mt.GPUs)),
		}}
	}
	if p.opts.ServiceAccount != "" {
		in.ServiceAccounts = []*computepb.ServiceAccount{{
			Email: proto.String(p.opts.ServiceAccount), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"},
		}}
	}
	return in
}

// Describe gets each instance; IDs are "zone/name". Deleted instances are
// left out.
func (p *Provider) Describe(ctx context.Context, ids []string) ([]providers.Instance, error) {
	out := []providers.Instance{}
	for _, id := range ids {
		zone, name, ok := strings.Cut(id, "/")
		if !ok || zone == "" || name == "" {
			return nil, fmt.Errorf("gcp: describe: %w: instance ID %q is not zone/name", providers.ErrInvalid, id)
		}
		in, err := p.api.Get(ctx, &computepb.GetInstanceRequest{Project: p.opts.Project, Zone: zone, Instance: name})
		if err != nil {
			err = mapError("get "+id, err, nil)
			if errors.Is(err, providers.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, p.instance(in))
	}
	return out, nil
}

// Terminate deletes the instances without waiting for the delete
// operations: they show Stopping until gone. A 404 is success.
func (p *Provider) Terminate(ctx context.Context, ids []string) error {
	for _, id := range ids {
		zone, name, ok := strings.Cut(id, "/")
		if !ok || zone == "" || name == "" {
			return fmt.Errorf("gcp: terminate: %w: instance ID %q is not zone/name", providers.ErrInvalid, id)
		}
		if err := p.delete(ctx, zone, name); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) delete(ctx context.Context, zone, name string) error {
	_, err := p.api.Delete(ctx, &computepb.DeleteInstanceRequest{Project: p.opts.Project, Zone: zone, Instance: name})
	if err != nil {
		err = mapError("delete "+zone+"/"+name, err, nil)
		if !errors.Is(err, providers.ErrNotFound) {
			return err
		}
	}
	return nil
}

// deleteNames cleans up after a launch that fell short, best effort: the
// caller's compensation and the reconciler catch what this misses.
func (p *Provider) deleteNames(ctx context.Context, zone string, names []string) {
	for _, name := range names {
		if err := p.delete(ctx, zone, name); err != nil {
			p.opts.Log.Warn("gcp: cleanup after a short launch failed", "zone", zone, "instance", name, "err", err)
		}
	}
}

// ListByTag lists, in every configured zone, the instances whose label
// key (folded as labels are, see labelValue) has value; deleted ones are
// gone from the list.
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]providers.Instance, error) {
	filter := fmt.Sprintf("labels.%s:*", labelKey(key))
	if value != "" {
		filter = fmt.Sprintf("labels.%s = %q", labelKey(key), labelValue(value))
	}
	out := []providers.Instance{}
	for _, zone := range p.opts.Zones {
		it := p.api.List(ctx, &computepb.ListInstancesRequest{Project: p.opts.Project, Zone: zone, Filter: proto.String(filter)})
		for {
			in, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				return nil, mapError("list instances in "+zone, err, nil)
			}
			out = append(out, p.instance(in))
		}
	}
	return out, nil
}

// instance converts a Compute instance; GPUs come from the table.
func (p *Provider) instance(in *computepb.Instance) providers.Instance {
	zone := last(in.GetZone())
	out := providers.Instance{
		ID: zone + "/" + in.GetName(), NodeID: in.GetName(), Provider: p.opts.Name, Zone: zone,
		InstanceType: last(in.GetMachineType()), CapacityType: gangway.CapacityOnDemand,
		State: state(in.GetStatus()), StateReason: in.GetStatusMessage(), Tags: maps.Clone(in.GetLabels()),
	}
	if out.Tags == nil {
		out.Tags = map[string]string{}
	}
	if in.GetScheduling().GetProvisioningModel() == "SPOT" {
		out.CapacityType = gangway.CapacitySpot
	}
	if mt, ok := p.types[out.InstanceType]; ok {
		out.GPUModel, out.GPUs = mt.GPUModel, mt.GPUs
	}
	if nics := in.GetNetworkInterfaces(); len(nics) > 0 {
		out.PrivateIP = nics[0].GetNetworkIP()
	}
	if t, err := time.Parse(time.RFC3339, in.GetCreationTimestamp()); err == nil {
		out.LaunchedAt = t
	}
	out.Pool = out.Tags[providers.TagPool]
	if out.Pool == "" {
		out.Pool = providers.PoolName(p.opts.Name, zone, out.InstanceType, out.CapacityType)
	}
	return out
}

func state(status string) providers.State {
	switch status {
	case "PROVISIONING", "STAGING", "PENDING":
		return providers.Pending
	case "RUNNING":
		return providers.Running
	case "STOPPING", "PENDING_STOP", "DEPROVISIONING", "SUSPENDING", "REPAIRING":
		return providers.Stopping
	case "TERMINATED", "SUSPENDED", "STOPPED":
		// TERMINATED is GCE's word for stopped: the VM and its disk remain.
		return providers.Stopped
	}
	return providers.Pending
}

// last is the last path segment of a resource URL.
func last(url string) string { return url[strings.LastIndexByte(url, '/')+1:] }

// labelKey and labelValue fold a tag into GCE's label alphabet: lowercase
// letters, digits, '_' and '-', at most 63 characters (keys start with a
// letter). Job IDs and Gangway's tags are already in it.
func labelKey(k string) string {
	k = labelValue(k)
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		k = "k" + k
	}
	return k[:min(len(k), 63)]
}

func labelValue(v string) string {
	b := []byte(strings.ToLower(v))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 63)])
}
