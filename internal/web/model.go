package web

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/placement"
)

// What the pages show is computed here, from a Fleet and the config, by
// pure functions the unit tests call directly; the handlers only read the
// Source and render.

// GPU states on the map (data-state).
const (
	StateHeld        = "held"        // whole, by one job
	StateShared      = "shared"      // in shares, by one or more jobs
	StateFree        = "free"        // free on a schedulable node
	StateFenced      = "fenced"      // unhealthy: no new work
	StateReserved    = "reserved"    // free, on a node reserved for a blocked job
	StateUnavailable = "unavailable" // free, but the node takes no work (cordoned, lost, silent)
)

// teamClasses is how many team colours the stylesheet defines
// (.team-0 … .team-7).
const teamClasses = 8

// scope is what a viewer may see: every team's jobs, or their own.
type scope struct {
	all   bool
	teams map[string]bool
}

func scopeOf(v *client.Identity) scope {
	if v == nil || v.Admin {
		return scope{all: true}
	}
	s := scope{teams: map[string]bool{}}
	for _, t := range v.Teams {
		s.teams[t] = true
	}
	return s
}

func (s scope) sees(team string) bool { return s.all || s.teams[team] }

// palette gives each team a colour class, stable for a given set of teams
// (sorted order).
type palette map[string]string

func newPalette(teams []string) palette {
	p := palette{}
	for i, t := range slices.Compact(slices.Sorted(slices.Values(teams))) {
		p[t] = fmt.Sprintf("team-%d", i%teamClasses)
	}
	return p
}

func (p palette) class(team string) string {
	if c, ok := p[team]; ok {
		return c
	}
	return "team-unknown"
}

