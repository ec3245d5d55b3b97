package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// APIOptions say where NewAPI finds the user API and how the caller proves
// who it is.
type APIOptions struct {
	// URL is the API's base URL, e.g. "https://gangway.example.com:8080".
	URL string
	// Token is the bearer token (`gangway token create`, or an OIDC ID
	// token); empty sends none, for a client certificate in TLS or to be
	// told what is missing.
	Token string
	// TLS is the https connection's config: the CA to trust, a client
	// certificate. Nil uses the system's roots.
	TLS *tls.Config
	// HTTP is the HTTP client to use (tests); nil builds one with TLS.
	HTTP *http.Client
	// Poll is how often Result reads the status of a job still running
	// (default 1s).
	Poll time.Duration
}

// NewAPI returns a client of the user API at o.URL: what users hold
// credentials for. Every call carries o.Token; the API's refusals come
// back as *APIError, which errors.Is matches to ErrUnauthenticated,
// ErrForbidden, ErrJobNotFound and the others.
func NewAPI(o APIOptions) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// A URL's user info may hold a password: it is never printed.
		shown := o.URL
		if err == nil {
			shown = u.Redacted()
		} else if strings.Contains(o.URL, "@") {
			shown = "(not shown: it may hold a password)"
		}
		return nil, fmt.Errorf("API URL: want http(s)://host:port, got %q", shown)
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: o.TLS, Proxy: http.ProxyFromEnvironment}}
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	a := &apiClient{base: strings.TrimSuffix(u.String(), "/"), token: o.Token, http: o.HTTP, poll: o.Poll}
	return &Client{b: a, close: o.HTTP.CloseIdleConnections}, nil
}

// apiClient is the backend over the user API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
	poll  time.Duration
}

var _ backend = (*apiClient)(nil)

// do sends a request and decodes a 2xx JSON answer into out (nil: none);
// any other status becomes the *APIError its body holds.
func (a *apiClient) do(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string, out any) error {
	resp, err := a.send(ctx, method, path, q, body, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns a 2xx response for the caller to
// read and close.
func (a *apiClient) send(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := a.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

// decodeError reads an error response: the API's JSON error, or the
// status and the start of the body from anything else in the way.
func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Status: resp.StatusCode}
	if json.Unmarshal(data, e) != nil || e.Message == "" {
		e.Code = codeOfStatus(resp.StatusCode)
		e.Message = fmt.Sprintf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(data[:min(len(data), 200)])))
	}
	return e
}

// codeOfStatus guesses the code of an error that is not the API's own
// (a proxy's 401, say).
func codeOfStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusBadRequest:
		return CodeInvalid
	case http.StatusNotFound:
		return CodeNotFound
	}
	return CodeInternal
}

func jobPath(id gangway.JobID, rest string) string { return "/v1/jobs/" + url.PathEscape(id) + rest }

func (a *apiClient) submit(ctx context.Context, spec gangway.JobSpec, o SubmitOptions) (gangway.JobID, error) {
	spec.Default()
	if err := spec.Validate(); err != nil {
		return "", err
	}
	body, err := yaml.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encode job spec: %w", err)
	}
	var out Submitted
	if err := a.do(ctx, http.MethodPost, "/v1/jobs", nil, bytes.NewReader(body), "application/yaml", &out); err != nil {
		return "", err
	}
	if o.Warn != nil {
		for _, msg := range out.Warnings {
			o.Warn(msg)
		}
	}
	return out.JobID, nil
}

func (a *apiClient) status(ctx context.Context, id gangway.JobID) (JobStatus, error) {
	var st JobStatus
	err := a.do(ctx, http.MethodGet, jobPath(id, ""), nil, nil, "", &st)
	return st, err
}

// result reads the status until the job has ended: the API has no call
// that blocks that long.
func (a *apiClient) result(ctx context.Context, id gangway.JobID) (workflows.Status, error) {
	for {
		st, err := a.status(ctx, id)
		if err != nil {
			return workflows.Status{}, err
		}
		if st.Phase.Terminal() {
			return st.Status, nil
		}
		select {
		case <-ctx.Done():
			return workflows.Status{}, fmt.Errorf("result of job %s: %w", id, ctx.Err())
		case <-time.After(a.poll):
		}
	}
}

func (a *apiClient) cancel(ctx context.Context, id gangway.JobID) error {
	return a.do(ctx, http.MethodPost, jobPath(id, "/cancel"), nil, nil, "", nil)
}

func (a *apiClient) list(ctx context.Context) ([]Summary, error) {
	var out []Summary
	err := a.do(ctx, http.MethodGet, "/v1/jobs", nil, nil, "", &out)
	return out, err
}

