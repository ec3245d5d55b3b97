package fake

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/providers"
)

var _ providers.Provider = (*Provider)(nil)

// Notice leads: how long before reclaiming a spot instance each cloud warns
// it (AWS: IMDS spot/instance-action; GCP: metadata instance/preempted).
const (
	AWSNoticeLead = 2 * time.Minute
	GCPNoticeLead = 30 * time.Second
)

// Clock tells the fake what time it is: the real clock for `gangway dev`,
// a virtual one in the simulator and in tests.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Pool is one offer of the fake cloud.
type Pool struct {
	// Name is the pool; "" means providers.PoolName(provider, zone, type,
	// capacity type).
	Name         string
	Region       string
	Zone         string
	InstanceType string
	GPUModel     string
	GPUs         int // per instance
	CapacityType gangway.CapacityType
	// PricePerHour is per instance; a trace with prices overrides it.
	PricePerHour float64
	// MaxInstances caps the pool's live instances; 0 means no limit. A
	// trace overrides it.
	MaxInstances int
	// Trace drives availability (and price, when it has prices): spot
	// instances beyond what the trace allows get a notice and are then
	// taken away. Nil: the pool is never reclaimed except by Preempt.
	Trace *spotpolicy.Trace
	// TraceScale is how many instances one unit of the trace stands for
	// (the shared traces count single nodes); 0 means 1.
	TraceScale int
	// InterruptionRate is reported in the offer, per instance-hour; 0 with
	// a trace means the trace's own rate.
	InterruptionRate float64
}

// Notice is a preemption notice, as a cloud gives it to a spot instance.
type Notice struct {
	InstanceID string
	Pool       string
	Action     string    // "terminate"
	At         time.Time // when the notice was given
	// TerminateAt is when the instance is taken: At plus the notice lead.
	TerminateAt time.Time
}

// Options configures the fake cloud.
type Options struct {
	Name string // provider name; "" means "fake"
	// IDPrefix starts every instance's ID (and node ID): prefix-000001
	// and on; "" means "fake". Fakes in several processes that share one
	// view (servers each running the fake cloud) need distinct prefixes,
	// as a real cloud's IDs never repeat.
	IDPrefix string
	Pools    []Pool
	// BootDelay is how long an instance stays pending before it runs.
	BootDelay time.Duration
	// NoticeLead is the warning before a spot instance is reclaimed;
	// 0 means AWSNoticeLead (use GCPNoticeLead for GCP-style).
	NoticeLead time.Duration
	// Clock is the time source; nil means the wall clock. Time moves only
	// when the fake is called or ticked.
	Clock Clock
	// TraceStart is the time of each trace's tick 0; zero means the
	// clock's time when New is called.
	TraceStart time.Time
	// OnRunning is called when an instance finishes booting (the dev stack
	// starts an in-process agent for it); OnNotice when a spot instance is
	// told it will be reclaimed; OnTerminated when an instance is gone.
	// They run on the goroutine that moved time forward, after the fake's
	// lock is released, so they may call back into it; they must not block
	// for long.
	OnRunning    func(providers.Instance)
	OnNotice     func(Notice)
	OnTerminated func(providers.Instance)
	Log          *slog.Logger
}

// Op names a Provider method, for fault injection.
type Op string

// Ops that faults can target. OpAny matches every call.
const (
	OpAny       Op = ""
	OpOffers    Op = "offers"
	OpLaunch    Op = "launch"
	OpDescribe  Op = "describe"
	OpTerminate Op = "terminate"
	OpList      Op = "list"
)

// Provider is an in-process cloud: instances with synthetic GPUs that boot
// after a delay, spot pools whose availability and price follow a trace,
// preemption notices ahead of reclaiming, idempotent launches by token and
// lookup by tag. It is safe for concurrent use.
type Provider struct {
	name     string
	idPrefix string
	opts     Options

	mu        sync.Mutex
	pools     []*pool
	instances map[string]*instance
	tokens    map[string]*launch
	seq       int
	faults    []fault
	hang      int // launches to leave unanswered
	budget    int // instances still launchable in all; < 0: no limit
	callbacks []func()
}

type pool struct {
	Pool
	override  *int // SetCapacity
	processed int  // last trace tick whose availability was applied
}

type instance struct {
	providers.Instance
	seq      int
	pool     *pool
	readyAt  time.Time
	notice   *Notice
	userData string
}

