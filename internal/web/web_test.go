package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

var (
	nlpUser = &client.Identity{User: "ana", Teams: []string{"nlp"}}
	admin   = &client.Identity{User: "root", Admin: true}
)

// gpuCells returns the map's GPU cells.
func gpuCells(doc *html.Node) []*html.Node { return all(doc, byAttr("data-gpu", "*")) }

func countBy(cells []*html.Node, key string) map[string]int {
	out := map[string]int{}
	for _, c := range cells {
		out[attr(c, key)]++
	}
	return out
}

func TestMapPage(t *testing.T) {
	tests := map[string]struct {
		viewer *client.Identity
		// wantJobs are the jobs the GPU cells link, per team.
		wantJobs map[string][]string
	}{
		"no identity sees every job":    {nil, map[string][]string{"nlp": {"burst", "nlp-train"}, "vision": {"vision-a"}}},
		"admin sees every job":          {admin, map[string][]string{"nlp": {"burst", "nlp-train"}, "vision": {"vision-a"}}},
		"a user sees their team's jobs": {nlpUser, map[string][]string{"nlp": {"burst", "nlp-train"}, "vision": {""}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, doc := get(t, serve(t, newFakeSource(), tc.viewer), "/ui/")
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			cells := gpuCells(doc)
			if len(cells) != 32 {
				t.Fatalf("%d GPU cells, want 32 (4 nodes × 8)", len(cells))
			}
			wantStates := map[string]int{StateHeld: 14, StateShared: 1, StateFenced: 1, StateFree: 1, StateReserved: 7, StateUnavailable: 8}
			if diff := cmp.Diff(wantStates, countBy(cells, "data-state")); diff != "" {
				t.Errorf("GPU states (-want +got):\n%s", diff)
			}
			// The totals say the same numbers as the cells.
			for state, n := range wantStates {
				if got := attr(mustID(t, doc, "total-"+state), "data-count"); got != strconv.Itoa(n) {
					t.Errorf("total-%s = %s, want %d", state, got, n)
				}
			}
			held := all(doc, byAttr("data-state", StateHeld))
			if diff := cmp.Diff(map[string]int{"nlp": 12, "vision": 2}, countBy(held, "data-team")); diff != "" {
				t.Errorf("GPUs held whole per team (-want +got):\n%s", diff)
			}
			jobs := map[string][]string{}
			for _, c := range held {
				team, job := attr(c, "data-team"), attr(c, "data-job")
				if l := jobs[team]; len(l) == 0 || l[len(l)-1] != job {
					jobs[team] = append(jobs[team], job)
				}
			}
			for team := range jobs {
				jobs[team] = sortedCopy(compact(jobs[team]))
			}
			if diff := cmp.Diff(tc.wantJobs, jobs); diff != "" {
				t.Errorf("jobs linked per team (-want +got):\n%s", diff)
			}
			// The legend counts shares as fractions.
			legend := map[string]string{}
			for _, row := range all(mustID(t, doc, "team-gpus"), and(tag("tr"), byAttr("data-team", "*"))) {
				legend[attr(row, "data-team")] = attr(all(row, byAttr("data-gpus", "*"))[0], "data-gpus")
			}
			if diff := cmp.Diff(map[string]string{"nlp": "12.5", "vision": "2.25"}, legend); diff != "" {
				t.Errorf("legend GPUs per team (-want +got):\n%s", diff)
			}
			// Only the teams the viewer may see link to their page.
			var linked []string
			for _, a := range all(mustID(t, doc, "team-gpus"), tag("a")) {
				linked = append(linked, text(a))
			}
			wantLinked := []string{"nlp", "vision"}
			if tc.viewer == nlpUser {
				wantLinked = []string{"nlp"}
			}
			if diff := cmp.Diff(wantLinked, linked); diff != "" {
				t.Errorf("team links (-want +got):\n%s", diff)
			}
		})
	}
}

