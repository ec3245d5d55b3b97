package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// OpenAPI is the API's OpenAPI 3 document, served at /v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Options configure a Server.
type Options struct {
	// Client is the direct client (client.New over workflows/jobs and the
	// Redis view) the handlers act through.
	Client *client.Client
	// Jobs tells a job's team before anyone may touch it (*jobs.Jobs).
	Jobs JobTeams
	// Fleet gives the allocations (whose jobs are on a node; the runs in
	// flight a cost report counts) and the published cloud offers
	// (*capacity.View).
	Fleet Fleet
	// Ledger answers cost reports (*accounting.Ledger); nil: /v1/cost
	// answers 503.
	Ledger CostLedger
	// OnDemandPrices are the configured on-demand prices per GPU-hour by
	// pool; they win over the published offers' (cost's spot savings).
	OnDemandPrices map[string]float64
	// Validate relaxes spec validation as the server's config says.
	Validate []gangway.ValidateOption

	// Tokens verify bearer tokens, tried in order (TokenFile, OIDC).
	Tokens []TokenVerifier
	// ClientCert, when set, makes a verified client certificate an
	// identity for a request without a token.
	ClientCert *ClientCert
	// Admins are users who are admins whatever their credential says.
	Admins []string

	// Log receives the audit lines and request errors.
	Log *slog.Logger
	// Now is the clock cost windows are read against (default time.Now).
	Now func() time.Time
}

// JobTeams is what the server needs of job workflows beyond the client:
// a job's team, from its workflow (ErrJobGone when there is none).
type JobTeams interface {
	Describe(ctx context.Context, id gangway.JobID) (jobs.Description, error)
}

// Fleet is what the server reads of the Redis view beside the client.
type Fleet interface {
	Allocations(ctx context.Context) ([]gangway.Assignment, error)
	CloudOffers(ctx context.Context) ([]gangway.Offer, error)
}

// CostLedger reports usage.
type CostLedger interface {
	Report(ctx context.Context, q accounting.Query) (gangway.CostSummary, error)
}

// Server is the user API's HTTP handler.
type Server struct {
	o      Options
	auth   authenticator
	mux    *http.ServeMux
	routes []string // "METHOD /pattern" of every API route
	log    *slog.Logger
}

// New returns a server; Handler serves it.
func New(o Options) (*Server, error) {
	if o.Client == nil || o.Jobs == nil || o.Fleet == nil {
		return nil, errors.New("api: Options.Client, Jobs and Fleet are required")
	}
	if len(o.Tokens) == 0 && o.ClientCert == nil {
		return nil, errors.New("api: no way to authenticate: give Options.Tokens or ClientCert")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, auth: authenticator{tokens: o.Tokens, certs: o.ClientCert, admins: o.Admins},
		mux: http.NewServeMux(), log: o.Log}
	s.routeAll()
	return s, nil
}

// Handler serves the API and what is mounted on it. A browser's
// cross-origin request that would change something (POST from another
// site, carrying the gangway_token cookie) is refused with 403: the cookie
// must not let another page act for the user.
func (s *Server) Handler() http.Handler { return http.NewCrossOriginProtection().Handler(s.mux) }

// Mount serves h under prefix (a path ending in "/", e.g. "/ui/") behind
// the API's authentication: a request without valid credentials gets the
// same 401 as the API's, and h finds the caller with IdentityFrom.
func (s *Server) Mount(prefix string, h http.Handler) { s.MountPages(prefix, h, nil) }

// SignedOutFunc answers a browser's request that has no valid credentials
// (err says why).
type SignedOutFunc func(w http.ResponseWriter, r *http.Request, err error)

// MountPages is Mount for pages a person reads: a request without valid
// credentials that accepts HTML (a browser's navigation) is answered by
// signedOut — a page saying how to sign in — and any other (the CLI, a
// script: they accept JSON) gets the API's 401. signedOut nil is Mount.
func (s *Server) MountPages(prefix string, h http.Handler, signedOut SignedOutFunc) {
	s.mux.Handle(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.auth.authenticate(r)
		if err != nil {
			if signedOut != nil && acceptsHTML(r) {
				signedOut(w, r, err)
				return
			}
			writeError(w, unauthenticated(err))
			return
		}
		h.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	}))
}

