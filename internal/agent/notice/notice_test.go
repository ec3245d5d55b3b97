package notice

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/internal/agent"
)

// fakeIMDS speaks IMDSv2: a token from PUT /latest/api/token, required on
// every GET; the notice paths 404 until the test sets a body.
type fakeIMDS struct {
	mu        sync.Mutex
	token     string
	tokens    int // tokens handed out
	gets      int // notice GETs answered with a valid token
	action    string
	rebalance string
	unauthed  int // GETs refused for want of a valid token
}

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == awsTokenPath {
		if r.Method != http.MethodPut || r.Header.Get(awsTokenTTLHdr) == "" {
			http.Error(w, "bad token request", http.StatusBadRequest)
			return
		}
		f.tokens++
		f.token = fmt.Sprintf("token-%d", f.tokens)
		fmt.Fprint(w, f.token)
		return
	}
	if r.Method != http.MethodGet || f.token == "" || r.Header.Get(awsTokenHdr) != f.token {
		f.unauthed++
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	f.gets++
	var body string
	switch r.URL.Path {
	case awsActionPath:
		body = f.action
	case awsRebalancePath:
		body = f.rebalance
	}
	if body == "" {
		http.NotFound(w, r)
		return
	}
	fmt.Fprint(w, body)
}

func (f *fakeIMDS) set(fn func(*fakeIMDS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// afterGets waits until the service has answered n more notice GETs: the
// watcher has looked again and had nothing new to send.
func (f *fakeIMDS) afterGets(t *testing.T, n int) {
	t.Helper()
	f.mu.Lock()
	want := f.gets + n
	f.mu.Unlock()
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.gets >= want })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func next(t *testing.T, ch <-chan agent.Notice) agent.Notice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5s")
		return agent.Notice{}
	}
}

func none(t *testing.T, ch <-chan agent.Notice) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("unexpected notice %+v", n)
	default:
	}
}

// watch runs w until the test ends.
func watch(t *testing.T, w Watcher) <-chan agent.Notice {
	t.Helper()
	ch := make(chan agent.Notice)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Watch(ctx, ch) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	})
	return ch
}

func TestAWS(t *testing.T) {
	imds := &fakeIMDS{}
	srv := httptest.NewServer(imds)
	defer srv.Close()
	ch := watch(t, NewAWS(Options{AWSBaseURL: srv.URL, AWSInterval: 5 * time.Millisecond}))

	imds.afterGets(t, 4) // both paths 404, twice: nothing to say
	none(t, ch)

	imds.set(func(f *fakeIMDS) { f.rebalance = `{"noticeTime": "2026-11-30T10:00:00Z"}` })
	want := agent.Notice{Kind: agent.NoticeRebalance, Source: "aws-imds", Detail: "rebalance recommendation 2026-11-30T10:00:00Z"}
	if diff := cmp.Diff(want, next(t, ch)); diff != "" {
		t.Errorf("rebalance notice (-want +got):\n%s", diff)
	}

	// The service forgets its token (a restart): the watcher gets another.
	imds.set(func(f *fakeIMDS) { f.token = "" })
	imds.set(func(f *fakeIMDS) { f.action = `{"action": "terminate", "time": "2026-11-30T10:02:00Z"}` })
	want = agent.Notice{Kind: agent.NoticeInterruption, Deadline: time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC),
		Source: "aws-imds", Detail: "spot instance-action terminate"}
	if diff := cmp.Diff(want, next(t, ch)); diff != "" {
		t.Errorf("interruption notice (-want +got):\n%s", diff)
	}

	imds.afterGets(t, 4) // the same notices again: sent once
	none(t, ch)

	// AWS may move the time: that is news.
	imds.set(func(f *fakeIMDS) { f.action = `{"action": "stop", "time": "2026-11-30T10:03:00Z"}` })
	if got := next(t, ch); got.Detail != "spot instance-action stop" || !got.Deadline.Equal(time.Date(2026, 11, 30, 10, 3, 0, 0, time.UTC)) {
		t.Errorf("changed notice %+v", got)
	}
	imds.set(func(f *fakeIMDS) {
		if f.tokens != 2 || f.unauthed != 1 {
			t.Errorf("%d tokens fetched, %d GETs refused; want 2 and 1 (one token per service session)", f.tokens, f.unauthed)
		}
	})
}

// fakeGCE speaks the GCE metadata server: the Metadata-Flavor header both
// ways.
type fakeGCE struct {
	mu          sync.Mutex
	preempted   string
	maintenance string
	gets        int
}

