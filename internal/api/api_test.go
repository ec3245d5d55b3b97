package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
)

// TestRoutesMatchOpenAPI: every route the server serves is in
// openapi.yaml, with its method, and every operation there is served.
func TestRoutesMatchOpenAPI(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	s := newTestServer(t).srv
	served := slices.Clone(s.routes)
	slices.Sort(documented)
	slices.Sort(served)
	if diff := cmp.Diff(documented, served); diff != "" {
		t.Errorf("routes (-openapi.yaml +served):\n%s", diff)
	}
}

// testServer is an API over fake jobs and a fake view, with a token file
// holding alice (team ml), bob (team vision) and root (admin).
type testServer struct {
	srv    *Server
	http   *httptest.Server
	jobs   *fakeJobs
	view   *fakeView
	tokens map[string]string // user → token
	audit  *bytes.Buffer
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	ts := &testServer{tokens: map[string]string{}, audit: &bytes.Buffer{},
		jobs: newFakeJobs(
			gangway.JobSpec{Name: "ml-train", Team: "ml"},
			gangway.JobSpec{Name: "vision-train", Team: "vision"}),
		view: &fakeView{
			allocs: []gangway.Assignment{
				{JobID: "ml-train", Team: "ml", Attempt: 1, Members: []gangway.Member{{NodeID: "n1", Pool: "onprem", GPUs: []int{0}}}},
				{JobID: "vision-train", Team: "vision", Attempt: 1, Members: []gangway.Member{{NodeID: "n1", Pool: "onprem", GPUs: []int{1}}}},
			},
			logs: map[gangway.JobID][]gangway.LogLine{
				"vision-train": {{ID: "1-0", Text: "vision secret"}},
				"ml-train":     {{ID: "1-0", Text: "step 1"}, {ID: "2-0", Text: "step 2"}},
			}},
	}
	for _, u := range []struct {
		user  string
		teams []string
		admin bool
	}{{"alice", []string{"ml"}, false}, {"bob", []string{"vision"}, false}, {"root", nil, true}} {
		tok, err := CreateToken(path, u.user, u.teams, u.admin, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ts.tokens[u.user] = tok
	}
	tf, err := OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	ledger := fakeLedger{segs: []gangway.UsageSegment{
		{JobID: "ml-old", Attempt: 1, Team: "ml", Pool: "onprem", CapacityType: gangway.CapacityOnPrem, GPUs: 2, Start: t0, End: t0.Add(time.Hour), PricePerGPUHour: 2},
		{JobID: "vision-old", Attempt: 1, Team: "vision", Pool: "onprem", CapacityType: gangway.CapacityOnPrem, GPUs: 1, Start: t0, End: t0.Add(time.Hour), PricePerGPUHour: 2},
	}}
	ts.srv, err = New(Options{Client: client.New(ts.jobs, ts.view), Jobs: ts.jobs, Fleet: ts.view, Ledger: ledger,
		Tokens: []TokenVerifier{tf}, Log: slog.New(slog.NewTextHandler(ts.audit, nil)),
		Now: func() time.Time { return t0.Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	ts.http = httptest.NewServer(ts.srv.Handler())
	t.Cleanup(ts.http.Close)
	return ts
}

// call sends a request as user ("" = no credentials) and returns the
// status and body.
func (ts *testServer) call(t *testing.T, user, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+ts.tokens[user])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

const mlSpec = "name: ml-new\nteam: ml\ncommand: [train]\ngang: {replicas: 1, gpusPerReplica: 1}\n"
const visionSpec = "name: vision-new\nteam: vision\ncommand: [train]\ngang: {replicas: 1, gpusPerReplica: 1}\n"

// TestAuthorization: who may do what, and what a refusal says.
func TestAuthorization(t *testing.T) {
	tests := map[string]struct {
		user, method, path, body string
		wantStatus               int
		wantParts                []string
	}{
		"no token":                    {"", "GET", "/v1/jobs", "", 401, []string{"token required"}},
		"no token, submit":            {"", "POST", "/v1/jobs", mlSpec, 401, []string{"token required"}},
		"spec is public":              {"", "GET", "/v1/openapi.yaml", "", 200, []string{"openapi: 3"}},
		"health is public":            {"", "GET", "/v1/healthz", "", 200, []string{"ok"}},
		"whoami":                      {"alice", "GET", "/v1/whoami", "", 200, []string{`"user":"alice"`, `"teams":["ml"]`, `"via":"token"`}},
		"submit as own team":          {"alice", "POST", "/v1/jobs", mlSpec, 201, []string{`"jobId":"ml-new"`}},
		"submit as another team":      {"alice", "POST", "/v1/jobs", visionSpec, 403, []string{"user alice is not in team vision", `"code":"forbidden"`}},
		"admin submits for any team":  {"root", "POST", "/v1/jobs", visionSpec, 201, nil},
		"submit a bad spec":           {"alice", "POST", "/v1/jobs", "name: x\n", 400, []string{`"code":"invalid"`, "team", `"problems"`}},
		"submit a taken name":         {"alice", "POST", "/v1/jobs", strings.Replace(mlSpec, "ml-new", "ml-train", 1), 409, []string{"job_exists"}},
		"status of own job":           {"alice", "GET", "/v1/jobs/ml-train", "", 200, []string{`"phase":"Queued"`, `"waitTime":"1m30s"`}},
		"status of another's job":     {"alice", "GET", "/v1/jobs/vision-train", "", 403, []string{"user alice is not in team vision", "vision-train"}},
		"status of an unknown job":    {"alice", "GET", "/v1/jobs/nope", "", 404, []string{`no job named \"nope\"`, "job_not_found"}},
		"why of another's job":        {"alice", "GET", "/v1/jobs/vision-train/why", "", 403, []string{"not in team vision"}},
		"why of own job":              {"alice", "GET", "/v1/jobs/ml-train/why", "", 200, []string{`"phase":"Queued"`}},
		"logs of another's job":       {"alice", "GET", "/v1/jobs/vision-train/logs", "", 403, []string{"not in team vision"}},
		"logs of own job":             {"alice", "GET", "/v1/jobs/ml-train/logs?after=1-0", "", 200, []string{"step 2"}},
		"logs with a bad block":       {"alice", "GET", "/v1/jobs/ml-train/logs?block=1h", "", 400, []string{"block"}},
		"a route with another method": {"alice", "DELETE", "/v1/jobs/ml-train", "", 405, []string{`DELETE /v1/jobs/ml-train: this route takes GET`, `"code":"invalid"`}},
		"no such route":               {"alice", "GET", "/v1/job", "", 404, []string{`no API route /v1/job`, `"code":"not_found"`}},
		"logs after no line id":       {"alice", "GET", "/v1/jobs/ml-train/logs?after=-5", "", 400, []string{`after: want the id of a line read before`, `got \"-5\"`}},
		"cancel another's job":        {"alice", "POST", "/v1/jobs/vision-train/cancel", "", 403, []string{"user alice is not in team vision"}},
		"drain as a user":             {"alice", "POST", "/v1/nodes/n1/drain", "", 403, []string{"user alice is not an admin: drain needs one"}},
		"cordon as a user":            {"bob", "POST", "/v1/nodes/n1/cordon", "", 403, []string{"not an admin"}},
		"admin cordons":               {"root", "POST", "/v1/nodes/n1/cordon", "", 200, []string{`"state":"cordoned"`}},
		"admin cordons a ghost":       {"root", "POST", "/v1/nodes/ghost/cordon", "", 404, []string{`no node named \"ghost\"`}},
		"remove a node as a user":     {"alice", "DELETE", "/v1/nodes/n9", "", 403, []string{"user alice is not an admin: remove-node needs one"}},
		"admin removes a live node": {"root", "DELETE", "/v1/nodes/n1", "", 409,
			[]string{"node in use: n1 is ready, its agent heartbeating", "stop the agent first", `"code":"node_in_use"`}},
		"admin removes a lost node": {"root", "DELETE", "/v1/nodes/n9", "", 200, []string{`"node":"n9"`, `"state":"removed"`}},
		"admin removes a ghost":     {"root", "DELETE", "/v1/nodes/ghost", "", 404, []string{`no node named \"ghost\"`}},
		"cost with a bad window":    {"alice", "GET", "/v1/cost?since=soon", "", 400, []string{"since"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ts := newTestServer(t)
			status, body := ts.call(t, tc.user, tc.method, tc.path, tc.body)
			if status != tc.wantStatus {
				t.Errorf("%s %s as %q: status %d, want %d\n%s", tc.method, tc.path, tc.user, status, tc.wantStatus, body)
			}
			for _, p := range tc.wantParts {
				if !strings.Contains(body, p) {
					t.Errorf("body lacks %q:\n%s", p, body)
				}
			}
			for _, tok := range ts.tokens {
				if strings.Contains(ts.audit.String(), tok) || strings.Contains(body, tok) {
					t.Errorf("a token appears in the log or the answer")
				}
			}
		})
	}
}

// TestAuditLines: every mutating call writes one audit line naming who,
// what and on which job or node; reads write none.
func TestAuditLines(t *testing.T) {
	ts := newTestServer(t)
	ts.call(t, "alice", "GET", "/v1/jobs", "")
	ts.call(t, "alice", "POST", "/v1/jobs", mlSpec)
	ts.call(t, "alice", "POST", "/v1/jobs/vision-train/cancel", "")
	ts.call(t, "root", "POST", "/v1/nodes/n1/drain", "")
	ts.call(t, "", "POST", "/v1/jobs/ml-train/cancel", "")
	var lines []string
	for l := range strings.Lines(ts.audit.String()) {
		if strings.Contains(l, "msg=audit") {
			lines = append(lines, l)
		}
	}
	want := [][]string{
		{"user=alice", "action=submit", "target=ml-new", "outcome=ok"},
		{"user=alice", "action=cancel", "target=vision-train", "outcome=refused", "status=403"},
		{"user=root", "admin=true", "action=drain", "target=n1", "outcome=ok"},
		{`user=""`, "outcome=refused", "status=401"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d:\n%s", len(lines), len(want), ts.audit)
	}
	for i, parts := range want {
		for _, p := range parts {
			if !strings.Contains(lines[i], p) {
				t.Errorf("audit line %d lacks %q: %s", i, p, lines[i])
			}
		}
	}
}

// TestTeamViews: lists, costs and nodes show a user its teams' jobs only.
func TestTeamViews(t *testing.T) {
	ts := newTestServer(t)
	_, body := ts.call(t, "alice", "GET", "/v1/jobs", "")
	var list []client.Summary
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 || list[0].JobID != "ml-train" {
		t.Errorf("alice's list = %s, want ml-train alone", body)
	}
	_, body = ts.call(t, "root", "GET", "/v1/jobs", "")
	if !strings.Contains(body, "vision-train") || !strings.Contains(body, "ml-train") {
		t.Errorf("the admin's list lacks a job: %s", body)
	}

	_, body = ts.call(t, "alice", "GET", "/v1/cost?since=2025-06-01", "")
	var cost client.CostReport
	if err := json.Unmarshal([]byte(body), &cost); err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, r := range cost.Rows {
		groups = append(groups, r.Group)
	}
	if !slices.Equal(groups, []string{"ml"}) {
		t.Errorf("alice's cost rows %v, want ml alone:\n%s", groups, body)
	}
	_, body = ts.call(t, "root", "GET", "/v1/cost?since=2025-06-01&by=team", "")
	if !strings.Contains(body, `"group":"vision"`) {
		t.Errorf("the admin's cost lacks vision: %s", body)
	}

	_, body = ts.call(t, "alice", "GET", "/v1/nodes", "")
	var nodes []client.Node
	if err := json.Unmarshal([]byte(body), &nodes); err != nil || len(nodes) != 2 {
		t.Fatalf("nodes = %s (%v)", body, err)
	}
	if got, want := nodes[0].Allocated, map[int]gangway.JobID{0: "ml-train", 1: otherTeam}; !cmp.Equal(got, want) {
		t.Errorf("alice sees allocations %v, want %v", got, want)
	}
}

// TestCostPricesRunningBurst: a cloud burst still running costs, so far,
// its GPUs at its pool's offer (the view's cloud members carry no price).
func TestCostPricesRunningBurst(t *testing.T) {
	ts := newTestServer(t)
	now := ts.srv.o.Now()
	ts.view.allocs = append(ts.view.allocs, gangway.Assignment{JobID: "ml-burst", Team: "ml", Attempt: 1, At: now.Add(-time.Hour),
		Members: []gangway.Member{{NodeID: "i-1", Pool: "fake-a100-spot", CapacityType: gangway.CapacitySpot, GPUs: []int{0, 1, 2, 3}}}})
	ts.view.offers = []gangway.Offer{{Provider: "fake", Pool: "fake-a100-spot", InstanceType: "a100x8", GPUsPerInstance: 8,
		CapacityType: gangway.CapacitySpot, PricePerHour: 8}}
	_, body := ts.call(t, "alice", "GET", "/v1/cost?since=2025-06-01&by=pool", "")
	var cost client.CostReport
	if err := json.Unmarshal([]byte(body), &cost); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cost.Rows, func(r gangway.CostRow) bool { return r.Group == "fake-a100-spot" })
	if i < 0 {
		t.Fatalf("no fake-a100-spot row: %s", body)
	}
	// One hour on 4 GPUs, a replica of 4 renting a whole $8/h instance:
	// $2 per GPU-hour.
	if got := cost.Rows[i].Dollars.Spot; math.Abs(got-8) > 1e-9 {
		t.Errorf("running burst's spot cost so far $%v, want $8:\n%s", got, body)
	}
}

// TestCookieAndHeader: a browser's cookie works; the header wins over it.
func TestCookieAndHeader(t *testing.T) {
	ts := newTestServer(t)
	whoami := func(header, cookie string) (int, string) {
		req, _ := http.NewRequest("GET", ts.http.URL+"/v1/whoami", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: TokenCookie, Value: cookie})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := whoami("", ts.tokens["bob"]); st != 200 || !strings.Contains(body, `"bob"`) {
		t.Errorf("cookie: %d %s", st, body)
	}
	if st, body := whoami("Bearer "+ts.tokens["alice"], ts.tokens["bob"]); st != 200 || !strings.Contains(body, `"alice"`) {
		t.Errorf("header and cookie: %d %s, want alice", st, body)
	}
	if st, body := whoami("Bearer gw_nope", ""); st != 401 || !strings.Contains(body, "unknown or revoked") {
		t.Errorf("a bad token: %d %s", st, body)
	}
	if st, body := whoami("Basic abc", ""); st != 401 || !strings.Contains(body, "Bearer") {
		t.Errorf("basic auth: %d %s", st, body)
	}
}

// TestMount: a mounted handler is behind the API's authentication and
// sees the caller; a public mount sees it when there is one.
func TestMount(t *testing.T) {
	ts := newTestServer(t)
	who := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := IdentityFrom(r.Context())
		if !ok {
			io.WriteString(w, "nobody")
			return
		}
		io.WriteString(w, id.User)
	})
	ts.srv.Mount("/ui/", who)
	ts.srv.MountPublic("/login/", who)
	for _, tc := range []struct {
		user, path string
		wantStatus int
		want       string
	}{
		{"alice", "/ui/jobs", 200, "alice"},
		{"", "/ui/jobs", 401, "token required"},
		{"", "/login/", 200, "nobody"},
		{"bob", "/login/", 200, "bob"},
	} {
		status, body := ts.call(t, tc.user, "GET", tc.path, "")
		if status != tc.wantStatus || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s as %q = %d %q, want %d with %q", tc.path, tc.user, status, body, tc.wantStatus, tc.want)
		}
	}
}

// TestClientOverAPI: the public client's API transport does what the
// direct one does, and maps refusals to its sentinel errors.
func TestClientOverAPI(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	alice, err := client.NewAPI(client.APIOptions{URL: ts.http.URL, Token: ts.tokens["alice"], Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	spec := gangway.JobSpec{Name: "ml-client", Team: "ml", Command: []string{"train"}, Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1},
		MaxRuntime: gangway.Duration{Duration: time.Hour}, Env: map[string]string{"A": "1"}}
	if id, err := alice.Submit(ctx, spec, client.SubmitOptions{}); err != nil || id != "ml-client" {
		t.Fatalf("Submit = %q, %v", id, err)
	}
	got := ts.jobs.specs["ml-client"]
	want := spec
	want.Default()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the spec the server started (-sent +started):\n%s", diff)
	}
	if _, err := alice.Submit(ctx, spec, client.SubmitOptions{}); !errors.Is(err, client.ErrJobExists) {
		t.Errorf("a second Submit = %v, want ErrJobExists", err)
	}
	other := spec
	other.Name, other.Team = "sneaky", "vision"
	if _, err := alice.Submit(ctx, other, client.SubmitOptions{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("Submit as vision = %v, want ErrForbidden", err)
	}
	if _, err := alice.Status(ctx, "nope"); !errors.Is(err, client.ErrJobNotFound) || err.Error() != `no job named "nope"` {
		t.Errorf("Status of an unknown job = %v", err)
	}
	st, err := alice.Status(ctx, "ml-train")
	if err != nil || st.Phase != gangway.PhaseQueued || st.WaitTime != 90*time.Second {
		t.Errorf("Status = %+v, %v", st, err)
	}
	var lines []string
	if err := alice.FollowLogs(ctx, "ml-train", false, func(l gangway.LogLine) { lines = append(lines, l.Text) }); err != nil ||
		!slices.Equal(lines, []string{"step 1", "step 2"}) {
		t.Errorf("FollowLogs = %v, %v", lines, err)
	}
	if err := alice.Cancel(ctx, "vision-train"); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("Cancel of vision's job = %v, want ErrForbidden", err)
	}
	if err := alice.Cancel(ctx, "ml-train"); err != nil {
		t.Errorf("Cancel = %v", err)
	}
	// The job is now Cancelled: following its logs ends after its lines.
	lines = nil
	if err := alice.FollowLogs(ctx, "ml-train", true, func(l gangway.LogLine) { lines = append(lines, l.Text) }); err != nil || len(lines) != 2 {
		t.Errorf("FollowLogs -f = %v, %v", lines, err)
	}
	if res, err := alice.Result(ctx, "ml-train"); err != nil || res.Phase != gangway.PhaseCancelled {
		t.Errorf("Result = %+v, %v", res, err)
	}
	if _, err := alice.Drain(ctx, "n1"); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("Drain as alice = %v, want ErrForbidden", err)
	}
	root, _ := client.NewAPI(client.APIOptions{URL: ts.http.URL, Token: ts.tokens["root"]})
	asked, err := root.Drain(ctx, "n1")
	if err != nil || !slices.Equal(asked, []string{"ml-train", "vision-train"}) {
		t.Errorf("Drain as root = %v, %v", asked, err)
	}
	anon, _ := client.NewAPI(client.APIOptions{URL: ts.http.URL})
	if _, err := anon.List(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("List without a token = %v, want ErrUnauthenticated", err)
	}
}

