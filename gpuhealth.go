package gangway

import (
	"math"
	"time"
)

// FlakinessHalfLife is how fast a fence is forgiven: a GPU's flakiness is
// its fences, each counting half as much for every FlakinessHalfLife since.
const FlakinessHalfLife = 7 * 24 * time.Hour

// GPUEvent is one entry of the GPU event stream: a fault a GPU reported, or
// something the agent did about its GPUs (a zombie killed, an idle job
// released).
type GPUEvent struct {
	ID   string `json:"id,omitempty"` // stream entry ID, set by Redis
	Node string `json:"node"`
	// GPUs are the slots (GPU indices) concerned; UUID the
	// physical GPU's.
	GPUs []int  `json:"gpus"`
	UUID string `json:"uuid,omitempty"`
	// Kind is a fault kind (gpuinfo.Kind*: xid, ecc-dbe, gpu-lost, ...)
	// or a reclaim ("zombie-killed", "orphan-killed", "idle-released").
	Kind string `json:"kind"`
	Xid  int    `json:"xid,omitempty"`
	// Meaning says what happened in words; Blame is "gpu", "app" or
	// "none" for faults, "" otherwise.
	Meaning string `json:"meaning"`
	Blame   string `json:"blame,omitempty"`
	// Jobs are the jobs whose tasks it stopped, PIDs the processes it
	// killed.
	Jobs []JobID   `json:"jobs,omitempty"`
	PIDs []int     `json:"pids,omitempty"`
	At   time.Time `json:"at"`
}

// Fault reports whether the event is a fault a GPU reported.
func (e GPUEvent) Fault() bool { return e.Blame != "" }

// GPUHealth is the view's record of one GPU (slot): whether it is fenced,
// how often it was, and its last fault.
type GPUHealth struct {
	Node    string `json:"node"`
	GPU     int    `json:"gpu"`
	UUID    string `json:"uuid"`
	Healthy bool   `json:"healthy"`
	// FencedAt is when the GPU was last fenced (zero: never); Reason why.
	FencedAt time.Time `json:"fencedAt,omitzero"`
	Reason   string    `json:"reason,omitempty"`
	// Fences counts every fence; Score is the decayed count as of ScoreAt
	// (see Flakiness).
	Fences  int       `json:"fences"`
	Score   float64   `json:"score"`
	ScoreAt time.Time `json:"scoreAt,omitzero"`
	// LastFault is the newest fault the GPU reported, whoever it blamed.
	LastFault *GPUEvent `json:"lastFault,omitempty"`
}

// Flakiness is the GPU's decayed fence count at now: each fence counts
// 2^(-age/FlakinessHalfLife). A GPU fenced once a week ago scores 0.5;
// twice in the last day, about 2.
func (h GPUHealth) Flakiness(now time.Time) float64 {
	if h.Score == 0 {
		return 0
	}
	age := max(now.Sub(h.ScoreAt), 0)
	return h.Score * math.Exp2(-float64(age)/float64(FlakinessHalfLife))
}
