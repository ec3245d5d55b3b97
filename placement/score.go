package placement

import "github.com/gangwayhq/gangway"

// Scorer rates candidates for one replica; the engine places each replica
// on the feasible candidate with the highest score (ties go to the lowest
// node index, so plans are deterministic). Scorers read the view and never
// change it. They run on every feasible node for every replica: keep them
// cheap, and put anything per-call in Prepare.
type Scorer interface {
	// Name is the policy name used on the command line and in reports.
	Name() string
	// Score rates placing one replica of j as c; higher is better.
	Score(v *View, c Candidate, j *gangway.QueueEntry) float64
}

// Cloner is implemented by scorers that keep state between calls (what
// Prepare computed for the View being placed on, a random draw): Clone
// returns a scorer of the same policy and settings sharing none of it. A
// Place call that runs beside another — the dispatch loop forecasts in the
// background while its cycles place — scores with Independent(s), never
// with s itself. A scorer that keeps no state need not implement it.
type Cloner interface {
	Clone() Scorer
}

// Independent returns a scorer that may score beside s: s's Clone, or s
// when it keeps no state.
func Independent(s Scorer) Scorer {
	if c, ok := s.(Cloner); ok {
		return c.Clone()
	}
	return s
}

// Preparer is implemented by scorers that precompute per Place call (FGD
// derives per-node fragmentation from the workload).
type Preparer interface {
	Prepare(v *View)
}

// ClassScorer is a Scorer the engine may run once per node class instead
// of once per node (classes.go): on a fleet of many alike nodes that is
// the difference between scoring thousands of nodes per replica and
// scoring dozens. The engine then scores only the lowest-indexed node of
// each class and places the replica exactly where scoring every node
// would, provided Score keeps this contract:
//
//   - of the candidate's node it reads only the model, pool, GPU count and
//     per GPU the free milli, health, flakiness, NVLink domain and NUMA
//     node (domains and NUMA nodes compared within the node), and the free
//     CPU and memory as Depends bounds below; any order of the GPUs of a
//     node whose GPUs are all alike scores the same;
//   - it depends on the node index at most through NodeOrder (lower index,
//     higher score), and then Depends says so; never on the node's name or
//     on other nodes' state;
//   - of the job it reads only the replica's shape: Replicas,
//     GPUsPerReplica, GPUMilli, CPUMilli, MemMiB and GPUModels;
//   - it draws no randomness and keeps no state that changes its scores
//     but what the view and the workload hold.
//
// A scorer that breaks any of these (Random draws, GPUClustering remembers
// what it placed where) must not implement ClassScorer; the engine then
// scores every node.
type ClassScorer interface {
	Scorer
	// Depends is what Score reads of node i besides its model, pool and
	// GPUs, for replicas needing at most cpu (milli) and mem (MiB). It may
	// read only what Score reads of the node other than its free CPU and
	// memory.
	Depends(v *View, i int, cpu, mem int64) NodeDeps
}

// NodeDeps is what a ClassScorer's score of a node depends on besides the
// node's model, pool and GPUs.
type NodeDeps struct {
	// CPULevel and MemLevel are the free CPU (milli) and memory (MiB) at
	// or above which the score no longer changes with them: two nodes
	// alike but for free CPU and memory, both at or above the levels,
	// score the same. math.MaxInt64 means the score reads the exact
	// amount, 0 that it reads none.
	CPULevel, MemLevel int64
	// ByIndex says the score depends on the node index (through
	// NodeOrder): a class is then scored again whenever its lowest-indexed
	// node changes.
	ByIndex bool
}

// Committer is implemented by scorers that keep per-node caches: the engine
// tells them when a node's free capacity changed.
type Committer interface {
	Changed(v *View, node int)
}

// Versioned is a ClassScorer whose scores also read state of the whole
// fleet, beyond the node scored: a node class's cached score of a replica
// of j holds only while ScoreVersion, asked for the node the class is
// scored on, returns what it returned when the score was taken. The finer
// the version (what j's score on that node reads, not every change of the
// fleet), the more cached scores hold.
type Versioned interface {
	ScoreVersion(v *View, j *gangway.QueueEntry, node int) uint64
}

// FirstFit prefers the lowest node index: Kubernetes' and Slurm's simplest
// policy, and the baseline every other is compared with.
type FirstFit struct{}

// Name implements Scorer.
func (FirstFit) Name() string { return "first-fit" }

// Score implements Scorer.
func (FirstFit) Score(_ *View, c Candidate, _ *gangway.QueueEntry) float64 { return -float64(c.Node) }
