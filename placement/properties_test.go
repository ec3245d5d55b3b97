package placement_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// TestPlaceProperties checks, on random fleets, queues and options, what
// every plan must keep whatever the policy: see checkPlan. It also checks
// that Place is deterministic and leaves its inputs alone.
func TestPlaceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap := genSnapshot(t, 0, 10)
		q := genQueue(t, snap)
		opts := genOptions(t)

		snapCopy, qCopy := deepCopySnapshot(snap), deepCopyJobs(q)
		plan := placement.Place(snap, q, opts)
		if d := cmp.Diff(snapCopy, snap); d != "" {
			t.Fatalf("Place changed its snapshot (-before +after):\n%s", d)
		}
		if d := cmp.Diff(qCopy, q); d != "" {
			t.Fatalf("Place changed its queue (-before +after):\n%s", d)
		}
		if again := placement.Place(snap, q, freshScorer(t, opts)); !cmp.Equal(plan, again) {
			t.Fatalf("same input, different plan:\n%s", cmp.Diff(plan, again))
		}
		t.Logf("snapshot: %s\nqueue: %s\noptions: %s\nplan: %s", dump(snap), dump(q), dump(opts), dump(plan))
		checkPlan(t, snap, q, opts, plan)
	})
}

// dump is v as one line of JSON, for failure logs.
func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestPreemptionProperties runs checkPlan on busy fleets with preemption
// on, where most plans preempt something.
func TestPreemptionProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap := genSnapshot(t, 8, 20)
		q := genQueue(t, snap)
		opts := genOptions(t)
		opts.Preempt = true
		plan := placement.Place(snap, q, opts)
		t.Logf("snapshot: %s\nqueue: %s\noptions: %s\nplan: %s", dump(snap), dump(q), dump(opts), dump(plan))
		checkPlan(t, snap, q, opts, plan)
	})
}

