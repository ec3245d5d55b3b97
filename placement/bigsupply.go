package placement

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// bigSupply follows, for each multi-GPU class of the job mix, how much of
// it the fleet's free capacity can still host — per node, whole replicas
// of the class in its free whole GPUs, CPU and memory — against what the
// class will need if the remaining arrivals fill the free capacity at the
// mix: its share of the mix's GPU demand times the fleet's free GPU
// capacity. A placement that takes a node's room for such a class pays
// for the part the class then misses: what it takes beyond the class's
// slack over its need (bigSupply.shortfall). Large replicas fit on few
// nodes; what keeps those nodes whole is this, where FGD weighs a class
// by its share of tasks, not of GPU demand.
type bigSupply struct {
	classes []bigClass
	supply  []float64 // per class: milli-GPU of it the free capacity hosts
	room    []int32   // per node, per class (node×classes+class): replicas of it the node hosts
}

// bigShape is a multi-GPU class's shape, its models joined by NUL.
type bigShape struct {
	gpus     int
	cpu, mem int64
	modelSet string
}

// bigClass is a multi-GPU whole-GPU class of the mix.
type bigClass struct {
	bigShape
	models []string
	share  float64 // of the mix's GPU demand
}

func (b *bigSupply) prepare(v *View) {
	*b = bigSupply{}
	all := 0.0
	for _, w := range v.demand {
		all += w.Weight * float64(max(w.GPUs, 0)) * float64(classMilli(w))
	}
	if all == 0 {
		return
	}
	index := map[bigShape]int{}
	for _, w := range v.demand {
		if w.GPUs < 2 || classMilli(w) != Whole || w.Weight <= 0 {
			continue
		}
		shape := bigShape{w.GPUs, max(w.CPUMilli, 0), max(w.MemMiB, 0), strings.Join(w.Models, "\x00")}
		share := w.Weight * float64(w.GPUs*Whole) / all
		if k, ok := index[shape]; ok {
			b.classes[k].share += share
			continue
		}
		index[shape] = len(b.classes)
		b.classes = append(b.classes, bigClass{bigShape: shape, models: w.Models, share: share})
	}
	if len(b.classes) == 0 {
		return
	}
	b.classes = mergeBig(b.classes)
	b.supply = make([]float64, len(b.classes))
	b.room = make([]int32, len(v.nodes)*len(b.classes))
	for i := range v.nodes {
		b.recount(v, i)
	}
}

// bigMaxClasses bounds the classes followed: each is looked at in every
// score of a node it has room on.
const bigMaxClasses = 16

// mergeBig keeps the bigMaxClasses classes with the largest shares and
// gives every other class's share to the kept class of its GPU count and
// models that asks the least CPU and memory at least its own (the one
// asking the most when none asks as much): a class needing more room
// than it is counted for would be undercounted.
func mergeBig(classes []bigClass) []bigClass {
	if len(classes) <= bigMaxClasses {
		return classes
	}
	slices.SortStableFunc(classes, func(a, b bigClass) int { return cmp.Compare(b.share, a.share) })
	kept, rest := slices.Clone(classes[:bigMaxClasses]), classes[bigMaxClasses:]
	for _, c := range rest {
		covers := func(o bigClass) bool { return o.cpu >= c.cpu && o.mem >= c.mem }
		// better: a class that covers c beats one that does not; of two
		// that do, the one asking less CPU; of two that do not, more.
		better := func(o, h bigClass) bool {
			if covers(o) != covers(h) {
				return covers(o)
			}
			return covers(o) && o.cpu < h.cpu || !covers(o) && o.cpu > h.cpu
		}
		home := -1
		for k, o := range kept {
			if o.gpus == c.gpus && o.modelSet == c.modelSet && (home < 0 || better(o, kept[home])) {
				home = k
			}
		}
		if home >= 0 {
			kept[home].share += c.share
		}
	}
	return kept
}

// active reports whether the mix has multi-GPU classes.
func (b *bigSupply) active() bool { return len(b.classes) > 0 }

