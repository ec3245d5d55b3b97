package providers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
)

// Provider is one cloud (or the fake) as Gangway rents from it.
//
// Every method takes the caller's context and honours its deadline. Errors
// wrap one of the sentinels below where the cause is known (see Retryable);
// anything else (a dropped connection, a 5xx, a deadline) is transient.
type Provider interface {
	// Name identifies the provider in offers, instances and pool names
	// ("aws", "gcp", "fake").
	Name() string

	// Offers lists what can be launched now: one offer per zone, instance
	// type and capacity type, with the current price. It launches nothing.
	Offers(ctx context.Context) ([]gangway.Offer, error)

	// Launch starts req.Count instances of req.Offer, tagged with the job,
	// attempt, token and pool, each booting the agent with req.Join.
	//
	// It is idempotent by req.Token: a call repeated with the same token
	// (after a timeout, a crash, a retried activity) returns the instances
	// the first call launched and launches no more. Reusing a token with a
	// different offer or count is ErrInvalid.
	//
	// It returns at least req.MinCount instances (all Count when MinCount is
	// 0) or an error, never both: fewer than Count but at least MinCount is
	// partial fulfilment, reported by the length of the result. When the
	// cloud cannot give MinCount it returns ErrNoCapacity (or ErrQuota,
	// ErrPriceTooLow) and leaves nothing from this call running. After a
	// transient error (ErrThrottled, a deadline) instances may be running
	// already; a retry with the same token adopts them, and the caller's
	// compensation terminates ListByTag(TagToken, token) on every path.
	Launch(ctx context.Context, req LaunchRequest) ([]Instance, error)

	// Describe returns the instances with these IDs that the cloud still
	// knows, in the order asked. An unknown or long-gone ID is left out, not
	// an error; a terminated instance may still show, as Terminated.
	Describe(ctx context.Context, ids []string) ([]Instance, error)

	// Terminate ends the instances. It is idempotent: IDs already
	// terminating, terminated or unknown are fine. It returns once the cloud
	// has accepted the request; instances then show Stopping or Terminated
	// until they are gone.
	Terminate(ctx context.Context, ids []string) error

	// ListByTag returns the instances not yet terminated (so also those
	// stopping or stopped, which still cost money) whose tag (GCP: label)
	// key has this value; value "" matches any value, so
	// ListByTag(ctx, TagJob, "") finds every instance Gangway launched.
	ListByTag(ctx context.Context, key, value string) ([]Instance, error)
}

// Tags (GCP: labels) every launched instance carries. The reconciler finds
// orphans by TagJob; a launch's compensation terminates by TagToken.
const (
	TagJob     = "gangway-job"
	TagAttempt = "gangway-attempt"
	TagToken   = "gangway-token"
	TagPool    = "gangway-pool"
)

// LaunchRequest asks a provider for instances for one attempt of one job.
type LaunchRequest struct {
	Offer gangway.Offer
	Count int
	// MinCount is the fewest instances worth having; 0 means Count (a gang
	// needs all of its members or none).
	MinCount int
	// Token makes the launch idempotent. Compute it with Token(JobID,
	// Attempt) in the workflow and pass it to the activity, so a retried
	// activity reuses it.
	Token   string
	JobID   string
	Attempt int
	// MaxPricePerHour caps a spot price per instance; 0 leaves the cloud's
	// default (the on-demand price).
	MaxPricePerHour float64
	// Join is how the instance's agent reaches the control plane.
	Join Join
	// Tags are extra tags (GCP: labels) such as team and project.
	Tags map[string]string
}

// Min is the fewest instances the request accepts.
func (r LaunchRequest) Min() int {
	if r.MinCount <= 0 || r.MinCount > r.Count {
		return r.Count
	}
	return r.MinCount
}

// Validate reports a malformed request as ErrInvalid naming the field.
func (r LaunchRequest) Validate() error {
	switch {
	case r.Count <= 0:
		return fmt.Errorf("%w: count must be positive, got %d", ErrInvalid, r.Count)
	case r.MinCount < 0 || r.MinCount > r.Count:
		return fmt.Errorf("%w: minCount must be between 0 and count %d, got %d", ErrInvalid, r.Count, r.MinCount)
	case r.Token == "":
		return fmt.Errorf("%w: token is required (see providers.Token)", ErrInvalid)
	case !gangway.IsDNSLabel(r.Token):
		return fmt.Errorf("%w: token must be a DNS label of at most 63 characters, got %q", ErrInvalid, r.Token)
	case r.JobID == "":
		return fmt.Errorf("%w: jobID is required", ErrInvalid)
	case r.Offer.InstanceType == "":
		return fmt.Errorf("%w: offer.instanceType is required", ErrInvalid)
	case !r.Offer.CapacityType.Cloud():
		return fmt.Errorf("%w: offer.capacityType must be %q or %q, got %q", ErrInvalid, gangway.CapacitySpot, gangway.CapacityOnDemand, r.Offer.CapacityType)
	case r.MaxPricePerHour < 0:
		return fmt.Errorf("%w: maxPricePerHour must not be negative, got %v", ErrInvalid, r.MaxPricePerHour)
	}
	for k := range r.Tags {
		if strings.HasPrefix(k, "gangway-") {
			return fmt.Errorf("%w: tags: %q is reserved for Gangway", ErrInvalid, k)
		}
	}
	return nil
}

// InstanceTags are the tags a launch puts on each instance: the request's
// extra tags plus Gangway's own.
func (r LaunchRequest) InstanceTags() map[string]string {
	tags := make(map[string]string, len(r.Tags)+4)
	for k, v := range r.Tags {
		tags[k] = v
	}
	tags[TagJob] = r.JobID
	tags[TagAttempt] = fmt.Sprint(r.Attempt)
	tags[TagToken] = r.Token
	tags[TagPool] = r.Offer.Pool
	return tags
}

// State is where an instance is in its life.
type State string

// Instance states, common to every cloud.
const (
	Pending    State = "pending"    // launched, booting
	Running    State = "running"    // up; its agent may have registered
	Stopping   State = "stopping"   // being terminated, preempted or stopped
	Stopped    State = "stopped"    // not running, but still there (and billed for disks)
	Terminated State = "terminated" // gone
)

// Live reports whether the instance is booting or running.
func (s State) Live() bool { return s == Pending || s == Running }

// Instance is a launched machine as its provider reports it.
type Instance struct {
	ID string
	// NodeID is the ID its agent registers under (the cloud's instance ID
	// or name, which are DNS labels).
	NodeID       string
	Provider     string
	Pool         string
	Zone         string
	InstanceType string
	CapacityType gangway.CapacityType
	GPUModel     string
	GPUs         int
	State        State
	// StateReason says why a stopping or terminated instance went, when the
	// cloud tells (e.g. a spot preemption).
	StateReason string
	PrivateIP   string
	LaunchedAt  time.Time
	Tags        map[string]string
}

// PoolName is the default pool of an offer: provider, zone, instance type
// and capacity type folded into one DNS label, such as
// "aws-us-east-1a-p3-2xlarge-spot".
func PoolName(provider, zone, instanceType string, ct gangway.CapacityType) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(strings.Join([]string{provider, zone, instanceType, string(ct)}, "-")) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := b.String()
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.TrimRight(s, "-")
}