// tb is what checkPlan needs of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// checkPlan checks the invariants of any plan for snap and queue:
//   - every queued job is assigned or unplaced exactly once, with a known
//     reason and a sentence;
//   - every assignment has exactly Replicas members of the job's shape, on
//     schedulable nodes of an allowed model and pool, on healthy GPUs, and
//     within its required topology group;
//   - no GPU is given more than it has free (UsedMilli plus the plan stays
//     within Whole), and no node more CPU or memory than it has;
//   - each assignment was admissible under the quotas when it was made;
//   - victims are running, preemptible, old enough and of lower priority
//     (or borrowing), each preemptor waits for its preemption, and the
//     preemptor fits once its victims are gone and the rest of the plan
//     has started;
//   - reservations belong to jobs that wait for them.
func checkPlan(t tb, snap placement.Snapshot, q []gangway.QueueEntry, opts placement.Options, plan placement.Plan) {
	t.Helper()
	jobs := map[string]*gangway.QueueEntry{}
	for i := range q {
		jobs[q[i].JobID] = &q[i]
	}
	nodes := map[string]*placement.Node{}
	for i := range snap.Nodes {
		nodes[snap.Nodes[i].ID] = &snap.Nodes[i]
	}
	seen := map[string]int{}
	for _, a := range plan.Assignments {
		seen[a.JobID]++
		// The assignment is complete: what later cycles read back about
		// the running job comes from its entry.
		if e := jobs[a.JobID]; e != nil {
			if want := withEntry(a, e); !cmp.Equal(want, a) {
				t.Errorf("%s: assignment does not carry its entry (-want +got):\n%s", a.JobID, cmp.Diff(want, a))
			}
		}
	}
	for _, u := range plan.Unplaced {
		seen[u.JobID]++
		if !slices.Contains(allReasons, u.Reason) {
			t.Errorf("%s: unknown reason %q", u.JobID, u.Reason)
		}
		if u.Detail == "" {
			t.Errorf("%s: reason %s without a detail", u.JobID, u.Reason)
		}
	}
	for id, n := range seen {
		if jobs[id] == nil {
			t.Errorf("plan mentions %s, which is not queued", id)
		} else if n != 1 {
			t.Errorf("%s appears %d times in the plan", id, n)
		}
	}
	for id := range jobs {
		if seen[id] == 0 {
			t.Errorf("%s is neither assigned nor unplaced", id)
		}
	}

	gpuUse := map[string][]int{} // node → milli added per GPU
	cpuUse, memUse := map[string]int64{}, map[string]int64{}
	for _, a := range plan.Assignments {
		j := jobs[a.JobID]
		if j == nil {
			continue
		}
		checkAssignment(t, snap, nodes, j, a)
		for _, m := range a.Members {
			n := nodes[m.NodeID]
			if n == nil {
				continue
			}
			if gpuUse[n.ID] == nil {
				gpuUse[n.ID] = make([]int, len(n.GPUs))
			}
			for _, g := range m.GPUs {
				if g >= 0 && g < len(n.GPUs) {
					gpuUse[n.ID][g] += memberMilli(m)
				}
			}
			cpuUse[n.ID] += j.CPUMilli
			memUse[n.ID] += j.MemMiB
		}
	}
	for id, use := range gpuUse {
		n := nodes[id]
		for g, add := range use {
			if add > 0 && n.GPUs[g].UsedMilli+add > placement.Whole {
				t.Errorf("%s GPU %d over-allocated: %d used + %d planned", id, g, n.GPUs[g].UsedMilli, add)
			}
		}
	}
	for id, add := range cpuUse {
		if n := nodes[id]; add > 0 && n.UsedCPUMilli+add > n.CPUMilli {
			t.Errorf("%s CPU over-allocated: %d used + %d planned > %d", id, n.UsedCPUMilli, add, n.CPUMilli)
		}
	}
	for id, add := range memUse {
		if n := nodes[id]; add > 0 && n.UsedMemMiB+add > n.MemMiB {
			t.Errorf("%s memory over-allocated: %d used + %d planned > %d", id, n.UsedMemMiB, add, n.MemMiB)
		}
	}

	checkQuotas(t, snap, jobs, nodes, opts.Quotas, plan)
	checkPreemptions(t, snap, q, jobs, opts, plan)

	waits := map[string]placement.Reason{}
	for _, u := range plan.Unplaced {
		waits[u.JobID] = u.Reason
	}
	for _, r := range plan.Reservations {
		if waits[r.JobID] != placement.ReasonReservation {
			t.Errorf("reservation for %s, which is %q", r.JobID, waits[r.JobID])
		}
		if r.Start.Before(snap.Now) {
			t.Errorf("reservation for %s starts at %s, before now %s", r.JobID, r.Start, snap.Now)
		}
	}
	if opts.Reservations >= 0 && len(plan.Reservations) > opts.Reservations {
		t.Errorf("%d reservations, more than the %d allowed", len(plan.Reservations), opts.Reservations)
	}
	for id, r := range waits {
		if r == placement.ReasonReservation && !slices.ContainsFunc(plan.Reservations, func(rs placement.Reservation) bool { return rs.JobID == id }) {
			t.Errorf("%s waits for a reservation the plan does not make", id)
		}
		if r == placement.ReasonPreempting && !slices.ContainsFunc(plan.Preemptions, func(p placement.Preemption) bool { return p.Preemptor == id }) {
			t.Errorf("%s waits for a preemption the plan does not make", id)
		}
	}
	if opts.MaxAssignments > 0 && len(plan.Assignments) > opts.MaxAssignments {
		t.Errorf("%d assignments, more than MaxAssignments %d", len(plan.Assignments), opts.MaxAssignments)
	}
}

var allReasons = []placement.Reason{
	placement.ReasonInsufficientGPUs, placement.ReasonFragmented, placement.ReasonReserved,
	placement.ReasonReservation, placement.ReasonQuota, placement.ReasonPreempting, placement.ReasonDefragmenting,
	placement.ReasonModelUnavailable, placement.ReasonNeverFits, placement.ReasonPlanFull,
}

// meteredMilli is what each GPU of m counts for against quotas on a node
// of model, worked out here from the rules rather than read off the
// member: its share, a MIG device's compute slices out of seven (four on
// an A30) rounded down, or a whole GPU.
func meteredMilli(model string, m gangway.Member) int {
	if m.MIG != "" {
		p, err := gangway.ParseMIGProfile(m.MIG)
		if err != nil {
			return placement.Whole
		}
		slices := 7
		if model == "A30" {
			slices = 4
		}
		return p.Slices * placement.Whole / slices
	}
	return memberMilli(m)
}

