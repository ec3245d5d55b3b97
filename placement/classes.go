package placement

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// Node classes: score each distinct node state once.
//
// Scoring every feasible node for every replica made a 10,000-node cycle
// take seconds, yet most nodes of a fleet look alike to a scorer: the same
// model in the same pool, the same GPUs free, more CPU and memory than any
// queued replica could tell apart. The engine groups the nodes whose state
// is the same for placement into classes and, for a ClassScorer, scores
// one node per class instead of every node. The plan is exactly the one
// scoring every node gives (TestNodeClassesPlaceAlike):
//
//   - A class key is everything the filters, the candidates, the census
//     and a ClassScorer read of a node but its name: model, pool, owner,
//     whether it is schedulable, CPU and memory capacity, and per GPU its free milli, health, flakiness, NVLink
//     domain and NUMA node (named by the first GPU of the node in the same
//     domain or NUMA node: only comparisons within the node matter
//     outside grouped placement). Free CPU and memory are capped at the
//     levels above which neither the CPU and memory filters nor the scorer
//     can tell two nodes apart for any queued replica: the largest demand
//     in the queue, and ClassScorer.Depends. On a node whose GPUs
//     are all alike any order of its GPUs is the same state, so their free
//     milli are keyed sorted. A node with a reservation is a class of its
//     own: what it offers depends on when each job would end.
//   - A class's representative is its lowest node index. The per-node scan
//     breaks ties to the lowest index, and a ClassScorer's score depends
//     on the node index at most through NodeOrder, which favours lower
//     indexes, so no member beats its representative: the best
//     representative is the node the per-node scan picks, and its best
//     candidate the candidate.
//   - Filters run on the representative at every scan (quota changes as
//     the plan commits); the representative's best score for a replica
//     shape is cached in the class. The key is the state the score reads,
//     so nothing but the workload or the demand the levels were computed
//     for can make a cached score stale, and either rebuilds the classes;
//     for a scorer whose score depends on the node index (NodeDeps.ByIndex)
//     a score holds only for the representative it was computed on. The
//     winning class's representative is scored again for its candidate
//     when its score was computed on another member (alike GPUs may sit at
//     other indexes). Classes whose CPU or memory is below the levels are
//     not cached: the score may then depend on the replica's exact
//     demand.
//   - The view records the nodes each take, give, rollback and reservation
//     changes; before a scan those nodes are keyed again and move between
//     classes, so the classes follow the plan as it commits, and gang
//     transactions that roll back leave them as they were.
//   - The census explain reads (count) is taken per class too, each class
//     counted as many times as it has members.
//
// Grouped (topology) placement, jobs pinned to nodes, jobs on MIG devices
// (whose state the keys leave out: a MIG device's free milli is always 0),
// sampling, FirstFit and scorers that are not ClassScorers scan nodes one
// by one.

// classes is a session's node classes, built on first use.
type classes struct {
	built  bool
	byKey  map[string]*nodeClass
	lists  [][]*nodeClass // per model index: the classes with members
	models map[string]int
	of     []*nodeClass // per node: its class
	// layout is, per node, its capacity and its GPUs' health, flakiness,
	// domains and NUMA nodes as key bytes (gpuLayout); alike says all its
	// GPUs are alike in those.
	layout []string
	alike  []bool
	// fleetModels is the fleet's GPU models, sorted, as the census lists
	// them.
	fleetModels []string
	// maxCPU and maxMem are the largest replica demands the keys hold
	// for; workload is the one the levels were computed against.
	maxCPU, maxMem int64
	workload       []WorkloadClass
	shapes         map[scoreShape]int32
	// scores holds, per score shape, each class's cached score by class
	// id: a scan reads one short row.
	scores [][]classScore
	ids    []int32 // ids of classes dropped from byKey, for reuse
	nextID int32
	empty  int // classes in byKey without members
	key    []byte
	sorted []int
}