func compact(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// TestMapLayout: pools on-prem first, cloud pools with their offers (an
// empty one too), nodes in their pool, NVLink domains, fences and
// reservations explained.
func TestMapLayout(t *testing.T) {
	_, doc := get(t, serve(t, newFakeSource(), nil), "/ui/")
	pools := all(doc, and(tag("section"), byAttr("data-pool", "*")))
	if diff := cmp.Diff([]string{"onprem", "fake-od", "fake-spot"}, attrs(pools, "data-pool")); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"false", "true", "true"}, attrs(pools, "data-cloud")); diff != "" {
		t.Errorf("pools' cloud flag (-want +got):\n%s", diff)
	}
	nodesIn := func(pool *html.Node) []string { return attrs(all(pool, tag("article")), "data-node") }
	if diff := cmp.Diff([][]string{{"n1", "n2", "n3"}, {}, {"c1"}}, [][]string{nodesIn(pools[0]), nodesIn(pools[1]), nodesIn(pools[2])}); diff != "" {
		t.Errorf("nodes per pool (-want +got):\n%s", diff)
	}
	if got := text(all(pools[1], byAttr("data-offer", "fake-od"))[0]); !strings.Contains(got, "$10.00/GPU-h") {
		t.Errorf("on-demand offer reads %q, want its price per GPU-hour, $10.00", got)
	}
	if got := text(pools[2]); !strings.Contains(got, "Launched for burst") {
		t.Errorf("spot node does not say which job it was launched for: %q", got)
	}
	n1 := all(doc, and(tag("article"), byAttr("data-node", "n1")))[0]
	if diff := cmp.Diff([]string{"n1/nvl-0", "n1/nvl-1"}, attrs(all(n1, tag("figure")), "data-domain")); diff != "" {
		t.Errorf("n1's NVLink domains (-want +got):\n%s", diff)
	}
	fenced := all(n1, byAttr("data-state", StateFenced))
	if len(fenced) != 1 || !strings.Contains(attr(fenced[0], "aria-label"), "Xid 79") {
		t.Errorf("fenced GPU on n1 = %v, want GPU 6 labelled with its fence reason", attrs(fenced, "aria-label"))
	}
	n2 := all(doc, and(tag("article"), byAttr("data-node", "n2")))[0]
	if got := attrs(all(n2, byAttr("data-reserved-for", "*")), "data-reserved-for"); !cmp.Equal(got, []string{"big"}) {
		t.Errorf("n2 reserved for %q, want big", got)
	}
	shared := all(n2, byAttr("data-state", StateShared))
	if len(shared) != 1 || attr(shared[0], "aria-label") != "n2 GPU 0: shared: 50% team nlp (nlp-nb), 25% team vision (vision-nb)" {
		t.Errorf("shared GPU label = %q", attrs(shared, "aria-label"))
	}
	n3 := all(doc, and(tag("article"), byAttr("data-node", "n3")))[0]
	if attr(n3, "data-state") != gangway.NodeLost {
		t.Errorf("n3 state %q, want lost", attr(n3, "data-state"))
	}
}

