package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/redact"
	"github.com/gangwayhq/gangway/placement"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CookieName is the cookie the login page sets: the user API accepts the
// token in it as it accepts an Authorization: Bearer header.
const CookieName = "gangway_token"

// maxTokenLen bounds what the login form accepts.
const maxTokenLen = 4096

// DefaultRefresh is how often a page refreshes itself unless
// Options.Refresh says otherwise.
const DefaultRefresh = 5 * time.Second

// Options configure the web view.
type Options struct {
	// Source is where the pages read (required).
	Source Source
	// Prefix is the path the handler is mounted at ("/ui/"); links are
	// made under it. "" means "/".
	Prefix string
	// Identity returns who is asking, from the request's context (the
	// user API puts it there: api.IdentityFrom); nil, or false, means no
	// identity: the viewer sees everything.
	Identity func(ctx context.Context) (client.Identity, bool)
	// Verify, when set, checks a token the sign-in form is given before
	// the cookie is set (the user API's authentication); the error says
	// why it proves no one, without quoting it.
	Verify func(r *http.Request, token string) error
	// Quotas and Budgets are the teams' GPU quotas and cloud limits from
	// the server's config.
	Quotas  []placement.Quota
	Budgets map[string]accounting.TeamLimit
	// NodeTTL is the dispatch loop's: a ready node silent longer is shown
	// silent and its free GPUs unavailable (dispatch.DefaultNodeTTL when
	// not positive).
	NodeTTL time.Duration
	// Refresh is how often pages refresh themselves (DefaultRefresh when
	// zero; negative: never).
	Refresh time.Duration
	Log     *slog.Logger
}

// Handler serves the web view.
type Handler struct {
	o     Options
	pages map[string]*template.Template
	h     http.Handler
}

// PublicPaths are the paths under the prefix that need no identity — the
// sign-in form, signing out, the stylesheet and script — for a mount that
// authenticates the rest.
var PublicPaths = []string{"login", "logout", "static/"}

// The pages, each a template file that defines "content" inside
// layout.html.
var pageFiles = []string{"map", "queue", "jobs", "job", "teams", "team", "fragmentation", "login", "error"}

// New parses the templates and returns the handler.
func New(o Options) (*Handler, error) {
	if o.Source == nil {
		return nil, errors.New("web: Options.Source is required")
	}
	if o.Prefix == "" {
		o.Prefix = "/"
	}
	if !strings.HasPrefix(o.Prefix, "/") || !strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("web: Options.Prefix %q must start and end with /", o.Prefix)
	}
	if o.NodeTTL <= 0 {
		o.NodeTTL = dispatch.DefaultNodeTTL
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{o: o, pages: map[string]*template.Template{}}
	funcs := h.funcs()
	for _, p := range pageFiles {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", p, err)
		}
		h.pages[p] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("web: static files: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.clusterMap)
	mux.HandleFunc("GET /queue", h.queue)
	mux.HandleFunc("GET /jobs", h.jobs)
	mux.HandleFunc("GET /jobs/{id}", h.job)
	mux.HandleFunc("GET /teams", h.teams)
	mux.HandleFunc("GET /teams/{team}", h.team)
	mux.HandleFunc("GET /fragmentation", h.fragmentation)
	mux.HandleFunc("GET /login", h.loginForm)
	mux.HandleFunc("POST /login", h.login)
	mux.HandleFunc("POST /logout", h.logout)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "No page here.", nil)
	})
	// Signing in and out are the only POSTs: a form posted from another
	// site (signing a user in as someone else, or out) is refused.
	h.h = http.NewCrossOriginProtection().Handler(http.StripPrefix(strings.TrimSuffix(o.Prefix, "/"), mux))
	return h, nil
}

// ServeHTTP serves the pages under Options.Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setHeaders(w)
	h.h.ServeHTTP(w, r)
}

func setHeaders(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
}

// SignedOut answers a browser that asks for a page without credentials
// the user API accepts (reason says what was wrong with them): 401, with
// the sign-in form and a line saying why it is shown. The mount that
// authenticates the pages calls it (api.Server.MountPages); a program
// asking for JSON gets the API's own 401 instead.
func (h *Handler) SignedOut(w http.ResponseWriter, r *http.Request, reason error) {
	setHeaders(w)
	notice := "Sign in to see this page."
	if reason != nil {
		notice = "Sign in to see this page (" + reason.Error() + ")."
	}
	p := h.newPage(r, "login", "Sign in", time.Time{}, loginData{Notice: notice})
	p.Refresh = 0
	h.render(w, r, http.StatusUnauthorized, "login", p)
}