// nodeClass is the nodes of one key.
type nodeClass struct {
	key         string
	model       int // index into classes.lists
	pos         int // in its list; -1 without members
	size        int
	schedulable bool
	// whole and maxFree are the members' entirely free GPUs and most free
	// milli on one GPU: the free-GPUs filter, without visiting a member.
	whole, maxFree int
	// exact: free CPU or memory is below the levels, or a reservation
	// makes the node a class of its own; its scores are not cached.
	exact bool
	// byIndex: scores hold only for the representative they were
	// computed on (NodeDeps.ByIndex).
	byIndex bool
	// heap is a min-heap of member node indexes; entries of nodes that
	// left since (classes.of names another class) are dropped lazily.
	heap []int32
	id   int32 // index into the rows of classes.scores
}

// classScore is a representative's best candidate for one replica shape.
type classScore struct {
	class *nodeClass // whose score it is: ids are reused
	rep   int32      // the representative it was computed on
	cand  int32      // index among its candidates
	n     int32      // candidates: one (whole GPUs, CPU only) is the same on every member
	ver   uint64     // the scorer's ScoreVersion when taken
	score float64
}

func (e *classScore) ok() bool { return e.n > 0 }

// scoreShape is what a ClassScorer and the candidates read of a job.
type scoreShape struct {
	replicas, gpus, milli int
	models                string
	avoidFlaky            bool
}

// maxScoreShapes bounds the replica shapes cached at once; past it the
// cache starts over.
const maxScoreShapes = 1024

// demand makes the class keys hold for replicas needing up to cpu and mem.
func (cl *classes) demand(cpu, mem int64) {
	if cpu > cl.maxCPU || mem > cl.maxMem {
		cl.maxCPU, cl.maxMem = max(cl.maxCPU, cpu), max(cl.maxMem, mem)
		cl.built = false
	}
}

// sync brings the classes up to date with the view.
func (cl *classes) sync(se *Session) {
	v := se.view
	if !cl.built || !sameWorkload(cl.workload, v.workload) {
		cl.build(se)
		return
	}
	for _, i := range v.dirty {
		v.isDirty[i] = false
		cl.place(se, i)
	}
	v.dirty = v.dirty[:0]
	if cl.empty > 1024 && cl.empty > len(cl.byKey)-cl.empty {
		for k, c := range cl.byKey {
			if c.size == 0 {
				delete(cl.byKey, k)
				cl.ids = append(cl.ids, c.id)
			}
		}
		cl.empty = 0
	}
}

// build keys every node afresh.
func (cl *classes) build(se *Session) {
	v := se.view
	if cl.layout == nil {
		cl.models = map[string]int{}
		cl.layout = make([]string, len(v.nodes))
		cl.alike = make([]bool, len(v.nodes))
		for i := range v.nodes {
			n := &v.nodes[i]
			if _, ok := cl.models[n.Model]; !ok {
				cl.models[n.Model] = len(cl.models)
				if n.Model != "" {
					cl.fleetModels = append(cl.fleetModels, n.Model)
				}
			}
			cl.layout[i], cl.alike[i] = gpuLayout(n)
		}
		slices.Sort(cl.fleetModels)
		cl.lists = make([][]*nodeClass, len(cl.models))
	}
	cl.byKey = make(map[string]*nodeClass, 256)
	for m := range cl.lists {
		cl.lists[m] = cl.lists[m][:0]
	}
	cl.of = make([]*nodeClass, len(v.nodes))
	cl.shapes = map[scoreShape]int32{}
	cl.scores, cl.ids, cl.nextID = cl.scores[:0], cl.ids[:0], 0
	cl.empty = 0
	cl.workload = v.workload
	for _, i := range v.dirty {
		v.isDirty[i] = false
	}
	v.dirty = v.dirty[:0]
	for i := range v.nodes {
		cl.place(se, i)
	}
	cl.built = true
}