type launch struct {
	pool  *pool
	count int
	ids   []string
}

type fault struct {
	op  Op
	err error
}

// New builds a fake cloud.
func New(opts Options) (*Provider, error) {
	if opts.Name == "" {
		opts.Name = "fake"
	}
	if opts.Clock == nil {
		opts.Clock = wallClock{}
	}
	if opts.NoticeLead == 0 {
		opts.NoticeLead = AWSNoticeLead
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.TraceStart.IsZero() {
		opts.TraceStart = opts.Clock.Now()
	}
	if opts.IDPrefix == "" {
		opts.IDPrefix = "fake"
	}
	p := &Provider{name: opts.Name, idPrefix: opts.IDPrefix, opts: opts, instances: map[string]*instance{}, tokens: map[string]*launch{}, budget: -1}
	seen := map[string]bool{}
	for i, c := range opts.Pools {
		if c.Name == "" {
			c.Name = providers.PoolName(opts.Name, c.Zone, c.InstanceType, c.CapacityType)
		}
		switch {
		case seen[c.Name]:
			return nil, fmt.Errorf("fake: pools[%d]: pool %q given twice", i, c.Name)
		case c.InstanceType == "":
			return nil, fmt.Errorf("fake: pools[%d]: instanceType is required", i)
		case c.Zone == "":
			return nil, fmt.Errorf("fake: pools[%d] (%s): zone is required", i, c.InstanceType)
		case c.GPUs < 0:
			return nil, fmt.Errorf("fake: pools[%d]: gpus must not be negative, got %d", i, c.GPUs)
		case !c.CapacityType.Cloud():
			return nil, fmt.Errorf("fake: pools[%d]: capacityType must be %q or %q, got %q", i, gangway.CapacitySpot, gangway.CapacityOnDemand, c.CapacityType)
		case c.PricePerHour < 0:
			return nil, fmt.Errorf("fake: pools[%d]: pricePerHour must not be negative", i)
		}
		if c.TraceScale <= 0 {
			c.TraceScale = 1
		}
		if c.InterruptionRate == 0 && c.Trace != nil && c.CapacityType == gangway.CapacitySpot {
			c.InterruptionRate = c.Trace.InterruptionRate()
		}
		seen[c.Name] = true
		pl := &pool{Pool: c}
		if c.Trace != nil {
			pl.processed = c.Trace.Tick(opts.Clock.Now().Sub(opts.TraceStart))
		}
		p.pools = append(p.pools, pl)
	}
	return p, nil
}

// Name is the provider's name.
func (p *Provider) Name() string { return p.name }

// Offers lists one offer per pool with its price now.
func (p *Provider) Offers(ctx context.Context) ([]gangway.Offer, error) {
	p.lock()
	defer p.unlock()
	if err := p.check(ctx, OpOffers); err != nil {
		return nil, err
	}
	now := p.opts.Clock.Now()
	offers := make([]gangway.Offer, 0, len(p.pools))
	for _, pl := range p.pools {
		offers = append(offers, p.offer(pl, now))
	}
	return offers, nil
}

func (p *Provider) offer(pl *pool, now time.Time) gangway.Offer {
	return gangway.Offer{
		Provider: p.name, Pool: pl.Name, Region: pl.Region, Zone: pl.Zone,
		InstanceType: pl.InstanceType, GPUModel: pl.GPUModel, GPUsPerInstance: pl.GPUs,
		CapacityType: pl.CapacityType, PricePerHour: p.price(pl, now),
		InterruptionRate: pl.InterruptionRate,
	}
}

// Launch starts instances in the request's pool (matched by pool name, or
// by zone, instance type and capacity type), idempotently by token.
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("%s: launch: %w", p.name, err)
	}
	p.lock()
	out, hang, err := p.launchLocked(ctx, req)
	p.unlock()
	if err != nil {
		return nil, err
	}
	if hang {
		// The launch took effect; its answer never comes.
		<-ctx.Done()
		return nil, fmt.Errorf("%s: launch %s: %w", p.name, req.Token, ctx.Err())
	}
	return out, nil
}