func TestQueuePage(t *testing.T) {
	tests := map[string]struct {
		viewer      *client.Identity
		wantJobs    []string
		wantReasons []string
		wantPos     []string
		wantHidden  string
	}{
		"everything": {nil, []string{"big", "vision-b", "fresh"},
			[]string{"InsufficientFreeGPUs", "QuotaExceeded", ""}, []string{"1", "2", "3"}, "0"},
		"one team's": {nlpUser, []string{"fresh"}, []string{""}, []string{"3"}, "2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, doc := get(t, serve(t, newFakeSource(), tc.viewer), "/ui/queue")
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			rows := all(mustID(t, doc, "queue-table"), and(tag("tr"), byAttr("data-job", "*")))
			if diff := cmp.Diff(tc.wantJobs, attrs(rows, "data-job")); diff != "" {
				t.Errorf("queue rows (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReasons, attrs(rows, "data-reason")); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPos, attrs(rows, "data-pos")); diff != "" {
				t.Errorf("positions (-want +got):\n%s", diff)
			}
			if got := attr(mustID(t, doc, "queue-count"), "data-hidden"); got != tc.wantHidden {
				t.Errorf("hidden = %s, want %s", got, tc.wantHidden)
			}
		})
	}
	_, doc := get(t, serve(t, newFakeSource(), nil), "/ui/queue")
	rows := all(doc, and(tag("tr"), byAttr("data-job", "*")))
	for _, want := range []string{"needs 8 GPUs on one node, at most 7 free", "GPUs reserved on n2 from 2026-12-14 12:30:00 UTC", "10m0s"} {
		if !strings.Contains(text(rows[0]), want) {
			t.Errorf("big's row %q does not say %q", text(rows[0]), want)
		}
	}
	// The waiting record's estimate, blockers and cloud option.
	eta := all(rows[0], byAttr("data-eta-p50", "*"))
	if len(eta) != 1 || attr(eta[0], "data-eta-p50") != "2026-12-14T12:20:00.000Z" || text(eta[0]) != "in 20m (P90 in 45m)" {
		t.Errorf("big's estimate: %q", text(rows[0]))
	}
	if c := all(rows[0], byAttr("data-cloud-pool", "fake-spot")); len(c) != 1 || attr(c[0], "data-expected-cost") != "12.500000" ||
		!strings.Contains(text(c[0]), "with burst enabled, it could start now on spot in fake-spot, about $12.50 expected") {
		t.Errorf("big's cloud option: %q", text(rows[0]))
	}
	if got := attrs(all(rows[1], byAttr("data-waits-for", "*")), "data-waits-for"); !cmp.Equal(got, []string{"nlp-train", "vision-a"}) {
		t.Errorf("vision-b waits for %q", got)
	}
	// A vision user sees vision-b's blocker of their team, and a count of
	// the other.
	_, vdoc := get(t, serve(t, newFakeSource(), &client.Identity{User: "vic", Teams: []string{"vision"}}), "/ui/queue")
	vrow := all(vdoc, and(tag("tr"), byAttr("data-job", "vision-b")))[0]
	if got := attrs(all(vrow, byAttr("data-waits-for", "*")), "data-waits-for"); !cmp.Equal(got, []string{"vision-a"}) ||
		!strings.Contains(text(vrow), "(1 job of other teams)") {
		t.Errorf("vision user: vision-b waits for %q, row %q", got, text(vrow))
	}
	if !strings.Contains(text(rows[2]), "not yet considered") {
		t.Errorf("fresh's row %q does not say no cycle has seen it", text(rows[2]))
	}

	// A job that never fits: told so, and, where it may burst, that the
	// cloud is where it can start.
	for _, tc := range []struct {
		cloud *gangway.CloudOption
		want  string
	}{
		{nil, "never fits as the fleet stands"},
		{&gangway.CloudOption{Pool: "fake-od", CapacityType: gangway.CapacityOnDemand, InstanceType: "a100x8", Instances: 2,
			PricePerGPUHour: 10, ExpectedCost: 40, ExpectedDuration: gangway.Duration{Duration: 15 * time.Minute}},
			"never fits as the fleet stands"},
		{&gangway.CloudOption{Pool: "fake-od", CapacityType: gangway.CapacityOnDemand, InstanceType: "a100x8", Instances: 2,
			PricePerGPUHour: 10, ExpectedCost: 40, ExpectedDuration: gangway.Duration{Duration: 15 * time.Minute}, BurstEnabled: true},
			"never fits on-prem as the fleet stands: it can start only in the cloud"},
	} {
		src := newFakeSource()
		src.fleet.Reasons["big"] = gangway.Waiting{Reason: "NeverFits", Detail: "needs 16 GPUs on one node; the largest has 8", Cloud: tc.cloud}
		_, doc := get(t, serve(t, src, nil), "/ui/queue")
		row := all(doc, and(tag("tr"), byAttr("data-job", "big")))[0]
		if got := all(row, byAttr("class", "never-fits")); len(got) != 1 || text(got[0]) != tc.want {
			t.Errorf("cloud option %v: big's row %q, want it to say %q", tc.cloud, text(row), tc.want)
		}
	}
}

