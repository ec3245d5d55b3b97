package gcefake

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const base = "https://www.googleapis.com/compute/v1/"

// Server is a fake Compute Engine REST endpoint for instances and zone
// operations. It keeps instances by name and operations by request ID, as
// GCE does: a repeated requestId returns the first operation. Inserted
// instances are PROVISIONING until the next read, then RUNNING; deleted
// ones show STOPPING on one more read, then are gone. Operations are
// RUNNING when returned and DONE from the first poll on.
type Server struct {
	URL string
	// PageSize caps the items of one list page (default 500).
	PageSize int

	mu        sync.Mutex
	seq       int
	instances map[string]*instance // zone/name
	ops       map[string]*operation
	requests  map[string]string // requestId → operation name
	faults    []Fault
	budget    int
	inserts   []map[string]any
}

// Fault is an injected failure of the next request of Kind ("insert",
// "get", "delete", "list"; "" for any). Status with Reason answers with a
// googleapi error; OpCode lets the request through but ends its operation
// with that error code (with HTTP status Status); Hang carries the request
// out and never answers.
type Fault struct {
	Kind    string
	Status  int
	Reason  string
	Message string
	OpCode  string
	Hang    bool
}

type instance struct {
	json    Instance
	zone    string
	deleted int // reads since deletion; 0: not deleted
}

type operation struct {
	json  Operation
	polls int
}

