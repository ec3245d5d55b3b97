package agent

import "time"

// Notice kinds: what a cloud (or a person, or a GPU) says about this node.
const (
	// NoticeInterruption: the cloud will take the instance at Deadline
	// (AWS spot/instance-action, GCP instance/preempted).
	NoticeInterruption = "interruption"
	// NoticeRebalance: AWS expects the instance to be interrupted soon
	// (rebalance recommendation); no deadline yet.
	NoticeRebalance = "rebalance"
	// NoticeMaintenance: GCP will migrate or terminate the instance for
	// host maintenance.
	NoticeMaintenance = "maintenance"
)

// Notice is a warning that the node is about to go away. The agent turns an
// interruption or maintenance notice into a preempt signal (cause "notice")
// to the workflow of every job running on the node, so they checkpoint
// within the notice window; a rebalance recommendation is logged and counted.
type Notice struct {
	Kind     string
	Deadline time.Time // zero when the cloud gives none
	// Source says where it came from ("aws-imds", "gcp-metadata", "fake").
	Source string
	Detail string
}
