package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// defaultIdle is how long the idle CPU is measured before the first step.
const defaultIdle = 10 * time.Second

// maxInFlight bounds the submits a step has waiting for an answer.
const maxInFlight = 200

// The paths a submit can take (Options.Via).
const (
	ViaAPI      = "api"
	ViaTemporal = "temporal"
)

// Pools of the simulated fleet.
const (
	benchPool = "bench" // where the measured jobs run
	heldPool  = "held"  // cordoned: keeps Options.Pending jobs waiting
)

// Options describe a benchmark run.
type Options struct {
	// Dir holds the servers' state and logs (required).
	Dir string
	// Nodes simulated nodes of GPUsPerNode H100s each are registered, all
	// run by one agent host.
	Nodes, GPUsPerNode int
	// Rates are the submit rates of the steps, in jobs per second, run in
	// order. With Sweep the run stops at the first step that saturates.
	Rates []float64
	Sweep bool
	// Duration is how long each step submits.
	Duration time.Duration
	// Command is every job's task (short: the run measures starts).
	Command []string
	// Pending jobs wait in the queue through every step (see the package
	// doc).
	Pending int
	// LatencyLimit is the p99 submit → started a sweep stops past.
	LatencyLimit time.Duration
	// Drain bounds how long after a step the run waits for its jobs to
	// start; a job not started by then counts as submitted, not started.
	Drain time.Duration
	// Via is the path submits take: ViaAPI (what `gangway submit` runs)
	// or ViaTemporal (a client inside the trust boundary, on a Temporal
	// connection of its own).
	Via string
	// FleetCheck makes every ViaTemporal submit check the job against the
	// registered fleet, as the user API does for every submit (it reads
	// the nodes that changed).
	FleetCheck bool
	// Idle is how long the idle CPU is measured before the first step
	// (default 10 s).
	Idle time.Duration
	// Dispatch configures the server's loop, as `gangway server` would.
	Dispatch dispatch.Config
	// Log is the components' log; nil discards it.
	Log *slog.Logger
	// Progress, when set, receives a line per phase of the run.
	Progress func(line string)
}

// Validate names the flag of every bad option.
func (o Options) Validate() error {
	var bad []string
	if o.Nodes < 1 || o.Nodes > 100_000 {
		bad = append(bad, fmt.Sprintf("--nodes must be 1..100000, got %d", o.Nodes))
	}
	if o.GPUsPerNode < 1 || o.GPUsPerNode > 64 {
		bad = append(bad, fmt.Sprintf("--gpus-per-node must be 1..64, got %d", o.GPUsPerNode))
	}
	if len(o.Rates) == 0 {
		bad = append(bad, "--rate names no rate")
	}
	for _, r := range o.Rates {
		if !(r > 0 && r <= 10_000) {
			bad = append(bad, fmt.Sprintf("--rate must be in (0, 10000] jobs/s, got %g", r))
		}
	}
	if o.Sweep && !slices.IsSorted(o.Rates) {
		bad = append(bad, fmt.Sprintf("--sweep needs rising rates, got %v", o.Rates))
	}
	if o.Duration < time.Second {
		bad = append(bad, fmt.Sprintf("--duration must be at least 1s, got %v", o.Duration))
	}
	if len(o.Command) == 0 || o.Command[0] == "" {
		bad = append(bad, "--command is empty")
	}
	switch o.Via {
	case ViaAPI:
		if !o.FleetCheck {
			bad = append(bad, "--fleet-check=false needs --via temporal: the user API checks every submit against the fleet")
		}
	case ViaTemporal:
	default:
		bad = append(bad, fmt.Sprintf("--via must be %s or %s, got %q", ViaAPI, ViaTemporal, o.Via))
	}
	if o.Pending < 0 {
		bad = append(bad, fmt.Sprintf("--pending must not be negative, got %d", o.Pending))
	}
	if o.LatencyLimit <= 0 {
		bad = append(bad, fmt.Sprintf("--latency-limit must be positive, got %v", o.LatencyLimit))
	}
	if o.Drain < 0 {
		bad = append(bad, fmt.Sprintf("--drain must not be negative, got %v", o.Drain))
	}
	if len(bad) > 0 {
		return errors.New("bench: " + strings.Join(bad, "; "))
	}
	return nil
}

