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
// The node's inventory comes from package gpuinfo (NVML on a GPU node), or is
// synthetic (ParseFleet, `--fake-gpus`) for `gangway dev` and tests. With a
// GPU source (Config.GPU) the agent also watches its GPUs (health.go): a
// hardware fault fences the GPU in the view and moves its jobs (StopTasks
// with GPUFault), an application Xid fails only the job on it; and reclaims
// them (reclaim.go): processes holding a GPU without a task and tasks whose
// workflow is gone are killed after a grace period, and jobs idle past their
// idle policy are released.
package agent
