package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/workflows"
)

// Application error types the cloud activities return, one per provider
// sentinel (the strings are providers.Reason's). All but ErrTypeThrottled
// and ErrTypeCloudTransient are non-retryable: retrying the same launch
// cannot help, the workflow should try its next offer or go back to the
// queue.
const (
	ErrTypeNoCapacity  = "NoCapacity"  // providers.ErrNoCapacity
	ErrTypeQuota       = "Quota"       // providers.ErrQuota
	ErrTypePriceTooLow = "PriceTooLow" // providers.ErrPriceTooLow
	ErrTypeAuth        = "Auth"        // providers.ErrAuth
	ErrTypeInvalid     = "Invalid"     // providers.ErrInvalid, or a provider not configured
	ErrTypeNotFound    = "NotFound"    // providers.ErrNotFound
	// Retryable: the cloud's rate limit, or a failure without a known
	// cause (a deadline, a dropped connection, a 5xx).
	ErrTypeThrottled      = "Throttled"
	ErrTypeCloudTransient = "CloudTransient"
)

// DefaultAwaitNodesTimeout is AwaitNodes' timeout when the input gives none.
const DefaultAwaitNodesTimeout = 10 * time.Minute

// ProviderSource finds a configured provider by name. *cloud.Registry
// implements it; so does ProviderMap.
type ProviderSource interface {
	Provider(name string) (providers.Provider, bool)
}

// ProviderMap is a ProviderSource over a fixed map.
type ProviderMap map[string]providers.Provider

// Provider implements ProviderSource.
func (m ProviderMap) Provider(name string) (providers.Provider, bool) {
	p, ok := m[name]
	return p, ok
}

// Nodes is the part of the capacity view the cloud activities use: which
// nodes have registered, and removing those of terminated instances.
type Nodes interface {
	Nodes(ctx context.Context) ([]gangway.NodeStatus, error)
	RemoveNode(ctx context.Context, nodeID string) error
}

// Cloud holds the dependencies of the burst activities: Provision,
// AwaitNodes and Terminate. Each is safe to run more than once.
type Cloud struct {
	Providers ProviderSource
	Nodes     Nodes
	// Join is how launched instances' agents reach the control plane.
	Join providers.Join
	// JoinTokens, when set, signs each launch a one-use join token for its
	// boot data (internal/nodeauth), good for as many nodes as it launches
	// until the input's JoinBy.
	JoinTokens LaunchTokens
	Metrics    *metrics.Cloud // optional
	Log        *slog.Logger
	// PollInterval is how often AwaitNodes looks at the view; 0 means 1s.
	PollInterval time.Duration
}

// LaunchTokens signs one-use join tokens; *nodeauth.Authority is one.
type LaunchTokens interface {
	LaunchToken(pool, launch string, count int, expires time.Time) (string, error)
}

// Register registers the cloud activities under their contract names.
func (c *Cloud) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(c.Provision, activity.RegisterOptions{Name: workflows.ActivityProvision})
	w.RegisterActivityWithOptions(c.AwaitNodes, activity.RegisterOptions{Name: workflows.ActivityAwaitNodes})
	w.RegisterActivityWithOptions(c.Terminate, activity.RegisterOptions{Name: workflows.ActivityTerminate})
}

func (c *Cloud) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func (c *Cloud) provider(name string) (providers.Provider, error) {
	if c.Providers != nil {
		if p, ok := c.Providers.Provider(name); ok {
			return p, nil
		}
	}
	return nil, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("cloud provider %q is not configured", name), ErrTypeInvalid, nil)
}

// LaunchRequest is the launch Provision asks for: in.Offer's instances,
// all or none, tagged with the job, attempt, token, team and project.
func LaunchRequest(in workflows.ProvisionInput, join providers.Join) providers.LaunchRequest {
	o := in.Offer
	tags := map[string]string{}
	if in.Team != "" {
		tags["team"] = in.Team
	}
	if in.Project != "" {
		tags["project"] = in.Project
	}
	return providers.LaunchRequest{
		Offer:           o.Offer,
		Count:           o.Count,
		Token:           in.Token,
		JobID:           in.JobID,
		Attempt:         in.Attempt,
		MaxPricePerHour: in.MaxPricePerHour,
		Join:            join,
		Tags:            tags,
	}
}