// gpuLayout is the static part of a node's key: its CPU and memory
// capacity (the census counts what an empty node could hold), its GPU
// count and, per GPU, health, flakiness, whether it names a domain, whether it is a MIG device, and
// the first GPU of the node in its domain and in its NUMA node. alike
// reports that all GPUs are the same in all of these (then it is said
// once).
func gpuLayout(n *Node) (string, bool) {
	type attrs struct{ flags, domain, numa int }
	at := make([]attrs, len(n.GPUs))
	alike := true
	for g := range n.GPUs {
		gpu := &n.GPUs[g]
		a := attrs{}
		if gpu.Healthy {
			a.flags |= 1
		}
		if gpu.Flakiness > FlakyThreshold {
			a.flags |= 2
		}
		if gpu.Domain != "" {
			a.flags |= 4
		}
		if gpu.MIG != "" {
			a.flags |= 8 // taken for whole GPUs and shares; the census counts it out
		}
		a.domain = slices.IndexFunc(n.GPUs, func(h GPU) bool { return h.Domain == gpu.Domain })
		a.numa = slices.IndexFunc(n.GPUs, func(h GPU) bool { return h.NUMA == gpu.NUMA })
		at[g] = a
		alike = alike && a == at[0]
	}
	b := binary.AppendVarint(nil, n.CPUMilli)
	b = binary.AppendVarint(b, n.MemMiB)
	b = binary.AppendUvarint(b, uint64(len(n.GPUs)))
	if alike {
		b = append(b, 1)
		at = at[:min(len(at), 1)]
	} else {
		b = append(b, 0)
	}
	for _, a := range at {
		b = binary.AppendUvarint(b, uint64(a.flags))
		b = binary.AppendUvarint(b, uint64(a.domain))
		b = binary.AppendUvarint(b, uint64(a.numa))
	}
	return string(b), alike
}