// Instance is the REST JSON of a Compute instance (the fields used).
type Instance struct {
	Kind              string            `json:"kind,omitempty"`
	ID                string            `json:"id,omitempty"`
	Name              string            `json:"name"`
	Zone              string            `json:"zone,omitempty"`
	MachineType       string            `json:"machineType"`
	Status            string            `json:"status,omitempty"`
	StatusMessage     string            `json:"statusMessage,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	SelfLink          string            `json:"selfLink,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Metadata          *struct {
		Items []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"items"`
	} `json:"metadata,omitempty"`
	Scheduling *struct {
		ProvisioningModel         string `json:"provisioningModel,omitempty"`
		InstanceTerminationAction string `json:"instanceTerminationAction,omitempty"`
		OnHostMaintenance         string `json:"onHostMaintenance,omitempty"`
		AutomaticRestart          *bool  `json:"automaticRestart,omitempty"`
	} `json:"scheduling,omitempty"`
	GuestAccelerators []struct {
		AcceleratorType  string `json:"acceleratorType"`
		AcceleratorCount int    `json:"acceleratorCount"`
	} `json:"guestAccelerators,omitempty"`
	Disks []struct {
		Boot             bool `json:"boot,omitempty"`
		AutoDelete       bool `json:"autoDelete,omitempty"`
		InitializeParams *struct {
			SourceImage string `json:"sourceImage,omitempty"`
			DiskSizeGb  string `json:"diskSizeGb,omitempty"` // int64: a JSON string
		} `json:"initializeParams,omitempty"`
	} `json:"disks,omitempty"`
	NetworkInterfaces []struct {
		Network    string `json:"network,omitempty"`
		Subnetwork string `json:"subnetwork,omitempty"`
		NetworkIP  string `json:"networkIP,omitempty"`
	} `json:"networkInterfaces,omitempty"`
}

// Operation is the REST JSON of a zone operation.
type Operation struct {
	Kind                string    `json:"kind"`
	ID                  string    `json:"id"`
	Name                string    `json:"name"`
	Zone                string    `json:"zone"`
	OperationType       string    `json:"operationType"`
	TargetLink          string    `json:"targetLink"`
	Status              string    `json:"status"`
	Progress            int       `json:"progress"`
	InsertTime          string    `json:"insertTime"`
	SelfLink            string    `json:"selfLink"`
	Error               *opErrors `json:"error,omitempty"`
	HTTPErrorStatusCode int       `json:"httpErrorStatusCode,omitempty"`
	HTTPErrorMessage    string    `json:"httpErrorMessage,omitempty"`
}

type opErrors struct {
	Errors []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
}

// New returns an empty server.
func New() *Server {
	return &Server{instances: map[string]*instance{}, ops: map[string]*operation{}, requests: map[string]string{}, budget: -1}
}

// Start serves s on a local httptest server until the test ends.
func Start(t testing.TB, s *Server) *Server {
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Inject queues a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// LimitLaunches lets at most n more instances be inserted (n < 0: no
// limit); inserts past it end in ZONE_RESOURCE_POOL_EXHAUSTED.
func (s *Server) LimitLaunches(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.budget = n
}

// Reset drops faults and limits.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults, s.budget = nil, -1
}

// Inserts returns the decoded JSON bodies of the insert requests received.
func (s *Server) Inserts() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.inserts)
}

// Preempt reclaims a spot instance: with instanceTerminationAction DELETE
// it is deleted, otherwise stopped (TERMINATED).
func (s *Server) Preempt(zone, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[zone+"/"+name]
	if !ok {
		return
	}
	in.json.StatusMessage = "Instance was preempted."
	if in.json.Scheduling != nil && in.json.Scheduling.InstanceTerminationAction == "DELETE" {
		in.json.Status, in.deleted = "STOPPING", 1
	} else {
		in.json.Status = "TERMINATED"
	}
}

// Handler routes the Compute REST paths the provider calls.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	const zone = "/compute/v1/projects/{project}/zones/{zone}"
	mux.HandleFunc("POST "+zone+"/instances", s.wrap("insert", s.insert))
	mux.HandleFunc("GET "+zone+"/instances", s.wrap("list", s.list))
	mux.HandleFunc("GET "+zone+"/instances/{name}", s.wrap("get", s.get))
	mux.HandleFunc("DELETE "+zone+"/instances/{name}", s.wrap("delete", s.delete))
	mux.HandleFunc("GET "+zone+"/operations/{op}", s.wrap("operation", s.operation))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "notFound", "no route for "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// wrap applies faults and the lock.
func (s *Server) wrap(kind string, h func(w http.ResponseWriter, r *http.Request, f *Fault)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		var fault *Fault
		for i, f := range s.faults {
			if f.Kind == "" || f.Kind == kind {
				s.faults = slices.Delete(s.faults, i, i+1)
				fault = &f
				break
			}
		}
		if fault != nil && !fault.Hang && fault.OpCode == "" {
			s.mu.Unlock()
			writeError(w, fault.Status, fault.Reason, fault.Message)
			return
		}
		if fault != nil && fault.Hang {
			h(httptest.NewRecorder(), r, nil)
			s.mu.Unlock()
			<-r.Context().Done()
			return
		}
		defer s.mu.Unlock()
		h(w, r, fault)
	}
}

var (
	nameRE       = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	labelKeyRE   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValueRE = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
	filterRE     = regexp.MustCompile(`^labels\.([a-z][a-z0-9_-]*)\s*(=\s*"?([a-z0-9_-]*)"?|:\s*\*)$`)
)

func (s *Server) insert(w http.ResponseWriter, r *http.Request, f *Fault) {
	project, zone := r.PathValue("project"), r.PathValue("zone")
	requestID := r.URL.Query().Get("requestId")
	if requestID != "" {
		if name, ok := s.requests[requestID]; ok {
			writeJSON(w, s.ops[name].json)
			return
		}
	}
	var raw map[string]any
	var body Instance
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &raw); err != nil {
		writeError(w, http.StatusBadRequest, "parseError", "This API does not support parsing form-encoded input.")
		return
	}
	if err := json.Unmarshal(data, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "Invalid JSON payload received. "+err.Error())
		return
	}
	s.inserts = append(s.inserts, raw)
	if bad := validate(body); bad != "" {
		writeError(w, http.StatusBadRequest, "invalid", bad)
		return
	}
	key := zone + "/" + body.Name
	if _, ok := s.instances[key]; ok {
		writeError(w, http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' already exists", project, zone, body.Name))
		return
	}
	op := s.newOp(project, zone, "insert", body.Name)
	if requestID != "" {
		s.requests[requestID] = op.json.Name
	}
	switch {
	case f != nil && f.OpCode != "":
		op.fail(f.Status, f.OpCode, f.Message)
	case s.budget == 0:
		op.fail(http.StatusServiceUnavailable, "ZONE_RESOURCE_POOL_EXHAUSTED",
			fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request. Try a different zone, or try again later.", project, zone))
	default:
		if s.budget > 0 {
			s.budget--
		}
		s.seq++
		body.Kind, body.ID, body.Status = "compute#instance", strconv.Itoa(1000000+s.seq), "PROVISIONING"
		body.Zone = base + "projects/" + project + "/zones/" + zone
		body.MachineType = base + "projects/" + project + "/" + strings.TrimPrefix(body.MachineType, base+"projects/"+project+"/")
		body.SelfLink = body.Zone + "/instances/" + body.Name
		body.CreationTimestamp = time.Date(2026, 1, 5, 1, 0, s.seq, 0, time.FixedZone("PST", -8*3600)).Format("2006-01-02T15:04:05.000-07:00")
		if len(body.NetworkInterfaces) > 0 {
			body.NetworkInterfaces[0].NetworkIP = fmt.Sprintf("10.128.0.%d", s.seq%250+2)
		}
		s.instances[key] = &instance{json: body, zone: zone}
	}
	writeJSON(w, op.json)
}

func validate(in Instance) string {
	switch {
	case !nameRE.MatchString(in.Name):
		return fmt.Sprintf("Invalid value for field 'resource.name': '%s'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'", in.Name)
	case in.MachineType == "":
		return "Invalid value for field 'resource.machineType': ''. Machine type is required."
	case len(in.Disks) == 0:
		return "At least one disk is required."
	case in.Scheduling != nil && in.Scheduling.ProvisioningModel == "SPOT" && in.Scheduling.InstanceTerminationAction == "":
		return "Invalid value for field 'resource.scheduling.instanceTerminationAction': ''. Spot VMs need a termination action."
	case len(in.GuestAccelerators) > 0 && (in.Scheduling == nil || in.Scheduling.OnHostMaintenance != "TERMINATE"):
		return "Instances with guest accelerators do not support live migration."
	}
	for k, v := range in.Labels {
		if !labelKeyRE.MatchString(k) || !labelValueRE.MatchString(v) {
			return fmt.Sprintf("Invalid value for field 'resource.labels': label %q=%q", k, v)
		}
	}
	return ""
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, f *Fault) {
	in, ok := s.read(r.PathValue("zone"), r.PathValue("name"))
	if !ok {
		writeNotFound(w, r)
		return
	}
	writeJSON(w, in)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, f *Fault) {
	project, zone, name := r.PathValue("project"), r.PathValue("zone"), r.PathValue("name")
	requestID := r.URL.Query().Get("requestId")
	if opName, ok := s.requests[requestID]; ok && requestID != "" {
		writeJSON(w, s.ops[opName].json)
		return
	}
	in, ok := s.instances[zone+"/"+name]
	if !ok || in.deleted > 0 {
		writeNotFound(w, r)
		return
	}
	in.json.Status, in.deleted = "STOPPING", 1
	op := s.newOp(project, zone, "delete", name)
	if requestID != "" {
		s.requests[requestID] = op.json.Name
	}
	writeJSON(w, op.json)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, f *Fault) {
	zone := r.PathValue("zone")
	q := r.URL.Query()
	var key, value string
	var anyValue bool
	if f := strings.TrimSpace(q.Get("filter")); f != "" {
		m := filterRE.FindStringSubmatch(f)
		if m == nil {
			writeError(w, http.StatusBadRequest, "invalid", "Invalid value for field 'filter': '"+f+"'. Invalid list filter expression.")
			return
		}
		key, value, anyValue = m[1], m[3], strings.HasPrefix(strings.TrimSpace(m[2]), ":")
	}
	var names []string
	for k, in := range s.instances {
		if in.zone != zone {
			continue
		}
		v, has := in.json.Labels[key]
		if key == "" || has && (anyValue || v == value) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var items []Instance
	for _, k := range names {
		if in, ok := s.read(zone, strings.TrimPrefix(k, zone+"/")); ok {
			items = append(items, in)
		}
	}
	page := s.PageSize
	if page <= 0 {
		page = 500
	}
	if m, _ := strconv.Atoi(q.Get("maxResults")); m > 0 && m < page {
		page = m
	}
	start, _ := strconv.Atoi(q.Get("pageToken"))
	end := min(len(items), start+page)
	out := struct {
		Kind          string     `json:"kind"`
		Items         []Instance `json:"items,omitempty"`
		NextPageToken string     `json:"nextPageToken,omitempty"`
	}{Kind: "compute#instanceList", Items: items[min(start, end):end]}
	if end < len(items) {
		out.NextPageToken = strconv.Itoa(end)
	}
	writeJSON(w, out)
}

// read returns an instance as a read sees it now, moving it along: a
// provisioning instance has booted by the next read; a deleted one is
// seen stopping once, then gone.
func (s *Server) read(zone, name string) (Instance, bool) {
	in, ok := s.instances[zone+"/"+name]
	if !ok {
		return Instance{}, false
	}
	if in.deleted > 0 {
		in.deleted++
		if in.deleted > 2 {
			delete(s.instances, zone+"/"+name)
			return Instance{}, false
		}
		return in.json, true
	}
	out := in.json
	out.Labels = maps.Clone(in.json.Labels)
	if in.json.Status == "PROVISIONING" {
		in.json.Status = "RUNNING"
	}
	return out, true
}

func (s *Server) operation(w http.ResponseWriter, r *http.Request, f *Fault) {
	op, ok := s.ops[r.PathValue("op")]
	if !ok {
		writeNotFound(w, r)
		return
	}
	op.polls++
	op.json.Status, op.json.Progress = "DONE", 100
	writeJSON(w, op.json)
}

func (s *Server) newOp(project, zone, kind, target string) *operation {
	s.seq++
	name := fmt.Sprintf("operation-%d-%s", s.seq, kind)
	zoneURL := base + "projects/" + project + "/zones/" + zone
	op := &operation{json: Operation{
		Kind: "compute#operation", ID: strconv.Itoa(5000000 + s.seq), Name: name, Zone: zoneURL,
		OperationType: kind, TargetLink: zoneURL + "/instances/" + target, Status: "RUNNING",
		InsertTime: "2026-01-05T01:00:00.000-08:00", SelfLink: zoneURL + "/operations/" + name,
	}}
	s.ops[name] = op
	return op
}

func (op *operation) fail(status int, code, message string) {
	op.json.Error = &opErrors{Errors: []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{{code, message}}}
	op.json.HTTPErrorStatusCode = status
	op.json.HTTPErrorMessage = strings.ToUpper(http.StatusText(status))
}

func writeNotFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "notFound", fmt.Sprintf("The resource '%s' was not found", strings.TrimPrefix(r.URL.Path, "/compute/v1/")))
}

func writeError(w http.ResponseWriter, status int, reason, message string) {
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	body := map[string]any{"error": map[string]any{
		"code": status, "message": message, "errors": []item{{message, "global", reason}},
	}}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}