// Provision launches the offer's instances for one attempt of a job. It is
// idempotent by in.Token: a retry (after a timeout, a worker crash) gets
// the instances the first try launched and launches no more. Provider
// errors become application errors of the ErrType* above; only throttling
// and transient failures are retried. Whatever happens, the workflow's
// compensation (Terminate with the same token) ends what was launched.
func (c *Cloud) Provision(ctx context.Context, in workflows.ProvisionInput) (workflows.ProvisionResult, error) {
	p, err := c.provider(in.Offer.Provider)
	if err != nil {
		return workflows.ProvisionResult{}, err
	}
	log := c.log().With("job_id", in.JobID, "attempt", in.Attempt, "provider", in.Offer.Provider,
		"pool", in.Offer.Pool, "token", in.Token)
	req := LaunchRequest(in, c.Join)
	if c.JoinTokens != nil {
		by := in.JoinBy
		if by.IsZero() { // a workflow from before join tokens
			by = time.Now().Truncate(time.Hour).Add(2 * time.Hour)
		}
		if req.Join.Token, err = c.JoinTokens.LaunchToken(in.Offer.Pool, in.Token, req.Count, by); err != nil {
			return workflows.ProvisionResult{}, fmt.Errorf("provision %s: %w", in.Offer.Pool, err)
		}
	}
	// What an earlier try launched with this token (its answer lost, the
	// worker gone) is adopted by Launch, and not counted as launched again.
	adopted := 0
	if in.Token != "" { // "" is refused by Launch; listing it would match all
		if prev, err := p.ListByTag(ctx, providers.TagToken, in.Token); err == nil {
			adopted = len(prev)
		}
	}
	insts, err := p.Launch(ctx, req)
	if err != nil {
		reason := providers.Reason(err)
		if reason == "" {
			reason = "transient"
		}
		c.Metrics.LaunchFailed(p.Name(), in.Offer.Pool, reason)
		log.Warn("launch failed", "count", req.Count, "reason", reason, "error", err)
		return workflows.ProvisionResult{}, cloudError(fmt.Sprintf("provision %d × %s in %s for %s attempt %d",
			req.Count, in.Offer.InstanceType, in.Offer.Pool, in.JobID, in.Attempt), err)
	}
	c.Metrics.Launched(p.Name(), in.Offer.Pool, in.Offer.CapacityType, max(0, len(insts)-adopted))
	out := workflows.ProvisionResult{Instances: make([]workflows.Instance, 0, len(insts))}
	for _, inst := range insts {
		out.Instances = append(out.Instances, workflows.Instance{Provider: p.Name(), ID: inst.ID, NodeID: inst.NodeID})
	}
	log.Info("provisioned", "instances", len(insts), "adopted", adopted)
	return out, nil
}

// AwaitNodes waits until every node in in.NodeIDs has registered with the
// capacity view (and is not marked lost), heartbeating the count ready so
// far. After in.Timeout (DefaultAwaitNodesTimeout when zero) it fails with
// the non-retryable workflows.ErrTypeNodesNotReady, naming the missing
// nodes. A failed read of the view is retried at the next poll.
func (c *Cloud) AwaitNodes(ctx context.Context, in workflows.AwaitNodesInput) (workflows.AwaitNodesResult, error) {
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultAwaitNodesTimeout
	}
	poll := c.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		missing, err := c.missing(ctx, in.NodeIDs)
		now := time.Now()
		if err == nil && len(missing) == 0 {
			return workflows.AwaitNodesResult{ReadyAt: now}, nil
		}
		if err != nil {
			lastErr = err
			missing = in.NodeIDs
		}
		activity.RecordHeartbeat(ctx, len(in.NodeIDs)-len(missing))
		if !now.Before(deadline) {
			msg := fmt.Sprintf("%d of %d nodes did not register within %v: %v", len(missing), len(in.NodeIDs), timeout, missing)
			if lastErr != nil {
				msg += fmt.Sprintf(" (last view error: %v)", lastErr)
			}
			return workflows.AwaitNodesResult{}, temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeNodesNotReady, nil, missing)
		}
		select {
		case <-ctx.Done():
			return workflows.AwaitNodesResult{}, ctx.Err()
		case <-time.After(min(poll, deadline.Sub(now))):
		}
	}
}