// keyOf is node i's class key (valid until the next call), whether its
// scores may depend on a replica's exact demand, and whether on the node
// index.
func (cl *classes) keyOf(se *Session, i int) ([]byte, bool, bool) {
	v := se.view
	n := &v.nodes[i]
	b := appendString(cl.key[:0], n.Model)
	b = appendString(b, n.Pool)
	b = appendString(b, string(n.Owner))
	flags := byte(0)
	if n.Schedulable {
		flags |= 1
	}
	solo := v.resStart[i] != nil
	if solo {
		flags |= 2
	}
	b = append(b, flags)
	if solo {
		b = binary.AppendUvarint(b, uint64(i))
	}
	b = append(b, cl.layout[i]...)
	free := v.free[i]
	if cl.alike[i] {
		cl.sorted = append(cl.sorted[:0], free...)
		sortDesc(cl.sorted)
		free = cl.sorted
	}
	for _, f := range free {
		b = binary.AppendUvarint(b, uint64(f))
	}
	d := se.classed.Depends(v, i, cl.maxCPU, cl.maxMem)
	cpuLevel, memLevel := max(d.CPULevel, cl.maxCPU), max(d.MemLevel, cl.maxMem)
	b = binary.AppendVarint(b, min(v.cpu[i], cpuLevel))
	b = binary.AppendVarint(b, min(v.mem[i], memLevel))
	cl.key = b
	return b, solo || v.cpu[i] < cpuLevel || v.mem[i] < memLevel, d.ByIndex
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// place moves node i to the class of its current state.
func (cl *classes) place(se *Session, i int) {
	key, exact, byIndex := cl.keyOf(se, i)
	old := cl.of[i]
	if old != nil && old.key == string(key) {
		return
	}
	c := cl.byKey[string(key)]
	if c == nil {
		n := &se.view.nodes[i]
		c = &nodeClass{key: string(key), model: cl.models[n.Model], pos: -1, schedulable: n.Schedulable, exact: exact, byIndex: byIndex,
			whole: se.view.whole[i]}
		for _, f := range se.view.free[i] {
			c.maxFree = max(c.maxFree, f)
		}
		if k := len(cl.ids); k > 0 {
			c.id, cl.ids = cl.ids[k-1], cl.ids[:k-1]
		} else {
			c.id, cl.nextID = cl.nextID, cl.nextID+1
		}
		cl.byKey[c.key] = c
		cl.empty++
	}
	cl.of[i] = c
	if old != nil {
		cl.leave(old)
	}
	if c.size == 0 {
		cl.empty--
		c.pos = len(cl.lists[c.model])
		cl.lists[c.model] = append(cl.lists[c.model], c)
	}
	c.size++
	c.push(int32(i))
	if len(c.heap) > 2*c.size+16 {
		c.compact(cl)
	}
}

// leave takes one member out of c (classes.of already names its new class).
func (cl *classes) leave(c *nodeClass) {
	c.size--
	if c.size > 0 {
		return
	}
	list := cl.lists[c.model]
	last := list[len(list)-1]
	list[c.pos], last.pos = last, c.pos
	cl.lists[c.model] = list[:len(list)-1]
	c.pos = -1
	c.heap = c.heap[:0]
	cl.empty++
}

// rep is c's lowest member node index; c has members.
func (c *nodeClass) rep(cl *classes) int {
	for cl.of[c.heap[0]] != c {
		c.pop()
	}
	return int(c.heap[0])
}

func (c *nodeClass) push(i int32) {
	h := append(c.heap, i)
	for k := len(h) - 1; k > 0; {
		p := (k - 1) / 2
		if h[p] <= h[k] {
			break
		}
		h[p], h[k] = h[k], h[p]
		k = p
	}
	c.heap = h
}

func (c *nodeClass) pop() {
	h := c.heap
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for k := 0; ; {
		l := 2*k + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && h[r] < h[l] {
			l = r
		}
		if h[k] <= h[l] {
			break
		}
		h[k], h[l] = h[l], h[k]
		k = l
	}
	c.heap = h
}

// compact drops the heap's stale and repeated entries; a sorted slice is a
// heap.
func (c *nodeClass) compact(cl *classes) {
	h := c.heap[:0]
	for _, i := range c.heap {
		if cl.of[i] == c {
			h = append(h, i)
		}
	}
	slices.Sort(h)
	c.heap = slices.Compact(h)
}

// room is the free-GPUs filter on c's members.
func (c *nodeClass) room(j *gangway.QueueEntry) bool {
	switch {
	case j.GPUsPerReplica == 0:
		return true
	case j.Share():
		return c.maxFree >= j.GPUMilli
	}
	return c.whole >= j.GPUsPerReplica
}

// entry is c's cached score for shape; rep -1 when there is none.
func (cl *classes) entry(c *nodeClass, shape int32) *classScore {
	row := cl.scores[shape]
	if int(c.id) >= len(row) {
		row = append(row, make([]classScore, int(c.id)+1-len(row))...)
		cl.scores[shape] = row
	}
	p := &row[c.id]
	if p.class != c {
		*p = classScore{class: c, rep: -1}
	}
	return p
}

// shapeID numbers j's score shape, starting the cache over when full.
func (cl *classes) shapeID(j *gangway.QueueEntry, avoidFlaky bool) int32 {
	k := scoreShape{replicas: j.Replicas, gpus: j.GPUsPerReplica, milli: j.GPUMilli, avoidFlaky: avoidFlaky}
	switch len(j.GPUModels) {
	case 0:
	case 1:
		k.models = j.GPUModels[0]
	default:
		k.models = strings.Join(j.GPUModels, "\x00")
	}
	if id, ok := cl.shapes[k]; ok {
		return id
	}
	if len(cl.shapes) == maxScoreShapes {
		clear(cl.shapes)
		cl.scores = cl.scores[:0]
	}
	id := int32(len(cl.shapes))
	cl.shapes[k] = id
	cl.scores = append(cl.scores, nil)
	return id
}

// bestOfClasses is best for an ungrouped replica of j under a ClassScorer:
// the per-node scan's answer, scoring one node per class.
func (se *Session) bestOfClasses(j *gangway.QueueEntry) (Candidate, bool) {
	cl := &se.cls
	cl.demand(j.CPUMilli, j.MemMiB)
	cl.sync(se)
	v := se.view
	lists := cl.lists
	if len(j.GPUModels) == 1 {
		m, ok := cl.models[j.GPUModels[0]]
		if !ok {
			return Candidate{}, false
		}
		lists = lists[m : m+1]
	}
	shape := int32(-1)
	vs, versioned := se.scorer.(Versioned)
	version := func(rep int) uint64 {
		if !versioned {
			return 0
		}
		return vs.ScoreVersion(v, j, rep)
	}
	bestRep, bestCand, bestScore := -1, int32(0), 0.0
	var best *nodeClass
	for _, list := range lists {
		for _, c := range list {
			if !c.schedulable || !c.room(j) {
				continue
			}
			rep := c.rep(cl)
			if !se.feasibleRest(j, rep) {
				continue
			}
			var e classScore
			if c.exact {
				e = se.scoreNode(j, rep)
			} else {
				if shape < 0 {
					shape = cl.shapeID(j, v.avoidFlaky)
				}
				p := cl.entry(c, shape)
				if ver := version(rep); p.rep < 0 || p.ver != ver || (p.rep != int32(rep) && c.byIndex) {
					*p = se.scoreNode(j, rep)
					p.class, p.ver = c, ver
				}
				e = *p
			}
			if e.ok() && (bestRep < 0 || e.score > bestScore || (e.score == bestScore && rep < bestRep)) {
				bestRep, best, bestScore = rep, c, e.score
				bestCand = e.cand
				if e.rep != int32(rep) && e.n > 1 {
					bestCand = -1
				}
			}
		}
	}
	if bestRep < 0 {
		return Candidate{}, false
	}
	if bestCand < 0 { // scored on another member, whose GPUs may be alike at other indexes
		e := se.scoreNode(j, bestRep)
		p := cl.entry(best, shape)
		*p = e
		p.class, p.ver = best, version(bestRep)
		bestCand = e.cand
	}
	c := v.candidates(bestRep, j, nil)[bestCand]
	c.GPUs = slices.Clone(c.GPUs)
	return c, true
}

// feasibleRest is feasibleNode past the free-GPUs and schedulable filters,
// which a class answers for its members (room, schedulable).
func (se *Session) feasibleRest(j *gangway.QueueEntry, i int) bool {
	for _, k := range placeOrder[2:] {
		if !filters[k].ok(se, j, i) {
			return false
		}
	}
	return true
}

// scoreNode is node i's best candidate for one replica of j: the first of
// the highest score, as the per-node scan takes it.
func (se *Session) scoreNode(j *gangway.QueueEntry, i int) classScore {
	e := classScore{rep: int32(i)}
	for k, c := range se.view.candidates(i, j, nil) {
		if s := se.scorer.Score(se.view, c, j); k == 0 || s > e.score {
			e.cand, e.score = int32(k), s
		}
		e.n++
	}
	return e
}

// countClasses is count, the census of the filter chain for one replica of
// j, taken once per class and weighted by its size: the classes' keys hold
// everything the filters and the census read of a node but its name,
// which only the pinned-nodes filter reads (count runs node by node for a
// job pinned to nodes).
func (se *Session) countClasses(j *gangway.QueueEntry) census {
	cl := &se.cls
	cl.demand(j.CPUMilli, j.MemMiB)
	cl.sync(se)
	v := se.view
	c := census{models: cl.fleetModels}
	end := v.jobEnd(j)
	for _, list := range cl.lists {
		for _, k := range list {
			i := k.rep(cl)
			n := &v.nodes[i]
			static := true
			for f := range filters {
				if filters[f].static && !filters[f].ok(se, j, i) {
					c.rejected[f] += k.size
					static = false
					break
				}
			}
			if !static {
				continue
			}
			c.matching += k.size
			c.everReplicas += k.size * replicasByCapacity(n, j)
			for f := range filters {
				if !filters[f].static && !filters[f].ok(se, j, i) {
					c.rejected[f] += k.size
				}
			}
			if !n.Schedulable {
				continue
			}
			milli, whole, reserved := 0, 0, 0
			for gi, f := range v.free[i] {
				milli += f
				if f == Whole {
					if v.usable(i, gi, end) {
						whole++
					} else {
						reserved++
					}
				}
			}
			c.freeMilli += k.size * milli
			c.freeWhole += k.size * whole
			c.reservedFree += k.size * reserved
			c.largestNode = max(c.largestNode, whole)
		}
	}
	return c
}
