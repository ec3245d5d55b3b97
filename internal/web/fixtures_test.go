package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/workflows"
)

var t0 = time.Date(2026, 12, 14, 12, 0, 0, 0, time.UTC)

// node is an 8-GPU H100 node; with two domains its GPUs 0-3 and 4-7 are
// two NVLink domains.
func node(id, pool string, domains int) gangway.Node {
	n := gangway.Node{ID: id, Pool: pool, CPUMilli: 128000, MemMiB: 1 << 20}
	for i := range 8 {
		d := fmt.Sprintf("%s/nvl-%d", id, i*domains/8)
		n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true, NVLinkDomain: d})
	}
	return n
}

// testFleet is two on-prem nodes and one spot node:
//
//	n1  GPUs 0-3 nlp-train (nlp), 4-5 vision-a (vision), 6 fenced, 7 free
//	n2  GPU 0 shared by nlp-nb (nlp, 500) and vision-nb (vision, 250);
//	    the rest free, and reserved for big (research)
//	c1  spot, launched for burst (nlp): all 8 GPUs
//
// Queued: big (research, reserved on n2) and vision-b (vision, over
// quota); and lost-job (ops), whose node n3 is lost.
func testFleet() Fleet {
	n1 := node("n1", "onprem", 2)
	n1.GPUs[6].Healthy = false
	n2 := node("n2", "onprem", 1)
	c1 := node("c1", "fake-spot", 1)
	c1.CapacityType, c1.Owner = gangway.CapacitySpot, "burst"
	for i := range c1.GPUs {
		c1.GPUs[i].Model = "A100"
	}
	n3 := node("n3", "onprem", 1)
	allocated := func(job gangway.JobID, gpus ...int) map[int]gangway.JobID {
		m := map[int]gangway.JobID{}
		for _, g := range gpus {
			m[g] = job
		}
		return m
	}
	n1a := allocated("nlp-train", 0, 1, 2, 3)
	n1a[4], n1a[5] = "vision-a", "vision-a"
	at := t0.Add(-time.Hour)
	onprem := func(node string, gpus ...int) gangway.Member {
		return gangway.Member{NodeID: node, Pool: "onprem", GPUs: gpus, CapacityType: gangway.CapacityOnPrem, PricePerGPUHour: 2}
	}
	return Fleet{
		Snapshot: capacity.Snapshot{Now: t0,
			Nodes: []gangway.NodeStatus{
				{Node: c1, State: gangway.NodeReady, LastHeartbeat: t0, Allocated: allocated("burst", 0, 1, 2, 3, 4, 5, 6, 7)},
				{Node: n1, State: gangway.NodeReady, LastHeartbeat: t0, Allocated: n1a},
				{Node: n2, State: gangway.NodeReady, LastHeartbeat: t0.Add(-time.Second),
					Shared: map[int]map[gangway.JobID]int{0: {"nlp-nb": 500, "vision-nb": 250}}},
				{Node: n3, State: gangway.NodeLost, LastHeartbeat: t0.Add(-time.Hour)},
			},
			Queue: []gangway.QueueEntry{
				{JobID: "big", Team: "research", PriorityClass: "high", Priority: 100, Replicas: 1, GPUsPerReplica: 8, SubmittedAt: t0.Add(-10 * time.Minute)},
				{JobID: "vision-b", Team: "vision", PriorityClass: "normal", Priority: 50, Replicas: 2, GPUsPerReplica: 1, SubmittedAt: t0.Add(-5 * time.Minute)},
				{JobID: "fresh", Team: "nlp", PriorityClass: "low", Priority: 10, Replicas: 1, GPUsPerReplica: 1, SubmittedAt: t0},
			},
			Allocations: []gangway.Assignment{
				{JobID: "burst", Team: "nlp", At: at, Members: []gangway.Member{{NodeID: "c1", Pool: "fake-spot", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7},
					CapacityType: gangway.CapacitySpot}}}, // as the view holds it: no price (the offer's is $3/GPU-h)
				{JobID: "nlp-nb", Team: "nlp", At: at, Members: []gangway.Member{{NodeID: "n2", Pool: "onprem", GPUs: []int{0}, Milli: 500, PricePerGPUHour: 2}}},
				{JobID: "nlp-train", Team: "nlp", At: at, Members: []gangway.Member{onprem("n1", 0, 1, 2, 3)}},
				{JobID: "vision-a", Team: "vision", At: at, Members: []gangway.Member{onprem("n1", 4, 5)}},
				{JobID: "vision-nb", Team: "vision", At: at, Members: []gangway.Member{{NodeID: "n2", Pool: "onprem", GPUs: []int{0}, Milli: 250, PricePerGPUHour: 2}}},
			},
		},
		Reasons: map[gangway.JobID]gangway.Waiting{
			"big": {Reason: string(placement.ReasonInsufficientGPUs), Detail: "needs 8 GPUs on one node, at most 7 free", Retry: true,
				ReservationStart: t0.Add(30 * time.Minute), ReservedNodes: []string{"n2"},
				ETA: &gangway.ETA{P50: t0.Add(20 * time.Minute), P90: t0.Add(45 * time.Minute), At: t0},
				Cloud: &gangway.CloudOption{Pool: "fake-spot", CapacityType: gangway.CapacitySpot, InstanceType: "a100x8", Instances: 1,
					PricePerGPUHour: 3, ExpectedCost: 12.5, ExpectedDuration: gangway.Duration{Duration: 30 * time.Minute}}},
			"vision-b": {Reason: string(placement.ReasonQuota), Detail: "team vision uses 2.25/2 GPUs of H100 quota; borrowing limit is 0", Retry: true,
				WaitsFor: []gangway.JobID{"nlp-train", "vision-a"}},
		},
		Offers: []gangway.Offer{
			{Provider: "fake", Pool: "fake-spot", Zone: "z1", InstanceType: "a100x8", GPUModel: "A100", GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 24},
			{Provider: "fake", Pool: "fake-od", Zone: "z1", InstanceType: "a100x8", GPUModel: "A100", GPUsPerInstance: 8, CapacityType: gangway.CapacityOnDemand, PricePerHour: 80},
		},
		Health: map[string]map[int]gangway.GPUHealth{"n1": {6: {Node: "n1", GPU: 6, Reason: "Xid 79: fell off the bus"}}},
	}
}