func (p *Provider) launchLocked(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, bool, error) {
	if err := p.check(ctx, OpLaunch); err != nil {
		return nil, false, err
	}
	pl := p.findPool(req.Offer)
	if pl == nil {
		return nil, false, fmt.Errorf("%s: launch: %w: no pool %q (zone %q, type %q, %s)", p.name, providers.ErrInvalid,
			req.Offer.Pool, req.Offer.Zone, req.Offer.InstanceType, req.Offer.CapacityType)
	}
	if l, ok := p.tokens[req.Token]; ok {
		if l.pool != pl || l.count != req.Count {
			return nil, false, fmt.Errorf("%s: launch: %w: token %s was used for %d in %s", p.name, providers.ErrInvalid, req.Token, l.count, l.pool.Name)
		}
		return p.describeLocked(l.ids), false, nil
	}
	now := p.opts.Clock.Now()
	price := p.price(pl, now)
	if pl.CapacityType == gangway.CapacitySpot && req.MaxPricePerHour > 0 && price > req.MaxPricePerHour {
		return nil, false, fmt.Errorf("%s: launch in %s: %w: $%.4f/h > max $%.4f/h", p.name, pl.Name, providers.ErrPriceTooLow, price, req.MaxPricePerHour)
	}
	n := req.Count
	if free := p.free(pl, now); free >= 0 && free < n {
		n = free
	}
	if p.budget >= 0 && p.budget < n {
		n = p.budget
	}
	if n < req.Min() {
		return nil, false, fmt.Errorf("%s: launch %d × %s in %s: %w: %d obtainable", p.name, req.Count, pl.InstanceType, pl.Name, providers.ErrNoCapacity, n)
	}
	if p.budget >= 0 {
		p.budget -= n
	}
	l := &launch{pool: pl, count: req.Count}
	tags := req.InstanceTags()
	for range n {
		p.seq++
		id := fmt.Sprintf("%s-%06d", p.idPrefix, p.seq)
		in := &instance{
			Instance: providers.Instance{
				ID: id, NodeID: id, Provider: p.name, Pool: pl.Name, Zone: pl.Zone,
				InstanceType: pl.InstanceType, CapacityType: pl.CapacityType,
				GPUModel: pl.GPUModel, GPUs: pl.GPUs, State: providers.Pending,
				PrivateIP:  fmt.Sprintf("10.%d.%d.%d", p.seq>>16&255, p.seq>>8&255, p.seq&255),
				LaunchedAt: now, Tags: maps.Clone(tags),
			},
			seq: p.seq, pool: pl, readyAt: now.Add(p.opts.BootDelay),
		}
		in.userData = providers.BootScript(req.Join, providers.Boot{
			JobID: req.JobID, Attempt: req.Attempt, Pool: pl.Name, GPUModel: pl.GPUModel, GPUs: pl.GPUs,
			NodeIDCommand: "echo " + id, AddrCommand: "echo " + in.PrivateIP,
		})
		p.instances[id] = in
		l.ids = append(l.ids, id)
	}
	p.tokens[req.Token] = l
	p.opts.Log.Info("fake cloud launched", "token", req.Token, "job_id", req.JobID, "pool", pl.Name, "asked", req.Count, "launched", n)
	p.advance(now) // a zero boot delay runs them at once
	hang := p.hang > 0
	if hang {
		p.hang--
	}
	return p.describeLocked(l.ids), hang, nil
}

// Describe returns the known instances among ids, in order.
func (p *Provider) Describe(ctx context.Context, ids []string) ([]providers.Instance, error) {
	p.lock()
	defer p.unlock()
	if err := p.check(ctx, OpDescribe); err != nil {
		return nil, err
	}
	return p.describeLocked(ids), nil
}

func (p *Provider) describeLocked(ids []string) []providers.Instance {
	out := []providers.Instance{}
	for _, id := range ids {
		if in, ok := p.instances[id]; ok {
			out = append(out, in.snapshot())
		}
	}
	return out
}

// Terminate ends the instances at once; unknown and gone IDs are ignored.
func (p *Provider) Terminate(ctx context.Context, ids []string) error {
	p.lock()
	defer p.unlock()
	if err := p.check(ctx, OpTerminate); err != nil {
		return err
	}
	for _, id := range ids {
		if in, ok := p.instances[id]; ok && in.State != providers.Terminated {
			p.terminate(in, "terminated by request")
		}
	}
	return nil
}

