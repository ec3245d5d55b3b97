package aws

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

var _ providers.Provider = (*Provider)(nil)

// ec2API is the part of the EC2 client the provider uses. *ec2.Client
// implements it.
type ec2API interface {
	RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, opts ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// InstanceType is one row of the instance type table: what EC2 does not
// tell through the calls made here.
type InstanceType struct {
	Name     string // "p4d.24xlarge"
	GPUModel string // "A100"
	GPUs     int
	// OnDemandPrice is the list price per hour in the region (the Pricing
	// API is another service); 0 means no on-demand offers of this type.
	OnDemandPrice float64
	// InterruptionRate is the spot interruption rate per instance-hour,
	// e.g. from the Spot Instance Advisor's frequency band.
	InterruptionRate float64
}

// Options configures the provider.
type Options struct {
	Name   string // provider name; "" means "aws"
	Region string
	// Zones limits offers to these availability zones; empty means every
	// zone with a spot price.
	Zones []string
	// Subnets maps a zone to the subnet instances launch into there; a zone
	// without one uses the default VPC.
	Subnets          map[string]string
	ImageID          string
	SecurityGroupIDs []string
	KeyName          string
	InstanceProfile  string // IAM instance profile name
	InstanceTypes    []InstanceType
	// Now is the clock for price queries; nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Provider launches EC2 instances, spot or on-demand, one zone per launch.
type Provider struct {
	api   ec2API
	opts  Options
	types map[string]InstanceType
}

// New builds a provider on an EC2 client (ec2.NewFromConfig(cfg), or
// ec2.New with a BaseEndpoint in tests).
func New(client *ec2.Client, opts Options) (*Provider, error) {
	return newProvider(client, opts)
}

func newProvider(api ec2API, opts Options) (*Provider, error) {
	if opts.Name == "" {
		opts.Name = "aws"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.Region == "":
		return nil, errors.New("aws: options: region is required")
	case opts.ImageID == "":
		return nil, errors.New("aws: options: imageID is required")
	case len(opts.InstanceTypes) == 0:
		return nil, errors.New("aws: options: instanceTypes: give at least one")
	}
	p := &Provider{api: api, opts: opts, types: map[string]InstanceType{}}
	for i, it := range opts.InstanceTypes {
		switch {
		case it.Name == "":
			return nil, fmt.Errorf("aws: options: instanceTypes[%d].name is required", i)
		case it.GPUs <= 0 || it.GPUModel == "":
			return nil, fmt.Errorf("aws: options: instanceTypes[%d] (%s): gpus and gpuModel are required", i, it.Name)
		case it.OnDemandPrice < 0 || it.InterruptionRate < 0:
			return nil, fmt.Errorf("aws: options: instanceTypes[%d] (%s): prices and rates must not be negative", i, it.Name)
		case p.types[it.Name].Name != "":
			return nil, fmt.Errorf("aws: options: instanceTypes[%d]: %s given twice", i, it.Name)
		}
		p.types[it.Name] = it
	}
	return p, nil
}

// Name is the provider's name.
func (p *Provider) Name() string { return p.opts.Name }

// Offers lists a spot offer per configured instance type and zone at the
// live spot price (DescribeSpotPriceHistory), and an on-demand offer at the
// table's list price in each of those zones.
func (p *Provider) Offers(ctx context.Context) ([]gangway.Offer, error) {
	now := p.opts.Now()
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"},
		// Start and end now: the price in effect in each zone.
		StartTime: awssdk.Time(now), EndTime: awssdk.Time(now),
	}
	for _, it := range p.opts.InstanceTypes {
		in.InstanceTypes = append(in.InstanceTypes, types.InstanceType(it.Name))
	}
	type key struct{ zone, instanceType string }
	latest := map[key]types.SpotPrice{}
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.api, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, mapError("describe spot price history", err)
		}
		for _, sp := range out.SpotPriceHistory {
			k := key{awssdk.ToString(sp.AvailabilityZone), string(sp.InstanceType)}
			if len(p.opts.Zones) > 0 && !slices.Contains(p.opts.Zones, k.zone) {
				continue
			}
			if old, ok := latest[k]; !ok || awssdk.ToTime(sp.Timestamp).After(awssdk.ToTime(old.Timestamp)) {
				latest[k] = sp
			}
		}
	}
	var offers []gangway.Offer
	for _, k := range slices.SortedFunc(maps.Keys(latest), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.instanceType, b.instanceType), cmp.Compare(a.zone, b.zone))
	}) {
		price, err := strconv.ParseFloat(awssdk.ToString(latest[k].SpotPrice), 64)
		if err != nil {
			p.opts.Log.Warn("aws: unreadable spot price", "zone", k.zone, "type", k.instanceType, "price", awssdk.ToString(latest[k].SpotPrice))
			continue
		}
		it := p.types[k.instanceType]
		offers = append(offers, p.offer(it, k.zone, gangway.CapacitySpot, price))
		if it.OnDemandPrice > 0 {
			offers = append(offers, p.offer(it, k.zone, gangway.CapacityOnDemand, it.OnDemandPrice))
		}
	}
	return offers, nil
}