// page is what every template gets: the layout's fields and the page's
// own Data.
type page struct {
	Title  string
	Nav    string
	Prefix string
	Viewer *client.Identity
	// Refresh is the page's refresh period in seconds (0: off).
	Refresh int
	Now     time.Time
	Data    any
}

func (h *Handler) viewer(r *http.Request) *client.Identity {
	if h.o.Identity == nil {
		return nil
	}
	v, ok := h.o.Identity(r.Context())
	if !ok {
		return nil
	}
	return &v
}

func (h *Handler) newPage(r *http.Request, nav, title string, now time.Time, data any) page {
	p := page{Title: title, Nav: nav, Prefix: h.o.Prefix, Viewer: h.viewer(r), Now: now, Data: data}
	if h.o.Refresh > 0 && r.URL.Query().Get("refresh") != "0" {
		p.Refresh = max(int(h.o.Refresh/time.Second), 1)
	}
	return p
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	var buf bytes.Buffer
	if err := h.pages[name].Execute(&buf, p); err != nil {
		h.o.Log.Error("web view: render", "page", name, "path", r.URL.Path, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page. err, if any, goes to the server's log,
// not to the page: what fails inside (a Redis or Temporal address, a
// query) is the operators' to read, not every user's.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		h.o.Log.Warn("web view: read failed", "path", r.URL.Path, "status", status, "error", redact.Error(err))
		msg += " The server's log says why."
	}
	p := h.newPage(r, "", http.StatusText(status), time.Time{}, msg)
	p.Refresh = 0
	h.render(w, r, status, "error", p)
}

func (h *Handler) fleet(w http.ResponseWriter, r *http.Request) (Fleet, bool) {
	f, err := h.o.Source.Fleet(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, "Cannot read the fleet view.", err)
		return Fleet{}, false
	}
	return f, true
}

func (h *Handler) palette(f Fleet) palette {
	return newPalette(knownTeams(f, h.teamConfig()))
}

func (h *Handler) teamConfig() teamConfig {
	return teamConfig{Quotas: h.o.Quotas, Budgets: h.o.Budgets}
}

func (h *Handler) clusterMap(w http.ResponseWriter, r *http.Request) {
	f, ok := h.fleet(w, r)
	if !ok {
		return
	}
	m := buildMap(f, scopeOf(h.viewer(r)), h.palette(f), h.o.NodeTTL)
	h.render(w, r, http.StatusOK, "map", h.newPage(r, "map", "Cluster map", f.Now, m))
}

func (h *Handler) queue(w http.ResponseWriter, r *http.Request) {
	f, ok := h.fleet(w, r)
	if !ok {
		return
	}
	q := buildQueue(f, scopeOf(h.viewer(r)), h.palette(f))
	h.render(w, r, http.StatusOK, "queue", h.newPage(r, "queue", "Queue", f.Now, q))
}

// jobList is the jobs page's data.
type jobList struct {
	Jobs   []client.Summary
	Hidden int
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request) {
	list, err := h.o.Source.Jobs(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, "Cannot list the jobs.", err)
		return
	}
	sc := scopeOf(h.viewer(r))
	var d jobList
	for _, j := range list {
		if sc.sees(j.Team) {
			d.Jobs = append(d.Jobs, j)
		} else {
			d.Hidden++
		}
	}
	h.render(w, r, http.StatusOK, "jobs", h.newPage(r, "jobs", "Jobs", time.Time{}, d))
}

// jobPage is one job's page data.
type jobPage struct {
	client.JobStatus
	Class string
	// Total is what the job has cost, the run holding GPUs now up to
	// now: Recorded for the runs that ended plus InFlight for that run.
	Total, Recorded, InFlight float64
	// Where says how the job holds its assignment: "Running" on it,
	// "Ran on" it (ended), "Last placed" (waiting again).
	Where string
	// Checkpoints are the checkpoints the job's runs left or resumed
	// from, oldest first.
	Checkpoints []checkpointRow
	// WaitsFor are the jobs its waiting record names that the viewer may
	// see; HiddenWaitsFor counts the others.
	WaitsFor       []gangway.JobID
	HiddenWaitsFor int
}