func (a *apiClient) nodes(ctx context.Context) ([]Node, error) {
	var out []Node
	err := a.do(ctx, http.MethodGet, "/v1/nodes", nil, nil, "", &out)
	return out, err
}

func (a *apiClient) setNodeState(ctx context.Context, nodeID, state string) error {
	return a.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(nodeID)+"/"+stateVerb(state), nil, nil, "", nil)
}

// DrainResult is the answer to a drain: the jobs asked to move.
type DrainResult struct {
	Node string          `json:"node"`
	Jobs []gangway.JobID `json:"jobs"`
}

func (a *apiClient) drain(ctx context.Context, nodeID string) ([]gangway.JobID, error) {
	var out DrainResult
	err := a.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(nodeID)+"/drain", nil, nil, "", &out)
	return out.Jobs, err
}

func (a *apiClient) removeNode(ctx context.Context, nodeID string) error {
	return a.do(ctx, http.MethodDelete, "/v1/nodes/"+url.PathEscape(nodeID), nil, nil, "", nil)
}

func (a *apiClient) logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]gangway.LogLine, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if block > 0 {
		q.Set("block", block.String())
	}
	var out []gangway.LogLine
	err := a.do(ctx, http.MethodGet, jobPath(id, "/logs"), q, nil, "", &out)
	return out, err
}

// LogStreamLine is one line of the followed log stream (NDJSON): a log
// line, or, last, the error the stream ended with.
type LogStreamLine struct {
	gangway.LogLine
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

func (a *apiClient) followLogs(ctx context.Context, id gangway.JobID, follow bool, line func(gangway.LogLine)) error {
	if !follow {
		lines, err := a.logs(ctx, id, "", 0)
		for _, l := range lines {
			line(l)
		}
		return err
	}
	resp, err := a.send(ctx, http.MethodGet, jobPath(id, "/logs"), url.Values{"follow": {"true"}}, nil, "")
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l LogStreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("logs of %s: decode stream: %w", id, err)
		}
		if l.Error != "" {
			return &APIError{Status: statusOf(l.Code), Code: l.Code, Message: l.Error}
		}
		line(l.LogLine)
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("logs of %s: %w", id, err)
	}
	return nil
}

// CostQuery says what a cost report covers; the fields are the API's
// parameters as `gangway cost` takes them.
type CostQuery struct {
	// By is team, project or pool ("" = team).
	By string
	// Since and Until are a duration ago (7d, 36h), an RFC 3339 time or
	// a date; "" = the API's default (7d, now).
	Since, Until string
}

// CostReport is a cost report as the user API sends it: a caller who is
// not an admin sees only its teams' usage. Warnings say what it could not
// count (runs in flight while the fleet view is down).
type CostReport struct {
	gangway.CostSummary
	Warnings []string `json:"warnings,omitempty"`
}

// Cost reads GPU-hours and dollars from the usage ledger, through the user
// API (a direct client has no ledger).
func (c *Client) Cost(ctx context.Context, q CostQuery) (CostReport, error) {
	a, ok := c.b.(*apiClient)
	if !ok {
		return CostReport{}, errors.New("cost: the report comes from the user API (client.NewAPI)")
	}
	v := url.Values{}
	for k, s := range map[string]string{"by": q.By, "since": q.Since, "until": q.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	var out CostReport
	err := a.do(ctx, http.MethodGet, "/v1/cost", v, nil, "", &out)
	return out, err
}

// Identity is who the API takes a caller for: its user, its teams and
// whether it is an admin.
type Identity struct {
	// User names the caller: the token's user, the JWT's user claim, the
	// client certificate's common name.
	User string `json:"user"`
	// Teams are the teams the caller acts for, sorted.
	Teams []string `json:"teams"`
	// Admin may do everything: any team's jobs, the nodes.
	Admin bool `json:"admin"`
	// Via is how the caller proved it: "token", "oidc" or "cert".
	Via string `json:"via"`
}

// InTeam reports whether the identity may act for team: one of its teams,
// or any team for an admin.
func (id Identity) InTeam(team string) bool {
	if id.Admin {
		return true
	}
	for _, t := range id.Teams {
		if t == team {
			return true
		}
	}
	return false
}

// WhoAmI asks the user API who it takes the caller for.
func (c *Client) WhoAmI(ctx context.Context) (Identity, error) {
	a, ok := c.b.(*apiClient)
	if !ok {
		return Identity{}, errors.New("whoami: only the user API knows callers (client.NewAPI)")
	}
	var id Identity
	err := a.do(ctx, http.MethodGet, "/v1/whoami", nil, nil, "", &id)
	return id, err
}
