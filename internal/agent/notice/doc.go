// Package notice watches a cloud instance's metadata service for warnings
// that the instance is going away, and sends them to the agent as
// agent.Notice values:
//
//	AWS   IMDSv2 (token first)  /latest/meta-data/spot/instance-action           interruption, deadline from "time" (2 min)
//	                            /latest/meta-data/events/recommendations/rebalance rebalance, no deadline
//	GCP   computeMetadata/v1    instance/preempted = TRUE                         interruption, deadline now + 30 s
//	                            instance/maintenance-event != NONE                maintenance, no deadline
//
// Both are polled (AWS every 5 s as it asks, GCP every second); each
// watcher sends a notice once and again only when what the cloud says
// changes. Detect picks the watcher for `agent.notices: auto` by probing
// both services briefly; when neither answers the node is on-prem and
// there is nothing to watch.
//
// The agent turns an interruption or maintenance notice into a preempt
// signal to every running job's workflow (docs/checkpointing.md).
package notice
