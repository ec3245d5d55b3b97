// Package agent is the node agent: one per GPU node. It registers the node's
// inventory in the Redis view and heartbeats, polls the node's Temporal task
// queue (node/<id>) and runs RunTask: the gang member's command as a child
// process group with CUDA_VISIBLE_DEVICES and the GANGWAY_* variables set,
// output to a log file and to the job's log stream, heartbeating to Temporal,
// and the whole group killed on cancel.
//
// The agent checks invariant 1 at the edge: it refuses to start a task on a
// GPU it is already running something on.
//
// Inventory here is synthetic (ParseFleet, `--fake-gpus`), used by `gangway
// dev` and tests; NVML inventory plugs in behind the same gangway.Node.
package agent