func memberMilli(m gangway.Member) int {
	if m.Milli > 0 {
		return m.Milli
	}
	return placement.Whole
}

func checkAssignment(t tb, snap placement.Snapshot, nodes map[string]*placement.Node, j *gangway.QueueEntry, a gangway.Assignment) {
	t.Helper()
	if len(a.Members) != j.Replicas {
		t.Errorf("%s: %d members, want %d", j.JobID, len(a.Members), j.Replicas)
	}
	if !a.At.Equal(snap.Now) || a.Attempt != j.Attempt {
		t.Errorf("%s: at %s attempt %d, want %s attempt %d", j.JobID, a.At, a.Attempt, snap.Now, j.Attempt)
	}
	groups := map[string]bool{}
	for k, m := range a.Members {
		if m.Rank != k {
			t.Errorf("%s: member %d has rank %d", j.JobID, k, m.Rank)
		}
		n := nodes[m.NodeID]
		if n == nil {
			t.Errorf("%s: member on unknown node %s", j.JobID, m.NodeID)
			continue
		}
		if !n.Schedulable {
			t.Errorf("%s: member on unschedulable node %s", j.JobID, n.ID)
		}
		if m.Pool != n.Pool || m.Addr != n.Addr {
			t.Errorf("%s: member says pool %q addr %q, node %s has %q %q", j.JobID, m.Pool, m.Addr, n.ID, n.Pool, n.Addr)
		}
		if len(j.GPUModels) > 0 && !slices.Contains(j.GPUModels, n.Model) {
			t.Errorf("%s: on %s (%s), allowed %v", j.JobID, n.ID, n.Model, j.GPUModels)
		}
		if len(j.Pools) > 0 && !slices.Contains(j.Pools, n.Pool) {
			t.Errorf("%s: on %s (pool %s), allowed %v", j.JobID, n.ID, n.Pool, j.Pools)
		}
		switch {
		case j.GPUsPerReplica == 0:
			if len(m.GPUs) != 0 || m.Milli != 0 {
				t.Errorf("%s: CPU-only member holds GPUs %v (%dm)", j.JobID, m.GPUs, m.Milli)
			}
		case j.MIG():
			if len(m.GPUs) != j.GPUsPerReplica || m.Milli != 0 || m.MIG != j.MIGProfile || m.MIGMilli != gangway.MIGMilli(n.Model, j.MIGProfile) {
				t.Errorf("%s: MIG member holds GPUs %v (%dm, MIG %q at %dm), want %d MIG %s", j.JobID, m.GPUs, m.Milli, m.MIG, m.MIGMilli, j.GPUsPerReplica, j.MIGProfile)
			}
		case j.Share():
			if len(m.GPUs) != 1 || m.Milli != j.GPUMilli {
				t.Errorf("%s: share member holds GPUs %v at %dm, want one at %dm", j.JobID, m.GPUs, m.Milli, j.GPUMilli)
			}
		default:
			if len(m.GPUs) != j.GPUsPerReplica || m.Milli != 0 {
				t.Errorf("%s: member holds GPUs %v (%dm), want %d whole", j.JobID, m.GPUs, m.Milli, j.GPUsPerReplica)
			}
		}
		if s := slices.Clone(m.GPUs); len(slices.Compact(slices.Sorted(slices.Values(s)))) != len(s) {
			t.Errorf("%s: member lists a GPU twice: %v", j.JobID, m.GPUs)
		}
		for _, g := range m.GPUs {
			if g < 0 || g >= len(n.GPUs) {
				t.Errorf("%s: %s has no GPU %d", j.JobID, n.ID, g)
				continue
			}
			if !n.GPUs[g].Healthy {
				t.Errorf("%s: on unhealthy GPU %s/%d", j.JobID, n.ID, g)
			}
			// A MIG job only on MIG devices of its profile; nothing else
			// on a MIG device.
			if n.GPUs[g].MIG != j.MIGProfile {
				t.Errorf("%s (MIG profile %q): on GPU %s/%d, MIG profile %q", j.JobID, j.MIGProfile, n.ID, g, n.GPUs[g].MIG)
			}
			if j.Topology.Required && j.Topology.Level == gangway.LevelNVLink {
				groups[nvlinkKey(n, g)] = true
			}
		}
		if j.Topology.Required {
			switch j.Topology.Level {
			case gangway.LevelNode:
				groups[n.ID] = true
			case gangway.LevelRack:
				groups[orNode(n.Rack, n)] = true
			case gangway.LevelBlock:
				groups[orNode(n.Block, n)] = true
			}
		}
	}
	if len(groups) > 1 {
		t.Errorf("%s: requires one %s group, spans %v", j.JobID, j.Topology.Level, groups)
	}
}

