package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gangwayhq/gangway"
)

// Cloud holds the collectors of rented capacity: what was launched and
// terminated, the orphans the reconciler found, and what is live now.
// Every method is safe on a nil *Cloud, which records nothing, so packages
// that take one optionally need no checks.
type Cloud struct {
	launched      *prometheus.CounterVec
	launchErrors  *prometheus.CounterVec
	terminated    *prometheus.CounterVec
	orphans       *prometheus.CounterVec
	live          *prometheus.GaugeVec
	reconcileErrs *prometheus.CounterVec

	mu    sync.Mutex
	known map[LiveKey]bool // offers seen, whose series stay at 0 when empty
}

// Reasons an instance was terminated, for TerminatedInstances.
const (
	// TerminateReleased: the job's own compensation ended it (the job
	// finished, failed, was cancelled or moved, or its nodes never came).
	TerminateReleased = "released"
	// TerminateOrphan: the reconciler ended it because no live job owned it.
	TerminateOrphan = "orphan"
)

// NewCloud creates the cloud collectors and registers them on reg.
func NewCloud(reg prometheus.Registerer) *Cloud {
	c := &Cloud{
		launched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cloud_instances_launched_total",
			Help: "Cloud instances launched for bursts, by provider, pool and capacity type.",
		}, []string{"provider", "pool", "capacity_type"}),
		launchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cloud_launch_errors_total",
			Help: "Failed launch calls, by provider, pool and reason (NoCapacity, Quota, PriceTooLow, Auth, Invalid, Throttled, or transient).",
		}, []string{"provider", "pool", "reason"}),
		terminated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cloud_instances_terminated_total",
			Help: "Cloud instances Gangway terminated, by provider, pool and reason (released, orphan).",
		}, []string{"provider", "pool", "reason"}),
		orphans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cloud_orphans_terminated_total",
			Help: "Instances the reconciler terminated because no live job owned them, by provider and why (job-closed, job-unknown, stale-attempt).",
		}, []string{"provider", "reason"}),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cloud_instances",
			Help: "Gangway-tagged cloud instances not yet terminated, as the last reconcile pass listed them, by provider, pool and capacity type.",
		}, []string{"provider", "pool", "capacity_type"}),
		reconcileErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cloud_reconcile_errors_total",
			Help: "Reconcile steps that failed (listing a provider, asking after a job, terminating), by provider.",
		}, []string{"provider"}),
	}
	reg.MustRegister(c.launched, c.launchErrors, c.terminated, c.orphans, c.live, c.reconcileErrs)
	return c
}

// Providers creates the orphan and reconcile-error series of each
// provider, with every reason the reconciler may give for an orphan, so
// an alert on orphans has a series to read before the first one.
func (c *Cloud) Providers(names []string, orphanReasons ...string) {
	if c == nil {
		return
	}
	for _, p := range names {
		c.reconcileErrs.WithLabelValues(p)
		for _, r := range orphanReasons {
			c.orphans.WithLabelValues(p, r)
		}
	}
}

// Offers creates the launch and live-instance series of every offer, so a
// pool's instances read 0 rather than nothing while none run.
func (c *Cloud) Offers(offers []gangway.Offer) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		c.known = map[LiveKey]bool{}
	}
	for _, o := range offers {
		k := LiveKey{Provider: o.Provider, Pool: o.Pool, CapacityType: string(o.CapacityType)}
		c.known[k] = true
		c.launched.WithLabelValues(k.Provider, k.Pool, k.CapacityType)
		c.live.WithLabelValues(k.Provider, k.Pool, k.CapacityType)
	}
}

// Launched counts n instances launched in pool.
func (c *Cloud) Launched(provider, pool string, capacityType gangway.CapacityType, n int) {
	if c == nil || n <= 0 {
		return
	}
	c.launched.WithLabelValues(provider, pool, string(capacityType)).Add(float64(n))
}

// LaunchFailed counts a launch call that failed; reason is
// providers.Reason of the error, or "transient".
func (c *Cloud) LaunchFailed(provider, pool, reason string) {
	if c == nil {
		return
	}
	c.launchErrors.WithLabelValues(provider, pool, reason).Inc()
}

// Terminated counts n instances of pool terminated for reason
// (TerminateReleased or TerminateOrphan).
func (c *Cloud) Terminated(provider, pool, reason string, n int) {
	if c == nil || n <= 0 {
		return
	}
	c.terminated.WithLabelValues(provider, pool, reason).Add(float64(n))
}

// OrphanTerminated counts one orphan the reconciler terminated, by why no
// job owned it.
func (c *Cloud) OrphanTerminated(provider, reason string) {
	if c == nil {
		return
	}
	c.orphans.WithLabelValues(provider, reason).Inc()
}

// LiveKey names one series of the live-instances gauge.
type LiveKey struct{ Provider, Pool, CapacityType string }

// Live replaces the live-instances gauge with counts. Providers whose
// listing failed should be left out of listed: their series keep the
// last known value rather than drop to zero.
func (c *Cloud) Live(counts map[LiveKey]int, listed []string) {
	if c == nil {
		return
	}
	for _, p := range listed {
		c.live.DeletePartialMatch(prometheus.Labels{"provider": p})
	}
	c.mu.Lock()
	for k := range c.known {
		c.live.WithLabelValues(k.Provider, k.Pool, k.CapacityType)
	}
	c.mu.Unlock()
	for k, n := range counts {
		c.live.WithLabelValues(k.Provider, k.Pool, k.CapacityType).Set(float64(n))
	}
}

// ReconcileError counts a failed reconcile step against provider.
func (c *Cloud) ReconcileError(provider string) {
	if c == nil {
		return
	}
	c.reconcileErrs.WithLabelValues(provider).Inc()
}