// ListByTag returns the instances not terminated whose tag key has value
// ("" matches any value), in launch order.
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]providers.Instance, error) {
	p.lock()
	defer p.unlock()
	if err := p.check(ctx, OpList); err != nil {
		return nil, err
	}
	var found []*instance
	for _, in := range p.instances {
		v, ok := in.Tags[key]
		if ok && (value == "" || v == value) && in.State != providers.Terminated {
			found = append(found, in)
		}
	}
	slices.SortFunc(found, func(a, b *instance) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]providers.Instance, 0, len(found))
	for _, in := range found {
		out = append(out, in.snapshot())
	}
	return out, nil
}

// Tick moves the fake to the clock's time: boots, trace-driven notices and
// reclaims due by now happen, and their callbacks run. Every method does
// this first; a simulator calls Tick after moving its clock, `gangway dev`
// lets Run call it.
func (p *Provider) Tick() {
	p.lock()
	p.unlock()
}

// Run ticks every interval until ctx ends.
func (p *Provider) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			p.Tick()
		}
	}
}

// Preempt gives a live spot (or, to simulate a host failure, any) instance
// its notice now; it is taken NoticeLead later.
func (p *Provider) Preempt(id string) error {
	p.lock()
	defer p.unlock()
	in, ok := p.instances[id]
	if !ok {
		return fmt.Errorf("%s: preempt %s: %w", p.name, id, providers.ErrNotFound)
	}
	if in.State.Live() && in.notice == nil {
		p.notify(in, p.opts.Clock.Now())
	}
	return nil
}

// Notice is the preemption notice instance id has been given, as its
// metadata service would serve it (false: none).
func (p *Provider) Notice(id string) (Notice, bool) {
	p.lock()
	defer p.unlock()
	if in, ok := p.instances[id]; ok && in.notice != nil {
		return *in.notice, true
	}
	return Notice{}, false
}

// UserData is the boot script instance id was launched with.
func (p *Provider) UserData(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in, ok := p.instances[id]
	if !ok {
		return "", false
	}
	return in.userData, true
}

// SetCapacity sets how many live instances pool can hold from now on,
// overriding its trace and MaxInstances for launches (reclaims still follow
// the trace); n < 0 lifts the limit.
func (p *Provider) SetCapacity(poolName string, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range p.pools {
		if pl.Name == poolName {
			pl.override = &n
			return nil
		}
	}
	return fmt.Errorf("%s: set capacity: %w: no pool %q", p.name, providers.ErrNotFound, poolName)
}

// FailNext makes the next call of op (OpAny: of any kind) fail with err,
// without effect. Faults queue up in order.
func (p *Provider) FailNext(op Op, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, fault{op: op, err: err})
}

// HangNextLaunch makes the next launch take effect but not answer until
// the caller's context ends, like a response lost on the network.
func (p *Provider) HangNextLaunch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang++
}

// LimitLaunches lets at most n more instances launch, across all pools
// (n < 0: no limit): a cloud that fulfils part of a request.
func (p *Provider) LimitLaunches(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = n
}

// ClearFaults drops injected faults, hangs and launch limits.
func (p *Provider) ClearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults, p.hang, p.budget = nil, 0, -1
}

// lock takes the lock and brings the fake up to the clock's time.
func (p *Provider) lock() {
	p.mu.Lock()
	p.advance(p.opts.Clock.Now())
}

// unlock releases the lock, then runs the callbacks queued under it.
func (p *Provider) unlock() {
	cbs := p.callbacks
	p.callbacks = nil
	p.mu.Unlock()
	for _, cb := range cbs {
		cb()
	}
}

// check fails a call whose context is done or that a fault targets.
func (p *Provider) check(ctx context.Context, op Op) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", p.name, op, err)
	}
	for i, f := range p.faults {
		if f.op == OpAny || f.op == op {
			p.faults = slices.Delete(p.faults, i, i+1)
			return fmt.Errorf("%s: %s: %w", p.name, op, f.err)
		}
	}
	return nil
}

func (p *Provider) findPool(o gangway.Offer) *pool {
	for _, pl := range p.pools {
		if o.Pool != "" && pl.Name == o.Pool ||
			o.Pool == "" && pl.Zone == o.Zone && pl.InstanceType == o.InstanceType && pl.CapacityType == o.CapacityType {
			return pl
		}
	}
	return nil
}