func nvlinkKey(n *placement.Node, g int) string {
	if d := n.GPUs[g].Domain; d != "" {
		return d
	}
	return fmt.Sprintf("%s#%d", n.ID, g)
}

func orNode(label string, n *placement.Node) string {
	if label != "" {
		return label
	}
	return "node:" + n.ID
}

// checkQuotas replays the plan's assignments in order against a plain
// model of the quotas: each must fit in the team's nominal quota, or borrow
// within its borrowing limit what the rest of its cohort lends.
func checkQuotas(t tb, snap placement.Snapshot, jobs map[string]*gangway.QueueEntry, nodes map[string]*placement.Node, qs []placement.Quota, plan placement.Plan) {
	t.Helper()
	if len(qs) == 0 {
		return
	}
	byTeam := map[string][]placement.Quota{}
	for _, q := range qs {
		byTeam[q.Team] = append(byTeam[q.Team], q)
	}
	// quotaFor is the team's quota that governs model, and the key its use
	// is counted under.
	quotaFor := func(team, model string) (placement.Quota, string, bool) {
		for _, q := range byTeam[team] {
			if q.Model == model {
				return q, team + "/" + model, true
			}
		}
		for _, q := range byTeam[team] {
			if q.Model == "" {
				return q, team + "/", true
			}
		}
		return placement.Quota{}, "", false
	}
	used := map[string]int64{}
	charge := func(team, model string, milli int64) {
		if _, k, ok := quotaFor(team, model); ok {
			used[k] += milli
		}
	}
	for _, r := range snap.Running {
		for _, m := range r.Members {
			if n := nodes[m.NodeID]; n != nil {
				charge(r.Team, n.Model, int64(len(m.GPUs))*int64(meteredMilli(n.Model, m)))
			}
		}
	}
	for _, a := range plan.Assignments {
		j := jobs[a.JobID]
		if j == nil {
			continue
		}
		byModel := map[string]int64{}
		for _, m := range a.Members {
			if n := nodes[m.NodeID]; n != nil {
				byModel[n.Model] += int64(len(m.GPUs)) * int64(meteredMilli(n.Model, m))
			}
		}
		for _, model := range slices.Sorted(func(yield func(string) bool) {
			for m := range byModel {
				if !yield(m) {
					return
				}
			}
		}) {
			milli := byModel[model]
			if milli == 0 || len(byTeam[j.Team]) == 0 {
				continue
			}
			q, k, ok := quotaFor(j.Team, model)
			if !ok {
				t.Errorf("%s: team %s has no quota for %s, yet got %dm of it", j.JobID, j.Team, model, milli)
				continue
			}
			nominal := int64(q.Nominal) * placement.Whole
			borrow := used[k] + milli - nominal
			if borrow > 0 {
				if q.BorrowingLimit != nil && borrow > int64(*q.BorrowingLimit)*placement.Whole {
					t.Errorf("%s: team %s borrows %dm of %s, over its limit of %d GPUs", j.JobID, j.Team, borrow, model, *q.BorrowingLimit)
				}
				var lend, others int64
				if q.Cohort != "" {
					for team, tqs := range byTeam {
						if team == j.Team {
							continue
						}
						for _, o := range tqs {
							if o.Cohort != q.Cohort || (o.Model != "" && o.Model != model) {
								continue
							}
							ok := team + "/" + o.Model
							u, nom := used[ok], int64(o.Nominal)*placement.Whole
							free := nom - min(u, nom)
							if o.LendingLimit != nil {
								free = min(free, int64(*o.LendingLimit)*placement.Whole)
							}
							lend += free
							others += u - min(u, nom)
						}
					}
				}
				if borrow > max(lend-others, 0) {
					t.Errorf("%s: team %s borrows %dm of %s; its cohort %q lends %dm, %dm of it already borrowed",
						j.JobID, j.Team, borrow, model, q.Cohort, lend, others)
				}
			}
			used[k] += milli
		}
	}
}

