package capacity

import (
	_ "embed"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix, and Redis Cluster hash tag, used when
// Options.Prefix is empty.
const DefaultPrefix = "{gangway}"

// DefaultLogMaxLen is the per-job log stream cap used when Options.LogMaxLen
// is zero.
const DefaultLogMaxLen = 10000

// DefaultNodeTTL is how long a node may be silent before Nodes calls it
// lost when Options.NodeTTL is zero (the server's default node TTL).
const DefaultNodeTTL = 10 * time.Second

// Options configures a View.
type Options struct {
	// Prefix starts every key. It should be a hash tag ("{...}") so that all
	// keys share one Redis Cluster slot; tests use a fresh one per case and
	// several clusters can share one Redis with different prefixes.
	Prefix string
	// LogMaxLen caps each job's log stream (approximately: XADD MAXLEN ~).
	LogMaxLen int64
	// NodeTTL: Nodes reports a node whose last heartbeat is older than this
	// (on the Redis server's clock) as lost. It should be the dispatch
	// loop's node TTL (the server's config); default DefaultNodeTTL.
	NodeTTL time.Duration
}

// Sentinel errors; check them with errors.Is.
var (
	// ErrStale: Commit found that the data changed since the snapshot the
	// plan was made from. Nothing was written; plan again from a new one.
	ErrStale = errors.New("capacity: plan is stale")
	// ErrNotLeader: the caller does not hold the dispatch lease.
	ErrNotLeader = errors.New("capacity: not the dispatch leader")
	// ErrNotFound: the node, job or allocation does not exist.
	ErrNotFound = errors.New("capacity: not found")
	// ErrNodeBusy: RemoveNode was asked to remove a node whose GPUs are
	// still held.
	ErrNodeBusy = errors.New("capacity: node has allocated GPUs")
)

// View is the Redis live view. It is safe for concurrent use. Besides the
// client and the key names it holds only caches of the node records and
// queue entries it last read (nodecache.go; one for snapshots, one for
// FleetNodes), which Redis's revisions keep true, and the latest change
// it knows the view made, by which it tells the view went back in time.
type View struct {
	rdb       redis.UniversalClient
	k         keySet
	logMaxLen int64
	nodeTTL   time.Duration
	cache     readCache
	// fleet is FleetNodes's cache of the node records.
	fleet readCache
	// seen is the latest change this View knows the view made
	// (nodecache.go).
	seen seen
	// reasons is what SetReasons last wrote (reasons.go).
	reasons reasonCache
}

// keySet is the fixed key names under one prefix.
type keySet struct {
	nodes, nodeState, heartbeat, gpus, queue, allocs, lease, reasons string
	bursting, offers                                                 string
	logPrefix                                                        string
	// nodeChanges and queueChanges are the changes logs (sorted sets of
	// node and job IDs by the revision, from rev, of their last write or
	// removal), rev the last revision given, changesFloor the revision
	// below which the logs have forgotten removals, and epoch names the
	// view's lifetime: together they let a read fetch only what changed
	// (nodecache.go).
	nodeChanges, queueChanges, rev, changesFloor, epoch string
	// allocChanges logs allocations the same way (commit, release,
	// restore).
	allocChanges string
	// rebuilt is the epoch the view was last rebuilt for (rebuild.go);
	// nodeTasks (node → the tasks its agent reports running) is what the
	// agents' heartbeats carry.
	rebuilt, nodeTasks string
	// events is the pub/sub channel of events.go.
	events string
	// shares holds the GPUs held in shares: "<node>/<index>" → job → milli.
	shares string
	// joinUses starts the sets of nodes that joined with a launch token.
	joinUses string
	// checkpoints holds each running job's newest checkpoint.
	checkpoints string
	// reasonsStamp names the last write of reasons (reasons.go).
	reasonsStamp string
	// taskDone starts the keys of tasks their agents saw exit 0
	// (taskdone.go).
	taskDone string
	// learned is what the dispatch leader learned, learnedETA the
	// estimator's part of it, defrags its record of defragmentations
	// (records.go).
	learned, learnedETA, defrags string
}

func newKeys(prefix string) keySet {
	return keySet{
		nodes:     prefix + ":nodes",
		nodeState: prefix + ":node-state",
		heartbeat: prefix + ":heartbeat",
		gpus:      prefix + ":gpus",
		queue:     prefix + ":queue",
		allocs:    prefix + ":allocs",
		lease:     prefix + ":lease",
		reasons:   prefix + ":reasons",
		bursting:  prefix + ":bursting",
		offers:    prefix + ":cloud-offers",
		logPrefix: prefix + ":log:",
		// The changes logs: sorted sets (the hashes node-revs and
		// queue-revs of earlier versions are not read).
		nodeChanges:  prefix + ":node-changes",
		queueChanges: prefix + ":queue-changes",
		changesFloor: prefix + ":changes-floor",
		allocChanges: prefix + ":alloc-changes",
		rev:          prefix + ":rev",
		epoch:        prefix + ":epoch",
		rebuilt:      prefix + ":rebuilt",
		nodeTasks:    prefix + ":node-tasks",
		events:       prefix + ":events",
		shares:       prefix + ":shares",
		joinUses:     prefix + ":join-uses:",
		// checkpoints: job → "<attempt>:<unix ms>" of its newest save.
		checkpoints:  prefix + ":checkpoints",
		reasonsStamp: prefix + ":reasons-stamp",
		taskDone:     prefix + ":task-done:",
		learned:      prefix + ":learned",
		learnedETA:   prefix + ":learned-eta",
		defrags:      prefix + ":defrags",
	}
}

// New returns a View over rdb. Any go-redis client works (single node,
// Sentinel failover, Cluster).
func New(rdb redis.UniversalClient, opts Options) *View {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.LogMaxLen <= 0 {
		opts.LogMaxLen = DefaultLogMaxLen
	}
	if opts.NodeTTL <= 0 {
		opts.NodeTTL = DefaultNodeTTL
	}
	return &View{rdb: rdb, k: newKeys(opts.Prefix), logMaxLen: opts.LogMaxLen, nodeTTL: opts.NodeTTL}
}

// The Lua scripts. go-redis runs them with EVALSHA and falls back to EVAL
// after a server restart (NOSCRIPT).
var (
	//go:embed scripts/register.lua
	registerLua string
	//go:embed scripts/heartbeat.lua
	heartbeatLua string
	//go:embed scripts/forget_heartbeat.lua
	forgetHeartbeatLua string
	//go:embed scripts/set_state.lua
	setStateLua string
	//go:embed scripts/remove_node.lua
	removeNodeLua string
	//go:embed scripts/enqueue.lua
	enqueueLua string
	//go:embed scripts/dequeue.lua
	dequeueLua string
	//go:embed scripts/read.lua
	readLua string
	//go:embed scripts/commit.lua
	commitLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/lease_acquire.lua
	leaseAcquireLua string
	//go:embed scripts/lease_release.lua
	leaseReleaseLua string
	//go:embed scripts/checkpoint.lua
	checkpointLua string
	//go:embed scripts/reasons_update.lua
	reasonsUpdateLua string

	registerScript        = redis.NewScript(registerLua)
	heartbeatScript       = redis.NewScript(heartbeatLua)
	forgetHeartbeatScript = redis.NewScript(forgetHeartbeatLua)
	setStateScript        = redis.NewScript(setStateLua)
	removeNodeScript      = redis.NewScript(removeNodeLua)
	enqueueScript         = redis.NewScript(enqueueLua)
	dequeueScript         = redis.NewScript(dequeueLua)
	readScript            = redis.NewScript(readLua)
	commitScript          = redis.NewScript(commitLua)
	releaseScript         = redis.NewScript(releaseLua)
	leaseAcquireScript    = redis.NewScript(leaseAcquireLua)
	leaseReleaseScript    = redis.NewScript(leaseReleaseLua)
	checkpointScript      = redis.NewScript(checkpointLua)
	reasonsUpdateScript   = redis.NewScript(reasonsUpdateLua)
)

// gpuField is the P:gpus field for one GPU.
func gpuField(nodeID string, index int) string {
	return nodeID + "/" + strconv.Itoa(index)
}
