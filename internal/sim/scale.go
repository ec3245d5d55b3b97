package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// FleetSpec is a synthetic fleet's size: Nodes nodes of GPUsPerNode GPUs.
type FleetSpec struct {
	Nodes, GPUsPerNode int
}

func (f FleetSpec) String() string { return fmt.Sprintf("%dx%d", f.Nodes, f.GPUsPerNode) }

var fleetSpecRE = regexp.MustCompile(`^(\d+)[xX](\d+)$`)

// ParseFleetSpec reads "NxG" (N nodes of G GPUs). ok is false when s is not
// of that form (a file name, say); err is set when it is but out of range.
func ParseFleetSpec(s string) (f FleetSpec, ok bool, err error) {
	m := fleetSpecRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return FleetSpec{}, false, nil
	}
	n, err1 := strconv.Atoi(m[1])
	g, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || n < 1 || n > 1_000_000 || g < 1 || g > 72 {
		return FleetSpec{}, true, fmt.Errorf("fleet %q: want NxG with 1-1000000 nodes of 1-72 GPUs", s)
	}
	return FleetSpec{Nodes: n, GPUsPerNode: g}, true, nil
}

// ParseFleetSpecs reads a comma-separated list of NxG specs.
func ParseFleetSpecs(s string) ([]FleetSpec, error) {
	var out []FleetSpec
	for part := range strings.SplitSeq(s, ",") {
		f, ok, err := ParseFleetSpec(part)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("fleet %q: want NxG, e.g. 10000x8", strings.TrimSpace(part))
		}
		out = append(out, f)
	}
	return out, nil
}