// ParseRates reads a comma-separated list of rates in jobs per second.
func ParseRates(s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		r, err := strconv.ParseFloat(part, 64)
		if err != nil || math.IsNaN(r) {
			return nil, fmt.Errorf("rate %q is not a number of jobs per second (want e.g. 5,10,20)", part)
		}
		out = append(out, r)
	}
	return out, nil
}

// Step is what one rate measured. Durations are in seconds.
type Step struct {
	Rate      float64 `json:"rate"`
	Nodes     int     `json:"nodes"`
	GPUs      int     `json:"gpus"`
	Pending   int     `json:"pending"`
	DurationS float64 `json:"duration_s"`
	// Submitted jobs were accepted by Submit; SubmitErrors were not.
	Submitted    int `json:"submitted"`
	SubmitErrors int `json:"submit_errors"`
	// Started jobs started within the step or its drain.
	Started      int     `json:"started"`
	LatencyP50S  float64 `json:"latency_p50_s"`
	LatencyP95S  float64 `json:"latency_p95_s"`
	LatencyP99S  float64 `json:"latency_p99_s"`
	LatencyMaxS  float64 `json:"latency_max_s"`
	SubmitP50S   float64 `json:"submit_p50_s"` // the Submit call alone
	SubmitP99S   float64 `json:"submit_p99_s"`
	StartsPerS   float64 `json:"starts_per_s"`     // started within the step / its duration
	StartsPerMax float64 `json:"starts_per_s_max"` // most in any 5 s window
	Cycles       int     `json:"cycles"`
	CycleP50S    float64 `json:"cycle_p50_s"`
	CycleP99S    float64 `json:"cycle_p99_s"`
	// CPU is each component's CPU time over the step, in seconds
	// (redis, temporal, gangway, tasks); Busiest is the largest.
	CPU     map[string]float64 `json:"cpu_s"`
	Busiest string             `json:"busiest"`
	// CPUPerJob is CPU milliseconds per job submitted in the step, by
	// component, net of the idle use (Result.IdleCPU) over the step: what
	// a job costs, which a busy machine inflates far less than it
	// inflates latency.
	CPUPerJob map[string]float64 `json:"cpu_ms_per_job"`
	// HistoryEvents is the length of the Temporal history of one of the
	// step's finished jobs.
	HistoryEvents int64 `json:"history_events"`
	// Saturated: p99 over the limit, starts below 90% of the rate, or
	// starts not growing with the rate.
	Saturated bool   `json:"saturated"`
	Why       string `json:"why,omitempty"`
}

// Result is a whole run: its last step's numbers at the top, every step
// in Steps.
type Result struct {
	Step
	Steps []Step `json:"steps"`
	// SaturationRate is the rate of the first saturated step (0: none).
	SaturationRate float64   `json:"saturation_rate"`
	StartsPerSPeak float64   `json:"starts_per_s_peak"` // highest starts_per_s of any step
	Via            string    `json:"via"`               // the submits' path (Options.Via)
	Cores          int       `json:"cores"`
	At             time.Time `json:"at"`
	// IdleCPU is each component's CPU use with nothing submitted, in
	// cores (CPU seconds per second), over a few seconds before the first
	// step: the fleet's heartbeats, idle dispatch cycles and pollers.
	IdleCPU map[string]float64 `json:"idle_cpu_cores"`
	// LoadAvg is the machine's 1-minute load average at the start and the
	// end: other work on the machine shows in every number.
	LoadAvg [2]float64 `json:"load_avg"`
}

