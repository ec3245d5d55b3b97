package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// maxLogBlock caps how long one logs read may wait for new lines.
const maxLogBlock = 30 * time.Second

// maxSpecRead bounds how long a client may take to send a job spec, so a
// body trickled a byte at a time does not hold a connection for ever.
var maxSpecRead = 30 * time.Second // a variable for tests

// otherTeam stands for a job of a team the caller is not in, where a node
// listing would name it.
const otherTeam = "(another team)"

// submit starts the job the body's spec (YAML or JSON) describes, as one
// of the caller's teams.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, id Identity) error {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(maxSpecRead)) // unsupported in tests' recorders
	spec, err := s.decodeSpec(r.Body)
	target := spec.Name
	if err == nil && !id.InTeam(spec.Team) {
		err = forbidden(id, spec.Team, ": a job is submitted as one of its user's teams")
	}
	var warnings []string
	if err == nil {
		_, err = s.o.Client.Submit(r.Context(), spec, client.SubmitOptions{Validate: s.o.Validate,
			Warn: func(msg string) { warnings = append(warnings, msg) }})
	}
	s.audit(r, id, "submit", target, err)
	if err != nil {
		return err
	}
	for _, msg := range warnings {
		s.o.Log.Warn("job submitted unchecked", "job", spec.Name, "why", msg)
	}
	writeJSON(w, http.StatusCreated, client.Submitted{JobID: gangway.JobID(spec.Name), Team: spec.Team, Warnings: warnings})
	return nil
}

// decodeSpec reads a job spec of at most gangway.MaxSpecBytes and parses
// it as `gangway submit` does, with the server's validation options.
func (s *Server) decodeSpec(body io.Reader) (gangway.JobSpec, error) {
	return DecodeSpec(body, s.o.Validate...)
}

// DecodeSpec is the submit call's request decoding: at most
// gangway.MaxSpecBytes of YAML (or JSON) read, parsed strictly and
// validated. A spec that is too large is refused without reading it all.
func DecodeSpec(body io.Reader, opts ...gangway.ValidateOption) (gangway.JobSpec, error) {
	data, err := io.ReadAll(io.LimitReader(body, gangway.MaxSpecBytes+1))
	if err != nil {
		return gangway.JobSpec{}, invalid("read job spec: %v", err)
	}
	spec, err := gangway.ParseJobSpec(data, opts...)
	if err != nil {
		return spec, err
	}
	return spec, nil
}