func (f *fakeGCE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set(gcpFlavorHdr, gcpFlavor)
	if r.Header.Get(gcpFlavorHdr) != gcpFlavor {
		http.Error(w, "missing Metadata-Flavor:Google header", http.StatusForbidden)
		return
	}
	f.gets++
	switch r.URL.Path {
	case gcpPreemptedPath:
		fmt.Fprint(w, f.preempted)
	case gcpMaintenancePath:
		fmt.Fprint(w, f.maintenance)
	case gcpProbePath:
		fmt.Fprint(w, "1234567890")
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeGCE) set(fn func(*fakeGCE)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeGCE) afterGets(t *testing.T, n int) {
	t.Helper()
	f.mu.Lock()
	want := f.gets + n
	f.mu.Unlock()
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.gets >= want })
}

func TestGCP(t *testing.T) {
	gce := &fakeGCE{preempted: "FALSE", maintenance: "NONE"}
	srv := httptest.NewServer(gce)
	defer srv.Close()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ch := watch(t, NewGCP(Options{GCPBaseURL: srv.URL, GCPInterval: 5 * time.Millisecond, Now: func() time.Time { return now }}))

	gce.afterGets(t, 4)
	none(t, ch)

	gce.set(func(f *fakeGCE) { f.maintenance = "TERMINATE_ON_HOST_MAINTENANCE" })
	want := agent.Notice{Kind: agent.NoticeMaintenance, Source: "gcp-metadata", Detail: "maintenance-event TERMINATE_ON_HOST_MAINTENANCE"}
	if diff := cmp.Diff(want, next(t, ch)); diff != "" {
		t.Errorf("maintenance notice (-want +got):\n%s", diff)
	}
	gce.afterGets(t, 4)
	none(t, ch)

	gce.set(func(f *fakeGCE) { f.preempted = "TRUE" })
	want = agent.Notice{Kind: agent.NoticeInterruption, Deadline: now.Add(30 * time.Second), Source: "gcp-metadata",
		Detail: "instance preempted"}
	if diff := cmp.Diff(want, next(t, ch)); diff != "" {
		t.Errorf("preemption notice (-want +got):\n%s", diff)
	}
	gce.afterGets(t, 4)
	none(t, ch)

	// A maintenance event that ends and comes back is news again.
	gce.set(func(f *fakeGCE) { f.maintenance = "NONE" })
	gce.afterGets(t, 2)
	gce.set(func(f *fakeGCE) { f.maintenance = "TERMINATE_ON_HOST_MAINTENANCE" })
	if got := next(t, ch); got.Kind != agent.NoticeMaintenance {
		t.Errorf("second maintenance notice %+v", got)
	}
}

func TestDetect(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // connection refused
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer hanging.Close()
	defer close(hang)
	notFound := httptest.NewServer(http.NotFoundHandler()) // some HTTP server, not a cloud's
	defer notFound.Close()
	imds := httptest.NewServer(&fakeIMDS{})
	defer imds.Close()
	gce := httptest.NewServer(&fakeGCE{})
	defer gce.Close()

	cases := map[string]struct {
		aws, gcp string
		want     string // watcher name, "" for none
	}{
		"on-prem: nothing listens":     {aws: closed.URL, gcp: closed.URL},
		"on-prem: nothing answers":     {aws: hanging.URL, gcp: hanging.URL},
		"on-prem: an unrelated server": {aws: notFound.URL, gcp: notFound.URL},
		"aws":                          {aws: imds.URL, gcp: closed.URL, want: "aws"},
		"gcp":                          {aws: hanging.URL, gcp: gce.URL, want: "gcp"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := Detect(context.Background(), Options{AWSBaseURL: tc.aws, GCPBaseURL: tc.gcp, ProbeTimeout: 200 * time.Millisecond})
			got := ""
			if w != nil {
				got = w.Name()
			}
			if got != tc.want {
				t.Errorf("Detect found %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for kind, want := range map[string]string{"aws": "aws", "gcp": "gcp", "none": ""} {
		w, err := New(kind, Options{})
		if err != nil {
			t.Fatalf("New(%q): %v", kind, err)
		}
		got := ""
		if w != nil {
			got = w.Name()
		}
		if got != want {
			t.Errorf("New(%q) = %q, want %q", kind, got, want)
		}
	}
	if _, err := New("azure", Options{}); err == nil {
		t.Error(`New("azure") succeeded`)
	}
}

func TestStartNoneAndUnknown(t *testing.T) {
	ch, err := Start(t.Context(), "none", Options{})
	if ch != nil || err != nil {
		t.Errorf(`Start("none") = %v, %v; want nothing to watch`, ch, err)
	}
	if _, err := Start(t.Context(), "azure", Options{}); err == nil {
		t.Error(`Start("azure"): no error`)
	}
}