type checkpointRow struct {
	Attempt int
	Use     string // "left" or "resumed from"
	ID      string
	Step    string
	At      time.Time
	Bytes   int64
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := h.o.Source.Job(r.Context(), id)
	switch {
	case errors.Is(err, client.ErrJobNotFound):
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("No job named %q.", id), nil)
		return
	case err != nil:
		h.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("Cannot read job %q.", id), err)
		return
	}
	if !scopeOf(h.viewer(r)).sees(st.Team) {
		// Not found, as for a job that does not exist: a user learns
		// nothing of other teams' jobs.
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("No job named %q.", id), nil)
		return
	}
	f, ok := h.fleet(w, r)
	if !ok {
		return
	}
	d := jobPage{JobStatus: st, Class: h.palette(f).class(st.Team), Where: "Last placed"}
	switch {
	case st.Phase.Terminal():
		d.Where = "Ran on"
	case st.Phase == gangway.PhaseRunning || st.Phase == gangway.PhasePlaced:
		d.Where = "Running"
	}
	switch n := len(st.Attempts); {
	case st.Phase.Terminal():
		d.Total = st.Dollars
	case !st.AsOf.IsZero():
		// Live totals (client.JobStatus.Live) include the open run's cost.
		d.Total = st.Dollars
		if n > 0 && st.Attempts[n-1].EndedAt.IsZero() {
			d.InFlight = st.Attempts[n-1].Dollars
		}
	default:
		d.InFlight = inFlightDollars(f, st.JobID, st.Assignment)
		d.Total = st.Dollars + d.InFlight
	}
	d.Recorded = d.Total - d.InFlight
	if w := st.Waiting; w != nil {
		d.WaitsFor, d.HiddenWaitsFor = blockers(f, scopeOf(h.viewer(r)), w.WaitsFor)
	}
	for _, a := range st.Attempts {
		if c := a.ResumedFrom; c != nil {
			d.Checkpoints = append(d.Checkpoints, checkpointRow{Attempt: a.Attempt, Use: "resumed from", ID: c.ID, Step: step(c.Step), At: c.At, Bytes: c.Bytes})
		}
		if c := a.Checkpoint; c != nil {
			d.Checkpoints = append(d.Checkpoints, checkpointRow{Attempt: a.Attempt, Use: "left", ID: c.ID, Step: step(c.Step), At: c.At, Bytes: c.Bytes})
		}
	}
	h.render(w, r, http.StatusOK, "job", h.newPage(r, "jobs", "Job "+st.JobID, f.Now, d))
}

func step(s *int64) string {
	if s == nil {
		return ""
	}
	return fmt.Sprint(*s)
}

func (h *Handler) teamViews(w http.ResponseWriter, r *http.Request) (Fleet, []teamView, bool) {
	f, ok := h.fleet(w, r)
	if !ok {
		return f, nil, false
	}
	usage, err := h.o.Source.Usage(r.Context(), monthQuery(f))
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, "Cannot read the usage ledger.", err)
		return f, nil, false
	}
	return f, buildTeams(f, h.teamConfig(), usage, scopeOf(h.viewer(r)), h.palette(f)), true
}

func (h *Handler) teams(w http.ResponseWriter, r *http.Request) {
	f, ts, ok := h.teamViews(w, r)
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "teams", h.newPage(r, "teams", "Teams", f.Now, ts))
}

func (h *Handler) team(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("team")
	f, ts, ok := h.teamViews(w, r)
	if !ok {
		return
	}
	i := slices.IndexFunc(ts, func(t teamView) bool { return t.Team == name })
	if i < 0 {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("No team named %q.", name), nil)
		return
	}
	h.render(w, r, http.StatusOK, "team", h.newPage(r, "teams", "Team "+name, f.Now, ts[i]))
}

// The fragmentation chart's size in SVG units (it scales to the page).
const chartWidth, chartHeight = 900, 320

