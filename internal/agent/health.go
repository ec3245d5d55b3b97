package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/workflows"
)

// GPUSource is where the agent learns what its GPUs do: gpuinfo.NVML on a
// GPU node, gpuinfo.Synthetic for fake GPUs.
type GPUSource interface {
	// WatchFaults delivers faults until ctx ends.
	WatchFaults(ctx context.Context, out chan<- gpuinfo.Fault) error
	// Sample reads every GPU (slot) once.
	Sample(ctx context.Context) ([]gpuinfo.Sample, error)
}

// GPUHealthView is the part of the Redis view GPU health writes to;
// *capacity.View is one.
type GPUHealthView interface {
	FenceGPUs(ctx context.Context, e gangway.GPUEvent) ([]gangway.GPUHealth, error)
	UnfenceGPUs(ctx context.Context, nodeID string, gpus []int, now time.Time) ([]gangway.GPUHealth, error)
	RecordGPUEvent(ctx context.Context, e gangway.GPUEvent) error
	GPUHealth(ctx context.Context, nodeID string) (map[int]gangway.GPUHealth, error)
}

// JobAliveFunc reports whether attempt of a job is still wanted: its
// workflow runs. An error means it could not tell (nothing is stopped).
type JobAliveFunc func(ctx context.Context, jobID gangway.JobID, attempt int) (bool, error)

