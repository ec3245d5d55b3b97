// Package agent is the node agent: one per GPU node. It registers the node's
// inventory in the Redis view and heartbeats, polls the node's Temporal task
// queue (node/<id>) and runs RunTask: the gang member's command as a child
// process group with CUDA_VISIBLE_DEVICES and the GANGWAY_* variables set,
// output to a log file at once and to the job's log stream in the view from
// a bounded buffer (a hung Redis never holds up the task; lines it cannot
// take are counted, gangway_task_log_lines_dropped_total), heartbeating to
// Temporal, and the whole group killed on cancel.
//
// A node joins through the server (join.go): its registration and GPU
// health changes go to the server's NodeUpdate activity with a proof of
// the agent's join token, launch token or node token (internal/nodeauth),
// and the agent's own Redis user may only heartbeat, append task output
// and read the inventory (docs/security.md). Each task runs as its team's
// Unix user (Config.TaskUsers, isolate.go), with an environment built from
// the spec, the workload contract and Config.PassEnv, never the agent's,
// and folders of its own.
//
// The agent checks invariant 1 at the edge: it refuses to start a task on a
// GPU it is already running something on, unless both hold shares of it
// that add up to at most one GPU (gang.gpuShare; MPS tasks get their SM and
// memory limits in the environment).
//
// It keeps the agent's side of the checkpoint contract (docs/checkpointing.md):
// it restores the checkpoint a task resumes from into GANGWAY_RESUME_DIR,
// saves every checkpoint rank 0 marks complete in GANGWAY_CHECKPOINT_DIR to
// the checkpoint store, and on any stop (a cancel, StopTasks, shutdown) sends
// the job's signal, waits its grace period and saves the final checkpoint
// before RunTask returns. Cloud notices (package notice) become preempt
// signals to the workflows of the jobs running on the node.
//
// A Temporal outage is not a node loss (adopt.go): a task whose activity
// Temporal lost track of (its heartbeats failed for the heartbeat timeout)
// keeps running, and an adopting RunTask from its workflow attaches to it,
// or learns how it ended and with what exit code. An orphan its workflow no
// longer runs for is stopped.
//
// As soon as a task exits 0, before it drains the output, saves the last
// checkpoint and reports, the agent records it in the view
// (workflows.TaskDone, signed with the node's token), so a node that dies
// before the report reaches Temporal does not cost the job a rerun; it
// writes the last hour's records again when it registers in a view that
// lost its node.
//
// The node's inventory comes from package gpuinfo (NVML on a GPU node), or is
// synthetic (ParseFleet, `--fake-gpus`, which may put GPUs in MIG mode:
// "1x8:H100:mig2=1g.10gb*7") for `gangway dev` and tests. A task is given
// its GPUs in CUDA_VISIBLE_DEVICES (a MIG device by its UUID), and for a
// share or MIG devices what shareEnv adds; the agent refuses a task whose
// GPUs are not what it asks for (claim, claimMIG). With a
// GPU source (Config.GPU) the agent also watches its GPUs (health.go): a
// hardware fault fences the GPU in the view and moves its jobs (StopTasks
// with GPUFault), an application Xid fails only the job on it; and reclaims
// them (reclaim.go): processes holding a GPU without a task and tasks whose
// workflow is gone are killed after a grace period, and jobs idle past their
// idle policy are released.
//
// A Host (host.go) runs many simulated nodes in one process, so a test or
// `gangway bench` can register thousands on two cores: a Temporal worker
// per node (its own pollers, and task queue partitions on the server)
// would not fit. Every hosted node registers with the host's task queue,
// host/<id>, as its Node.TaskQueue; the server copies it into the members
// of an assignment before signalling it (internal/server), and JobWorkflow
// sends a member's RunTask to the queue its member names, else to
// node/<id> as before. The host's one worker polls that queue with
// DefaultHostPollers long polls and hands each RunTask to the hosted node
// it names (RunTaskInput.NodeID), where it runs exactly as under that
// node's own agent. The host heartbeats all its nodes to Redis in one
// script call per 500 nodes per interval, and registers again the ones
// the view lost.
// Hosted nodes watch no GPUs and no cloud notices. A node with its own
// agent is unchanged: its TaskQueue is empty and it polls node/<id>.
package agent