func TestJobPage(t *testing.T) {
	tests := map[string]struct {
		path       string
		viewer     *client.Identity
		wantStatus int
		// wantCost is data-dollars of #job-cost; wantCheckpoints the
		// checkpoint rows, wantRuns the run rows.
		wantCost        string
		wantCheckpoints []string
		wantRuns        []string
	}{
		"running: recorded plus in flight":   {"/ui/jobs/nlp-train", nil, http.StatusOK, "16.000000", []string{"ckpt-1", "ckpt-1"}, []string{"1", "2"}},
		"ended: recorded only":               {"/ui/jobs/done", nlpUser, http.StatusOK, "1.250000", []string{}, []string{"1"}},
		"running, live totals: counted once": {"/ui/jobs/vision-a", nil, http.StatusOK, "5.000000", []string{}, []string{"1"}},
		"another team's job is not found":    {"/ui/jobs/nlp-train", &client.Identity{User: "vic", Teams: []string{"vision"}}, http.StatusNotFound, "", nil, nil},
		"unknown job":                        {"/ui/jobs/nope", nil, http.StatusNotFound, "", nil, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, doc := get(t, serve(t, newFakeSource(), tc.viewer), tc.path)
			if code != tc.wantStatus {
				t.Fatalf("status %d, want %d", code, tc.wantStatus)
			}
			if code != http.StatusOK {
				if e := mustID(t, doc, "error"); !strings.Contains(text(e), "No job named") {
					t.Errorf("error reads %q", text(e))
				}
				return
			}
			if got := attr(mustID(t, doc, "job-cost"), "data-dollars"); got != tc.wantCost {
				t.Errorf("cost %s, want %s", got, tc.wantCost)
			}
			if diff := cmp.Diff(tc.wantCheckpoints, attrs(all(doc, byAttr("data-checkpoint", "*")), "data-checkpoint")); diff != "" {
				t.Errorf("checkpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRuns, attrs(all(mustID(t, doc, "runs-table"), byAttr("data-attempt", "*")), "data-attempt")); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
	_, doc := get(t, serve(t, newFakeSource(), nil), "/ui/jobs/nlp-train")
	phases := attrs(all(mustID(t, doc, "phases-list"), tag("li")), "data-phase")
	if diff := cmp.Diff([]string{"Queued", "Running", "Requeued", "Running"}, phases); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	// The ended run shows what it cost; the running one its cost so far.
	runs := all(mustID(t, doc, "runs-table"), byAttr("data-dollars", "*"))
	if diff := cmp.Diff([]string{"8.000000", "8.000000"}, attrs(runs, "data-dollars")); diff != "" || !strings.Contains(text(runs[1]), "so far") {
		t.Errorf("runs' cost (-want +got):\n%s%q", diff, text(runs[1]))
	}
	if got := text(mustID(t, doc, "job-where")); got != "Running: rank 0 → n1 GPUs [0 1 2 3]" {
		t.Errorf("where = %q", got)
	}
	// A job that has ended ran there; it runs nowhere now.
	_, doc = get(t, serve(t, newFakeSource(), nil), "/ui/jobs/done")
	if got := text(mustID(t, doc, "job-where")); got != "Ran on: rank 0 → n2 GPUs [4 5]" {
		t.Errorf("where, ended = %q", got)
	}
	_, doc = get(t, serve(t, newFakeSource(), nil), "/ui/jobs/vision-a")
	if c := mustID(t, doc, "job-cost"); attr(c, "data-recorded") != "1.000000" || attr(c, "data-in-flight") != "4.000000" {
		t.Errorf("live totals split into recorded %s and in flight %s, want 1 and 4", attr(c, "data-recorded"), attr(c, "data-in-flight"))
	}
	_, doc = get(t, serve(t, newFakeSource(), nil), "/ui/jobs/vision-b")
	if got := attr(mustID(t, doc, "job-waiting"), "data-reason"); got != "QuotaExceeded" {
		t.Errorf("waiting reason %q, want QuotaExceeded", got)
	}
}

func TestTeamPages(t *testing.T) {
	code, doc := get(t, serve(t, newFakeSource(), nil), "/ui/teams")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	type row struct{ GPUs, Quota, Month string }
	got := map[string]row{}
	for _, tr := range all(mustID(t, doc, "teams-table"), and(tag("tr"), byAttr("data-team", "*"))) {
		r := row{GPUs: attr(all(tr, byAttr("data-gpus", "*"))[0], "data-gpus"), Month: attr(all(tr, byAttr("data-dollars", "*"))[0], "data-dollars")}
		for _, q := range all(tr, byAttr("data-quota-model", "*")) {
			r.Quota += attr(q, "data-used") + "/" + attr(q, "data-nominal")
		}
		got[attr(tr, "data-team")] = r
	}
	// nlp: $10 spot and $2 on-prem recorded this month (not last
	// month's $24), plus an hour of burst (8 × $3), nlp-train (4 × $2)
	// and nlp-nb (half a GPU, $1) in flight. Its H100 quota counts
	// 4 + 0.5 H100s; the burst runs on A100s.
	want := map[string]row{
		"nlp":      {GPUs: "12.5", Quota: "4.5/8", Month: "45.000000"},
		"research": {GPUs: "0", Month: "0.000000"},
		"vision":   {GPUs: "2.25", Quota: "2.25/2", Month: "4.500000"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}

	_, doc = get(t, serve(t, newFakeSource(), nil), "/ui/teams/nlp")
	cost := mustID(t, doc, "team-cost")
	if c, b := attr(cost, "data-cloud-dollars"), attr(cost, "data-budget"); c != "34.000000" || b != "100.000000" {
		t.Errorf("nlp cloud spend %s of budget %s, want 34 of 100", c, b)
	}
	if got := text(mustID(t, doc, "team-budget")); !strings.Contains(got, "$34.00 of the $100.00 monthly budget") || !strings.Contains(got, "34%") {
		t.Errorf("budget line %q", got)
	}
	running := attrs(all(mustID(t, doc, "team-running"), byAttr("data-job", "*")), "data-job")
	if diff := cmp.Diff([]string{"burst", "nlp-nb", "nlp-train"}, running); diff != "" {
		t.Errorf("nlp running (-want +got):\n%s", diff)
	}
	_, doc = get(t, serve(t, newFakeSource(), nil), "/ui/teams/vision")
	q := all(mustID(t, doc, "quota-table"), and(tag("tr"), byAttr("data-quota-model", "H100")))
	if len(q) != 1 || attr(q[0], "class") != "over" || !strings.Contains(text(q[0]), "borrowing") {
		t.Errorf("vision's H100 quota row should say it borrows: %v", attrs(q, "class"))
	}

	// A user sees their own teams only.
	_, doc = get(t, serve(t, newFakeSource(), nlpUser), "/ui/teams")
	if got := attrs(all(doc, and(tag("tr"), byAttr("data-team", "*"))), "data-team"); !cmp.Equal(got, []string{"nlp"}) {
		t.Errorf("nlp user sees teams %q", got)
	}
	if code, _ := get(t, serve(t, newFakeSource(), nlpUser), "/ui/teams/vision"); code != http.StatusNotFound {
		t.Errorf("nlp user on vision's page: status %d, want 404", code)
	}
}

func TestFragmentationPage(t *testing.T) {
	tests := map[string]struct {
		samples    []FragSample
		wantPoints int
		wantRate   string
	}{
		"history":  {newFakeSource().samples, 3, "1.0000"},
		"one":      {newFakeSource().samples[:1], 1, "0.2000"},
		"none yet": {nil, 0, "0.0000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := newFakeSource()
			src.samples = tc.samples
			code, doc := get(t, serve(t, src, nil), "/ui/fragmentation")
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			now := mustID(t, doc, "frag-now")
			if got := attr(now, "data-rate"); got != tc.wantRate {
				t.Errorf("rate %s, want %s", got, tc.wantRate)
			}
			chart := mustID(t, doc, "frag-chart")
			if got := attr(chart, "data-samples"); got != strconv.Itoa(len(tc.samples)) {
				t.Errorf("chart samples %s, want %d", got, len(tc.samples))
			}
			line := byID(doc, "frag-rate-line")
			if tc.wantPoints == 0 {
				if line != nil {
					t.Error("a line drawn without samples")
				}
				return
			}
			if line == nil {
				t.Fatal("no rate line")
			}
			if n := len(strings.Fields(attr(line, "points"))); n != tc.wantPoints {
				t.Errorf("rate line has %d points, want %d", n, tc.wantPoints)
			}
		})
	}
}

// TestFragChartScale: the rate is drawn 0–100 % bottom to top, free GPUs
// scaled to the most seen, time left to right.
func TestFragChartScale(t *testing.T) {
	c := buildFragChart(newFakeSource().samples, 900, 320)
	pts := strings.Fields(c.RatePoints)
	first, last := strings.Split(pts[0], ","), strings.Split(pts[len(pts)-1], ",")
	want := [][]string{{fmt.Sprint(c.Left) + ".0", fmt.Sprintf("%.1f", float64(c.Bot)-0.2*float64(c.Bot-c.Top))},
		{fmt.Sprint(c.Right) + ".0", fmt.Sprint(c.Top) + ".0"}}
	if diff := cmp.Diff(want, [][]string{first, last}); diff != "" {
		t.Errorf("rate line ends (-want +got):\n%s", diff)
	}
	if free := strings.Fields(c.FreePts); !strings.HasSuffix(free[0], ","+fmt.Sprint(c.Top)+".0") {
		t.Errorf("the most free GPUs (first sample) should touch the top: %s", free[0])
	}
}

func TestLogin(t *testing.T) {
	h := serve(t, newFakeSource(), nil)
	code, doc := get(t, h, "/ui/login")
	if code != http.StatusOK || byID(doc, "login-form") == nil || attr(mustID(t, doc, "token"), "type") != "password" {
		t.Fatalf("login form: status %d", code)
	}
	tests := map[string]struct {
		token      string
		wantStatus int
		wantCookie string
	}{
		"a token":         {"gw_abc.DEF-123", http.StatusSeeOther, "gw_abc.DEF-123"},
		"blank":           {"  ", http.StatusBadRequest, ""},
		"a space inside":  {"abc def", http.StatusBadRequest, ""},
		"a semicolon":     {"abc;def", http.StatusBadRequest, ""},
		"over the length": {strings.Repeat("a", maxTokenLen+1), http.StatusBadRequest, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {tc.token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			cookies := rec.Result().Cookies()
			if tc.wantCookie == "" {
				if len(cookies) != 0 {
					t.Errorf("cookies set on a refused token: %v", cookies)
				}
				doc, _ := html.Parse(rec.Body)
				if byID(doc, "login-error") == nil {
					t.Error("no error shown")
				}
				return
			}
			if loc := rec.Header().Get("Location"); loc != "/ui/" {
				t.Errorf("redirect to %q, want /ui/", loc)
			}
			if len(cookies) != 1 {
				t.Fatalf("cookies %v, want one", cookies)
			}
			c := cookies[0]
			if c.Name != CookieName || c.Value != tc.wantCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
				t.Errorf("cookie %+v", c)
			}
		})
	}
	// With a verifier (the user API's authentication) a token it refuses
	// sets no cookie and the form says why.
	verified, err := New(Options{Source: newFakeSource(), Prefix: "/ui/", Verify: func(r *http.Request, token string) error {
		if token != "good" {
			return errors.New("unknown token gw_1234")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]int{"good": http.StatusSeeOther, "revoked": http.StatusUnauthorized} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader("token="+token))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		verified.ServeHTTP(rec, req)
		if rec.Code != want || (len(rec.Result().Cookies()) == 1) != (want == http.StatusSeeOther) {
			t.Errorf("verified sign-in with %s: status %d, cookies %v; want %d", token, rec.Code, rec.Result().Cookies(), want)
		}
		if want == http.StatusUnauthorized {
			doc, _ := html.Parse(rec.Body)
			if got := text(mustID(t, doc, "login-error")); got != "The token was not accepted: unknown token gw_1234" {
				t.Errorf("refusal reads %q", got)
			}
		}
	}
	// Over TLS (here: behind a proxy that says so) the cookie is Secure.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader("token=t"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	h.ServeHTTP(rec, req)
	if c := rec.Result().Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("cookie over TLS %v, want Secure", c)
	}
	// A form posted from another site signs no one in or out.
	for _, path := range []string{"/ui/login", "/ui/logout"} {
		rec = httptest.NewRecorder()
		req = httptest.NewRequest(http.MethodPost, path, strings.NewReader("token=t"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
			t.Errorf("%s from another site: status %d, cookies %v; want 403, none", path, rec.Code, rec.Result().Cookies())
		}
	}
	// Sign out clears it.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ui/logout", nil))
	if c := rec.Result().Cookies(); rec.Code != http.StatusSeeOther || len(c) != 1 || c[0].MaxAge >= 0 || c[0].Name != CookieName {
		t.Errorf("logout: status %d, cookies %v", rec.Code, c)
	}
}

// TestLayout: links under the prefix, the viewer named, security headers,
// refresh on unless asked off, the assets served.
func TestLayout(t *testing.T) {
	h := serve(t, newFakeSource(), nlpUser)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/queue", nil))
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	doc, _ := html.Parse(rec.Body)
	if got := attr(mustID(t, doc, "nav-teams"), "href"); got != "/ui/teams" {
		t.Errorf("teams link %q", got)
	}
	if got := attr(mustID(t, doc, "nav-queue"), "aria-current"); got != "page" {
		t.Errorf("current page not marked: %q", got)
	}
	if got := text(mustID(t, doc, "viewer")); !strings.Contains(got, "ana · nlp") {
		t.Errorf("viewer %q", got)
	}
	body := all(doc, tag("body"))[0]
	if got := attr(body, "data-refresh"); got != "5" {
		t.Errorf("refresh %s, want 5", got)
	}
	_, doc = get(t, h, "/ui/queue?refresh=0")
	if got := attr(all(doc, tag("body"))[0], "data-refresh"); got != "0" {
		t.Errorf("refresh=0: data-refresh %s", got)
	}
	for _, p := range []string{"/ui/static/style.css", "/ui/static/refresh.js"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("%s: status %d, %d bytes", p, rec.Code, rec.Body.Len())
		}
	}
	if code, _ := get(t, h, "/ui/nothing-here"); code != http.StatusNotFound {
		t.Errorf("unknown page: status %d", code)
	}
}

// TestSourceDown: a page whose source fails says so, with status 503,
// and leaves the error (which may name addresses and credentials) to the
// log.
func TestSourceDown(t *testing.T) {
	src := newFakeSource()
	src.err = fmt.Errorf("dial redis://gangway:s3cret@10.0.0.1:6379: %w", errDown)
	for _, p := range []string{"/ui/", "/ui/queue", "/ui/jobs", "/ui/jobs/nlp-train", "/ui/teams", "/ui/fragmentation"} {
		code, doc := get(t, serve(t, src, nil), p)
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d, want 503", p, code)
			continue
		}
		msg := text(mustID(t, doc, "error"))
		if !strings.Contains(msg, "Cannot") || !strings.Contains(msg, "log says why") || strings.Contains(msg, "s3cret") || strings.Contains(msg, "10.0.0.1") {
			t.Errorf("%s: error %q: want what failed, without the error's text", p, msg)
		}
	}
}

func TestJobsPage(t *testing.T) {
	_, doc := get(t, serve(t, newFakeSource(), &client.Identity{User: "vic", Teams: []string{"vision"}}), "/ui/jobs")
	rows := all(mustID(t, doc, "jobs-table"), and(tag("tr"), byAttr("data-job", "*")))
	if diff := cmp.Diff([]string{"vision-a"}, attrs(rows, "data-job")); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if got := attr(mustID(t, doc, "jobs-count"), "data-hidden"); got != "3" {
		t.Errorf("hidden %s, want 3", got)
	}
}

func TestNew(t *testing.T) {
	tests := map[string]struct {
		o       Options
		wantErr string
	}{
		"no source":     {Options{}, "Options.Source is required"},
		"bad prefix":    {Options{Source: newFakeSource(), Prefix: "ui"}, `Options.Prefix "ui" must start and end with /`},
		"root":          {Options{Source: newFakeSource()}, ""},
		"with a prefix": {Options{Source: newFakeSource(), Prefix: "/ui/"}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.o)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("New: %v, want %q", err, tc.wantErr)
			}
		})
	}
	h, _ := New(Options{Source: newFakeSource()})
	if code, doc := get(t, h, "/"); code != http.StatusOK || attr(mustID(t, doc, "nav-queue"), "href") != "/queue" {
		t.Errorf("mounted at /: status %d", code)
	}
}

