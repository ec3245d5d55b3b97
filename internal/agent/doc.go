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
// It keeps the agent's side of the checkpoint contract (docs/checkpointing.md):
// it restores the checkpoint a task resumes from into GANGWAY_RESUME_DIR,
// saves every checkpoint rank 0 marks complete in GANGWAY_CHECKPOINT_DIR to
// the checkpoint store, and on any stop (a cancel, StopTasks, shutdown) sends
// the job's signal, waits its grace period and saves the final checkpoint
// before RunTask returns. Cloud notices (package notice) become preempt
// signals to the workflows of the jobs running on the node.
//
// Inventory here is synthetic (ParseFleet, `--fake-gpus`), used by `gangway
// dev` and tests; NVML inventory plugs in behind the same gangway.Node.
package agent
