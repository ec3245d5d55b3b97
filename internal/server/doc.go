// Package server assembles `gangway server`: the Temporal worker that runs
// JobWorkflow and the server-side activities, the leader-elected dispatch
// loop, the Prometheus /metrics endpoint, the user API (internal/api) and,
// when Options.Web asks, the web view (internal/web) on it.
// Many servers may run against one Temporal and one Redis; one leads
// dispatch at a time, and any of them answers the API.
package server