// checkPreemptions checks each preemption's victims, then that its
// preemptor fits once they are gone: on the snapshot with the plan's
// assignments started and this and earlier preemptions' victims stopped,
// Place must assign it.
//
// Each preemptor is checked on its own, and for capacity, not quota. The
// plan does not say where a preemptor will go, so the next cycle may put
// an earlier preemptor on capacity freed for a later one; and a lender
// using its own nominal quota later in the plan may leave a borrowing
// preemptor over quota. Both are limits of the engine's design, reported
// with this suite, not what this property checks.
func checkPreemptions(t tb, snap placement.Snapshot, q []gangway.QueueEntry, jobs map[string]*gangway.QueueEntry, opts placement.Options, plan placement.Plan) {
	t.Helper()
	if len(plan.Preemptions) == 0 {
		return
	}
	if !opts.Preempt {
		t.Fatalf("preemptions without Options.Preempt: %v", plan.Preemptions)
	}
	runningByID := map[string]*gangway.Assignment{}
	for i := range snap.Running {
		runningByID[snap.Running[i].JobID] = &snap.Running[i]
	}
	victimOf := map[string]string{}
	after := applyPlan(snap, plan.Assignments)
	for _, p := range plan.Preemptions {
		j := jobs[p.Preemptor]
		if j == nil {
			t.Errorf("preemption for unknown job %s", p.Preemptor)
			continue
		}
		if len(p.Victims) == 0 {
			t.Errorf("%s: preemption without victims", j.JobID)
		}
		var ids []string
		for _, v := range p.Victims {
			ids = append(ids, v.JobID)
			if prev, dup := victimOf[v.JobID]; dup {
				t.Errorf("%s is preempted for both %s and %s", v.JobID, prev, j.JobID)
			}
			victimOf[v.JobID] = j.JobID
			r := runningByID[v.JobID]
			if r == nil {
				t.Errorf("%s: victim %s is not a running job of the snapshot", j.JobID, v.JobID)
				continue
			}
			if !r.Preemptible {
				t.Errorf("%s: victim %s is not preemptible", j.JobID, v.JobID)
			}
			if snap.Now.Sub(r.At) < opts.MinRuntime {
				t.Errorf("%s: victim %s started %s ago, less than MinRuntime %s", j.JobID, v.JobID, snap.Now.Sub(r.At), opts.MinRuntime)
			}
			if r.Priority >= j.Priority && (r.Team == j.Team || len(opts.Quotas) == 0) {
				t.Errorf("%s (priority %d): victim %s has priority %d and reclaims no quota", j.JobID, j.Priority, v.JobID, r.Priority)
			}
		}
		after = withoutRunning(after, ids)
		o := opts
		o.Preempt, o.Reservations, o.MaxAssignments, o.Quotas = false, 0, 0, nil
		again := placement.Place(after, []gangway.QueueEntry{*j}, freshScorer(t, o))
		if len(again.Assignments) != 1 {
			t.Errorf("%s preempts %v but does not fit once they are gone: %+v", j.JobID, ids, again.Unplaced)
		}
	}
}

// applyPlan is snap with assignments started as running allocations.
func applyPlan(snap placement.Snapshot, as []gangway.Assignment) placement.Snapshot {
	out := deepCopySnapshot(snap)
	for _, a := range as {
		// The plan's assignment is what runs: complete, from the entry.
		out.Running = append(out.Running, a)
		chargeNodes(&out, a, +1)
	}
	return out
}

// withoutRunning is snap with the running allocations ids stopped.
func withoutRunning(snap placement.Snapshot, ids []string) placement.Snapshot {
	out := deepCopySnapshot(snap)
	for _, r := range out.Running {
		if slices.Contains(ids, r.JobID) {
			chargeNodes(&out, r, -1)
		}
	}
	out.Running = slices.DeleteFunc(out.Running, func(r gangway.Assignment) bool { return slices.Contains(ids, r.JobID) })
	return out
}