var zero = 0

var testQuotas = []placement.Quota{
	{Team: "nlp", Model: "H100", Nominal: 8},
	{Team: "vision", Model: "H100", Nominal: 2, BorrowingLimit: &zero},
}

var testBudgets = map[string]accounting.TeamLimit{"nlp": {MonthlyBudget: 100, MaxPricePerGPUHour: 4}}

// fakeSource serves fixed data; err, when set, fails every call.
type fakeSource struct {
	fleet   Fleet
	jobs    []client.Summary
	status  map[gangway.JobID]client.JobStatus
	ledger  []gangway.UsageSegment
	samples []FragSample
	err     error
}

func newFakeSource() *fakeSource {
	step := int64(120)
	return &fakeSource{
		fleet: testFleet(),
		jobs: []client.Summary{
			{JobID: "fresh", Team: "nlp", Phase: gangway.PhaseQueued, GPUs: 1, StartedAt: t0},
			{JobID: "vision-a", Team: "vision", Phase: gangway.PhaseRunning, GPUs: 2, StartedAt: t0.Add(-time.Hour)},
			{JobID: "nlp-train", Team: "nlp", Phase: gangway.PhaseRunning, GPUs: 4, StartedAt: t0.Add(-2 * time.Hour)},
			{JobID: "done", Team: "nlp", Phase: gangway.PhaseSucceeded, GPUs: 2, StartedAt: t0.Add(-3 * time.Hour), ClosedAt: t0.Add(-2 * time.Hour)},
		},
		status: map[gangway.JobID]client.JobStatus{
			"nlp-train": {Status: workflows.Status{JobID: "nlp-train", Team: "nlp", Phase: gangway.PhaseRunning, Attempt: 2, InfraRestarts: 1,
				SubmittedAt: t0.Add(-2 * time.Hour), GPUSeconds: 3600 * 4, Dollars: 8,
				Assignment: &gangway.Assignment{JobID: "nlp-train", Members: []gangway.Member{{Rank: 0, NodeID: "n1", GPUs: []int{0, 1, 2, 3}}}},
				Phases: []workflows.PhaseChange{{Phase: gangway.PhaseQueued, At: t0.Add(-2 * time.Hour)},
					{Phase: gangway.PhaseRunning, At: t0.Add(-2 * time.Hour), Attempt: 1},
					{Phase: gangway.PhaseRequeued, At: t0.Add(-61 * time.Minute), Attempt: 1, Reason: "preempted by big-old"},
					{Phase: gangway.PhaseRunning, At: t0.Add(-time.Hour), Attempt: 2}},
				Attempts: []workflows.AttemptRecord{
					{Attempt: 1, Pool: "onprem", CapacityType: gangway.CapacityOnPrem, Nodes: []string{"n2"}, GPUs: 4,
						StartedAt: t0.Add(-2 * time.Hour), EndedAt: t0.Add(-61 * time.Minute), Ended: workflows.CausePreempted,
						Checkpoint: &workflows.CheckpointRef{ID: "ckpt-1", Step: &step, At: t0.Add(-62 * time.Minute), Bytes: 3 << 20}, Dollars: 8},
					{Attempt: 2, Pool: "onprem", CapacityType: gangway.CapacityOnPrem, Nodes: []string{"n1"}, GPUs: 4,
						StartedAt: t0.Add(-time.Hour), ResumedFrom: &workflows.CheckpointRef{ID: "ckpt-1", Step: &step}},
				}}},
			// Live totals (AsOf set): the open run's $4 is in Dollars
			// already.
			"vision-a": {Status: workflows.Status{JobID: "vision-a", Team: "vision", Phase: gangway.PhaseRunning, Attempt: 1, Dollars: 5,
				Attempts: []workflows.AttemptRecord{{Attempt: 1, Pool: "onprem", GPUs: 2, StartedAt: t0.Add(-time.Hour), Dollars: 4}}},
				AsOf: t0},
			"vision-b": {Status: workflows.Status{JobID: "vision-b", Team: "vision", Phase: gangway.PhaseQueued},
				Waiting: &gangway.Waiting{Reason: string(placement.ReasonQuota), Detail: "team vision uses 2.25/2 GPUs of H100 quota", Retry: true}},
			"done": {Status: workflows.Status{JobID: "done", Team: "nlp", Phase: gangway.PhaseSucceeded, Attempt: 1, Dollars: 1.25,
				Assignment: &gangway.Assignment{JobID: "done", Members: []gangway.Member{{Rank: 0, NodeID: "n2", GPUs: []int{4, 5}}}},
				Attempts:   []workflows.AttemptRecord{{Attempt: 1, Pool: "onprem", GPUs: 2, Dollars: 1.25, Ended: "succeeded"}}}},
		},
		// Earlier this month nlp spent $10 on spot and $2 on-prem;
		// last month does not count.
		ledger: []gangway.UsageSegment{
			{JobID: "old-burst", Attempt: 1, Team: "nlp", Pool: "fake-spot", CapacityType: gangway.CapacitySpot, GPUs: 8,
				Start: t0.Add(-48 * time.Hour), End: t0.Add(-48*time.Hour + 25*time.Minute), PricePerGPUHour: 3},
			{JobID: "done", Attempt: 1, Team: "nlp", Pool: "onprem", CapacityType: gangway.CapacityOnPrem, GPUs: 2,
				Start: t0.Add(-3 * time.Hour), End: t0.Add(-150 * time.Minute), PricePerGPUHour: 2},
			{JobID: "last-month", Attempt: 1, Team: "nlp", Pool: "fake-spot", CapacityType: gangway.CapacitySpot, GPUs: 8,
				Start: monthStart(t0).Add(-3 * time.Hour), End: monthStart(t0).Add(-2 * time.Hour), PricePerGPUHour: 3},
		},
		samples: []FragSample{
			{At: t0.Add(-20 * time.Second), Rate: 0.2, FreeGPUs: 10, LargestNode: 7, Pending: 1},
			{At: t0.Add(-10 * time.Second), Rate: 0.5, FreeGPUs: 8, LargestNode: 7, Pending: 2},
			{At: t0, Rate: 1, FreeGPUs: 8, LargestNode: 7, Pending: 3},
		},
	}
}