func TestFragRing(t *testing.T) {
	r := NewFragRing(3)
	var want []int
	for i := range 7 {
		r.Add(FragSample{FreeGPUs: i})
		want = append(want, i)
		if len(want) > 3 {
			want = want[1:]
		}
		var got []int
		for _, s := range r.Samples() {
			got = append(got, s.FreeGPUs)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("after %d adds (-want +got):\n%s", i+1, diff)
		}
	}
}

type fakeLedger []gangway.UsageSegment

func (l fakeLedger) Segments(_ context.Context, since, until time.Time) ([]gangway.UsageSegment, error) {
	var out []gangway.UsageSegment
	for _, s := range l {
		if s.End.After(since) && s.Start.Before(until) {
			out = append(out, s)
		}
	}
	return out, nil
}

// TestBackendUsage: a run the ledger holds is counted once, from the
// ledger, even while its allocation is not yet released.
func TestBackendUsage(t *testing.T) {
	ended := gangway.UsageSegment{JobID: "a", Attempt: 1, Team: "nlp", Pool: "onprem", CapacityType: gangway.CapacityOnPrem,
		GPUs: 2, Start: t0.Add(-time.Hour), End: t0.Add(-time.Minute), PricePerGPUHour: 1}
	running := []gangway.UsageSegment{
		{JobID: "a", Attempt: 1, Team: "nlp", Pool: "onprem", CapacityType: gangway.CapacityOnPrem, GPUs: 2, Start: t0.Add(-time.Hour), End: t0, PricePerGPUHour: 1},
		{JobID: "b", Attempt: 1, Team: "nlp", Pool: "onprem", CapacityType: gangway.CapacityOnPrem, GPUs: 1, Start: t0.Add(-time.Hour), End: t0, PricePerGPUHour: 1},
	}
	for name, tc := range map[string]struct {
		b         *Backend
		wantTotal float64
	}{
		"with a ledger": {&Backend{Ledger: fakeLedger{ended}}, ended.Dollars() + running[1].Dollars()},
		"without":       {&Backend{}, running[0].Dollars() + running[1].Dollars()},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := tc.b.Usage(t.Context(), accounting.Query{By: gangway.CostByTeam, Since: monthStart(t0), Until: t0, Running: running})
			if err != nil {
				t.Fatal(err)
			}
			if s.Total.TotalDollars != tc.wantTotal {
				t.Errorf("total %v, want %v", s.Total.TotalDollars, tc.wantTotal)
			}
		})
	}
}

