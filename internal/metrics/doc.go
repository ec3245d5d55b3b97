// Package metrics owns every Prometheus collector Gangway exports. Collectors
// are registered on a registry passed in from cmd (never the global one) and
// updated through typed helpers, so names and labels live in one place.
//
// Labels take bounded values only (pools, teams, priority classes, node
// IDs, GPUs, fixed vocabularies); series whose label values are known up
// front are created at once (Teams, Reasons, Pools, Providers, Offers,
// Node), so rates and alerts read 0 rather than nothing before the first
// event. The agent's GPU readings are exported twice: under Gangway's names
// and under dcgm-exporter's (DCGM_FI_*), for existing DCGM dashboards.
// docs/metrics.md lists every metric; deploy/grafana and deploy/prometheus
// hold the dashboards and rules that read them, and deploy's tests check a
// running stack serves all of those.
package metrics