// chargeNodes adds (sign +1) or removes (-1) r's usage on s's nodes.
func chargeNodes(s *placement.Snapshot, r gangway.Assignment, sign int) {
	for _, m := range r.Members {
		i := slices.IndexFunc(s.Nodes, func(n placement.Node) bool { return n.ID == m.NodeID })
		n := &s.Nodes[i]
		n.UsedCPUMilli += int64(sign) * r.CPUMilli
		n.UsedMemMiB += int64(sign) * r.MemMiB
		for _, g := range m.GPUs {
			n.GPUs[g].UsedMilli += sign * orWhole(m.Milli)
		}
	}
}

func orWhole(milli int) int {
	if milli <= 0 {
		return placement.Whole
	}
	return milli
}

func deepCopySnapshot(s placement.Snapshot) placement.Snapshot {
	out := placement.Snapshot{Now: s.Now}
	if s.Nodes != nil {
		out.Nodes = make([]placement.Node, len(s.Nodes))
	}
	for i, n := range s.Nodes {
		n.GPUs = slices.Clone(n.GPUs)
		out.Nodes[i] = n
	}
	if s.Running != nil {
		out.Running = make([]gangway.Assignment, len(s.Running))
	}
	for i, r := range s.Running {
		r.Members = slices.Clone(r.Members)
		for k := range r.Members {
			r.Members[k].GPUs = slices.Clone(r.Members[k].GPUs)
		}
		out.Running[i] = r
	}
	return out
}

func deepCopyJobs(q []gangway.QueueEntry) []gangway.QueueEntry {
	if q == nil {
		return nil
	}
	out := make([]gangway.QueueEntry, len(q))
	for i, j := range q {
		j.GPUModels, j.Pools = slices.Clone(j.GPUModels), slices.Clone(j.Pools)
		out[i] = j
	}
	return out
}

var (
	genModels = []string{"H100", "A100"}
	genTeams  = []string{"nlp", "vision", "infra"}
	// genMIGProfiles are the MIG profiles fleets are cut into and jobs
	// ask for; 2g.20gb is asked for but never cut.
	genMIGProfiles = []string{"1g.10gb", "3g.40gb", "1g.10gb"}
)