// acceptsHTML reports whether r's Accept header names text/html (with a
// non-zero quality): a browser navigating, not an API client.
func acceptsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(mt), "text/html") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// MountPublic serves h under prefix without demanding credentials (a login
// form, static files): a request whose credentials are valid still carries
// its identity (IdentityFrom), and one without or with bad ones reaches h
// without.
func (s *Server) MountPublic(prefix string, h http.Handler) {
	s.mux.Handle(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, err := s.auth.authenticate(r); err == nil {
			r = r.WithContext(WithIdentity(r.Context(), id))
		}
		h.ServeHTTP(w, r)
	}))
}

// Authenticate returns who r comes from, as the API would take it (for a
// login form checking a token before it sets the cookie); the error says
// why r proves no one.
func (s *Server) Authenticate(r *http.Request) (Identity, error) { return s.auth.authenticate(r) }

// handler is an API route's work: it writes its answer, or returns the
// error to answer with.
type handler func(w http.ResponseWriter, r *http.Request, id Identity) error

// handle routes pattern ("METHOD /path") to h behind authentication.
func (s *Server) handle(pattern string, h handler) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		id, err := s.auth.authenticate(r)
		if err != nil {
			if r.Method != http.MethodGet {
				s.audit(r, Identity{}, pattern, "", unauthenticated(err))
			}
			writeError(w, unauthenticated(err))
			return
		}
		if err := h(w, r.WithContext(WithIdentity(r.Context(), id)), id); err != nil {
			writeError(w, err)
		}
	})
}

// public routes pattern to h without authentication.
func (s *Server) public(pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, h)
}

func (s *Server) routeAll() {
	s.public("GET /v1/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(OpenAPI)
	})
	s.public("GET /v1/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.handle("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request, id Identity) error {
		writeJSON(w, http.StatusOK, id)
		return nil
	})
	s.handle("POST /v1/jobs", s.submit)
	s.handle("GET /v1/jobs", s.list)
	s.handle("GET /v1/jobs/{job}", s.status)
	s.handle("GET /v1/jobs/{job}/why", s.why)
	s.handle("POST /v1/jobs/{job}/cancel", s.cancel)
	s.handle("GET /v1/jobs/{job}/logs", s.logs)
	s.handle("GET /v1/cost", s.cost)
	s.handle("GET /v1/nodes", s.nodes)
	s.handle("POST /v1/nodes/{node}/cordon", s.nodeState("cordon", gangway.NodeCordoned))
	s.handle("POST /v1/nodes/{node}/uncordon", s.nodeState("uncordon", gangway.NodeReady))
	s.handle("POST /v1/nodes/{node}/drain", s.drain)
	s.handle("DELETE /v1/nodes/{node}", s.removeNode)
	// Everything else under /v1/ is answered in JSON too, as every
	// refusal is: a path no route has (404), or a route's path with
	// another method (405, naming those it takes).
	s.mux.HandleFunc("/v1/", s.noRoute)
}

// noRoute answers a request under /v1/ that no route takes.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/v1/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, &client.APIError{Status: http.StatusNotFound, Code: client.CodeNotFound,
			Message: fmt.Sprintf("no API route %s (the routes are listed at GET /v1/openapi.yaml)", r.URL.Path)})
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, &client.APIError{Status: http.StatusMethodNotAllowed, Code: client.CodeInvalid,
		Message: fmt.Sprintf("%s %s: this route takes %s", r.Method, r.URL.Path, strings.Join(allow, " or "))})
}

// audit writes the one line a mutating call leaves: who, what, on which
// job or node, and how it went. Never a credential.
func (s *Server) audit(r *http.Request, id Identity, action, target string, err error) {
	attrs := []any{"user", id.User, "via", id.Via, "admin", id.Admin, "action", action, "remote", r.RemoteAddr}
	if target != "" {
		attrs = append(attrs, "target", target)
	}
	switch ae := client.AsAPIError(err); {
	case err == nil:
		s.log.Info("audit", append(attrs, "outcome", "ok")...)
	case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
		s.log.Warn("audit", append(attrs, "outcome", "refused", "status", ae.Status, "reason", ae.Message)...)
	default:
		s.log.Warn("audit", append(attrs, "outcome", "failed", "status", ae.Status, "reason", ae.Message)...)
	}
}

func unauthenticated(err error) error {
	return &client.APIError{Status: http.StatusUnauthorized, Code: client.CodeUnauthenticated, Message: err.Error()}
}

func invalid(format string, args ...any) error {
	return &client.APIError{Status: http.StatusBadRequest, Code: client.CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	ae := client.AsAPIError(err)
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gangway"`)
	}
	writeJSON(w, ae.Status, ae)
}

// truthy reads a boolean query parameter.
func truthy(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "yes":
		return true
	}
	return false
}