// missing lists the nodes of ids not registered (or lost), in order.
func (c *Cloud) missing(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	nodes, err := c.Nodes.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("await nodes: %w", err)
	}
	ready := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		ready[n.Node.ID] = n.State != gangway.NodeLost
	}
	var missing []string
	for _, id := range ids {
		if !ready[id] {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// Terminate ends every instance in.Provider launched with in.Token (found
// by tag, so instances of a launch whose answer was lost are found too)
// and removes their nodes, and in.NodeIDs, from the capacity view. It is
// the burst saga's compensation: idempotent, and it returns how many
// instances it asked the cloud to end that were not already going.
//
// A node a job still holds GPUs on stays in the view (the job's release
// comes later); the reconciler removes it once its agent is silent.
func (c *Cloud) Terminate(ctx context.Context, in workflows.TerminateInput) (int, error) {
	if in.Token == "" {
		// ListByTag(TagToken, "") would match every launch.
		return 0, temporal.NewNonRetryableApplicationError("terminate: token is required", ErrTypeInvalid, nil)
	}
	p, err := c.provider(in.Provider)
	if err != nil {
		return 0, err
	}
	log := c.log().With("job_id", in.JobID, "provider", in.Provider, "token", in.Token)
	insts, err := p.ListByTag(ctx, providers.TagToken, in.Token)
	if err != nil {
		return 0, cloudError(fmt.Sprintf("terminate %s: list instances", in.Token), err)
	}
	var ids []string
	nodes := slices.Clone(in.NodeIDs)
	ending := map[string]int{} // pool → instances not already going
	for _, inst := range insts {
		if job := inst.Tags[providers.TagJob]; in.JobID != "" && job != in.JobID {
			log.Warn("instance with this token belongs to another job; left alone", "instance", inst.ID, "its_job", job)
			continue
		}
		ids = append(ids, inst.ID)
		if inst.NodeID != "" && !slices.Contains(nodes, inst.NodeID) {
			nodes = append(nodes, inst.NodeID)
		}
		if inst.State != providers.Stopping {
			ending[inst.Pool]++
		}
	}
	n := 0
	if len(ids) > 0 {
		if err := p.Terminate(ctx, ids); err != nil {
			return 0, cloudError(fmt.Sprintf("terminate %d instances of %s", len(ids), in.Token), err)
		}
		for pool, k := range ending {
			c.Metrics.Terminated(p.Name(), pool, metrics.TerminateReleased, k)
			n += k
		}
		log.Info("terminated instances", "instances", ids, "newly", n)
	}
	var errs []error
	for _, id := range nodes {
		err := c.Nodes.RemoveNode(ctx, id)
		switch {
		case err == nil, errors.Is(err, capacity.ErrNotFound):
		case errors.Is(err, capacity.ErrNodeBusy):
			log.Warn("node still holds a job's GPUs; left for the reconciler", "node", id)
		default:
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// The instances are gone; a retry lists none and removes the nodes.
		return n, temporal.NewApplicationErrorWithCause(fmt.Sprintf("terminate %s: remove nodes: %v", in.Token, err), ErrTypeCloudTransient, err)
	}
	return n, nil
}

// cloudError turns a provider error into a Temporal application error of
// the sentinel's type: non-retryable for what retrying cannot fix,
// retryable for throttling and failures of unknown cause. Cancellation is
// returned as it is.
func cloudError(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	msg := fmt.Sprintf("%s: %v", op, err)
	reason := providers.Reason(err)
	if providers.Retryable(err) {
		if reason == "" {
			reason = ErrTypeCloudTransient
		}
		return temporal.NewApplicationErrorWithCause(msg, reason, err)
	}
	return temporal.NewNonRetryableApplicationError(msg, reason, err)
}