func (p *Provider) offer(it InstanceType, zone string, ct gangway.CapacityType, price float64) gangway.Offer {
	o := gangway.Offer{
		Provider: p.opts.Name, Pool: providers.PoolName(p.opts.Name, zone, it.Name, ct),
		Region: p.opts.Region, Zone: zone, InstanceType: it.Name, GPUModel: it.GPUModel, GPUsPerInstance: it.GPUs,
		CapacityType: ct, PricePerHour: price,
	}
	if ct == gangway.CapacitySpot {
		o.InterruptionRate = it.InterruptionRate
	}
	return o
}

// Launch runs RunInstances once for the whole request: MinCount
// req.Min(), MaxCount req.Count, ClientToken req.Token, in req.Offer.Zone,
// as one-time spot (terminate on interruption) or on-demand. EC2 launches
// between MinCount and MaxCount or nothing, and answers a repeated token
// with the original reservation, so retries (the SDK's and the caller's)
// never launch twice.
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("aws: launch: %w", err)
	}
	it, ok := p.types[req.Offer.InstanceType]
	if !ok {
		return nil, fmt.Errorf("aws: launch: %w: instance type %q is not in the table", providers.ErrInvalid, req.Offer.InstanceType)
	}
	if req.Offer.Zone == "" {
		return nil, fmt.Errorf("aws: launch: %w: offer.zone is required", providers.ErrInvalid)
	}
	pool := req.Offer.Pool
	if pool == "" {
		pool = providers.PoolName(p.opts.Name, req.Offer.Zone, it.Name, req.Offer.CapacityType)
	}
	tags := req.InstanceTags()
	tags[providers.TagPool] = pool
	script := providers.BootScript(req.Join, providers.Boot{
		JobID: req.JobID, Attempt: req.Attempt, Pool: pool, GPUModel: it.GPUModel, GPUs: it.GPUs,
		NodeIDCommand: imds("instance-id"), AddrCommand: imds("local-ipv4"),
	})
	in := &ec2.RunInstancesInput{
		ImageId:      awssdk.String(p.opts.ImageID),
		InstanceType: types.InstanceType(it.Name),
		MinCount:     awssdk.Int32(int32(req.Min())),
		MaxCount:     awssdk.Int32(int32(req.Count)),
		ClientToken:  awssdk.String(req.Token),
		UserData:     awssdk.String(base64.StdEncoding.EncodeToString([]byte(script))),
		// A shutdown from inside ends the instance rather than leaving a
		// stopped one that still bills for its volumes.
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		MetadataOptions: &types.InstanceMetadataOptionsRequest{
			HttpEndpoint: types.InstanceMetadataEndpointStateEnabled,
			HttpTokens:   types.HttpTokensStateRequired,
		},
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: ec2Tags(tags)},
			{ResourceType: types.ResourceTypeVolume, Tags: ec2Tags(tags)},
		},
	}
	if subnet, ok := p.opts.Subnets[req.Offer.Zone]; ok {
		in.SubnetId = awssdk.String(subnet)
	} else {
		in.Placement = &types.Placement{AvailabilityZone: awssdk.String(req.Offer.Zone)}
	}
	if len(p.opts.SecurityGroupIDs) > 0 {
		in.SecurityGroupIds = p.opts.SecurityGroupIDs
	}
	if p.opts.KeyName != "" {
		in.KeyName = awssdk.String(p.opts.KeyName)
	}
	if p.opts.InstanceProfile != "" {
		in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: awssdk.String(p.opts.InstanceProfile)}
	}
	if req.Offer.CapacityType == gangway.CapacitySpot {
		spot := &types.SpotMarketOptions{
			SpotInstanceType:             types.SpotInstanceTypeOneTime,
			InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
		}
		if req.MaxPricePerHour > 0 {
			spot.MaxPrice = awssdk.String(strconv.FormatFloat(req.MaxPricePerHour, 'f', -1, 64))
		}
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot, SpotOptions: spot}
	}
	out, err := p.api.RunInstances(ctx, in)
	if err != nil {
		return nil, mapError(fmt.Sprintf("run %d × %s in %s (%s)", req.Count, it.Name, req.Offer.Zone, req.Offer.CapacityType), err)
	}
	launched := make([]providers.Instance, 0, len(out.Instances))
	for _, i := range out.Instances {
		launched = append(launched, p.instance(i))
	}
	p.opts.Log.Info("aws: launched", "job_id", req.JobID, "attempt", req.Attempt, "token", req.Token,
		"pool", pool, "asked", req.Count, "launched", len(launched), "reservation", awssdk.ToString(out.ReservationId))
	return launched, nil
}

