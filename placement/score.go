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

// Preparer is implemented by scorers that precompute per Place call (FGD
// derives per-node fragmentation from the workload).
type Preparer interface {
	Prepare(v *View)
}

// Committer is implemented by scorers that keep per-node caches: the engine
// tells them when a node's free capacity changed.
type Committer interface {
	Changed(v *View, node int)
}

// FirstFit prefers the lowest node index: Kubernetes' and Slurm's simplest
// policy, and the baseline every other is compared with.
type FirstFit struct{}

// Name implements Scorer.
func (FirstFit) Name() string { return "first-fit" }

// Score implements Scorer.
func (FirstFit) Score(_ *View, c Candidate, _ *gangway.QueueEntry) float64 { return -float64(c.Node) }