// GPUConfig turns on the agent's GPU health monitor and reclaimers. The
// zero value (no Source) leaves them off.
type GPUConfig struct {
	Source GPUSource
	// View records fences and events; nil: the agent's Capacity when it
	// is a GPUHealthView (the Redis view is), else nowhere.
	View    GPUHealthView
	Metrics *metrics.GPU // optional
	// SampleInterval is how often GPUs are sampled for metrics, zombies
	// and idleness (default 10 s).
	SampleInterval time.Duration
	// ZombieGrace is how long a process may hold a GPU without a task, or
	// a task may run after its job's workflow is gone, before it is killed
	// (default 5 min).
	ZombieGrace time.Duration
	// IdleReport is how long a job without an idle policy may keep its
	// GPUs idle before the agent logs it (default 1 h). It is never
	// stopped for it.
	IdleReport time.Duration
	// JobAlive asks whether a job's workflow still runs; nil: Temporal's
	// DescribeWorkflowExecution on the agent's client.
	JobAlive JobAliveFunc
	// BootTime is when the machine booted (zero: from /proc/stat). A fence
	// from before the boot is lifted at start: the reboot reset the GPU.
	// A fence from since stays until the next reboot.
	BootTime time.Time
	// Processes looks at and kills processes; nil: this host's.
	Processes Processes
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Defaults of GPUConfig.
const (
	DefaultSampleInterval = 10 * time.Second
	DefaultZombieGrace    = 5 * time.Minute
	DefaultIdleReport     = time.Hour
)

// gpuState is the agent's GPU health and reclaim state.
type gpuState struct {
	mu sync.Mutex
	// fenced are the slots taken out of service since the agent started
	// (or before, and since the last boot); flaky the slots' flakiness
	// records; registered the flakiness the view was last told.
	fenced     map[int]string
	flaky      map[int]gangway.GPUHealth
	registered map[int]float64
	// pending are fences and events the view has not taken yet.
	pending []pendingEvent
	// tasks are the tasks RunTask is running, with what GPU reclaim needs
	// to know of them (reclaim.go).
	tasks map[taskKey]gpuTask
	// Reclaim bookkeeping (reclaim.go).
	zombies   map[int]time.Time
	orphans   map[jobAttempt]time.Time
	idleSince map[jobAttempt]time.Time
	idleDone  map[jobAttempt]bool
	lastBeat  time.Time
	// stop stands in for StopTasks in tests.
	stop func(gpus []int, errType, reason string) int
}

type pendingEvent struct {
	e     gangway.GPUEvent
	fence bool
}

func (s *gpuState) init() {
	if s.fenced == nil {
		s.fenced, s.flaky, s.registered = map[int]string{}, map[int]gangway.GPUHealth{}, map[int]float64{}
		s.tasks, s.zombies, s.orphans = map[taskKey]gpuTask{}, map[int]time.Time{}, map[jobAttempt]time.Time{}
		s.idleSince, s.idleDone = map[jobAttempt]time.Time{}, map[jobAttempt]bool{}
	}
}

func (a *Agent) gpuNow() time.Time {
	if a.cfg.GPU.Now != nil {
		return a.cfg.GPU.Now()
	}
	return time.Now()
}

func (a *Agent) healthView() GPUHealthView {
	if a.cfg.GPU.View != nil {
		return a.cfg.GPU.View
	}
	v, _ := a.cap.(GPUHealthView)
	return v
}

// nodeView is the node as the agent registers it: the inventory it was
// given, with the fences and flakiness the agent has learnt since.
func (a *Agent) nodeView() gangway.Node {
	n := a.cfg.Node
	n.GPUs = slices.Clone(n.GPUs)
	a.gpu.mu.Lock()
	defer a.gpu.mu.Unlock()
	a.gpu.init()
	now := a.gpuNow()
	for i := range n.GPUs {
		if _, fenced := a.gpu.fenced[i]; fenced {
			n.GPUs[i].Healthy = false
		}
		if h, ok := a.gpu.flaky[i]; ok {
			n.GPUs[i].Flakiness = math.Round(h.Flakiness(now)*1000) / 1000
			a.gpu.registered[i] = n.GPUs[i].Flakiness
		}
	}
	return n
}

// fencedReason says why GPU g is out of service, "" when it is not.
func (a *Agent) fencedReason(g int) string {
	a.gpu.mu.Lock()
	defer a.gpu.mu.Unlock()
	return a.gpu.fenced[g]
}

// restoreGPUHealth reads the GPUs' records before the node registers: their
// flakiness, and the fences that still hold (set since the machine booted).
// It returns the slots whose fence the reboot lifted.
func (a *Agent) restoreGPUHealth(ctx context.Context) []int {
	view := a.healthView()
	if view == nil || a.cfg.GPU.Source == nil {
		return nil
	}
	recs, err := view.GPUHealth(ctx, a.cfg.Node.ID)
	if err != nil {
		a.log.Warn("cannot read GPU health records; starting with every GPU healthy", "error", err)
		return nil
	}
	boot := a.cfg.GPU.BootTime
	if boot.IsZero() {
		boot = bootTime()
	}
	var lifted []int
	a.gpu.mu.Lock()
	defer a.gpu.mu.Unlock()
	a.gpu.init()
	for i, g := range a.cfg.Node.GPUs {
		h, ok := recs[i]
		if !ok || h.UUID != g.UUID {
			continue // a GPU the records do not know, or a new card in its place
		}
		a.gpu.flaky[i] = h
		switch {
		case h.Healthy:
		case h.FencedAt.After(boot):
			a.gpu.fenced[i] = h.Reason
			a.log.Warn("GPU stays fenced: it faulted since the machine booted", "gpu", i, "uuid", g.UUID,
				"fenced_at", h.FencedAt, "reason", h.Reason)
		default:
			lifted = append(lifted, i)
			a.log.Info("GPU fence lifted: the machine rebooted since", "gpu", i, "uuid", g.UUID, "fenced_at", h.FencedAt)
		}
	}
	return lifted
}

// startGPUWatch starts the fault monitor and the sampler (health and
// reclaim), with the GPU fences the records still hold; the function it
// returns stops them and waits.
func (a *Agent) startGPUWatch(ctx context.Context, tc client.Client, lifted []int) func() {
	if a.cfg.GPU.Source == nil {
		return func() {}
	}
	if len(lifted) > 0 {
		if view := a.healthView(); view != nil {
			if _, err := view.UnfenceGPUs(ctx, a.cfg.Node.ID, lifted, a.gpuNow()); err != nil {
				a.log.Warn("cannot mark GPUs healthy again in the view", "gpus", lifted, "error", err)
			}
		}
	}
	a.cfg.GPU.Metrics.Node(a.nodeLabels())
	alive := a.cfg.GPU.JobAlive
	if alive == nil && tc != nil {
		alive = TemporalJobAlive(tc)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	faults := make(chan gpuinfo.Fault, 16)
	wg.Go(func() {
		if err := a.cfg.GPU.Source.WatchFaults(ctx, faults); err != nil && ctx.Err() == nil {
			a.log.Error("GPU fault watch stopped: faults are no longer noticed", "error", err)
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case f := <-faults:
				a.handleFault(ctx, f)
			}
		}
	})
	wg.Go(func() {
		interval := a.cfg.GPU.SampleInterval
		if interval <= 0 {
			interval = DefaultSampleInterval
		}
		every(ctx, interval, func(ctx context.Context) { a.gpuTick(ctx, alive) })
	})
	return func() { cancel(); wg.Wait() }
}

// handleFault acts on one fault: a hardware fault fences the GPUs (in the
// agent first, so a re-registration keeps the fence, then in the view)
// and stops their tasks as a GPU fault, which moves the jobs without
// spending a retry; an application fault fails the tasks on them and
// leaves the GPUs in service; anything else is recorded.
func (a *Agent) handleFault(ctx context.Context, f gpuinfo.Fault) {
	log := a.log.With("gpus", f.Slots, "uuid", f.UUID, "kind", f.Kind, "xid", f.Xid)
	tasks := a.tasksOn(f.Slots)
	ev := gangway.GPUEvent{Node: a.cfg.Node.ID, GPUs: f.Slots, UUID: f.UUID, Kind: f.Kind, Xid: f.Xid,
		Meaning: f.Meaning, Blame: string(f.Blame), At: f.At}
	for _, t := range tasks {
		if !slices.Contains(ev.Jobs, t.JobID) {
			ev.Jobs = append(ev.Jobs, t.JobID)
		}
	}
	for _, s := range f.Slots {
		g := a.slot(s)
		a.cfg.GPU.Metrics.Fault(a.nodeLabels(), s, g.UUID, g.Model, a.teamOn(s), f.Kind, string(f.Blame), f.Xid)
	}
	switch f.Blame {
	case gpuinfo.BlameGPU:
		log.Error("GPU fault: fencing the GPU and moving its jobs", "fault", f.String(), "jobs", ev.Jobs)
		a.gpu.mu.Lock()
		a.gpu.init()
		for _, s := range f.Slots {
			a.gpu.fenced[s] = f.Meaning
		}
		a.gpu.mu.Unlock()
		a.publish(ctx, ev, true)
		if n := a.stopTasks(f.Slots, workflows.ErrTypeGPUFault, f.String()); n > 0 {
			log.Info("stopping tasks on the fenced GPU", "tasks", n)
		}
	case gpuinfo.BlameApp:
		log.Warn("application fault on a GPU: failing its task; the GPU stays in service", "fault", f.String(), "jobs", ev.Jobs)
		a.publish(ctx, ev, false)
		a.stopTasks(f.Slots, workflows.ErrTypeTaskFailed, f.String())
	default:
		log.Info("GPU event", "fault", f.String())
		a.publish(ctx, ev, false)
	}
}

// publish hands a fence or an event to the view, or keeps it for the next
// sample tick when the view cannot take it now.
func (a *Agent) publish(ctx context.Context, e gangway.GPUEvent, fence bool) {
	if !a.tryPublish(ctx, pendingEvent{e: e, fence: fence}) {
		a.gpu.mu.Lock()
		a.gpu.pending = append(a.gpu.pending, pendingEvent{e: e, fence: fence})
		a.gpu.mu.Unlock()
	}
}

func (a *Agent) tryPublish(ctx context.Context, p pendingEvent) bool {
	view := a.healthView()
	if view == nil {
		return true
	}
	if !p.fence {
		if err := view.RecordGPUEvent(ctx, p.e); err != nil {
			a.log.Warn("cannot record GPU event; will retry", "kind", p.e.Kind, "error", err)
			return false
		}
		return true
	}
	recs, err := view.FenceGPUs(ctx, p.e)
	if err != nil {
		a.log.Warn("cannot fence GPU in the view; will retry", "gpus", p.e.GPUs, "error", err)
		return false
	}
	a.gpu.mu.Lock()
	defer a.gpu.mu.Unlock()
	for _, h := range recs {
		a.gpu.flaky[h.GPU] = h
		a.gpu.registered[h.GPU] = math.Round(h.Flakiness(a.gpuNow())*1000) / 1000
	}
	return true
}

// retryPending publishes what the view could not take before.
func (a *Agent) retryPending(ctx context.Context) {
	a.gpu.mu.Lock()
	pending := a.gpu.pending
	a.gpu.pending = nil
	a.gpu.mu.Unlock()
	for i, p := range pending {
		if !a.tryPublish(ctx, p) {
			a.gpu.mu.Lock()
			a.gpu.pending = append(pending[i:len(pending):len(pending)], a.gpu.pending...)
			a.gpu.mu.Unlock()
			return
		}
	}
}

// refreshFlakiness re-registers the node when the GPUs' flakiness has
// decayed noticeably since the view was told, so placement forgives them.
func (a *Agent) refreshFlakiness(ctx context.Context) {
	now := a.gpuNow()
	a.gpu.mu.Lock()
	stale := false
	for i, h := range a.gpu.flaky {
		if math.Abs(h.Flakiness(now)-a.gpu.registered[i]) >= 0.05 {
			stale = true
		}
	}
	a.gpu.mu.Unlock()
	if !stale {
		return
	}
	if err := a.cap.RegisterNode(ctx, a.nodeView()); err != nil {
		a.log.Warn("cannot update GPU flakiness in the view", "error", err)
	}
}

// slot is the node's GPU s (zero when it has none).
func (a *Agent) slot(s int) gangway.GPU {
	if s < 0 || s >= len(a.cfg.Node.GPUs) {
		return gangway.GPU{Index: s}
	}
	return a.cfg.Node.GPUs[s]
}

// heartbeatDone notes a successful heartbeat, for the heartbeat age
// metric.
func (a *Agent) heartbeatDone(at time.Time) {
	a.gpu.mu.Lock()
	a.gpu.lastBeat = at
	a.gpu.mu.Unlock()
}

// bootTime reads when the machine booted from /proc/stat (zero if it
// cannot: every old fence then holds).
func bootTime() time.Time {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}

// fmtDuration is a duration for people: "1h0m", "30m", "45s".
func fmtDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// fmtRatio is a ratio as a percentage: 0.05 → "5%".
func fmtRatio(r float64) string { return fmt.Sprintf("%g%%", math.Round(r*1000)/10) }
