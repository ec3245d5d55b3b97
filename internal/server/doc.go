// Package server assembles `gangway server`: the Temporal worker that runs
// JobWorkflow and the server-side activities, the leader-elected dispatch
// loop, and the Prometheus /metrics endpoint. Many servers may run against
// one Temporal and one Redis; one leads dispatch at a time.
package server