// imds is a shell command that prints an IMDSv2 metadata item.
func imds(item string) string {
	return `curl -sf -H "X-aws-ec2-metadata-token: $(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)" http://169.254.169.254/latest/meta-data/` + item
}

// Describe looks the instances up by an instance-id filter, which, unlike
// InstanceIds, does not fail the whole call for one unknown ID.
func (p *Provider) Describe(ctx context.Context, ids []string) ([]providers.Instance, error) {
	found := map[string]providers.Instance{}
	for chunk := range slices.Chunk(ids, 200) {
		got, err := p.describe(ctx, "describe instances", []types.Filter{{Name: awssdk.String("instance-id"), Values: chunk}})
		if err != nil {
			return nil, err
		}
		for _, in := range got {
			found[in.ID] = in
		}
	}
	out := []providers.Instance{}
	for _, id := range ids {
		if in, ok := found[id]; ok {
			out = append(out, in)
		}
	}
	return out, nil
}

// Terminate calls TerminateInstances. EC2 rejects the whole call when one
// ID is unknown (InvalidInstanceID.NotFound); Terminate then retries with
// the IDs that still exist.
func (p *Provider) Terminate(ctx context.Context, ids []string) error {
	for chunk := range slices.Chunk(ids, 1000) {
		_, err := p.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: chunk})
		if err == nil {
			continue
		}
		err = mapError("terminate instances", err)
		if !errors.Is(err, providers.ErrNotFound) {
			return err
		}
		known, err := p.Describe(ctx, chunk)
		if err != nil {
			return err
		}
		var rest []string
		for _, in := range known {
			if in.State != providers.Terminated {
				rest = append(rest, in.ID)
			}
		}
		if len(rest) == 0 {
			continue
		}
		if _, err := p.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: rest}); err != nil {
			return mapError("terminate instances", err)
		}
	}
	return nil
}

// ListByTag describes the instances with the tag that are not terminated.
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]providers.Instance, error) {
	tag := types.Filter{Name: awssdk.String("tag:" + key), Values: []string{value}}
	if value == "" {
		tag = types.Filter{Name: awssdk.String("tag-key"), Values: []string{key}}
	}
	return p.describe(ctx, "list instances by tag", []types.Filter{tag, {
		Name:   awssdk.String("instance-state-name"),
		Values: []string{"pending", "running", "shutting-down", "stopping", "stopped"},
	}})
}

func (p *Provider) describe(ctx context.Context, op string, filters []types.Filter) ([]providers.Instance, error) {
	out := []providers.Instance{}
	pages := ec2.NewDescribeInstancesPaginator(p.api, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: awssdk.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, mapError(op, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, p.instance(i))
			}
		}
	}
	return out, nil
}

// instance converts an EC2 instance; GPUs come from the table.
func (p *Provider) instance(i types.Instance) providers.Instance {
	in := providers.Instance{
		ID: awssdk.ToString(i.InstanceId), NodeID: awssdk.ToString(i.InstanceId), Provider: p.opts.Name,
		InstanceType: string(i.InstanceType), CapacityType: gangway.CapacityOnDemand,
		PrivateIP: awssdk.ToString(i.PrivateIpAddress), LaunchedAt: awssdk.ToTime(i.LaunchTime),
		Tags: map[string]string{},
	}
	if i.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		in.CapacityType = gangway.CapacitySpot
	}
	if i.Placement != nil {
		in.Zone = awssdk.ToString(i.Placement.AvailabilityZone)
	}
	if i.State != nil {
		in.State = state(i.State.Name)
	}
	if i.StateReason != nil {
		in.StateReason = awssdk.ToString(i.StateReason.Message)
	}
	for _, t := range i.Tags {
		in.Tags[awssdk.ToString(t.Key)] = awssdk.ToString(t.Value)
	}
	if it, ok := p.types[in.InstanceType]; ok {
		in.GPUModel, in.GPUs = it.GPUModel, it.GPUs
	}
	in.Pool = in.Tags[providers.TagPool]
	if in.Pool == "" {
		in.Pool = providers.PoolName(p.opts.Name, in.Zone, in.InstanceType, in.CapacityType)
	}
	return in
}

func state(s types.InstanceStateName) providers.State {
	switch s {
	case types.InstanceStateNamePending:
		return providers.Pending
	case types.InstanceStateNameRunning:
		return providers.Running
	case types.InstanceStateNameShuttingDown, types.InstanceStateNameStopping:
		return providers.Stopping
	case types.InstanceStateNameStopped:
		return providers.Stopped
	}
	return providers.Terminated
}

func ec2Tags(m map[string]string) []types.Tag {
	out := make([]types.Tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, types.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return out
}