// list is the jobs of the caller's teams (every job for an admin).
func (s *Server) list(w http.ResponseWriter, r *http.Request, id Identity) error {
	all, err := s.o.Client.List(r.Context())
	if err != nil {
		return err
	}
	out := []client.Summary{}
	for _, j := range all {
		if id.InTeam(j.Team) {
			out = append(out, j)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// job returns the path's job ID once the caller may touch that job: 404
// for an unknown job, 403 for another team's.
func (s *Server) job(r *http.Request, id Identity) (gangway.JobID, error) {
	job := r.PathValue("job")
	d, err := s.o.Jobs.Describe(r.Context(), job)
	if errors.Is(err, jobs.ErrJobGone) {
		return job, &client.APIError{Status: http.StatusNotFound, Code: client.CodeJobNotFound, Message: fmt.Sprintf("no job named %q", job)}
	}
	if err != nil {
		return job, err
	}
	if !id.InTeam(d.Team) {
		return job, forbidden(id, d.Team, ", the team of job "+job)
	}
	return job, nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, id Identity) error {
	job, err := s.job(r, id)
	if err != nil {
		return err
	}
	st, err := s.o.Client.Status(r.Context(), job)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// Why is the answer of GET /v1/jobs/{job}/why: the phase and, while the
// job waits, the dispatch loop's typed reason.
type Why struct {
	JobID   gangway.JobID    `json:"jobId"`
	Team    string           `json:"team"`
	Phase   gangway.Phase    `json:"phase"`
	Attempt int              `json:"attempt"`
	Waiting *gangway.Waiting `json:"waiting"`
	Reason  string           `json:"reason"`
	// Where is where it runs, while it holds GPUs.
	Where string `json:"where,omitempty"`
}

func (s *Server) why(w http.ResponseWriter, r *http.Request, id Identity) error {
	job, err := s.job(r, id)
	if err != nil {
		return err
	}
	st, err := s.o.Client.Status(r.Context(), job)
	if err != nil {
		return err
	}
	out := Why{JobID: st.JobID, Team: st.Team, Phase: st.Phase, Attempt: st.Attempt, Waiting: st.Waiting, Reason: st.Reason}
	if st.Assignment != nil && !st.Phase.Terminal() {
		out.Where = st.Assignment.Where()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, id Identity) error {
	job, err := s.job(r, id)
	if err == nil {
		err = s.o.Client.Cancel(r.Context(), job)
	}
	s.audit(r, id, "cancel", job, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"jobId": job, "cancel": "requested"})
	return nil
}

// streamID is a line's id, as LogLine.ID gives it: a Redis stream entry
// ID, milliseconds and a sequence number (the sequence may be left out).
var streamID = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

// logs answers the job's output lines after ?after, waiting up to ?block
// for new ones; with ?follow=true it streams them (NDJSON, from the start)
// until the job has ended and its lines are sent.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, id Identity) error {
	job, err := s.job(r, id)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if truthy(q.Get("follow")) {
		return s.followLogs(w, r, job)
	}
	var block time.Duration
	if b := q.Get("block"); b != "" {
		if block, err = time.ParseDuration(b); err != nil || block < 0 || block > maxLogBlock {
			return invalid("block: want a duration from 0 to %s, got %q", maxLogBlock, b)
		}
	}
	after := q.Get("after")
	if after != "" && !streamID.MatchString(after) {
		return invalid("after: want the id of a line read before (like 1733616000000-0), got %q", after)
	}
	lines, err := s.o.Client.Logs(r.Context(), job, after, block)
	if err != nil {
		return err
	}
	if lines == nil {
		lines = []gangway.LogLine{}
	}
	writeJSON(w, http.StatusOK, lines)
	return nil
}

// followLogs streams the job's lines as they come. An error after the
// first line is the stream's last line.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request, job gangway.JobID) error {
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	started := false
	start := func() {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
	}
	err := s.o.Client.FollowLogs(r.Context(), job, true, func(l gangway.LogLine) {
		start()
		_ = enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	})
	if err != nil && !started {
		return err
	}
	start()
	if err != nil {
		ae := client.AsAPIError(err)
		_ = enc.Encode(client.LogStreamLine{Error: ae.Message, Code: ae.Code})
	}
	return nil
}

// cost is the usage report of the caller's teams (every team for an
// admin): the ledger's ended runs and the view's runs in flight.
func (s *Server) cost(w http.ResponseWriter, r *http.Request, id Identity) error {
	if s.o.Ledger == nil {
		return &client.APIError{Status: http.StatusServiceUnavailable, Code: client.CodeInternal, Message: "cost: this server has no usage ledger"}
	}
	p := r.URL.Query()
	now := s.o.Now()
	by, since := p.Get("by"), p.Get("since")
	if by == "" {
		by = string(gangway.CostByTeam)
	}
	if since == "" {
		since = accounting.DefaultSince
	}
	q, err := accounting.ParseQuery(by, since, p.Get("until"), now)
	if err != nil {
		return invalid("%v", err)
	}
	if !id.Admin {
		q.Team = id.InTeam
	}
	var report client.CostReport
	running, err := s.o.Fleet.Allocations(r.Context())
	if err != nil {
		report.Warnings = append(report.Warnings, fmt.Sprintf("runs in flight are not counted: %v", err))
	}
	offers, err := s.o.Fleet.CloudOffers(r.Context())
	if err != nil {
		report.Warnings = append(report.Warnings, fmt.Sprintf("cloud pools' on-demand prices are not known: %v", err))
	}
	// The view's cloud members carry no price: each is priced at its
	// pool's offer, as the burst rented it.
	q.Running = accounting.RunningSegments(accounting.PriceCloud(running, offers), now)
	q.OnDemandPrices = accounting.OnDemandPrices(offers, s.o.OnDemandPrices)
	if report.CostSummary, err = s.o.Ledger.Report(r.Context(), q); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, report)
	return nil
}

// nodes lists the fleet. A caller who is not an admin sees the jobs of
// other teams on it as "(another team)".
func (s *Server) nodes(w http.ResponseWriter, r *http.Request, id Identity) error {
	nodes, err := s.o.Client.Nodes(r.Context())
	if err != nil {
		return err
	}
	if !id.Admin {
		allocs, err := s.o.Fleet.Allocations(r.Context())
		if err != nil {
			return err
		}
		team := map[gangway.JobID]string{}
		for _, a := range allocs {
			team[a.JobID] = a.Team
		}
		visible := func(j gangway.JobID) gangway.JobID {
			if t, ok := team[j]; ok && id.InTeam(t) {
				return j
			}
			return otherTeam
		}
		for i := range nodes {
			hideJobs(&nodes[i], visible)
		}
	}
	if nodes == nil {
		nodes = []client.Node{}
	}
	writeJSON(w, http.StatusOK, nodes)
	return nil
}

// hideJobs rewrites every job ID n names through visible, in fresh maps
// (the view's are not shared, but a caller's may be).
func hideJobs(n *client.Node, visible func(gangway.JobID) gangway.JobID) {
	alloc := make(map[int]gangway.JobID, len(n.Allocated))
	for g, j := range n.Allocated {
		alloc[g] = visible(j)
	}
	n.Allocated = alloc
	shared := make(map[int]map[gangway.JobID]int, len(n.Shared))
	for g, held := range n.Shared {
		m := map[gangway.JobID]int{}
		for j, milli := range held {
			m[visible(j)] += milli
		}
		shared[g] = m
	}
	n.Shared = shared
	health := make(map[int]gangway.GPUHealth, len(n.GPUHealth))
	for g, h := range n.GPUHealth {
		if h.LastFault != nil {
			f := *h.LastFault
			f.Jobs = make([]gangway.JobID, len(h.LastFault.Jobs))
			for k, j := range h.LastFault.Jobs {
				f.Jobs[k] = visible(j)
			}
			h.LastFault = &f
		}
		health[g] = h
	}
	n.GPUHealth = health
}

// nodeState is cordon or uncordon: admins only.
func (s *Server) nodeState(action, state string) handler {
	return func(w http.ResponseWriter, r *http.Request, id Identity) error {
		node := r.PathValue("node")
		var err error
		if !id.Admin {
			err = needAdmin(id, action)
		} else if state == gangway.NodeCordoned {
			err = nodeErr(s.o.Client.Cordon(r.Context(), node), node)
		} else {
			err = nodeErr(s.o.Client.Uncordon(r.Context(), node), node)
		}
		s.audit(r, id, action, node, err)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]string{"node": node, "state": state})
		return nil
	}
}