// Run starts the stack, runs the steps and stops everything.
func Run(ctx context.Context, o Options) (res Result, _ error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if o.Dir == "" {
		return Result{}, errors.New("bench: Options.Dir is empty")
	}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	res = Result{Via: o.Via, Cores: runtime.NumCPU(), At: time.Now().UTC()}
	res.LoadAvg[0] = loadAvg()
	defer func() { res.LoadAvg[1] = loadAvg() }()
	rec := newRecorder()
	nodes := agent.FakeFleet("sim", benchPool, []agent.NodeShape{{Count: o.Nodes, GPUs: o.GPUsPerNode, Model: "H100"}})
	var held []gangway.Node
	if o.Pending > 0 {
		held = agent.FakeFleet("held", heldPool, []agent.NodeShape{{Count: 1, GPUs: o.GPUsPerNode, Model: "H100"}})
	}
	say("starting redis, temporal, the server and %d simulated nodes", o.Nodes+len(held))
	started := time.Now()
	fo := fullstack.Options{
		Dir: o.Dir, Headless: true, Log: o.Log,
		HostedNodes: append(nodes, held...),
		Agent:       agent.Config{Recorder: rec, Log: o.Log},
		Server:      &fullstack.ServerOptions{Dispatch: o.Dispatch},
	}
	var token string
	if o.Via == ViaAPI {
		tokens := filepath.Join(o.Dir, "api-tokens")
		var err error
		if token, err = api.CreateToken(tokens, "bench", []string{"bench"}, false, time.Now()); err != nil {
			return res, fmt.Errorf("bench: API token: %w", err)
		}
		fo.Server.API = &api.Config{TokenFile: tokens}
	}
	st, err := fullstack.Start(ctx, fo)
	if err != nil {
		return res, err
	}
	defer st.Close()
	say("stack up in %s", time.Since(started).Round(100*time.Millisecond))
	for _, n := range held {
		if err := st.View.SetNodeState(ctx, n.ID, gangway.NodeCordoned); err != nil {
			return res, fmt.Errorf("cordon %s: %w", n.ID, err)
		}
	}
	c, closeClient, err := dialClient(ctx, st, o, token)
	if err != nil {
		return res, err
	}
	defer closeClient()
	r := &runner{o: o, st: st, rec: rec, say: say, run: time.Now().Format("150405"), c: c,
		pids: pids{redis: st.Redis.Pid(), temporal: st.Temporal.Pid()}}
	if err := r.fillPending(ctx); err != nil {
		return res, err
	}
	idleStart, idleBefore := time.Now(), r.pids.read()
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(cmp.Or(o.Idle, defaultIdle)):
	}
	res.IdleCPU = r.pids.read().minus(idleBefore)
	for k, v := range res.IdleCPU {
		res.IdleCPU[k] = math.Round(v/time.Since(idleStart).Seconds()*1000) / 1000
	}
	r.idle = res.IdleCPU
	say("idle: %s cores", cpuLine(res.IdleCPU))
	for i, rate := range o.Rates {
		step, err := r.step(ctx, i, rate)
		if err != nil {
			return res, err
		}
		if i > 0 && !step.Saturated {
			// Starts that stop growing with the rate mean the stack is full.
			prev := res.Steps[i-1]
			if step.StartsPerS < prev.StartsPerS*1.05 {
				step.Saturated, step.Why = true, fmt.Sprintf("starts/s %.1f did not grow past %.1f at %g/s", step.StartsPerS, prev.StartsPerS, prev.Rate)
			}
		}
		res.Steps = append(res.Steps, step)
		res.StartsPerSPeak = max(res.StartsPerSPeak, step.StartsPerS)
		say("rate %g/s: %s", rate, step.Summary())
		if step.Saturated && res.SaturationRate == 0 {
			res.SaturationRate = rate
		}
		if step.Saturated && o.Sweep {
			break
		}
		if st.Err() != nil {
			return res, st.Err()
		}
	}
	res.Step = res.Steps[len(res.Steps)-1]
	return res, nil
}

// Summary is a step in one line.
func (s Step) Summary() string {
	line := fmt.Sprintf("submitted %d started %d | submit→started p50 %.3fs p95 %.3fs p99 %.3fs | starts/s %.1f (max %.1f) | cycle p50 %.1fms p99 %.1fms (%d) | cpu s: %s",
		s.Submitted, s.Started, s.LatencyP50S, s.LatencyP95S, s.LatencyP99S, s.StartsPerS, s.StartsPerMax,
		s.CycleP50S*1000, s.CycleP99S*1000, s.Cycles, cpuLine(s.CPU))
	if s.Saturated {
		line += " | saturated: " + s.Why
	}
	return line
}

func cpuLine(cpu map[string]float64) string {
	var parts []string
	for _, k := range components {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, cpu[k]))
	}
	return strings.Join(parts, ", ")
}

type runner struct {
	o    Options
	st   *fullstack.Stack
	rec  *recorder
	c    *client.Client
	pids pids
	say  func(string, ...any)
	run  string // names this run's jobs
	idle map[string]float64
}

func (r *runner) spec(name, pool string) gangway.JobSpec {
	return gangway.JobSpec{Name: name, Team: "bench", Command: r.o.Command, Pools: []string{pool},
		Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1}}
}

