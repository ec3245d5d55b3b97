package web_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/server"
	"github.com/gangwayhq/gangway/internal/web"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// chromium finds the browser: $GANGWAY_CHROMIUM, else Debian's chromium
// or another Chrome on PATH; "" when there is none.
func chromium() string {
	if p := os.Getenv("GANGWAY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestWebViewInChromium runs the web view on the dev stack (redis-server,
// the Temporal dev server, the in-process server and agents with
// synthetic GPUs, a fake spot cloud), runs jobs of three teams on it and
// reads in headless Chromium what a person would see:
//
//   - the cluster map: GPUs per team equal to the allocations in the
//     view, the fenced GPU, the burst's node in its cloud pool, NVLink
//     domains;
//   - the queue: every waiting job with the reason the dispatch loop
//     recorded (one over its team's quota);
//   - a finished job's page: its cost equal to the ledger's;
//   - the team page: GPUs in use against quota, the month's cost as the
//     ledger and the runs in flight add up;
//   - the fragmentation chart, with a point per sample;
//   - the login form, setting the HttpOnly token cookie, and a page
//     refreshing itself when the queue changes.
//
// Screenshots of every page go to t.ArtifactDir (kept with go test
// -artifacts; see the Makefile's test target).
func TestWebViewInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, a Temporal dev server and Chromium")
	}
	browser := chromium()
	if browser == "" {
		t.Skip("chromium not found on PATH (nor $GANGWAY_CHROMIUM): install it (apt-get install -y chromium; `make test` does when run as root) to run the browser test")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	// node-0 has two NVLink domains of four GPUs; node-1 one of eight.
	nodes := agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 2, GPUs: 8, Model: "H100"}})
	for i := range nodes[0].GPUs {
		nodes[0].GPUs[i].NVLinkDomain = fmt.Sprintf("node-0/nvl-%d", i/4)
	}
	zero := 0
	quotas := []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 8}, {Team: "nlp", Model: "A100", Nominal: 8},
		{Team: "vision", Model: "H100", Nominal: 8, BorrowingLimit: &zero}}
	limits := map[string]accounting.TeamLimit{"nlp": {MonthlyBudget: 50}}
	// Two users of the user API: an admin, and ana of team nlp.
	dir := t.TempDir()
	tokens := filepath.Join(dir, "api-tokens")
	adminToken, err := api.CreateToken(tokens, "root", nil, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	anaToken, err := api.CreateToken(tokens, "ana", []string{"nlp"}, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: dir, Headless: true,
		Nodes: nodes, Agent: agent.Config{HeartbeatInterval: 200 * time.Millisecond},
		CloudAgent: agent.Config{HeartbeatInterval: 200 * time.Millisecond},
		Cloud: func(ctx context.Context, hooks fullstack.FakeHooks) (*fullstack.Cloud, error) {
			f, err := fake.New(fake.Options{Pools: []fake.Pool{{Name: "fake-spot", Zone: "fake-1a", InstanceType: "a100x8",
				GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12}},
				BootDelay: 500 * time.Millisecond, OnRunning: hooks.OnRunning, OnNotice: hooks.OnNotice, OnTerminated: hooks.OnTerminated})
			if err != nil {
				return nil, err
			}
			reg, err := cloud.NewRegistry([]providers.Provider{f}, cloud.RegistryOptions{})
			if err != nil {
				return nil, err
			}
			return &fullstack.Cloud{Registry: reg, Fakes: []*fake.Provider{f}}, nil
		},
		Server: &fullstack.ServerOptions{
			Dispatch: dispatch.Config{Interval: 200 * time.Millisecond,
				Placement:    placement.Options{Quotas: quotas, Reservations: 1},
				OnPremPrices: map[string]float64{"onprem": 2}},
			TeamLimits: limits,
			Reconcile:  cloud.ReconcilerConfig{Interval: time.Second, Grace: time.Minute},
			API:        &api.Config{TokenFile: tokens},
			Web:        &server.WebOptions{SampleEvery: 200 * time.Millisecond, Refresh: time.Second},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	view := st.View
	cl := client.New(jobs.New(st.TemporalClient), view)
	timing := client.SubmitOptions{Timing: workflows.Timing{StartTimeout: 30 * time.Second, BootTimeout: 30 * time.Second}}
	submit := func(name, team string, replicas, gpus int, script string, mod func(*gangway.JobSpec)) {
		t.Helper()
		sp := gangway.JobSpec{Name: name, Team: team, Command: []string{"/bin/sh", "-c", script},
			Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus}}
		if mod != nil {
			mod(&sp)
		}
		if _, err := cl.Submit(ctx, sp, timing); err != nil {
			t.Fatalf("submit %s: %v", name, err)
		}
	}
	phase := func(job string) gangway.Phase {
		s, err := cl.Status(ctx, job)
		if err != nil {
			return ""
		}
		return s.Phase
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.After(time.Minute)
		for !ok() {
			select {
			case <-deadline:
				rs, _ := view.Reasons(ctx)
				t.Fatalf("waiting for %s: no luck in a minute (waiting reasons: %v)", what, rs)
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	// A job that finishes, and so has a recorded cost; then the fleet's
	// 16 H100s fill up: vision at its quota of 8, nlp with 6 of its 8.
	submit("nlp-done", "nlp", 1, 1, "sleep 1", nil)
	waitFor("nlp-done to succeed", func() bool { return phase("nlp-done") == gangway.PhaseSucceeded })
	submit("vision-train", "vision", 1, 8, "sleep 600", nil)
	submit("nlp-train", "nlp", 2, 2, "sleep 600", nil)
	submit("nlp-small", "nlp", 1, 2, "sleep 600", nil)
	// An A100 job: only the spot pool has A100s, so it bursts (its 10
	// minutes at most cost far less than nlp's budget).
	submit("nlp-burst", "nlp", 1, 8, "sleep 600", func(s *gangway.JobSpec) {
		s.Gang.GPUModels = []string{"A100"}
		s.Burst = gangway.Burst{Enabled: true}
		s.MaxRuntime = gangway.Duration{Duration: 10 * time.Minute}
	})
	for _, j := range []string{"vision-train", "nlp-train", "nlp-small", "nlp-burst"} {
		waitFor(j+" to run", func() bool { return phase(j) == gangway.PhaseRunning })
	}
	// One of the two free GPUs fails.
	ns, err := view.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fenced gangway.NodeStatus
	for _, n := range ns {
		if n.Node.Pool == "onprem" && len(n.FreeGPUs()) > 0 {
			fenced = n
			break
		}
	}
	if fenced.Node.ID == "" {
		t.Fatal("no free on-prem GPU to fence")
	}
	if _, err := view.FenceGPUs(ctx, gangway.GPUEvent{Node: fenced.Node.ID, GPUs: fenced.FreeGPUs()[:1], Kind: "xid", Xid: 79,
		Meaning: "GPU has fallen off the bus", Blame: "gpu", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Two jobs that wait: vision is at its quota and may not borrow;
	// research needs 4 GPUs where 1 is free.
	submit("vision-more", "vision", 1, 1, "sleep 600", nil)
	submit("research-big", "research", 1, 4, "sleep 600", nil)
	var reasons map[gangway.JobID]gangway.Waiting
	waitFor("both waiting jobs to have a reason", func() bool {
		reasons, err = view.Reasons(ctx)
		return err == nil && reasons["vision-more"].Reason == string(placement.ReasonQuota) && reasons["research-big"].Reason != ""
	})
	b := newBrowser(t, ctx, browser, st.WebURL)

	// The pages are the user API's: without a token, 401.
	resp := run(b, chromedp.NavigateResponse(st.WebURL))
	if resp.Status != http.StatusUnauthorized {
		t.Errorf("the map without a token: %d, want 401", resp.Status)
	}
	// Sign in: a token the API refuses is refused by the form; the
	// admin's sets the cookie, HttpOnly (the page's script cannot read
	// it), and the map comes next.
	b.open("login", "#login-form")
	b.shot("login.png", "the sign-in form")
	b.signIn("gw_not-a-token")
	b.do(chromedp.WaitVisible(chromedp.ID("login-error")))
	b.shot("login-refused.png", "the sign-in form refusing a token the user API does not know")
	b.signIn(adminToken)
	b.do(chromedp.WaitVisible(chromedp.ID("map-summary")))
	cookies, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{st.WebURL}})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cookies.Cookies, func(c *network.Cookie) bool { return c.Name == web.CookieName })
	if i < 0 || cookies.Cookies[i].Value != adminToken || !cookies.Cookies[i].HTTPOnly {
		t.Errorf("after sign-in, cookie %s: %v; want the admin's token, HttpOnly", web.CookieName, i >= 0)
	}
	if who := run(b, chromedp.Text(chromedp.ID("viewer"))); !strings.Contains(who, "root (admin)") {
		t.Errorf("signed in as %q, want root (admin)", who)
	}
	if seen := run(b, chromedp.Evaluate[string](`document.cookie`)); seen != "" {
		t.Errorf("the page's script reads the cookies %q; the token cookie must be HttpOnly", seen)
	}

	// The map: GPUs per team as the view's allocations hold them.
	b.open("?refresh=0", "#map-summary")
	b.shot("map.png", "the cluster map: GPUs by team, the fenced GPU, the burst's node in the spot pool")
	allocs, err := view.Allocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantHeld := map[string]int{}
	for _, a := range allocs {
		for _, m := range a.Members {
			wantHeld[a.Team] += len(m.GPUs)
		}
	}
	held := run(b, chromedp.Evaluate[map[string]int](`(() => {
		const out = {};
		for (const g of document.querySelectorAll('li.gpu[data-state="held"]')) out[g.dataset.team] = (out[g.dataset.team] || 0) + 1;
		return out;
	})()`))
	if diff := cmp.Diff(wantHeld, held); diff != "" {
		t.Errorf("GPUs held per team on the map (-allocations +map):\n%s", diff)
	}
	t.Logf("map: GPUs held per team %v (allocations: %v)", held, wantHeld)
	legend := run(b, chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll('#team-gpus tr[data-team]')].map(r => [r.dataset.team, r.querySelector('[data-gpus]').textContent.trim()]))`))
	for team, n := range wantHeld {
		if legend[team] != fmt.Sprint(n) {
			t.Errorf("legend says team %s holds %q GPUs, the allocations %d", team, legend[team], n)
		}
	}
	type mapFacts struct {
		Fenced    []string `json:"fenced"`
		SpotNodes []string `json:"spotNodes"`
		Domains   []string `json:"domains"`
		Total     int      `json:"total"`
	}
	facts := run(b, chromedp.Evaluate[mapFacts](`({
		fenced: [...document.querySelectorAll('li.gpu.unhealthy')].map(g => g.closest('[data-node]').dataset.node + '/' + g.dataset.gpu),
		spotNodes: [...document.querySelectorAll('section[data-pool="fake-spot"] article[data-node]')].map(n => n.dataset.node),
		domains: [...document.querySelectorAll('article[data-node="node-0"] figure[data-domain]')].map(d => d.dataset.domain),
		total: document.querySelectorAll('li.gpu').length,
	})`))
	if want := []string{fmt.Sprintf("%s/%d", fenced.Node.ID, fenced.FreeGPUs()[0])}; !cmp.Equal(facts.Fenced, want) {
		t.Errorf("fenced GPUs on the map %v, want %v", facts.Fenced, want)
	}
	burstNode := ""
	for _, a := range allocs {
		if a.JobID == "nlp-burst" {
			burstNode = a.Members[0].NodeID
		}
	}
	if !cmp.Equal(facts.SpotNodes, []string{burstNode}) {
		t.Errorf("nodes in the spot pool %v, want the burst's node %q", facts.SpotNodes, burstNode)
	}
	if !cmp.Equal(facts.Domains, []string{"node-0/nvl-0", "node-0/nvl-1"}) {
		t.Errorf("node-0's NVLink domains %v", facts.Domains)
	}
	if facts.Total != 24 {
		t.Errorf("%d GPU cells, want 24 (two 8-GPU nodes and the spot instance)", facts.Total)
	}

	// The queue: each waiting job with what its waiting record says —
	// the reason, and the start estimate, the jobs it waits for and the
	// cloud option when the record has them. Estimates are remade every
	// few cycles: the page is compared with records that did not change
	// while it loaded.
	type queueRow struct {
		Reason, ETA, WaitsFor, Cloud string
	}
	want, rows := map[string]queueRow{}, map[string]queueRow{}
	waitFor("a queue page to load between two estimates", func() bool {
		before, err := view.Reasons(ctx)
		if err != nil {
			return false
		}
		b.open("queue?refresh=0", "#queue-table")
		rows = run(b, chromedp.Evaluate[map[string]queueRow](`Object.fromEntries([...document.querySelectorAll('#queue-table tr[data-job]')].map(r => [r.dataset.job, {
			Reason: r.dataset.reason,
			ETA: [...r.querySelectorAll('[data-eta-p50]')].map(e => e.dataset.etaP50 + '/' + e.dataset.etaP90).join(),
			WaitsFor: [...r.querySelectorAll('[data-waits-for]')].map(e => e.dataset.waitsFor).join(),
			Cloud: [...r.querySelectorAll('[data-cloud-pool]')].map(e => e.dataset.cloudPool).join(),
		}]))`))
		after, err := view.Reasons(ctx)
		if err != nil || !cmp.Equal(before, after) {
			return false
		}
		reasons = after
		return true
	})
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
	withETA := 0
	for _, j := range []string{"vision-more", "research-big"} {
		w := reasons[j]
		r := queueRow{Reason: w.Reason, WaitsFor: strings.Join(w.WaitsFor, ",")}
		if w.ETA != nil {
			r.ETA = iso(w.ETA.P50) + "/" + iso(w.ETA.P90)
			withETA++
		}
		if w.Cloud != nil {
			r.Cloud = w.Cloud.Pool
		}
		want[j] = r
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("queue rows and waiting records (-view +page):\n%s", diff)
	}
	if rows["vision-more"].Reason != string(placement.ReasonQuota) {
		t.Errorf("vision-more's reason on the page %q, want %s", rows["vision-more"].Reason, placement.ReasonQuota)
	}
	b.shot("queue.png", "the queue: a job over its team's quota and one that does not fit, with their reasons, start estimates and blockers")
	t.Logf("queue: %v (%d of 2 with a start estimate)", rows, withETA)

	// The jobs page lists every job (Temporal's visibility store catches
	// up within moments).
	wantJobs := []string{"nlp-burst", "nlp-done", "nlp-small", "nlp-train", "research-big", "vision-more", "vision-train"}
	var listed []string
	waitFor("the jobs page to list every job", func() bool {
		b.open("jobs?refresh=0", "#jobs-table")
		listed = run(b, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#jobs-table tr[data-job]')].map(r => r.dataset.job).sort()`))
		return cmp.Equal(listed, wantJobs)
	})
	b.shot("jobs.png", "every job with its team, phase and GPUs")
	t.Logf("jobs: %d listed", len(listed))

	// A finished job's cost is the ledger's.
	b.open("jobs/nlp-done?refresh=0", "#job-cost")
	b.shot("job-done.png", "a finished job: phases, its run, its cost")
	total, err := st.Ledger.PerJob(ctx, "nlp-done")
	if err != nil {
		t.Fatal(err)
	}
	cost := run(b, chromedp.Evaluate[string](`document.getElementById('job-cost').dataset.dollars`))
	if cost != fmt.Sprintf("%.6f", total.Dollars) || total.Dollars <= 0 {
		t.Errorf("nlp-done's cost on the page %s, the ledger's %.6f", cost, total.Dollars)
	}
	t.Logf("job nlp-done: page cost $%s, ledger $%.6f over %d segments", cost, total.Dollars, total.Segments)
	b.open("jobs/nlp-train?refresh=0", "#runs-table")
	b.shot("job-running.png", "a running gang: where its ranks run, its phases, its cost so far")
	if n := run(b, chromedp.Evaluate[int](`document.querySelectorAll('#runs-table tr[data-attempt]').length`)); n != 1 {
		t.Errorf("nlp-train shows %d runs, want 1", n)
	}

	// The team page: GPUs in use against quota, and the month's cost as
	// the ledger and the runs in flight add up at the page's instant.
	b.open("teams/nlp?refresh=0", "#team-cost")
	b.shot("team-nlp.png", "team nlp: H100s in use against its quota, the month's cost against its budget")
	type teamFacts struct {
		Used, Nominal string
		Total, Cloud  string
		At            string
	}
	tf := run(b, chromedp.Evaluate[teamFacts](`(() => {
		const q = document.querySelector('#quota-table tr[data-quota-model="H100"]');
		const c = document.getElementById('team-cost');
		return {Used: q.dataset.used, Nominal: q.dataset.nominal, Total: c.dataset.dollars, Cloud: c.dataset.cloudDollars,
			At: document.getElementById('updated').getAttribute('datetime')};
	})()`))
	h100 := 0
	for _, a := range allocs {
		if a.Team == "nlp" && a.JobID != "nlp-burst" {
			for _, m := range a.Members {
				h100 += len(m.GPUs)
			}
		}
	}
	if tf.Used != fmt.Sprint(h100) || tf.Nominal != "8" {
		t.Errorf("nlp's H100 quota on the page: %s of %s, want %d of 8", tf.Used, tf.Nominal, h100)
	}
	at, err := time.Parse(time.RFC3339Nano, tf.At)
	if err != nil {
		t.Fatalf("page time %q: %v", tf.At, err)
	}
	// The view holds no price for the burst's spot GPUs (its workflow
	// does): the page prices them at the pool's offer.
	offers, err := view.CloudOffers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spotPrice := 0.0
	for _, o := range offers {
		if o.Pool == "fake-spot" {
			spotPrice = o.PricePerGPUHourFor(8)
		}
	}
	for i, a := range allocs {
		if a.JobID == "nlp-burst" {
			allocs[i].Members = slices.Clone(a.Members)
			allocs[i].Members[0].PricePerGPUHour = spotPrice
		}
	}
	report, err := st.Ledger.Report(ctx, accounting.Query{By: gangway.CostByTeam, Since: time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC),
		Until: at, Running: accounting.RunningSegments(allocs, at)})
	if err != nil {
		t.Fatal(err)
	}
	var nlp gangway.CostRow
	for _, r := range report.Rows {
		if r.Group == "nlp" {
			nlp = r
		}
	}
	// The page's instant is shown to the millisecond: allow what a
	// millisecond of the running GPUs costs.
	if got := parseFloat(t, tf.Total); math.Abs(got-nlp.TotalDollars) > 0.001 || nlp.TotalDollars <= 0 {
		t.Errorf("nlp's month on the page $%s, the ledger and the runs in flight $%.6f", tf.Total, nlp.TotalDollars)
	}
	if got := parseFloat(t, tf.Cloud); math.Abs(got-(nlp.Dollars.Spot+nlp.Dollars.OnDemand)) > 0.001 || got <= 0 {
		t.Errorf("nlp's cloud spend on the page $%s, want $%.6f (the burst so far)", tf.Cloud, nlp.Dollars.Spot+nlp.Dollars.OnDemand)
	}
	t.Logf("team nlp: %s of 8 H100s; month $%s (cloud $%s of the $50 budget); report $%.6f", tf.Used, tf.Total, tf.Cloud, nlp.TotalDollars)
	b.open("teams?refresh=0", "#teams-table")
	b.shot("teams.png", "every team: GPUs in use, quota, queued jobs, month's cost against budget")

	// Fragmentation: a point per sample.
	waitFor("three fragmentation samples", func() bool {
		b.open("fragmentation?refresh=0", "#frag-chart")
		return run(b, chromedp.Evaluate[int](`+document.getElementById('frag-chart').dataset.samples`)) >= 3
	})
	b.shot("fragmentation.png", "fragmentation rate and free GPUs over time, drawn by the server")
	pts := run(b, chromedp.Evaluate[[]int](`[+document.getElementById('frag-chart').dataset.samples,
		document.getElementById('frag-rate-line').getAttribute('points').trim().split(/\s+/).length]`))
	if pts[0] != pts[1] {
		t.Errorf("the chart has %d samples and %d points on its line", pts[0], pts[1])
	}
	t.Logf("fragmentation: %d samples", pts[0])

	// A page refreshes itself: the queue drops a cancelled job without a
	// reload.
	b.open("queue", "#queue-table")
	b.do(chromedp.WaitVisible(chromedp.CSS(`tr[data-job="vision-more"]`)))
	run(b, chromedp.Evaluate[bool](`window.notReloaded = true`))
	if err := cl.Cancel(ctx, "vision-more"); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.WaitNotPresent(chromedp.CSS(`tr[data-job="vision-more"]`)))
	if !run(b, chromedp.Evaluate[bool](`window.notReloaded === true`)) {
		t.Error("the queue page was reloaded, not refreshed in place")
	}
	b.shot("queue-refreshed.png", "the queue after vision-more was cancelled, refreshed in place")

	// Ana of team nlp sees nlp's jobs only: vision's GPUs on the map
	// name no job, the queue hides research's job, vision's job page is
	// not found.
	b.do(chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("login-form")))
	b.signIn(anaToken)
	b.do(chromedp.WaitVisible(chromedp.ID("map-summary")))
	b.open("?refresh=0", "#map-summary")
	b.shot("map-ana.png", "the cluster map as ana of team nlp sees it: other teams' GPUs coloured, their jobs not named")
	jobsSeen := run(b, chromedp.Evaluate[map[string][]string](`(() => {
		const out = {};
		for (const g of document.querySelectorAll('li.gpu[data-state="held"]')) {
			const l = out[g.dataset.team] = out[g.dataset.team] || [];
			if (!l.includes(g.dataset.job)) l.push(g.dataset.job);
		}
		for (const k in out) out[k].sort();
		return out;
	})()`))
	if diff := cmp.Diff(map[string][]string{"nlp": {"nlp-burst", "nlp-small", "nlp-train"}, "vision": {""}}, jobsSeen); diff != "" {
		t.Errorf("jobs ana sees on the map (-want +got):\n%s", diff)
	}
	b.open("queue?refresh=0", "#queue-table")
	if q := run(b, chromedp.Evaluate[[]string](`[document.querySelectorAll('#queue-table tr[data-job]').length + '', document.getElementById('queue-count').dataset.hidden]`)); !cmp.Equal(q, []string{"0", "1"}) {
		t.Errorf("ana's queue: %v rows and hidden; want 0 and 1 (research-big)", q)
	}
	resp = run(b, chromedp.NavigateResponse(b.base+"jobs/vision-train"))
	if resp.Status != http.StatusNotFound {
		t.Errorf("ana on vision-train's page: %d, want 404", resp.Status)
	}
}

// browserT drives one headless Chromium tab for a test.
type browserT struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string
}

func newBrowser(t *testing.T, ctx context.Context, path, base string) *browserT {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1400, 1000),
		chromedp.DisableGPU, chromedp.Flag("lang", "en-US"))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	// The first call starts the browser, which lives as long as the
	// context of that call: bctx, not the per-action timeouts of do.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return &browserT{t: t, ctx: bctx, base: base, dir: t.ArtifactDir()}
}

// do runs actions, each bounded to 30 s; a failure ends the test.
func (b *browserT) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func run[T any](b *browserT, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %v", err)
	}
	return v
}

// open loads the page at path under the web view and waits for sel.
func (b *browserT) open(path, sel string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// signIn submits token on the sign-in form.
func (b *browserT) signIn(token string) {
	b.t.Helper()
	b.open("login", "#login-form")
	b.do(chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("login-form")))
}

// shot saves a full-page screenshot as name in the artifact directory.
func (b *browserT) shot(name, what string) {
	b.t.Helper()
	png := run(b, chromedp.FullScreenshot(100))
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s: %s", p, what)
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return f
}