// knownTeams are the teams the config names and the fleet shows.
func knownTeams(f Fleet, cfg teamConfig) []string {
	set := map[string]bool{}
	for _, q := range cfg.Quotas {
		set[q.Team] = true
	}
	for t := range cfg.Budgets {
		set[t] = true
	}
	for _, a := range f.Allocations {
		if a.Team != "" {
			set[a.Team] = true
		}
	}
	for _, e := range f.Queue {
		if e.Team != "" {
			set[e.Team] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// teamConfig is the part of the server's config the team pages show.
type teamConfig struct {
	Quotas  []placement.Quota
	Budgets map[string]accounting.TeamLimit
}

// ---- the cluster map ----

type clusterMap struct {
	Pools []mapPool
	// Teams is the legend: GPUs held per team (whole GPUs plus shares).
	Teams []teamGPUs
	// Totals over the fleet, in GPUs.
	GPUs, Held, Shared, Free, Fenced, Reserved, Unavailable int
}

type teamGPUs struct {
	Team, Class string
	// Visible: the viewer may open the team's page.
	Visible bool
	// Whole counts the GPU cells held whole (MIG devices included); GPUs
	// is what the team's allocations are metered for, in GPUs (a share
	// or a MIG device as its part of one GPU).
	Whole int
	GPUs  float64
}

type mapPool struct {
	Name         string
	CapacityType gangway.CapacityType
	Cloud        bool
	// Offers are the pool's cloud offers (price, instance type).
	Offers     []gangway.Offer
	Nodes      []mapNode
	GPUs, Free int
}

type mapNode struct {
	ID, State, Model, Rack, Block string
	CapacityType                  gangway.CapacityType
	// Owner is the job a cloud node was launched for ("" when hidden or
	// none).
	Owner gangway.JobID
	// Reserved lists the blocked jobs the node is reserved for.
	Reserved []reservation
	Domains  []mapDomain
	GPUs     int
	Held     int
}

type reservation struct {
	Job   gangway.JobID // "" when the viewer may not see it
	Team  string
	Start time.Time
}

type mapDomain struct {
	// Name is the NVLink domain ("" for GPUs without NVLink).
	Name string
	GPUs []mapGPU
}

type mapGPU struct {
	Index int
	Model string
	// MIG is the device's MIG profile ("" for a whole GPU), Parent the
	// physical GPU it is a partition of.
	MIG    string
	Parent int
	State  string
	// Team and Class for a GPU held whole (the first share's team for a
	// shared GPU); Job is "" when the viewer may not see it.
	Team, Class string
	Job         gangway.JobID
	Shares      []gpuShare
	// Unhealthy is set on a fenced GPU, also while a job still holds it.
	Unhealthy   bool
	FenceReason string
	Label       string
}

type gpuShare struct {
	Job   gangway.JobID
	Team  string
	Milli int
}

// nodeState is the node's state as the map shows it: its recorded state,
// or "silent" for a ready node whose heartbeat is older than ttl.
func nodeState(n gangway.NodeStatus, now time.Time, ttl time.Duration) string {
	if n.State == gangway.NodeReady && now.Sub(n.LastHeartbeat) > ttl {
		return "silent"
	}
	return n.State
}

func buildMap(f Fleet, sc scope, pal palette, ttl time.Duration) clusterMap {
	jobTeam := map[gangway.JobID]string{}
	for _, a := range f.Allocations {
		jobTeam[a.JobID] = a.Team
	}
	queued := map[gangway.JobID]string{}
	for _, e := range f.Queue {
		queued[e.JobID] = e.Team
	}
	reserved := map[string][]reservation{}
	for _, id := range slices.Sorted(maps.Keys(f.Reasons)) {
		w := f.Reasons[id]
		team := queued[id]
		for _, n := range w.ReservedNodes {
			r := reservation{Team: team, Start: w.ReservationStart}
			if sc.sees(team) {
				r.Job = id
			}
			reserved[n] = append(reserved[n], r)
		}
	}
	pools := map[string]*mapPool{}
	pool := func(name string) *mapPool {
		p := pools[name]
		if p == nil {
			p = &mapPool{Name: name, CapacityType: gangway.CapacityOnPrem}
			pools[name] = p
		}
		return p
	}
	for _, o := range f.Offers {
		p := pool(o.Pool)
		p.Cloud, p.CapacityType = true, o.CapacityType
		p.Offers = append(p.Offers, o)
	}
	m := clusterMap{}
	held := map[string]*teamGPUs{}
	count := func(team string, whole int) *teamGPUs {
		t := held[team]
		if t == nil {
			t = &teamGPUs{Team: team, Class: pal.class(team), Visible: team != "" && sc.sees(team)}
			held[team] = t
		}
		t.Whole += whole
		return t
	}
	// What a team holds in GPUs is what it is metered for: whole GPUs,
	// shares and MIG devices at their share of the parent GPU.
	for _, a := range f.Allocations {
		t := count(a.Team, 0)
		for _, m := range a.Members {
			t.GPUs += float64(len(m.GPUs)) * float64(m.MeteredMilli()) / gangway.MilliPerGPU
		}
	}
	for _, n := range f.Nodes {
		p := pool(n.Node.Pool)
		if n.Node.CapacityType.Cloud() {
			p.Cloud, p.CapacityType = true, n.Node.CapacityType
		}
		st := nodeState(n, f.Now, ttl)
		mn := mapNode{ID: n.Node.ID, State: st, Model: n.Node.Model(), Rack: n.Node.Rack, Block: n.Node.Block,
			CapacityType: n.Node.CapacityType, Reserved: reserved[n.Node.ID], GPUs: len(n.Node.GPUs)}
		if n.Node.Owner != "" && sc.sees(jobTeam[n.Node.Owner]) {
			mn.Owner = n.Node.Owner
		}
		health := f.Health[n.Node.ID]
		for _, g := range n.Node.GPUs {
			mg := mapGPU{Index: g.Index, Model: g.Model, Unhealthy: !g.Healthy, MIG: g.MIGProfile, Parent: g.ParentIndex}
			if mg.Unhealthy {
				mg.FenceReason = health[g.Index].Reason
			}
			if job, ok := n.Allocated[g.Index]; ok {
				mg.State, mg.Team = StateHeld, jobTeam[job]
				if sc.sees(mg.Team) {
					mg.Job = job
				}
				count(mg.Team, 1)
				m.Held++
				mn.Held++
			} else if shares := n.Shared[g.Index]; len(shares) > 0 {
				mg.State = StateShared
				for _, job := range slices.Sorted(maps.Keys(shares)) {
					s := gpuShare{Team: jobTeam[job], Milli: shares[job]}
					if sc.sees(s.Team) {
						s.Job = job
					}
					mg.Shares = append(mg.Shares, s)
					count(s.Team, 0)
				}
				mg.Team = mg.Shares[0].Team
				m.Shared++
				mn.Held++
			} else {
				switch {
				case mg.Unhealthy:
					mg.State = StateFenced
				case st != gangway.NodeReady:
					mg.State = StateUnavailable
					m.Unavailable++
				case len(mn.Reserved) > 0:
					mg.State = StateReserved
					m.Reserved++
				default:
					mg.State = StateFree
					m.Free++
					p.Free++
				}
			}
			if mg.Unhealthy {
				m.Fenced++
			}
			if mg.Team != "" {
				mg.Class = pal.class(mg.Team)
			}
			mg.Label = gpuLabel(mn, mg)
			addToDomain(&mn, g.NVLinkDomain, mg)
		}
		m.GPUs += mn.GPUs
		p.GPUs += mn.GPUs
		p.Nodes = append(p.Nodes, mn)
	}
	for _, p := range pools {
		m.Pools = append(m.Pools, *p)
	}
	// On-prem pools first, then the cloud's; by name within each.
	slices.SortFunc(m.Pools, func(a, b mapPool) int {
		if a.Cloud != b.Cloud {
			if a.Cloud {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for _, t := range slices.Sorted(maps.Keys(held)) {
		m.Teams = append(m.Teams, *held[t])
	}
	return m
}

func addToDomain(n *mapNode, domain string, g mapGPU) {
	for i := range n.Domains {
		if n.Domains[i].Name == domain {
			n.Domains[i].GPUs = append(n.Domains[i].GPUs, g)
			return
		}
	}
	n.Domains = append(n.Domains, mapDomain{Name: domain, GPUs: []mapGPU{g}})
}

// gpuLabel says what a GPU cell shows, in words (its accessible name).
func gpuLabel(n mapNode, g mapGPU) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s GPU %d", n.ID, g.Index)
	if g.MIG != "" {
		fmt.Fprintf(&b, " (MIG %s on GPU %d)", g.MIG, g.Parent)
	}
	b.WriteString(": ")
	switch g.State {
	case StateHeld:
		fmt.Fprintf(&b, "held by team %s", orUnknown(g.Team))
		if g.Job != "" {
			fmt.Fprintf(&b, ", job %s", g.Job)
		}
	case StateShared:
		parts := make([]string, len(g.Shares))
		for i, s := range g.Shares {
			who := "team " + orUnknown(s.Team)
			if s.Job != "" {
				who += " (" + s.Job + ")"
			}
			parts[i] = fmt.Sprintf("%.0f%% %s", float64(s.Milli)/10, who)
		}
		b.WriteString("shared: " + strings.Join(parts, ", "))
	case StateFenced:
		b.WriteString("fenced")
	case StateReserved:
		b.WriteString("free, reserved for a blocked job")
	case StateUnavailable:
		b.WriteString("free, node " + n.State)
	default:
		b.WriteString("free")
	}
	if g.Unhealthy && g.State != StateFenced {
		b.WriteString(" (fenced)")
	}
	if g.FenceReason != "" {
		b.WriteString(": " + g.FenceReason)
	}
	return b.String()
}

func orUnknown(team string) string {
	if team == "" {
		return "unknown"
	}
	return team
}

// ---- the queue ----

type queueView struct {
	Rows []queueRow
	// Hidden counts the entries of teams the viewer may not see.
	Hidden int
}

type queueRow struct {
	// Pos is the entry's place in the whole queue, from 1.
	Pos           int
	Job           gangway.JobID
	Team, Class   string
	PriorityClass string
	Priority      int
	GPUs          int
	Share         string // "0.5 GPU each" for GPU shares
	Models        string
	Submitted     time.Time
	Waited        time.Duration
	// The waiting record; HasReason is false before a cycle has seen the
	// job.
	HasReason        bool
	Reason, Detail   string
	Retry, CloudOnly bool
	ReservationStart time.Time
	ReservedNodes    []string
	// The start estimate, the jobs the job waits for (those the viewer
	// may see; HiddenWaitsFor counts the others' jobs) and the priced
	// cloud option, when the waiting record carries them.
	ETA            *gangway.ETA
	WaitsFor       []gangway.JobID
	HiddenWaitsFor int
	Cloud          *gangway.CloudOption
}

// blockers splits the jobs a waiting record names into those the viewer
// may see and a count of the others (a job neither running nor queued
// counts as another team's: its team is unknown).
func blockers(f Fleet, sc scope, jobs []gangway.JobID) (visible []gangway.JobID, hidden int) {
	if len(jobs) == 0 {
		return nil, 0
	}
	team := map[gangway.JobID]string{}
	for _, a := range f.Allocations {
		team[a.JobID] = a.Team
	}
	for _, e := range f.Queue {
		team[e.JobID] = e.Team
	}
	for _, j := range jobs {
		if t, ok := team[j]; ok && sc.sees(t) {
			visible = append(visible, j)
		} else {
			hidden++
		}
	}
	return visible, hidden
}

func buildQueue(f Fleet, sc scope, pal palette) queueView {
	var q queueView
	for i, e := range f.Queue {
		if !sc.sees(e.Team) {
			q.Hidden++
			continue
		}
		r := queueRow{Pos: i + 1, Job: e.JobID, Team: e.Team, Class: pal.class(e.Team), PriorityClass: e.PriorityClass,
			Priority: e.Priority, GPUs: e.GPUs(), Models: strings.Join(e.GPUModels, ", "),
			Submitted: e.SubmittedAt, Waited: max(f.Now.Sub(e.SubmittedAt), 0)}
		if e.Share() {
			r.Share = fmt.Sprintf("%g GPU each", float64(e.GPUMilli)/gangway.MilliPerGPU)
		}
		if w, ok := f.Reasons[e.JobID]; ok && (w.Reason != "" || w.Detail != "") {
			r.HasReason, r.Reason, r.Detail, r.Retry, r.CloudOnly = true, w.Reason, w.Detail, w.Retry, w.CloudOnly()
			r.ReservationStart, r.ReservedNodes = w.ReservationStart, w.ReservedNodes
			r.ETA, r.Cloud = w.ETA, w.Cloud
			r.WaitsFor, r.HiddenWaitsFor = blockers(f, sc, w.WaitsFor)
		}
		q.Rows = append(q.Rows, r)
	}
	return q
}

// ---- teams ----

type teamView struct {
	Team, Class string
	// Quotas are the team's quotas with the GPUs it holds under each.
	Quotas []quotaUse
	// InUse is the GPUs the team holds now (shares as fractions).
	InUse   float64
	Running []teamJob
	Queued  []gangway.JobID
	Month   monthCost
	// Budget is the team's monthly cloud budget (0: none) and MaxPrice
	// its price cap per GPU-hour (0: none).
	Budget, MaxPrice float64
	// BudgetUsed is Month's cloud spend over Budget, as a share.
	BudgetUsed float64
}

type quotaUse struct {
	Model   string // "" = any model
	Used    float64
	Nominal int
	// Borrowing and Lending are the limits (nil: none).
	Borrowing, Lending *int
	Cohort             string
	// Share is Used over Nominal; Over says the team borrows.
	Share float64
	Over  bool
}

type teamJob struct {
	Job   gangway.JobID
	GPUs  float64
	Pools string
	Since time.Time
	// Dollars is what the run has cost so far.
	Dollars float64
}

type monthCost struct {
	Since, Until time.Time
	GPUHours     gangway.CostSplit
	Dollars      gangway.CostSplit
	Total        float64
	// Cloud is the month's spend on spot and on-demand: what the budget
	// counts (the runs in flight included).
	Cloud float64
	// InFlight counts the runs still going, whose cost so far is
	// included.
	InFlight int
}

// monthStart is the first instant of now's month, in UTC: budgets are per
// calendar month (UTC).
func monthStart(now time.Time) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// monthQuery is the usage report the team pages read: this month, by team,
// with the runs in flight priced up to now.
func monthQuery(f Fleet) accounting.Query {
	return accounting.Query{By: gangway.CostByTeam, Since: monthStart(f.Now), Until: f.Now,
		Running: accounting.RunningSegments(accounting.PriceCloud(f.Allocations, f.Offers), f.Now)}
}

// buildTeams returns the teams the viewer may see, each with its usage
// against quota and its month's cost against budget; usage is the month's
// report by team.
func buildTeams(f Fleet, cfg teamConfig, usage gangway.CostSummary, sc scope, pal palette) []teamView {
	teams := knownTeams(f, cfg)
	for _, r := range usage.Rows {
		if r.Group != "" && !slices.Contains(teams, r.Group) {
			teams = append(teams, r.Group)
		}
	}
	slices.Sort(teams)
	model := map[string]string{}
	for _, n := range f.Nodes {
		model[n.Node.ID] = n.Node.Model()
	}
	rows := map[string]gangway.CostRow{}
	for _, r := range usage.Rows {
		rows[r.Group] = r
	}
	running := map[gangway.JobID]float64{}
	for _, s := range accounting.RunningSegments(accounting.PriceCloud(f.Allocations, f.Offers), f.Now) {
		running[s.JobID] += s.Dollars()
	}
	var out []teamView
	for _, team := range teams {
		if !sc.sees(team) {
			continue
		}
		t := teamView{Team: team, Class: pal.class(team)}
		byModel := map[string]float64{}
		for _, a := range f.Allocations {
			if a.Team != team {
				continue
			}
			j := teamJob{Job: a.JobID, Since: a.At, Dollars: running[a.JobID]}
			var pools []string
			for _, m := range a.Members {
				g := float64(len(m.GPUs)) * float64(m.MeteredMilli()) / gangway.MilliPerGPU
				j.GPUs += g
				byModel[model[m.NodeID]] += g
				if p := cmp.Or(m.Pool, "?"); !slices.Contains(pools, p) {
					pools = append(pools, p)
				}
			}
			j.Pools = strings.Join(pools, ", ")
			t.InUse += j.GPUs
			t.Running = append(t.Running, j)
		}
		for _, e := range f.Queue {
			if e.Team == team {
				t.Queued = append(t.Queued, e.JobID)
			}
		}
		for _, q := range cfg.Quotas {
			if q.Team != team {
				continue
			}
			u := quotaUse{Model: q.Model, Nominal: q.Nominal, Borrowing: q.BorrowingLimit, Lending: q.LendingLimit, Cohort: q.Cohort}
			if q.Model == "" {
				u.Used = t.InUse
			} else {
				u.Used = byModel[q.Model]
			}
			if q.Nominal > 0 {
				u.Share = u.Used / float64(q.Nominal)
			}
			u.Over = u.Used > float64(q.Nominal)
			t.Quotas = append(t.Quotas, u)
		}
		r := rows[team]
		t.Month = monthCost{Since: usage.Since, Until: usage.Until, GPUHours: r.GPUHours, Dollars: r.Dollars,
			Total: r.TotalDollars, Cloud: r.Dollars.Spot + r.Dollars.OnDemand, InFlight: r.InFlight}
		if l, ok := cfg.Budgets[team]; ok {
			t.Budget, t.MaxPrice = l.MonthlyBudget, l.MaxPricePerGPUHour
			if l.MonthlyBudget > 0 {
				t.BudgetUsed = t.Month.Cloud / l.MonthlyBudget
			}
		}
		out = append(out, t)
	}
	return out
}

// ---- one job ----

// inFlightDollars is what the job's current run has cost so far (0 when
// it holds no GPUs): its allocation in the view, priced as the workflow's
// assignment (own, when given, with the price each member was rented at)
// says, else as accounting.PriceCloud does.
func inFlightDollars(f Fleet, job gangway.JobID, own *gangway.Assignment) float64 {
	i := slices.IndexFunc(f.Allocations, func(a gangway.Assignment) bool { return a.JobID == job })
	if i < 0 {
		return 0
	}
	a := accounting.PriceCloud(f.Allocations[i:i+1], f.Offers)
	if own != nil && own.Attempt == a[0].Attempt && len(own.Members) == len(a[0].Members) {
		for j, m := range own.Members {
			if m.PricePerGPUHour > 0 {
				a[0].Members[j].CapacityType, a[0].Members[j].PricePerGPUHour = m.CapacityType, m.PricePerGPUHour
			}
		}
	}
	total := 0.0
	for _, s := range accounting.RunningSegments(a, f.Now) {
		total += s.Dollars()
	}
	return total
}

// ---- fragmentation ----

// fragChart is the fragmentation history drawn as an SVG line chart.
type fragChart struct {
	Samples []FragSample
	// Latest is the newest sample (zero without any).
	Latest FragSample
	// The plot: its size, the two lines as SVG points, the axis ticks.
	Width, Height         int
	Left, Top, Right, Bot int
	RatePoints, FreePts   string
	YTicks, XTicks        []tick
	MaxFree               int
	From, To              time.Time
}

type tick struct {
	Pos   float64
	Label string
}

// buildFragChart lays out samples (oldest first) in a width × height
// chart: the fragmentation rate (left axis, 0–100 %) and the free GPUs
// (scaled to the largest count seen) over time.
func buildFragChart(samples []FragSample, width, height int) fragChart {
	c := fragChart{Samples: samples, Width: width, Height: height, Left: 56, Top: 32, Right: width - 56, Bot: height - 40}
	for r := 0; r <= 4; r++ {
		y := float64(c.Bot) - float64(r)/4*float64(c.Bot-c.Top)
		c.YTicks = append(c.YTicks, tick{Pos: y, Label: fmt.Sprintf("%d%%", r*25)})
	}
	if len(samples) == 0 {
		return c
	}
	c.Latest = samples[len(samples)-1]
	c.From, c.To = samples[0].At, c.Latest.At
	for _, s := range samples {
		c.MaxFree = max(c.MaxFree, s.FreeGPUs)
	}
	span := c.To.Sub(c.From)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return float64(c.Right)
		}
		return float64(c.Left) + float64(t.Sub(c.From))/float64(span)*float64(c.Right-c.Left)
	}
	y := func(v float64) float64 { return float64(c.Bot) - v*float64(c.Bot-c.Top) }
	var rate, free strings.Builder
	for i, s := range samples {
		if i > 0 {
			rate.WriteByte(' ')
			free.WriteByte(' ')
		}
		fmt.Fprintf(&rate, "%.1f,%.1f", x(s.At), y(min(max(s.Rate, 0), 1)))
		f := 0.0
		if c.MaxFree > 0 {
			f = float64(s.FreeGPUs) / float64(c.MaxFree)
		}
		fmt.Fprintf(&free, "%.1f,%.1f", x(s.At), y(f))
	}
	c.RatePoints, c.FreePts = rate.String(), free.String()
	const xTicks = 4
	for i := 0; i <= xTicks; i++ {
		at := c.From.Add(time.Duration(float64(span) * float64(i) / xTicks))
		c.XTicks = append(c.XTicks, tick{Pos: x(at), Label: at.UTC().Format("15:04:05")})
		if span <= 0 {
			break
		}
	}
	return c
}