// TestTokenFile: tokens verify until their line is deleted; a file that
// does not parse names the line; a missing file is no tokens.
func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	tf, err := OpenTokenFile(path)
	if err != nil {
		t.Fatalf("a missing file: %v", err)
	}
	tok, err := CreateToken(path, "alice@example.com", []string{"ml", "vision"}, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) < 40 {
		t.Errorf("token %q: want gw_ and 256 bits", tok)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), tok) || !strings.Contains(string(data), TokenID(tok)) {
		t.Errorf("the file holds the token, or not its hash:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	id, err := tf.Verify(context.Background(), tok)
	if want := (Identity{User: "alice@example.com", Teams: []string{"ml", "vision"}, Via: "token"}); err != nil || !cmp.Equal(id, want) {
		t.Errorf("Verify = %+v, %v; want %+v", id, err, want)
	}
	if _, err := tf.Verify(context.Background(), "eyJ.a.b"); !errors.Is(err, ErrNotMine) {
		t.Errorf("a JWT: %v, want ErrNotMine", err)
	}
	// Revoked: its line deleted (the file changes size, so it is reread).
	if err := os.WriteFile(path, []byte("# no tokens\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Verify(context.Background(), tok); err == nil {
		t.Error("a revoked token still verifies")
	}
	for text, want := range map[string]string{
		"sha256:abc alice ml user 2025-01-01T00:00:00Z\n":                                   "line 1: hash",
		"# c\nsha256:" + strings.Repeat("ab", 32) + " alice ML user 2025-01-01T00:00:00Z\n": "line 2: teams",
		"sha256:" + strings.Repeat("ab", 32) + " alice ml root 2025-01-01T00:00:00Z\n":      "role",
		"sha256:" + strings.Repeat("ab", 32) + " alice ml\n":                                "want 5 fields",
	} {
		if _, err := ParseTokenFile(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTokenFile(%q) = %v, want an error with %q", text, err, want)
		}
	}
	if _, err := CreateToken(path, "bad user", nil, false, time.Now()); err == nil || !strings.Contains(err.Error(), "--user") {
		t.Errorf("a bad user: %v", err)
	}
	if _, err := CreateToken(path, "bob", []string{"Bad_Team"}, false, time.Now()); err == nil || !strings.Contains(err.Error(), "--teams") {
		t.Errorf("a bad team: %v", err)
	}
}

// TestDecodeSpecTooLarge: a spec past the cap is refused as invalid,
// without the rest of the body being read.
func TestDecodeSpecTooLarge(t *testing.T) {
	body := strings.NewReader(mlSpec + "# " + strings.Repeat("x", 2*gangway.MaxSpecBytes) + "\n")
	_, err := DecodeSpec(body)
	// Only MaxSpecBytes+1 were read: the error names the cap, not a size
	// it does not know.
	want := "job spec is larger than the 262144 (256 KiB) allowed"
	if ae := client.AsAPIError(err); ae.Status != http.StatusBadRequest || err.Error() != want {
		t.Errorf("DecodeSpec of a large spec = %v (status %d), want a 400: %s", err, ae.Status, want)
	}
	if body.Len() < gangway.MaxSpecBytes {
		t.Errorf("read %d bytes past the cap", 2*gangway.MaxSpecBytes-body.Len())
	}
}

// TestSubmitSlowBody: a spec body that stops coming is refused once
// maxSpecRead has passed, not waited for.
func TestSubmitSlowBody(t *testing.T) {
	defer func(d time.Duration) { maxSpecRead = d }(maxSpecRead)
	maxSpecRead = 100 * time.Millisecond
	ts := newTestServer(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(mlSpec[:len(mlSpec)/2])) //nolint:errcheck // the server stops reading
	req, _ := http.NewRequest("POST", ts.http.URL+"/v1/jobs", pr)
	req.Header.Set("Authorization", "Bearer "+ts.tokens["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "read job spec") {
		t.Errorf("a stalled body: %d %s, want 400 read job spec", resp.StatusCode, data)
	}
}

// TestCrossSiteRefused: a cross-site browser POST carrying the cookie is
// refused before it reaches a handler; the same call from the CLI (no
// Origin) or the same site goes through.
func TestCrossSiteRefused(t *testing.T) {
	ts := newTestServer(t)
	cancel := func(origin, site string) int {
		req, _ := http.NewRequest("POST", ts.http.URL+"/v1/jobs/vision-train/cancel", nil)
		req.AddCookie(&http.Cookie{Name: TokenCookie, Value: ts.tokens["bob"]})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := cancel("https://evil.example.com", "cross-site"); got != http.StatusForbidden {
		t.Errorf("a cross-site POST: %d, want 403", got)
	}
	if ts.jobs.cancelled["vision-train"] {
		t.Error("the cross-site POST cancelled the job")
	}
	if got := cancel(ts.http.URL, "same-origin"); got != http.StatusAccepted {
		t.Errorf("a same-origin POST: %d, want 202", got)
	}
}
