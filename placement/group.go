package placement

import (
	"cmp"
	"slices"

	"github.com/gangwayhq/gangway"
)

// group is a set of nodes (and, for an NVLink domain, GPUs) a gang must
// stay within.
type group struct {
	level Level
	key   string
	nodes []int
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
	if g == nil || g.level != LevelNVLink {
		return true
	}
	return domainKey(&v.nodes[i], gi) == g.key
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
func (se *Session) groupsAt(l Level) []*group {
	if gs, ok := se.groups[l]; ok {
		return gs
	}
	byKey := map[string]*group{}
	var order []*group
	add := func(key string, i int) {
		g := byKey[key]
		if g == nil {
			g = &group{level: l, key: key}
			byKey[key] = g
			order = append(order, g)
		}
		if len(g.nodes) == 0 || g.nodes[len(g.nodes)-1] != i {
			g.nodes = append(g.nodes, i)
		}
	}
	for i := range se.view.nodes {
		n := &se.view.nodes[i]
		switch l {
		case LevelNVLink:
			for gi := range n.GPUs {
				add(domainKey(n, gi), i)
			}
		case LevelNode:
			add(n.ID, i)
		case LevelRack:
			add(orSelf(n.Rack, n), i)
		case LevelBlock:
			add(orSelf(n.Block, n), i)
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

// freeFor is how many of j's GPUs-per-replica units the group has free now,
// in GPUs (whole) — a quick bound to skip groups and to try tight ones first.
func (se *Session) freeFor(g *group) int {
	v := se.view
	t := 0
	for _, i := range g.nodes {
		if !v.nodes[i].Schedulable {
			continue
		}
		for gi, f := range v.free[i] {
			if f == Whole && g.allowsGPU(v, i, gi) {
				t++
			}
		}
	}
	return t
}

// placeGrouped places j inside one group of its topology level: the group
// with the least free capacity that still holds it, so large domains stay
// whole for large gangs.
func (se *Session) placeGrouped(j *Job) ([]gangway.Member, bool) {
	need := j.Replicas * max(j.GPUsPerReplica, 0)
	type cand struct {
		g    *group
		free int
	}
	var cands []cand
	for _, g := range se.groupsAt(j.Topology.Level) {
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