// TestMapMIG: a MIG device is a cell of its own, named with its profile
// and parent GPU; the team holding it counts its share of the parent.
func TestMapMIG(t *testing.T) {
	src := newFakeSource()
	n := gangway.Node{ID: "m1", Pool: "onprem", GPUs: []gangway.GPU{
		{Index: 0, Model: "H100", Healthy: true, MIGProfile: "3g.40gb", ParentIndex: 0, ParentUUID: "GPU-a"},
		{Index: 1, Model: "H100", Healthy: true, MIGProfile: "3g.40gb", ParentIndex: 0, ParentUUID: "GPU-a"}}}
	src.fleet = Fleet{Snapshot: capacity.Snapshot{Now: t0,
		Nodes: []gangway.NodeStatus{{Node: n, State: gangway.NodeReady, LastHeartbeat: t0, Allocated: map[int]gangway.JobID{1: "m"}}},
		Allocations: []gangway.Assignment{{JobID: "m", Team: "nlp", At: t0,
			Members: []gangway.Member{{NodeID: "m1", Pool: "onprem", GPUs: []int{1}, MIG: "3g.40gb", MIGMilli: 428}}}}}}
	_, doc := get(t, serve(t, src, nil), "/ui/")
	cells := all(doc, byAttr("data-mig", "3g.40gb"))
	if len(cells) != 2 || attr(cells[1], "aria-label") != "m1 GPU 1 (MIG 3g.40gb on GPU 0): held by team nlp, job m" {
		t.Errorf("MIG cells %q", attrs(cells, "aria-label"))
	}
	row := all(mustID(t, doc, "team-gpus"), and(tag("tr"), byAttr("data-team", "nlp")))
	if len(row) != 1 || attr(all(row[0], byAttr("data-gpus", "*"))[0], "data-gpus") != "0.43" {
		t.Errorf("nlp's GPUs in the legend: want 0.43 (one 3g.40gb device)")
	}
}