// genSnapshot is a small fleet: GPU and CPU-only nodes, NVLink domains per
// node, per half node or across a rack, some GPUs used, shared, unhealthy
// or MIG devices, some nodes cordoned, and running allocations (whole,
// shares, MIG devices) charged to it.
func genSnapshot(t *rapid.T, minRunning, maxRunning int) placement.Snapshot {
	count := rapid.IntRange(1, 7).Draw(t, "nodes")
	var f fleetBuilder
	f.now = t0
	for i := range count {
		id := fmt.Sprintf("n%d", i+1)
		rack := fmt.Sprintf("r%d", rapid.IntRange(1, 3).Draw(t, id+".rack"))
		b := node(id).rack(rack).block("b1").
			pool(rapid.SampledFrom([]string{"onprem", "cloud"}).Draw(t, id+".pool")).
			cpu(int64(rapid.IntRange(4, 64).Draw(t, id+".cpus")) * 1000).
			mem(int64(rapid.IntRange(64, 512).Draw(t, id+".memGiB")) * 1024)
		if rapid.IntRange(0, 7).Draw(t, id+".cpuOnly") > 0 {
			gpus := rapid.SampledFrom([]int{1, 2, 4, 8, 8, 8}).Draw(t, id+".gpus")
			b.gpus(gpus, rapid.SampledFrom(genModels).Draw(t, id+".model"))
			switch rapid.IntRange(0, 3).Draw(t, id+".domains") {
			case 0: // one domain per node
				b.domain("nvl-" + id)
			case 1: // two halves
				b.domain("nvl-"+id+"a", seq(0, gpus/2)...).domain("nvl-"+id+"b", seq(gpus/2, gpus-gpus/2)...)
			case 2: // rack-scale
				b.domain("nvl72-" + rack)
			}
			for g := range gpus {
				switch rapid.IntRange(0, 9).Draw(t, fmt.Sprintf("%s.gpu%d", id, g)) {
				case 0:
					b.used(g)
				case 1:
					b.usedMilli(g, rapid.IntRange(1, 999).Draw(t, fmt.Sprintf("%s.gpu%d.milli", id, g)))
				case 2:
					b.unhealthy(g)
				case 3:
					b.mig(rapid.SampledFrom(genMIGProfiles).Draw(t, fmt.Sprintf("%s.gpu%d.mig", id, g)), g)
				}
			}
		}
		if rapid.IntRange(0, 7).Draw(t, id+".cordoned") == 0 {
			b.cordoned()
		}
		f.nodes = append(f.nodes, b)
	}
	// Running allocations on what is left.
	runs := rapid.IntRange(minRunning, maxRunning).Draw(t, "running")
	snap := f.build()
	for k := range runs {
		id := fmt.Sprintf("r%d", k+1)
		ni := rapid.IntRange(0, len(snap.Nodes)-1).Draw(t, id+".node")
		n := &snap.Nodes[ni]
		rb := running(id).team(rapid.SampledFrom(genTeams).Draw(t, id+".team")).
			prio(rapid.SampledFrom([]int{50, 100, 200}).Draw(t, id+".prio")).
			started(t0.Add(-time.Duration(rapid.IntRange(0, 240).Draw(t, id+".ageMin"))*time.Minute)).
			runtime(time.Duration(rapid.SampledFrom([]int{0, 30, 120, 300}).Draw(t, id+".runtimeMin"))*time.Minute).
			res(int64(rapid.IntRange(0, 2).Draw(t, id+".cpus"))*1000, 1024)
		if rapid.Bool().Draw(t, id+".preemptible") {
			rb.preemptible()
		}
		if rapid.Bool().Draw(t, id+".checkpointed") {
			rb.checkpoint(t0.Add(-10 * time.Minute))
		}
		if n.CPUMilli-n.UsedCPUMilli < rb.r.CPUMilli || n.MemMiB-n.UsedMemMiB < rb.r.MemMiB {
			continue
		}
		var free, freeMIG []int
		for g, gpu := range n.GPUs {
			switch {
			case !gpu.Healthy || gpu.UsedMilli > 0:
			case gpu.MIG != "":
				freeMIG = append(freeMIG, g)
			default:
				free = append(free, g)
			}
		}
		switch {
		case len(freeMIG) > 0 && rapid.IntRange(0, 2).Draw(t, id+".mig") == 0:
			g := freeMIG[rapid.IntRange(0, len(freeMIG)-1).Draw(t, id+".migDevice")]
			rb.mig(n.GPUs[g].MIG).on(n.ID, g)
		case len(free) > 0 && rapid.IntRange(0, 3).Draw(t, id+".share") == 0:
			rb.share(rapid.IntRange(100, 900).Draw(t, id+".milli")).on(n.ID, free[0])
		default:
			want := rapid.IntRange(min(1, len(free)), len(free)).Draw(t, id+".gpus")
			rb.on(n.ID, free[:want]...)
		}
		r := rb.r
		for i := range r.Members {
			r.Members[i].Pool, r.Members[i].Addr = n.Pool, n.Addr
			r.Members[i].Milli = rb.milli
			if rb.profile != "" {
				r.Members[i].MIG, r.Members[i].MIGMilli = rb.profile, gangway.MIGMilli(n.Model, rb.profile)
			}
		}
		snap.Running = append(snap.Running, r)
		chargeNodes(&snap, r, +1)
	}
	return snap
}

