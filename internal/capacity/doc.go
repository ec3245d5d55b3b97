// Package capacity owns the Redis live view of the fleet: node inventory,
// state and heartbeats, which job holds which GPU, the pending queue, the
// dispatch leader lease, the reason each pending job waits, and per-job task
// output streams.
//
// Redis is a view, not the truth: job workflows and node agents hold the
// truth, and everything here can be rebuilt from them. What the view must
// guarantee (DESIGN.md's invariant 1, stated for shared GPUs) is that every
// GPU is free, or held whole by exactly one job, or held in shares by jobs
// whose shares sum to at most 1000 milli-GPU, never both whole and shared;
// and that a gang is recorded all-or-nothing. TestViewProperties checks
// both on a real redis-server. Every change that touches more than one
// key is a single Lua script (scripts/*.lua), so a concurrent reader never
// sees half a change and a failed check never leaves half a write.
//
// # Key layout
//
// Every key starts with Options.Prefix (default "{gangway}"). The braces make
// the prefix a Redis Cluster hash tag, so all keys live in one slot and every
// script may touch all of them. P is the prefix below.
//
//	key               type    field → value
//	P:nodes           hash    node ID → gangway.Node JSON (inventory)
//	P:node-changes    zset    node ID by the revision (from P:rev) of the last write or removal of its P:nodes record or P:node-state
//	P:rev             string  the last revision given to a change of a node, a queue entry or an allocation (INCR)
//	P:queue-changes   zset    job ID by the revision (from P:rev) of the last write or removal of its P:queue entry
//	P:alloc-changes   zset    job ID by the revision (from P:rev) of the last write or removal of its P:allocs record (commit, release, restore)
//	P:changes-floor   string  the revision below which the changes logs have forgotten removals (a reader behind it reads whole; nodecache.go)
//	P:epoch           string  the view's generation: written (TIME) by the first read of a new or flushed view, or of one that went back in time
//	P:rebuilt         string  the generation the view was last rebuilt for (rebuild.go; the dispatch loop places nothing until it is P:epoch)
//	P:node-tasks      hash    node ID → JSON list of the tasks its agent reports running (each heartbeat, and as a task's processes end)
//	P:node-state      hash    node ID → ready | cordoned | lost
//	P:heartbeat       hash    node ID → last heartbeat, unix ms of the Redis server's clock (TIME)
//	P:gpus            hash    "<node ID>/<GPU index>" → job ID holding it whole (free and shared GPUs are absent)
//	P:shares          hash    "<node ID>/<GPU index>" → {job ID: milli-GPU} of a shared GPU, summing to at most 1000
//	P:checkpoints     hash    job ID → "<attempt>:<unix ms>" of the newest checkpoint its running attempt saved (agents record it; Snapshot reports it as the allocation's LastCheckpoint)
//	P:queue           hash    job ID → gangway.QueueEntry JSON
//	P:bursting        hash    job ID → the burst request JSON of a job taken out of the queue to run on rented instances, until it is queued pinned to them (burst.go)
//	P:allocs          hash    job ID → {"cpuMilli","memMiB" per member, "assignment": gangway.Assignment JSON}
//	P:lease           string  holder of the dispatch leader lease (SET NX PX)
//	P:reasons         hash    job ID → Waiting JSON: why it is still pending (typed reason, detail, retry, reservation)
//	P:reasons-stamp   string  names the last write of P:reasons, so a View writes differences only onto its own (reasons.go)
//	P:cloud-offers    hash    pool → gangway.Offer JSON the servers' providers make (PublishOffers; expires)
//	P:task-done:<job ID>/<attempt>/<rank>  string  workflows.TaskDone JSON: the agent saw the task exit 0 (a day's TTL; read when its node is lost)
//	P:log:<job ID>    stream  task output lines {t: unix ms, rank, attempt, text}, capped at Options.LogMaxLen
//	P:gpu-health      hash    "<node ID>/<GPU index>" → GPUHealth JSON (fences, flakiness, last fault)
//	P:events          pub/sub enqueued | released | node: a change that may let a job start (events.go)
//	P:gpu-events      stream  GPU faults and reclaims {event: GPUEvent JSON}, capped at GPUEventsMaxLen
//	P:join-uses:<l>   set     node IDs that joined with launch l's one-use token (ClaimJoinUse; expires with it)
//	P:learned         string  capacity.Learned JSON but its ETA: what the dispatch leader learned of the arrivals, their typical workload (SaveLearned, fenced by the lease; TypicalWorkload reads it alone)
//	P:learned-eta     string  forecast.State JSON: the start-time estimator's runtimes, calibration and waiting jobs' first estimates, stored with P:learned
//	P:defrags         string  capacity.Defrags JSON: the dispatch leader's defragmentations under way and the last hour's spend (SaveDefrags, fenced by the lease)
//
// Agents reach only P:heartbeat (write), P:log:<job ID> (append) and
// P:nodes and P:gpu-health (read) under their Redis ACL user
// (docs/security.md): their inventory changes go through the server's
// NodeUpdate activity.
// Every script names all the keys it touches in KEYS, as Redis Cluster
// requires. P:log:<job ID> streams are only touched by single commands.
//
// # Rebuilding
//
// The view can be lost at any moment (FLUSHALL, a restart with no data)
// and is rebuilt (rebuild.go, internal/dispatch's rebuild): its generation
// changes. So can it go back in time, to a state that lacks writes its
// readers saw (a failover to a replica that missed them, a restart from an
// older snapshot): the first read that finds so (nodecache.go) drops the
// queue, the allocations, the GPUs held and the bursts delivered, which
// may be stale, and begins a new generation too. Then the dispatch leader restores the queue and the allocations from
// the job workflows and the cordons from the ledger, and the agents'
// heartbeats say which GPUs run tasks, so a GPU whose owner the view does
// not know is shown held by the task's job and never offered. The
// leader's own records (P:learned, P:learned-eta, P:defrags) are not rebuilt: the
// leader stores them again from its memory as soon as it plans in the
// new generation. Until the
// generation is rebuilt nothing is placed, and Commit (CommitIn) refuses a
// plan made from another generation.
//
// # One clock
//
// Liveness is judged on the Redis server's clock alone: heartbeat scripts
// stamp TIME, never a time the agent sends, and Snapshot.Now and
// NodeStatus.HeartbeatAge are TIME too, so a node whose clock is off is
// neither kept alive nor declared lost by it. Nodes reports a node silent
// longer than Options.NodeTTL as lost.
//
// # Incremental snapshots
//
// A dispatch cycle reads the whole view, but not every node record or
// queue entry: those are large and most of them do not change from one
// cycle to the next, so each write of one takes a new revision and
// Snapshot fetches only the records and entries newer than those it holds
// (nodecache.go); it keeps the queue sorted between reads. P:epoch changes
// when the view is flushed, replaced or went back in time, which makes the
// next read whole.
// Allocations are read whole and decoded only when their JSON changed.
// The pending reasons are written the same way round: SetReasons writes
// only those that changed since its last write, unless another writer
// came between (P:reasons-stamp).
//
// Attempts order everything that can arrive late: an enqueue, commit or
// release for an older attempt never undoes the work of a newer one.
package capacity