// roomFor is how many replicas of c fit in whole free GPUs, CPU and memory.
func (c *bigClass) roomFor(whole int, cpu, mem int64, model string) int {
	if !allowed(c.models, model) {
		return 0
	}
	k := whole / c.gpus
	if c.cpu > 0 {
		k = min(k, int(max(cpu, 0)/c.cpu))
	}
	if c.mem > 0 {
		k = min(k, int(max(mem, 0)/c.mem))
	}
	return k
}

// recount replaces node i's room per class, and its part of the supply,
// with what the node holds now (none when it is not schedulable).
func (b *bigSupply) recount(v *View, i int) {
	room := b.roomOf(i)
	for k := range b.classes {
		c := &b.classes[k]
		b.supply[k] -= float64(int(room[k]) * c.gpus * Whole)
		room[k] = 0
		if v.nodes[i].Schedulable {
			room[k] = int32(c.roomFor(v.whole[i], v.cpu[i], v.mem[i], v.nodes[i].Model))
		}
		b.supply[k] += float64(int(room[k]) * c.gpus * Whole)
	}
}

// roomOf is node i's room per class.
func (b *bigSupply) roomOf(i int) []int32 {
	n := len(b.classes)
	return b.room[i*n : (i+1)*n]
}

// refresh recounts node i.
func (b *bigSupply) refresh(v *View, i int) {
	if !b.active() || i < 0 || i >= len(v.nodes) {
		return
	}
	b.recount(v, i)
}

// slack is class k's supply beyond its need when the fleet has total
// milli-GPU free.
func (b *bigSupply) slack(k int, total float64) float64 {
	return b.supply[k] - b.classes[k].share*total
}

// shortfall is the milli-GPU of multi-GPU classes the mix will miss if
// replica j lands on node i taking takeWhole of its wholly free GPUs: per
// class, the room the node loses beyond the class's slack (its supply
// less its share of the free capacity total), summed over the classes.
// Their rooms overlap (a node's GPUs host one class or another), so the
// sum counts a node twice for two classes short of room: it is worse for
// both. (The largest over the classes instead left the same at
// multi-GPU 40%, 0.906 × FGD on the full fleet, and was not kept for
// want of a reason to prefer it.) A replica of the class's own shape
// serves that class and is not charged for it.
func (b *bigSupply) shortfall(v *View, i int, j *gangway.QueueEntry, takeWhole int, total float64) float64 {
	sum := 0.0
	whole, cpu, mem := v.whole[i]-takeWhole, v.cpu[i]-j.CPUMilli, v.mem[i]-j.MemMiB
	room := b.roomOf(i)
	for k := range b.classes {
		c := &b.classes[k]
		before := int(room[k])
		if before == 0 {
			continue
		}
		if c.gpus == j.GPUsPerReplica && c.cpu == max(j.CPUMilli, 0) && !j.Share() {
			continue
		}
		lost := float64((before - c.roomFor(whole, cpu, mem, v.nodes[i].Model)) * c.gpus * Whole)
		if lost <= 0 {
			continue
		}
		sum += min(max(lost-b.slack(k, total), 0), lost)
	}
	return sum
}

// version sums up what shortfall reads beyond node i's own state, for
// ScoreVersion: for each class the node has room for, whether its slack
// covers all of that room (nothing is charged), is gone (all that is lost
// is charged), or lies between (the slack itself).
func (b *bigSupply) version(v *View, i int, total float64) uint64 {
	h := uint64(0)
	rooms := b.roomOf(i)
	for k := range b.classes {
		c := &b.classes[k]
		room := int(rooms[k])
		if room == 0 {
			continue
		}
		slack := b.slack(k, total)
		if slack >= float64(room*c.gpus*Whole) {
			continue // no placement here can take more than the slack
		}
		if slack <= 0 {
			// Short already: every room lost is missed, whatever the
			// slack.
			h = h*1099511628211 ^ uint64(k+1)
			continue
		}
		h = h*1099511628211 ^ uint64(k+1) ^ math.Float64bits(slack)
	}
	return h
}