func (h *Handler) fragmentation(w http.ResponseWriter, r *http.Request) {
	samples, err := h.o.Source.Fragmentation(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, "Cannot read the fragmentation history.", err)
		return
	}
	c := buildFragChart(samples, chartWidth, chartHeight)
	h.render(w, r, http.StatusOK, "fragmentation", h.newPage(r, "fragmentation", "Fragmentation", c.To, c))
}

// loginData is the login page's data.
type loginData struct {
	Error string
	// Notice says why the form is shown instead of the page asked for.
	Notice string
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(r, "login", "Sign in", time.Time{}, loginData{})
	p.Refresh = 0
	h.render(w, r, http.StatusOK, "login", p)
}

// login sets the token cookie and goes to the map: once Options.Verify
// accepts the token, and in any case the user API checks it on every
// request.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 2*maxTokenLen)
	token := strings.TrimSpace(r.PostFormValue("token"))
	status, msg := http.StatusBadRequest, checkToken(token)
	if msg == "" && h.o.Verify != nil {
		if err := h.o.Verify(r, token); err != nil {
			status, msg = http.StatusUnauthorized, "The token was not accepted: "+err.Error()
		}
	}
	if msg != "" {
		p := h.newPage(r, "login", "Sign in", time.Time{}, loginData{Error: msg})
		p.Refresh = 0
		h.render(w, r, status, "login", p)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true,
		Secure: secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, h.o.Prefix, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, h.o.Prefix+"login", http.StatusSeeOther)
}

// secure says whether the request came over TLS (directly or through a
// proxy that says so): the cookie is then sent only over TLS.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// checkToken says what is wrong with a token for the cookie ("" if
// nothing): cookie values may not hold spaces, quotes, commas, semicolons,
// backslashes or control characters, and net/http would drop them
// silently.
func checkToken(t string) string {
	switch {
	case t == "":
		return "Enter your API token."
	case len(t) > maxTokenLen:
		return fmt.Sprintf("The token is %d bytes long; at most %d are accepted.", len(t), maxTokenLen)
	}
	for _, c := range t {
		if c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\' {
			return "The token holds a character an API token never has (a space, quote, comma, semicolon, backslash or non-ASCII character)."
		}
	}
	return ""
}

func (h *Handler) funcs() template.FuncMap {
	return template.FuncMap{
		"url":     func(parts ...string) string { return h.o.Prefix + strings.Join(parts, "") },
		"dollars": gangway.FormatDollars,
		"raw":     func(v float64) string { return fmt.Sprintf("%.6f", v) },
		"gpus":    gpus,
		"pct":     func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) },
		"dur":     dur,
		"ts":      ts,
		"iso": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		},
		"until": func(t, now time.Time) string {
			if t.IsZero() || now.IsZero() {
				return ""
			}
			if d := t.Sub(now); d > 0 {
				return "in " + dur(d)
			}
			return "now"
		},
		"bytes": func(n int64) string {
			switch {
			case n >= 1<<30:
				return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
			case n >= 1<<20:
				return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
			case n >= 1<<10:
				return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
			}
			return fmt.Sprintf("%d B", n)
		},
		"join":     func(s []string) string { return strings.Join(s, ", ") },
		"terminal": func(p gangway.Phase) bool { return p.Terminal() },
		"deref": func(p *int) int {
			if p == nil {
				return 0
			}
			return *p
		},
		"perGPUHour": func(o gangway.Offer) string { return gangway.FormatDollars(o.PricePerGPUHour()) + "/GPU-h" },
		"f1":         func(v float64) string { return fmt.Sprintf("%.1f", v) },
		// n says a count with its noun: "1 node", "3 nodes".
		"n": func(count int, one, many string) string {
			if count == 1 {
				return "1 " + one
			}
			return fmt.Sprintf("%d %s", count, many)
		},
		"pctOf": func(v float64, of int) string {
			if of <= 0 {
				return ""
			}
			return fmt.Sprintf("%.0f%%", v/float64(of)*100)
		},
	}
}

// gpus formats a GPU count that may hold shares: "4", "2.5".
func gpus(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(fmt.Sprintf("%.2f", v), "0")
}

// dur rounds a duration for people: seconds under a minute, else to the
// second.
func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// ts is a time in UTC, to the second; "—" when zero.
func ts(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return gangway.FormatTime(t)
}
