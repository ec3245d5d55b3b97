package accounting

import (
	"time"

	"github.com/gangwayhq/gangway"
)

// t0 is the fixed time tests start from.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// segment is a fluent UsageSegment fixture: team "ml", project "llm", pool
// "onprem", on-prem, one GPU, one hour from t0 at $2/GPU-hour.
type segment gangway.UsageSegment

func seg(job string) segment {
	return segment{
		JobID: job, Attempt: 1, Team: "ml", Project: "llm", Pool: "onprem",
		CapacityType: gangway.CapacityOnPrem, GPUs: 1, Start: t0, End: t0.Add(time.Hour), PricePerGPUHour: 2,
	}
}

func (s segment) attempt(n int) segment { s.Attempt = n; return s }
func (s segment) team(t string) segment { s.Team = t; return s }
func (s segment) project(p string) segment {
	s.Project = p
	return s
}
func (s segment) gpus(n int) segment { s.GPUs = n; return s }

// pool sets the pool, its capacity type and price.
func (s segment) pool(pool string, capacityType gangway.CapacityType, price float64) segment {
	s.Pool, s.CapacityType, s.PricePerGPUHour = pool, capacityType, price
	return s
}

// at sets start and end as offsets from t0.
func (s segment) at(start, end time.Duration) segment {
	s.Start, s.End = t0.Add(start), t0.Add(end)
	return s
}

func (s segment) build() gangway.UsageSegment { return gangway.UsageSegment(s) }

// sumInOrder adds up what each segment costs in the order they ran: what
// every total must equal exactly.
func sumInOrder(segs []gangway.UsageSegment) (gpuSeconds, dollars float64) {
	segs = append([]gangway.UsageSegment(nil), segs...)
	SortSegments(segs)
	for _, s := range segs {
		gpuSeconds += s.GPUSeconds()
		dollars += s.Dollars()
	}
	return gpuSeconds, dollars
}
