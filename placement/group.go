package placement

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// group is a set of nodes (and, for an NVLink domain, GPUs) a gang must
// stay within.
type group struct {
	level gangway.Level
	key   string
	nodes []int
	// For an NVLink domain: gpus[k] lists the group's GPUs on nodes[k],
	// and keys[i][gi] is the domain of every GPU in the fleet (shared by
	// all NVLink groups), so membership is a comparison, not a lookup.
	gpus [][]int
	keys [][]string
	size int // GPUs in the group, free or not
}

// nodeList is the nodes to consider: the group's, or all n.
func (g *group) nodeList(all []int) []int {
	if g == nil {
		return all
	}
	return g.nodes
}

// allowsGPU reports whether GPU gi of node i belongs to the group.
func (g *group) allowsGPU(v *View, i, gi int) bool {
	if g == nil || g.level != gangway.LevelNVLink {
		return true
	}
	return g.keys[i][gi] == g.key
}

// domainKey names GPU gi's NVLink domain; a GPU without one is alone.
func domainKey(n *Node, gi int) string {
	if d := n.GPUs[gi].Domain; d != "" {
		return d
	}
	return n.ID + "#" + itoa(n.GPUs[gi].Index)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	p := len(b)
	for ; i > 0; i /= 10 {
		p--
		b[p] = byte('0' + i%10)
	}
	return string(b[p:])
}

// groupsAt partitions the fleet at level l (cached per session).
func (se *Session) groupsAt(l gangway.Level) []*group {
	if gs, ok := se.groups[l]; ok {
		return gs
	}
	byKey := map[string]*group{}
	var order []*group
	add := func(key string, i int) *group {
		g := byKey[key]
		if g == nil {
			g = &group{level: l, key: key}
			byKey[key] = g
			order = append(order, g)
		}
		if len(g.nodes) == 0 || g.nodes[len(g.nodes)-1] != i {
			g.nodes = append(g.nodes, i)
			if l == gangway.LevelNVLink {
				g.gpus = append(g.gpus, nil)
			}
		}
		return g
	}
	var keys [][]string
	if l == gangway.LevelNVLink {
		keys = make([][]string, len(se.view.nodes))
	}
	for i := range se.view.nodes {
		n := &se.view.nodes[i]
		switch l {
		case gangway.LevelNVLink:
			keys[i] = make([]string, len(n.GPUs))
			for gi := range n.GPUs {
				keys[i][gi] = domainKey(n, gi)
				g := add(keys[i][gi], i)
				g.keys = keys
				g.gpus[len(g.gpus)-1] = append(g.gpus[len(g.gpus)-1], gi)
				g.size++
			}
		case gangway.LevelNode:
			add(n.ID, i).size += len(n.GPUs)
		case gangway.LevelRack:
			add(orSelf(n.Rack, n), i).size += len(n.GPUs)
		case gangway.LevelBlock:
			add(orSelf(n.Block, n), i).size += len(n.GPUs)
		}
	}
	se.groups[l] = order
	return order
}

func orSelf(label string, n *Node) string {
	if label != "" {
		return label
	}
	return "node:" + n.ID
}

// largestGroup is the most GPUs of the models allowed (all when none)
// that one group at level l holds, free or not. The fleet does not change
// within a session, so it is computed once per level and model list.
func (se *Session) largestGroup(l gangway.Level, models []string) int {
	key := l.String() + "@" + strings.Join(models, "|")
	if n, ok := se.largest[key]; ok {
		return n
	}
	v := se.view
	largest := 0
	for _, g := range se.groupsAt(l) {
		total := 0
		for _, i := range g.nodes {
			if !allowed(models, v.nodes[i].Model) {
				continue
			}
			for gi := range v.nodes[i].GPUs {
				if g.allowsGPU(v, i, gi) {
					total++
				}
			}
		}
		largest = max(largest, total)
	}
	if se.largest == nil {
		se.largest = map[string]int{}
	}
	se.largest[key] = largest
	return largest
}

// freeFor is how many of j's GPUs-per-replica units the group has free now,
// in GPUs (whole) — a quick bound to skip groups and to try tight ones first.
func (se *Session) freeFor(g *group) int {
	v := se.view
	t := 0
	for k, i := range g.nodes {
		switch {
		case !v.nodes[i].Schedulable:
		case g.level != gangway.LevelNVLink:
			t += v.whole[i]
		case len(g.gpus[k]) == len(v.free[i]): // the domain spans the node
			t += v.whole[i]
		default:
			for _, gi := range g.gpus[k] {
				if v.free[i][gi] == Whole {
					t++
				}
			}
		}
	}
	return t
}

// placeGrouped places j inside one group of its topology level: the group
// with the least free capacity that still holds it, so large domains stay
// whole for large gangs.
func (se *Session) placeGrouped(j *gangway.QueueEntry) ([]gangway.Member, bool) {
	need := j.Replicas * max(j.GPUsPerReplica, 0)
	if j.Share() || j.MIGProfile != "" {
		need = 0 // shares also fit on partly used GPUs, MIG jobs on MIG devices, which freeFor does not count
	}
	type cand struct {
		g    *group
		free int
	}
	var cands []cand
	for _, g := range se.groupsAt(j.Topology.Level) {
		if g.size < need {
			continue // too small even when empty
		}
		if f := se.freeFor(g); f >= need {
			cands = append(cands, cand{g, f})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.free, b.free) })
	for _, c := range cands {
		if m, ok := se.placeIn(j, c.g); ok {
			return m, true
		}
	}
	return nil, false
}