// dialClient connects the load generator to the stack on connections of
// its own, as `gangway submit` processes would have: through the user API
// with the bench user's token, or (ViaTemporal) to Temporal and Redis —
// sharing the server's Redis pool would make submits and dispatch cycles
// wait for each other's connections, which no real deployment does.
func dialClient(ctx context.Context, st *fullstack.Stack, o Options, token string) (*client.Client, func(), error) {
	if o.Via == ViaAPI {
		// One keep-alive connection per submit in flight, as that many
		// CLI processes would hold; the default pool keeps two and would
		// measure TCP set-up instead.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = maxInFlight
		hc := &http.Client{Transport: tr}
		c, err := client.NewAPI(client.APIOptions{URL: st.APIURL, Token: token, HTTP: hc})
		if err != nil {
			return nil, nil, fmt.Errorf("load generator: %w", err)
		}
		return c, tr.CloseIdleConnections, nil
	}
	tc, err := tclient.DialContext(ctx, tclient.Options{HostPort: st.Temporal.Addr, Namespace: st.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return nil, nil, fmt.Errorf("load generator: temporal: %w", err)
	}
	if !o.FleetCheck {
		return client.New(jobs.New(tc), nil), tc.Close, nil
	}
	ropts, err := redis.ParseURL(st.Redis.URL)
	if err != nil {
		tc.Close()
		return nil, nil, fmt.Errorf("load generator: redis url: %w", err)
	}
	rdb := redis.NewClient(ropts)
	view := capacity.New(rdb, capacity.Options{Prefix: st.Prefix()})
	return client.New(jobs.New(tc), view), func() { tc.Close(); _ = rdb.Close() }, nil
}

// fillPending writes the jobs that wait through the run into the queue,
// as the Enqueue activity of their workflows would. They have no
// workflows: they never run (their pool's only node is cordoned), and ten
// thousand workflow starts would take longer than the measurement; the
// dispatch loop reads, places and gives reasons for them like any other.
func (r *runner) fillPending(ctx context.Context) error {
	if r.o.Pending == 0 {
		return nil
	}
	r.say("queueing %d pending jobs", r.o.Pending)
	now := time.Now()
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= r.o.Pending || ctx.Err() != nil {
					return
				}
				spec := r.spec(fmt.Sprintf("bench-%s-pending-%06d", r.run, i), heldPool)
				spec.Default()
				if _, err := r.st.View.Enqueue(ctx, spec.QueueEntry(1, now, now)); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("queue pending job %d: %w", i, err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// step submits at rate for the step's duration, open loop, and measures.
func (r *runner) step(ctx context.Context, idx int, rate float64) (Step, error) {
	s := Step{Rate: rate, Nodes: r.o.Nodes, GPUs: r.o.Nodes * r.o.GPUsPerNode, Pending: r.o.Pending}
	cyclesBefore, err := scrapeCycles(ctx, r.st.MetricsAddr)
	if err != nil {
		return s, err
	}
	cpuBefore := r.pids.read()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var names []gangway.JobID
	var submitTimes []float64
	var submitErrs []error
	var inFlight atomic.Int64
	interval := time.Duration(float64(time.Second) / rate)
	begin := time.Now()
	end := begin.Add(r.o.Duration)
	for i := 0; ; i++ {
		at := begin.Add(time.Duration(i) * interval)
		if !at.Before(end) {
			break
		}
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return s, ctx.Err()
			case <-time.After(d):
			}
		}
		name := fmt.Sprintf("bench-%s-s%d-%06d", r.run, idx, i)
		if inFlight.Load() >= maxInFlight {
			// Open loop, but bounded: a stack this far behind would only
			// pile up goroutines that compete with the server in this
			// process. The submit counts as failed.
			mu.Lock()
			submitErrs = append(submitErrs, fmt.Errorf("not sent: %d submits already in flight", maxInFlight))
			mu.Unlock()
			continue
		}
		inFlight.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			t := time.Now()
			r.rec.expect(name, t)
			_, err := r.c.Submit(ctx, r.spec(name, benchPool), client.SubmitOptions{})
			took := time.Since(t).Seconds()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.rec.forget(name)
				submitErrs = append(submitErrs, err)
				return
			}
			names = append(names, name)
			submitTimes = append(submitTimes, took)
		})
	}
	// The step's window ends when its last submit was due; CPU and cycles
	// are read there, before the drain.
	if d := time.Until(end); d > 0 {
		time.Sleep(d)
	}
	window := time.Since(begin)
	cpuAfter := r.pids.read()
	cyclesAfter, err := scrapeCycles(ctx, r.st.MetricsAddr)
	if err != nil {
		return s, err
	}
	wg.Wait()
	if len(submitErrs) > 0 {
		r.say("%d submits failed; first: %v", len(submitErrs), submitErrs[0])
	}
	r.drain(ctx, names)

	s.DurationS = window.Seconds()
	s.Submitted, s.SubmitErrors = len(names), len(submitErrs)
	lat, starts := r.rec.measure(names)
	s.Started = len(lat)
	s.LatencyP50S, s.LatencyP95S, s.LatencyP99S = quantile(lat, 0.50), quantile(lat, 0.95), quantile(lat, 0.99)
	s.LatencyMaxS = quantile(lat, 1)
	slices.Sort(submitTimes)
	s.SubmitP50S, s.SubmitP99S = quantile(submitTimes, 0.5), quantile(submitTimes, 0.99)
	inWindow := 0
	for _, t := range starts {
		if !t.After(begin.Add(window)) {
			inWindow++
		}
	}
	s.StartsPerS = float64(inWindow) / window.Seconds()
	s.StartsPerMax = peakRate(starts, min(5*time.Second, window))
	cycles := cyclesAfter.minus(cyclesBefore)
	s.Cycles = int(cycles.count)
	s.CycleP50S, s.CycleP99S = cycles.quantile(0.5), cycles.quantile(0.99)
	s.CPU = cpuAfter.minus(cpuBefore)
	s.Busiest = busiest(s.CPU)
	s.CPUPerJob = map[string]float64{}
	for k, v := range s.CPU {
		net := max(v-r.idle[k]*window.Seconds(), 0)
		s.CPUPerJob[k] = math.Round(net*1000/float64(max(len(names)+len(submitErrs), 1))*10) / 10
	}
	if len(names) > 0 {
		if d, err := r.st.TemporalClient.DescribeWorkflowExecution(ctx, names[0], ""); err == nil {
			s.HistoryEvents = d.GetWorkflowExecutionInfo().GetHistoryLength()
		}
	}
	switch {
	case s.Started < s.Submitted:
		s.Saturated, s.Why = true, fmt.Sprintf("%d of %d jobs not started %v after the step", s.Submitted-s.Started, s.Submitted, r.o.Drain)
	case s.LatencyP99S > r.o.LatencyLimit.Seconds():
		s.Saturated, s.Why = true, fmt.Sprintf("p99 %.2fs over %v", s.LatencyP99S, r.o.LatencyLimit)
	case s.StartsPerS < 0.9*rate:
		s.Saturated, s.Why = true, fmt.Sprintf("starts/s %.1f below 90%% of %g/s", s.StartsPerS, rate)
	}
	return s, nil
}