// drain cordons the node and moves its jobs: admins only.
func (s *Server) drain(w http.ResponseWriter, r *http.Request, id Identity) error {
	node := r.PathValue("node")
	var asked []gangway.JobID
	var err error
	if !id.Admin {
		err = needAdmin(id, "drain")
	} else {
		asked, err = s.o.Client.Drain(r.Context(), node)
		err = nodeErr(err, node)
	}
	s.audit(r, id, "drain", node, err)
	if err != nil {
		return err
	}
	if asked == nil {
		asked = []gangway.JobID{}
	}
	writeJSON(w, http.StatusOK, client.DrainResult{Node: node, Jobs: asked})
	return nil
}

// removeNode takes a node whose agent has stopped out of the fleet: admins
// only.
func (s *Server) removeNode(w http.ResponseWriter, r *http.Request, id Identity) error {
	node := r.PathValue("node")
	var err error
	if !id.Admin {
		err = needAdmin(id, "remove-node")
	} else {
		err = nodeErr(s.o.Client.RemoveNode(r.Context(), node), node)
	}
	s.audit(r, id, "remove-node", node, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"node": node, "state": "removed"})
	return nil
}

// nodeErr makes an unknown node a 404, and one a job took a GPU of as it
// was being removed a 409.
func nodeErr(err error, node string) error {
	if errors.Is(err, capacity.ErrNodeBusy) {
		return &client.APIError{Status: http.StatusConflict, Code: client.CodeNodeInUse, Message: fmt.Sprintf("node in use: a job holds GPUs of %s; drain it first", node)}
	}
	if errors.Is(err, capacity.ErrNotFound) {
		return &client.APIError{Status: http.StatusNotFound, Code: client.CodeNotFound, Message: fmt.Sprintf("no node named %q", node)}
	}
	return err
}