// capacity is how many live instances pl can hold at now (< 0: no limit).
func (p *Provider) capacity(pl *pool, now time.Time) int {
	switch {
	case pl.override != nil:
		return *pl.override
	case pl.Trace != nil:
		n, _, _ := pl.Trace.At(now.Sub(p.opts.TraceStart))
		return n * pl.TraceScale
	case pl.MaxInstances > 0:
		return pl.MaxInstances
	}
	return -1
}

// free is how many more instances pl can take now (< 0: no limit).
// Instances under notice no longer count: the trace gave their capacity
// away already.
func (p *Provider) free(pl *pool, now time.Time) int {
	c := p.capacity(pl, now)
	if c < 0 {
		return -1
	}
	return max(0, c-len(p.holding(pl)))
}

func (p *Provider) price(pl *pool, now time.Time) float64 {
	if pl.Trace != nil {
		if _, price, ok := pl.Trace.At(now.Sub(p.opts.TraceStart)); ok {
			return price
		}
	}
	return pl.PricePerHour
}

// holding lists pl's live instances without a notice, newest first: the
// order in which a shrinking trace reclaims them.
func (p *Provider) holding(pl *pool) []*instance {
	var out []*instance
	for _, in := range p.instances {
		if in.pool == pl && in.State.Live() && in.notice == nil {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b *instance) int { return cmp.Compare(b.seq, a.seq) })
	return out
}

// advance applies everything due by now, in time order per kind: boots,
// trace ticks (notices), reclaims.
func (p *Provider) advance(now time.Time) {
	var booted []*instance
	for _, in := range p.instances {
		if in.State == providers.Pending && !now.Before(in.readyAt) {
			booted = append(booted, in)
		}
	}
	slices.SortFunc(booted, func(a, b *instance) int { return cmp.Compare(a.seq, b.seq) })
	for _, in := range booted {
		in.State = providers.Running
		if cb := p.opts.OnRunning; cb != nil {
			snap := in.snapshot()
			p.callbacks = append(p.callbacks, func() { cb(snap) })
		}
	}
	for _, pl := range p.pools {
		if pl.Trace == nil || pl.CapacityType != gangway.CapacitySpot {
			continue
		}
		last := pl.Trace.Tick(now.Sub(p.opts.TraceStart))
		// held shrinks only here, so one pass over the ticks suffices;
		// nothing launches between them (a launch ticks first).
		held := p.holding(pl)
		for k := pl.processed + 1; k <= last && len(held) > 0; k++ {
			avail, _, _ := pl.Trace.AtTick(k)
			if over := len(held) - avail*pl.TraceScale; over > 0 {
				at := p.opts.TraceStart.Add(time.Duration(k) * pl.Trace.Gap)
				for _, in := range held[:over] {
					p.notify(in, at)
				}
				held = held[over:]
			}
		}
		pl.processed = max(pl.processed, last)
	}
	var doomed []*instance
	for _, in := range p.instances {
		if in.notice != nil && in.State != providers.Terminated && !now.Before(in.notice.TerminateAt) {
			doomed = append(doomed, in)
		}
	}
	slices.SortFunc(doomed, func(a, b *instance) int {
		return cmp.Or(a.notice.TerminateAt.Compare(b.notice.TerminateAt), cmp.Compare(a.seq, b.seq))
	})
	for _, in := range doomed {
		p.terminate(in, "preempted")
	}
}

func (p *Provider) notify(in *instance, at time.Time) {
	n := Notice{InstanceID: in.ID, Pool: in.Pool, Action: "terminate", At: at, TerminateAt: at.Add(p.opts.NoticeLead)}
	in.notice = &n
	p.opts.Log.Info("fake cloud preemption notice", "instance", in.ID, "pool", in.Pool, "terminate_at", n.TerminateAt)
	if cb := p.opts.OnNotice; cb != nil {
		p.callbacks = append(p.callbacks, func() { cb(n) })
	}
}

func (p *Provider) terminate(in *instance, reason string) {
	in.State, in.StateReason = providers.Terminated, reason
	if cb := p.opts.OnTerminated; cb != nil {
		snap := in.snapshot()
		p.callbacks = append(p.callbacks, func() { cb(snap) })
	}
}

func (in *instance) snapshot() providers.Instance {
	out := in.Instance
	out.Tags = maps.Clone(in.Tags)
	return out
}