// ParseCounts reads a comma-separated list of positive counts ("1000,5000";
// "10k" is 10000).
func ParseCounts(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		mult := 1
		if strings.HasSuffix(strings.ToLower(part), "k") {
			mult, part = 1000, part[:len(part)-1]
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 || n > 10_000_000/mult {
			return nil, fmt.Errorf("count %q: want a positive integer (10k = 10000)", part)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// Synthetic fleet composition, by rack: racks of rackNodes nodes; a tenth
// of the racks are GB200 racks whose GPUs form one rack-scale NVLink domain
// (72 GPUs with 8 GPUs a node), the others H100 (half), A100 (three tenths)
// and L4 (a tenth, PCIe: no NVLink); H100 and A100 nodes are one NVLink
// domain each (NVSwitch). Racks group into blocks of blockRacks.
const (
	rackNodes  = 9
	blockRacks = 20
)

// SyntheticModels are the GPU models of a synthetic fleet.
var SyntheticModels = []string{"H100", "A100", "L4", "GB200"}

// SyntheticFleet builds a fleet of f.Nodes nodes of f.GPUsPerNode GPUs
// from seed (see the composition above); all GPUs free, every node
// schedulable, 16 CPU cores and 256 GiB per GPU.
func SyntheticFleet(f FleetSpec, seed uint64) []placement.Node {
	rnd := rand.New(rand.NewPCG(seed, 0x666c656574)) // "fleet"
	nodes := make([]placement.Node, 0, f.Nodes)
	for r := 0; r*rackNodes < f.Nodes; r++ {
		rack, block := fmt.Sprintf("rack-%d", r), fmt.Sprintf("block-%d", r/blockRacks)
		model := "H100"
		switch x := rnd.IntN(10); {
		case x == 0:
			model = "GB200"
		case x < 4:
			model = "A100"
		case x == 4:
			model = "L4"
		}
		for k := 0; k < rackNodes && len(nodes) < f.Nodes; k++ {
			id := fmt.Sprintf("%s-%d", rack, k)
			n := placement.Node{ID: id, Pool: "synthetic", CapacityType: "on-prem", Model: model, Rack: rack, Block: block,
				CPUMilli: int64(f.GPUsPerNode) * 16_000, MemMiB: int64(f.GPUsPerNode) * 256 << 10, Schedulable: true,
				GPUs: make([]placement.GPU, f.GPUsPerNode)}
			for g := range n.GPUs {
				n.GPUs[g] = placement.GPU{Index: g, Model: model, Healthy: true}
				switch model {
				case "GB200":
					n.GPUs[g].Domain = "nvl72-" + rack
				case "H100", "A100":
					n.GPUs[g].Domain = "nvl-" + id
				}
			}
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// scaleTeams are the synthetic workload's teams.
var scaleTeams = []string{"nlp", "vision", "speech", "rec", "ads", "search", "infra", "research", "robotics", "bio"}

// SyntheticQueue is count pending jobs from seed: 20% GPU shares, 30% one
// GPU, 15% two, 12% four, 15% eight, 3% CPU-only and 5% gangs of 2-32
// replicas of 8 GPUs (a quarter of those required in one NVLink domain —
// at most 9 replicas then, the size of a rack-scale domain — a quarter in
// one rack, a quarter preferring one NVLink domain); half pinned to one
// GPU model; priorities 50, 100 and 200; ten teams; half preemptible; max
// runtimes of 1-48 h. GPUs per replica are capped at gpusPerNode.
func SyntheticQueue(count, gpusPerNode int, at time.Time, seed uint64) []gangway.QueueEntry {
	rnd := rand.New(rand.NewPCG(seed, 0x7175657565)) // "queue"
	q := make([]gangway.QueueEntry, 0, count)
	for k := range count {
		j := gangway.QueueEntry{JobID: fmt.Sprintf("job-%d", k), Team: scaleTeams[rnd.IntN(len(scaleTeams))],
			Priority: []int{50, 100, 100, 100, 200}[rnd.IntN(5)], SubmittedAt: at.Add(-time.Duration(rnd.IntN(3600)) * time.Second),
			MaxRuntime: time.Duration(1+rnd.IntN(48)) * time.Hour, Preemptible: rnd.IntN(2) == 0,
			CPUMilli: int64(1+rnd.IntN(8)) * 1000, MemMiB: int64(1+rnd.IntN(64)) * 1024, Replicas: 1}
		switch x := rnd.IntN(100); {
		case x < 20:
			j.GPUsPerReplica, j.GPUMilli = 1, 100*(1+rnd.IntN(9))
		case x < 50:
			j.GPUsPerReplica = 1
		case x < 65:
			j.GPUsPerReplica = 2
		case x < 77:
			j.GPUsPerReplica = 4
		case x < 92:
			j.GPUsPerReplica = 8
		case x < 95:
		default:
			j.Replicas, j.GPUsPerReplica = 2+rnd.IntN(31), 8
			switch rnd.IntN(4) {
			case 0:
				j.Replicas = min(j.Replicas, 9)
				j.Topology = gangway.Topology{Level: gangway.LevelNVLink, Required: true}
			case 1:
				j.Topology = gangway.Topology{Level: gangway.LevelRack, Required: true}
			case 2:
				j.Topology = gangway.Topology{Level: gangway.LevelNVLink}
			}
		}
		j.GPUsPerReplica = min(j.GPUsPerReplica, gpusPerNode)
		if rnd.IntN(2) == 0 {
			j.GPUModels = []string{SyntheticModels[rnd.IntN(len(SyntheticModels))]}
		}
		q = append(q, j)
	}
	return q
}

// FillFleet starts running jobs on a synthetic fleet until about busy (a
// share, 0-1) of its GPUs are in use: whole GPUs (1, 2, 4 or 8) and shares
// on random nodes, as the snapshot of a live fleet shows them. It returns
// the snapshot at now.
func FillFleet(nodes []placement.Node, busy float64, now time.Time, seed uint64) placement.Snapshot {
	rnd := rand.New(rand.NewPCG(seed, 0x62757379)) // "busy"
	nodes = cloneNodes(nodes)
	s := placement.Snapshot{Now: now, Nodes: nodes}
	total := 0
	for i := range nodes {
		total += len(nodes[i].GPUs)
	}
	target := int(busy * float64(total))
	used, misses := 0, 0
	for k := 0; used < target && misses < 1000; k++ {
		n := &nodes[rnd.IntN(len(nodes))]
		var free []int
		for g := range n.GPUs {
			if n.GPUs[g].UsedMilli == 0 {
				free = append(free, g)
			}
		}
		if len(free) == 0 {
			misses++
			continue
		}
		r := gangway.Assignment{JobID: fmt.Sprintf("run-%d", k), Team: scaleTeams[rnd.IntN(len(scaleTeams))],
			Priority: []int{50, 100, 200}[rnd.IntN(3)], Preemptible: rnd.IntN(2) == 0,
			At: now.Add(-time.Duration(rnd.IntN(600)) * time.Minute), MaxRuntime: time.Duration(1+rnd.IntN(24)) * time.Hour,
			CPUMilli: 4000, MemMiB: 16384}
		m := gangway.Member{NodeID: n.ID, Pool: n.Pool}
		if rnd.IntN(5) == 0 {
			m.GPUs, m.Milli = free[:1], 100*(1+rnd.IntN(9))
			n.GPUs[free[0]].UsedMilli = m.Milli
			used++
		} else {
			want := min(len(free), []int{1, 2, 4, 8}[rnd.IntN(4)])
			m.GPUs = slices.Clone(free[:want])
			for _, g := range m.GPUs {
				n.GPUs[g].UsedMilli = placement.Whole
			}
			used += want
		}
		if n.UsedCPUMilli+r.CPUMilli > n.CPUMilli || n.UsedMemMiB+r.MemMiB > n.MemMiB {
			r.CPUMilli, r.MemMiB = 0, 0
		}
		n.UsedCPUMilli += r.CPUMilli
		n.UsedMemMiB += r.MemMiB
		r.Members = []gangway.Member{m}
		s.Running = append(s.Running, r)
	}
	return s
}

func cloneNodes(nodes []placement.Node) []placement.Node {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].GPUs = slices.Clone(out[i].GPUs)
	}
	return out
}

// ScaleConfig is a sweep of full placement cycles over synthetic fleets
// and queues.
type ScaleConfig struct {
	Fleets []FleetSpec
	Jobs   []int
	// Policies by name; NewScorer makes a fresh scorer for each cycle.
	Policies  []string
	NewScorer func(policy string) (placement.Scorer, error)
	// Options for every cycle (reservations, preemption, node sampling,
	// ...); Scorer and Seed are set per cycle.
	Options placement.Options
	// Busy is the share of GPUs already in use by running jobs.
	Busy float64
	Seed uint64
	// Repeat times each cycle this many times and keeps the fastest (the
	// least disturbed by other work on the machine), sweeping the whole
	// grid once per repeat; 0 means 1.
	Repeat int
	// Progress, when set, is called with the cycles done and to do.
	Progress func(done, total int)
}

// ScaleCell is one measurement: one policy, one fleet, one queue.
type ScaleCell struct {
	Policy   string
	Fleet    FleetSpec
	GPUs     int
	Running  int // jobs already running in the snapshot
	Jobs     int
	Placed   int
	Unplaced int
	// Cycle is one placement.Place call, as the dispatch loop makes it
	// each cycle: session setup (view, scorer caches) and every job tried.
	Cycle time.Duration
	// PlacementsPerSec is Placed over Cycle; JobsPerSec, Jobs over Cycle
	// (every job is placed or explained).
	PlacementsPerSec, JobsPerSec float64
}

// ScaleResult is a whole sweep.
type ScaleResult struct {
	Cells  []ScaleCell // fleet-major, then jobs, then policy
	Busy   float64
	Seed   uint64
	Repeat int
	Opts   placement.Options
}

// RunScale times one full Place cycle for every fleet × queue × policy,
// one after another (a cycle is single-threaded, as in the dispatch loop).
func RunScale(ctx context.Context, cfg ScaleConfig) (*ScaleResult, error) {
	if len(cfg.Fleets) == 0 || len(cfg.Jobs) == 0 {
		return nil, errors.New("scale: no fleets or queue sizes")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	repeat := max(cfg.Repeat, 1)
	res := &ScaleResult{Busy: cfg.Busy, Seed: cfg.Seed, Repeat: repeat, Opts: cfg.Options}
	prog := newProgress(cfg.Progress, len(cfg.Fleets)*len(cfg.Jobs)*len(cfg.Policies)*repeat)
	now := TraceEpoch
	snaps := make([]placement.Snapshot, len(cfg.Fleets))
	queues := make([][][]gangway.QueueEntry, len(cfg.Fleets))
	for fi, fs := range cfg.Fleets {
		snaps[fi] = FillFleet(SyntheticFleet(fs, cfg.Seed), cfg.Busy, now, cfg.Seed)
		for _, nj := range cfg.Jobs {
			queues[fi] = append(queues[fi], SyntheticQueue(nj, fs.GPUsPerNode, now, cfg.Seed))
		}
	}
	// Repeats sweep the whole grid in turn, so that a slow spell on a
	// shared machine costs one repeat of several cells rather than every
	// repeat of one.
	for rep := range repeat {
		k := 0
		for fi, fs := range cfg.Fleets {
			for ji, nj := range cfg.Jobs {
				for _, policy := range cfg.Policies {
					if rep == 0 {
						res.Cells = append(res.Cells, ScaleCell{Policy: policy, Fleet: fs, GPUs: fs.Nodes * fs.GPUsPerNode,
							Running: len(snaps[fi].Running), Jobs: nj})
					}
					cell := &res.Cells[k]
					k++
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					sc, err := cfg.NewScorer(policy)
					if err != nil {
						return nil, err
					}
					o := cfg.Options
					o.Scorer, o.Seed = sc, cfg.Seed
					// Place sorts its own copy of the job pointers; the
					// queue itself is not changed.
					t0 := time.Now()
					plan := placement.Place(snaps[fi], queues[fi][ji], o)
					d := time.Since(t0)
					if cell.Cycle == 0 || d < cell.Cycle {
						cell.Cycle = d
					}
					cell.Placed, cell.Unplaced = len(plan.Assignments), len(plan.Unplaced)
					prog.add(1)
				}
			}
		}
	}
	for i := range res.Cells {
		c := &res.Cells[i]
		secs := c.Cycle.Seconds()
		c.PlacementsPerSec, c.JobsPerSec = float64(c.Placed)/secs, float64(c.Jobs)/secs
	}
	prog.finish()
	return res, nil
}

// byPolicy orders cells by policy (first appearance), then fleet and jobs.
func (r *ScaleResult) byPolicy() []ScaleCell {
	order := map[string]int{}
	for _, c := range r.Cells {
		if _, ok := order[c.Policy]; !ok {
			order[c.Policy] = len(order)
		}
	}
	out := slices.Clone(r.Cells)
	slices.SortStableFunc(out, func(a, b ScaleCell) int { return cmp.Compare(order[a.Policy], order[b.Policy]) })
	return out
}
