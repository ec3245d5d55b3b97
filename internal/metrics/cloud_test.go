package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gangwayhq/gangway"
)

func TestCloud(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewCloud(reg)
	c.Launched("aws", "p4d-spot", "spot", 2)
	c.Launched("aws", "p4d-spot", "spot", 0) // nothing launched: no change
	c.LaunchFailed("gcp", "a2-spot", "NoCapacity")
	c.Terminated("aws", "p4d-spot", TerminateReleased, 2)
	c.Terminated("aws", "p4d-od", TerminateOrphan, 1)
	c.OrphanTerminated("aws", "job-closed")
	c.Live(map[LiveKey]int{{"aws", "p4d-spot", "spot"}: 3, {"gcp", "a2-spot", "spot"}: 1}, []string{"aws", "gcp"})
	// A pass where gcp could not be listed keeps gcp's last value and
	// replaces aws's.
	c.Live(map[LiveKey]int{{"aws", "p4d-od", "on-demand"}: 1}, []string{"aws"})
	c.ReconcileError("gcp")

	want := `
# HELP gangway_cloud_instances Gangway-tagged cloud instances not yet terminated, as the last reconcile pass listed them, by provider, pool and capacity type.
# TYPE gangway_cloud_instances gauge
gangway_cloud_instances{capacity_type="on-demand",pool="p4d-od",provider="aws"} 1
gangway_cloud_instances{capacity_type="spot",pool="a2-spot",provider="gcp"} 1
# HELP gangway_cloud_instances_launched_total Cloud instances launched for bursts, by provider, pool and capacity type.
# TYPE gangway_cloud_instances_launched_total counter
gangway_cloud_instances_launched_total{capacity_type="spot",pool="p4d-spot",provider="aws"} 2
# HELP gangway_cloud_instances_terminated_total Cloud instances Gangway terminated, by provider, pool and reason (released, orphan).
# TYPE gangway_cloud_instances_terminated_total counter
gangway_cloud_instances_terminated_total{pool="p4d-od",provider="aws",reason="orphan"} 1
gangway_cloud_instances_terminated_total{pool="p4d-spot",provider="aws",reason="released"} 2
# HELP gangway_cloud_launch_errors_total Failed launch calls, by provider, pool and reason (NoCapacity, Quota, PriceTooLow, Auth, Invalid, Throttled, or transient).
# TYPE gangway_cloud_launch_errors_total counter
gangway_cloud_launch_errors_total{pool="a2-spot",provider="gcp",reason="NoCapacity"} 1
# HELP gangway_cloud_orphans_terminated_total Instances the reconciler terminated because no live job owned them, by provider and why (job-closed, job-unknown, stale-attempt).
# TYPE gangway_cloud_orphans_terminated_total counter
gangway_cloud_orphans_terminated_total{provider="aws",reason="job-closed"} 1
# HELP gangway_cloud_reconcile_errors_total Reconcile steps that failed (listing a provider, asking after a job, terminating), by provider.
# TYPE gangway_cloud_reconcile_errors_total counter
gangway_cloud_reconcile_errors_total{provider="gcp"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	var none *Cloud // records nothing, panics on nothing
	none.Launched("aws", "p", "spot", 1)
	none.LaunchFailed("aws", "p", "Quota")
	none.Terminated("aws", "p", TerminateOrphan, 1)
	none.OrphanTerminated("aws", "job-closed")
	none.Live(nil, nil)
	none.ReconcileError("aws")
}

func TestCloudKnownSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewCloud(reg)
	c.Providers([]string{"aws"}, "job-closed", "job-unknown")
	c.Offers([]gangway.Offer{{Provider: "aws", Pool: "aws-spot", CapacityType: gangway.CapacitySpot}})
	c.Live(map[LiveKey]int{}, []string{"aws"}) // a pass that listed no instances
	want := `
# HELP gangway_cloud_instances Gangway-tagged cloud instances not yet terminated, as the last reconcile pass listed them, by provider, pool and capacity type.
# TYPE gangway_cloud_instances gauge
gangway_cloud_instances{capacity_type="spot",pool="aws-spot",provider="aws"} 0
# HELP gangway_cloud_instances_launched_total Cloud instances launched for bursts, by provider, pool and capacity type.
# TYPE gangway_cloud_instances_launched_total counter
gangway_cloud_instances_launched_total{capacity_type="spot",pool="aws-spot",provider="aws"} 0
# HELP gangway_cloud_orphans_terminated_total Instances the reconciler terminated because no live job owned them, by provider and why (job-closed, job-unknown, stale-attempt).
# TYPE gangway_cloud_orphans_terminated_total counter
gangway_cloud_orphans_terminated_total{provider="aws",reason="job-closed"} 0
gangway_cloud_orphans_terminated_total{provider="aws",reason="job-unknown"} 0
# HELP gangway_cloud_reconcile_errors_total Reconcile steps that failed (listing a provider, asking after a job, terminating), by provider.
# TYPE gangway_cloud_reconcile_errors_total counter
gangway_cloud_reconcile_errors_total{provider="aws"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gangway_cloud_instances", "gangway_cloud_instances_launched_total",
		"gangway_cloud_orphans_terminated_total", "gangway_cloud_reconcile_errors_total"); err != nil {
		t.Error(err)
	}
}
