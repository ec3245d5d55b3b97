package placement

// ScoreEachNode returns o with node classes off: every feasible node is
// scored, as the engine did before classes. The property tests compare
// plans both ways.
func ScoreEachNode(o Options) Options {
	o.eachNode = true
	return o
}

// NodeClasses is how many node classes se holds (0 when it scores every
// node).
func NodeClasses(se *Session) int {
	if se.classed == nil {
		return 0
	}
	se.cls.sync(se)
	n := 0
	for _, list := range se.cls.lists {
		n += len(list)
	}
	return n
}