// genQueue is up to a dozen jobs of every shape: shares, whole GPUs, gangs,
// MIG devices, CPU-only; with models, pools and topology constraints.
func genQueue(t *rapid.T, snap placement.Snapshot) []gangway.QueueEntry {
	count := rapid.IntRange(0, 12).Draw(t, "jobs")
	q := make([]gangway.QueueEntry, 0, count)
	for i := range count {
		id := fmt.Sprintf("j%d", i+1)
		b := job(id).team(rapid.SampledFrom(genTeams).Draw(t, id+".team")).
			prio(rapid.SampledFrom([]int{50, 100, 200}).Draw(t, id+".prio")).
			age(time.Duration(rapid.IntRange(0, 60).Draw(t, id+".ageMin")) * time.Minute).
			runtime(time.Duration(rapid.SampledFrom([]int{0, 10, 60, 600}).Draw(t, id+".runtimeMin")) * time.Minute).
			cpu(int64(rapid.IntRange(0, 4).Draw(t, id+".cpus")) * 1000).
			mem(int64(rapid.IntRange(0, 32).Draw(t, id+".memGiB")) * 1024).
			attempt(rapid.IntRange(1, 3).Draw(t, id+".attempt"))
		replicas := rapid.IntRange(1, 3).Draw(t, id+".replicas")
		switch rapid.IntRange(0, 6).Draw(t, id+".shape") {
		case 0:
			b.share(rapid.IntRange(1, 9).Draw(t, id+".tenths") * 100).replicas(replicas)
		case 1:
			b.cpuOnly().replicas(replicas)
		case 2:
			b.mig(rapid.SampledFrom(append(slices.Clone(genMIGProfiles), "2g.20gb")).Draw(t, id+".mig")).replicas(replicas)
		default:
			b.gang(replicas, rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, id+".gpusPer"))
		}
		if rapid.IntRange(0, 2).Draw(t, id+".pinModel") == 0 {
			b.models(rapid.SampledFrom(genModels).Draw(t, id+".model"))
		}
		if rapid.IntRange(0, 5).Draw(t, id+".pinPool") == 0 {
			b.pools(rapid.SampledFrom([]string{"onprem", "cloud"}).Draw(t, id+".pool"))
		}
		if lvl := rapid.IntRange(0, 4).Draw(t, id+".topology"); lvl > 0 && b.j.GPUsPerReplica > 0 {
			b.topology(gangway.Levels[lvl-1], rapid.Bool().Draw(t, id+".required"))
		}
		if rapid.Bool().Draw(t, id+".preemptible") {
			b.preemptible()
		}
		q = append(q, b.j)
	}
	return q
}

// genOptions turns on, at random, reservations, preemption, quotas with
// cohorts and limits, team weights and a plan size cap.
func genOptions(t *rapid.T) placement.Options {
	o := placement.Options{
		Seed:           rapid.Uint64().Draw(t, "seed"),
		MaxAssignments: rapid.SampledFrom([]int{0, 0, 0, 2}).Draw(t, "maxAssignments"),
		Reservations:   rapid.IntRange(0, 2).Draw(t, "reservations"),
		Preempt:        rapid.Bool().Draw(t, "preempt"),
		MinRuntime:     time.Duration(rapid.SampledFrom([]int{0, 0, 30}).Draw(t, "minRuntimeMin")) * time.Minute,
	}
	if name := rapid.SampledFrom(append([]string{"", ""}, baselines.Names()...)).Draw(t, "scorer"); name != "" {
		sc, err := baselines.ScorerByName(name)
		if err != nil {
			t.Fatalf("scorer %s: %v", name, err)
		}
		o.Scorer = sc
	}
	if rapid.Bool().Draw(t, "weighted") {
		o.Fairness.TeamWeights = map[string]float64{"nlp": 2, "vision": 1}
	}
	if rapid.Bool().Draw(t, "quotas") {
		// One model for every quota. When a team's any-model quota borrows
		// from a lender's H100-only quota, what it borrowed is later judged
		// against whichever model its next job wants, so admission depends
		// on order: a quirk of the quota model, not what this checks.
		model := rapid.SampledFrom([]string{"", "H100"}).Draw(t, "quotaModel")
		for _, team := range genTeams {
			if rapid.IntRange(0, 3).Draw(t, team+".quota") == 0 {
				continue
			}
			q := placement.Quota{Team: team, Nominal: rapid.IntRange(0, 16).Draw(t, team+".nominal"),
				Model:  model,
				Cohort: rapid.SampledFrom([]string{"", "research", "research"}).Draw(t, team+".cohort")}
			if rapid.Bool().Draw(t, team+".borrowCap") {
				q.BorrowingLimit = intp(rapid.IntRange(0, 8).Draw(t, team+".borrowingLimit"))
			}
			if rapid.Bool().Draw(t, team+".lendCap") {
				q.LendingLimit = intp(rapid.IntRange(0, 8).Draw(t, team+".lendingLimit"))
			}
			o.Quotas = append(o.Quotas, q)
		}
	}
	return o
}