// signedOutFleet and signedOutJobs are the user API's collaborators in
// TestSignedOutBrowser: it never gets as far as using them.
type signedOutFleet struct{}

func (signedOutFleet) Allocations(context.Context) ([]gangway.Assignment, error) { return nil, nil }
func (signedOutFleet) CloudOffers(context.Context) ([]gangway.Offer, error)      { return nil, nil }

type signedOutJobs struct{}

func (signedOutJobs) Describe(context.Context, gangway.JobID) (jobs.Description, error) {
	return jobs.Description{}, nil
}

type oneToken struct{}

func (oneToken) Verify(_ context.Context, token string) (api.Identity, error) {
	if token != "good" {
		return api.Identity{}, errors.New("unknown token")
	}
	return api.Identity{User: "alice", Admin: true}, nil
}

// TestSignedOutBrowser: mounted behind the user API as the server mounts
// it, a page asked for without valid credentials is, for a browser, a 401
// page with the sign-in form and a line saying why; for an API client (it
// accepts JSON, or says nothing) the API's JSON 401. With the token, the
// page itself.
func TestSignedOutBrowser(t *testing.T) {
	h, err := New(Options{Source: newFakeSource(), Prefix: "/ui/", Identity: api.IdentityFrom})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Client: client.New(nil, nil), Jobs: signedOutJobs{}, Fleet: signedOutFleet{},
		Tokens: []api.TokenVerifier{oneToken{}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range PublicPaths {
		srv.MountPublic("/ui/"+p, h)
	}
	srv.MountPages("/ui/", h, h.SignedOut)
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, tc := range []struct {
		name, path, accept, cookie string
		wantStatus                 int
		wantHTML                   bool
		wantNotice                 string
	}{
		{"browser, signed out", "/ui/", browser, "", http.StatusUnauthorized, true, "Sign in to see this page (token required"},
		{"browser, another page", "/ui/queue", browser, "", http.StatusUnauthorized, true, "Sign in to see this page"},
		{"browser, a refused token", "/ui/", browser, "revoked", http.StatusUnauthorized, true, "unknown token"},
		{"API client", "/ui/", "application/json", "", http.StatusUnauthorized, false, ""},
		{"no Accept", "/ui/queue", "", "", http.StatusUnauthorized, false, ""},
		{"HTML refused", "/ui/", "text/html;q=0, application/json", "", http.StatusUnauthorized, false, ""},
		{"signed in", "/ui/", browser, "good", http.StatusOK, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: CookieName, Value: tc.cookie})
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			ct := rec.Header().Get("Content-Type")
			if rec.Code != tc.wantStatus || strings.HasPrefix(ct, "text/html") != tc.wantHTML {
				t.Fatalf("status %d, Content-Type %q; want %d, HTML %v:\n%s", rec.Code, ct, tc.wantStatus, tc.wantHTML, rec.Body)
			}
			if !tc.wantHTML {
				var e struct{ Code string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != "unauthenticated" {
					t.Errorf("body %s, want the API's JSON 401 (%v)", rec.Body, err)
				}
				return
			}
			doc, err := html.Parse(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNotice == "" {
				if byID(doc, "login-notice") != nil {
					t.Error("a signed-in page shows the sign-in notice")
				}
				return
			}
			mustID(t, doc, "login-form")
			if got := text(mustID(t, doc, "login-notice")); !strings.Contains(got, tc.wantNotice) {
				t.Errorf("notice %q, want it to say %q", got, tc.wantNotice)
			}
		})
	}
}