// drain waits until every job of the step started, or Drain passed, and
// then until the queue holds only the pending jobs, so the next step
// starts on an empty queue.
func (r *runner) drain(ctx context.Context, names []gangway.JobID) {
	deadline := time.Now().Add(r.o.Drain)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		lat, _ := r.rec.measure(names)
		if len(lat) == len(names) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The jobs' tasks are short: give their ends (release, usage) a moment.
	time.Sleep(2 * time.Second)
}

// recorder keeps when each job was submitted and when its task started.
type recorder struct {
	mu        sync.Mutex
	submitted map[gangway.JobID]time.Time
	started   map[gangway.JobID]time.Time
}

func newRecorder() *recorder {
	return &recorder{submitted: map[gangway.JobID]time.Time{}, started: map[gangway.JobID]time.Time{}}
}

func (r *recorder) expect(id gangway.JobID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.submitted[id] = at
}

func (r *recorder) forget(id gangway.JobID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.submitted, id)
	delete(r.started, id)
}

// Record keeps a job's first start (rank 0 of its first attempt to start).
func (r *recorder) Record(e agent.Event) {
	if !e.Start || e.Rank != 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.submitted[e.JobID]; !ok {
		return
	}
	if _, ok := r.started[e.JobID]; !ok {
		r.started[e.JobID] = e.At
	}
}

// measure returns the submit → started latencies (seconds) of the jobs
// that started, and their start times, sorted.
func (r *recorder) measure(ids []gangway.JobID) ([]float64, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lat []float64
	var starts []time.Time
	for _, id := range ids {
		s, ok := r.started[id]
		if !ok {
			continue
		}
		lat = append(lat, s.Sub(r.submitted[id]).Seconds())
		starts = append(starts, s)
	}
	slices.Sort(lat)
	slices.SortFunc(starts, time.Time.Compare)
	return lat, starts
}