func (s *fakeSource) Fleet(context.Context) (Fleet, error) { return s.fleet, s.err }
func (s *fakeSource) Jobs(context.Context) ([]client.Summary, error) {
	return s.jobs, s.err
}

func (s *fakeSource) Job(_ context.Context, id gangway.JobID) (client.JobStatus, error) {
	if s.err != nil {
		return client.JobStatus{}, s.err
	}
	st, ok := s.status[id]
	if !ok {
		return st, fmt.Errorf("status: %w", client.ErrJobNotFound)
	}
	return st, nil
}

func (s *fakeSource) Usage(_ context.Context, q accounting.Query) (gangway.CostSummary, error) {
	if s.err != nil {
		return gangway.CostSummary{}, s.err
	}
	return accounting.Report(s.ledger, q)
}

func (s *fakeSource) Fragmentation(context.Context) ([]FragSample, error) { return s.samples, s.err }

var errDown = errors.New("redis: connection refused")

type viewerKey struct{}

// serve returns the handler over src, mounted at /ui/, with the viewer
// (if any) on every request's context as the user API would put it.
func serve(t *testing.T, src Source, v *client.Identity) http.Handler {
	t.Helper()
	h, err := New(Options{Source: src, Prefix: "/ui/", Quotas: testQuotas, Budgets: testBudgets,
		Identity: func(ctx context.Context) (client.Identity, bool) {
			v, ok := ctx.Value(viewerKey{}).(client.Identity)
			return v, ok
		}})
	if err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v != nil {
			r = r.WithContext(context.WithValue(r.Context(), viewerKey{}, *v))
		}
		h.ServeHTTP(w, r)
	})
}

// get fetches path and parses the page.
func get(t *testing.T, h http.Handler, path string) (int, *html.Node) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	doc, err := html.Parse(rec.Body)
	if err != nil {
		t.Fatalf("GET %s: parse: %v", path, err)
	}
	return rec.Code, doc
}

// all returns the elements under n that match, in document order.
func all(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

// byAttr matches elements whose attribute key has value; "*" matches any
// value of a present attribute.
func byAttr(key, value string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		v, ok := attrOK(n, key)
		return ok && (value == "*" || v == value)
	}
}

func and(ms ...func(*html.Node) bool) func(*html.Node) bool {
	return func(n *html.Node) bool {
		for _, m := range ms {
			if !m(n) {
				return false
			}
		}
		return true
	}
}

func tag(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == name }
}

func byID(doc *html.Node, id string) *html.Node {
	if ns := all(doc, byAttr("id", id)); len(ns) == 1 {
		return ns[0]
	}
	return nil
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

// text is n's text content with runs of white space made one space.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func attrs(ns []*html.Node, key string) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = attr(n, key)
	}
	return out
}

func mustID(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	n := byID(doc, id)
	if n == nil {
		t.Fatalf("no element with id %q", id)
	}
	return n
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }
