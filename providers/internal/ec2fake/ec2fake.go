package ec2fake

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Namespace is the XML namespace of EC2 API responses.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// Instance state codes and names, as EC2 reports them.
var (
	statePending      = state{0, "pending"}
	stateRunning      = state{16, "running"}
	stateShuttingDown = state{32, "shutting-down"}
	stateTerminated   = state{48, "terminated"}
)

// SpotPrice is one entry of the spot price history the server serves.
type SpotPrice struct {
	Zone, InstanceType string
	Price              float64
}

// Server is a fake EC2 endpoint: an http.Handler that keeps instances by
// client token and tag. Instances are pending when launched and running
// from the next DescribeInstances on; terminated ones stay describable.
type Server struct {
	// URL is set by Start.
	URL string
	// PageSize caps the instances of one DescribeInstances page (default
	// 1000), to exercise pagination.
	PageSize int

	mu        sync.Mutex
	now       time.Time
	seq       int
	instances map[string]*instance
	tokens    map[string]*reservation
	prices    []SpotPrice
	faults    []Fault
	budget    int
	requests  []url.Values
}

// Fault is an injected failure: the next request whose Action matches
// (any, when Action is "") gets this error response instead of its answer,
// or, with Hang, is carried out and then never answered.
type Fault struct {
	Action  string
	Status  int
	Code    string
	Message string
	Hang    bool
}

type state struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type instance struct {
	id, imageID, instanceType, zone, lifecycle, privateIP, token, reason string
	state                                                                state
	launched                                                             time.Time
	tags                                                                 map[string]string
	userData                                                             string
	seq                                                                  int
}

type reservation struct {
	id       string
	ids      []string
	identity string // the parameters a reused token must repeat
}

// New returns a server with spot prices to serve.
func New(prices ...SpotPrice) *Server {
	return &Server{
		now: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC), instances: map[string]*instance{},
		tokens: map[string]*reservation{}, prices: prices, budget: -1,
	}
}

// Start serves s on a local httptest server until the test ends.
func Start(t testing.TB, s *Server) *Server {
	srv := httptest.NewServer(s)
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

// LimitLaunches lets at most n more instances launch (n < 0: no limit).
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

// Requests returns the decoded forms of the requests received for action
// ("" for all), oldest first.
func (s *Server) Requests(action string) []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []url.Values
	for _, r := range s.requests {
		if action == "" || r.Get("Action") == action {
			out = append(out, r)
		}
	}
	return out
}

// UserData is the decoded user data of an instance.
func (s *Server) UserData(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.instances[id]; ok {
		return in.userData
	}
	return ""
}

// Preempt reclaims a spot instance as EC2 does after its notice.
func (s *Server) Preempt(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.instances[id]; ok {
		in.state, in.reason = stateTerminated, "Server.SpotInstanceTermination: Spot instance termination"
	}
}

// ServeHTTP answers one EC2 Query API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusBadRequest, "InvalidAction", "EC2 Query requests are form POSTs")
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "MalformedQueryString", err.Error())
		return
	}
	form := r.PostForm
	action := form.Get("Action")
	s.mu.Lock()
	s.requests = append(s.requests, form)
	if f, ok := s.takeFault(action); ok && !f.Hang {
		s.mu.Unlock()
		writeError(w, f.Status, f.Code, f.Message)
		return
	} else if ok {
		// Carry the request out, then lose the answer.
		s.handle(action, form, httptest.NewRecorder())
		s.mu.Unlock()
		<-r.Context().Done()
		return
	}
	defer s.mu.Unlock()
	s.handle(action, form, w)
}

func (s *Server) takeFault(action string) (Fault, bool) {
	for i, f := range s.faults {
		if f.Action == "" || f.Action == action {
			s.faults = slices.Delete(s.faults, i, i+1)
			return f, true
		}
	}
	return Fault{}, false
}

func (s *Server) handle(action string, form url.Values, w http.ResponseWriter) {
	if form.Get("Version") != "2016-11-15" {
		writeError(w, http.StatusBadRequest, "InvalidParameterValue", "unsupported Version "+form.Get("Version"))
		return
	}
	switch action {
	case "RunInstances":
		s.runInstances(form, w)
	case "DescribeInstances":
		s.describeInstances(form, w)
	case "TerminateInstances":
		s.terminateInstances(form, w)
	case "DescribeSpotPriceHistory":
		s.describeSpotPriceHistory(form, w)
	default:
		writeError(w, http.StatusBadRequest, "InvalidAction", "The action "+action+" is not valid for this web service.")
	}
}

func (s *Server) runInstances(form url.Values, w http.ResponseWriter) {
	minCount, err1 := strconv.Atoi(form.Get("MinCount"))
	maxCount, err2 := strconv.Atoi(form.Get("MaxCount"))
	switch {
	case err1 != nil || err2 != nil || minCount < 1 || maxCount < minCount:
		writeError(w, http.StatusBadRequest, "InvalidParameterValue", "MinCount and MaxCount must be positive and MinCount <= MaxCount")
		return
	case form.Get("ImageId") == "":
		writeError(w, http.StatusBadRequest, "MissingParameter", "The request must contain the parameter ImageId")
		return
	case form.Get("InstanceType") == "":
		writeError(w, http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstanceType")
		return
	}
	zone := form.Get("Placement.AvailabilityZone")
	if zone == "" {
		zone = strings.TrimPrefix(form.Get("SubnetId"), "subnet-")
	}
	lifecycle := ""
	switch form.Get("InstanceMarketOptions.MarketType") {
	case "spot":
		lifecycle = "spot"
	case "":
	default:
		writeError(w, http.StatusBadRequest, "InvalidParameterValue", "invalid InstanceMarketOptions.MarketType")
		return
	}
	token := form.Get("ClientToken")
	identity := strings.Join([]string{form.Get("InstanceType"), zone, lifecycle, form.Get("MinCount"), form.Get("MaxCount")}, "/")
	if res, ok := s.tokens[token]; ok && token != "" {
		if res.identity != identity {
			writeError(w, http.StatusBadRequest, "IdempotentParameterMismatch",
				"The client token you have provided is associated with a resource that has different parameters.")
			return
		}
		s.writeReservation(w, res)
		return
	}
	if lifecycle == "spot" {
		if max := form.Get("InstanceMarketOptions.SpotOptions.MaxPrice"); max != "" {
			limit, _ := strconv.ParseFloat(max, 64)
			if price, ok := s.price(zone, form.Get("InstanceType")); ok && limit < price {
				writeError(w, http.StatusBadRequest, "SpotMaxPriceTooLow",
					fmt.Sprintf("Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %g.", max, price))
				return
			}
		}
	}
	n := maxCount
	if s.budget >= 0 && s.budget < n {
		n = s.budget
	}
	if n < minCount {
		writeError(w, http.StatusInternalServerError, "InsufficientInstanceCapacity",
			fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", form.Get("InstanceType"), zone))
		return
	}
	if s.budget >= 0 {
		s.budget -= n
	}
	tags := map[string]string{}
	for i := 1; form.Has(fmt.Sprintf("TagSpecification.%d.ResourceType", i)); i++ {
		if form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i)) != "instance" {
			continue
		}
		for j := 1; form.Has(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)); j++ {
			tags[form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j))] = form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Value", i, j))
		}
	}
	userData, err := base64.StdEncoding.DecodeString(form.Get("UserData"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidParameterValue", "Invalid BASE64 encoding of user data.")
		return
	}
	s.seq++
	res := &reservation{id: fmt.Sprintf("r-%017x", s.seq), identity: identity}
	for range n {
		s.seq++
		in := &instance{
			id: fmt.Sprintf("i-%017x", s.seq), imageID: form.Get("ImageId"), instanceType: form.Get("InstanceType"),
			zone: zone, lifecycle: lifecycle, privateIP: fmt.Sprintf("10.0.%d.%d", s.seq/250, s.seq%250+2),
			token: token, state: statePending, launched: s.now, tags: maps.Clone(tags), userData: string(userData), seq: s.seq,
		}
		s.instances[in.id] = in
		res.ids = append(res.ids, in.id)
	}
	if token != "" {
		s.tokens[token] = res
	}
	s.writeReservation(w, res)
}

func (s *Server) writeReservation(w http.ResponseWriter, res *reservation) {
	out := runInstancesResponse{RequestID: requestID, ReservationID: res.id, OwnerID: ownerID}
	for _, id := range res.ids {
		out.Instances = append(out.Instances, s.instances[id].xml())
	}
	writeXML(w, out)
}

func (s *Server) describeInstances(form url.Values, w http.ResponseWriter) {
	ids := list(form, "InstanceId")
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			writeError(w, http.StatusBadRequest, "InvalidInstanceID.Malformed", fmt.Sprintf("Invalid id: %q", id))
			return
		}
		if _, ok := s.instances[id]; !ok {
			writeError(w, http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id))
			return
		}
	}
	filters := map[string][]string{}
	for i := 1; form.Has(fmt.Sprintf("Filter.%d.Name", i)); i++ {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		filters[name] = list(form, fmt.Sprintf("Filter.%d.Value", i))
		if name != "instance-id" && name != "instance-state-name" && name != "tag-key" && !strings.HasPrefix(name, "tag:") {
			writeError(w, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", name))
			return
		}
	}
	var match []*instance
	for _, in := range s.instances {
		if (len(ids) == 0 || slices.Contains(ids, in.id)) && in.matches(filters) {
			match = append(match, in)
		}
	}
	slices.SortFunc(match, func(a, b *instance) int { return a.seq - b.seq })
	start, _ := strconv.Atoi(form.Get("NextToken"))
	page := s.PageSize
	if page <= 0 {
		page = 1000
	}
	if m, _ := strconv.Atoi(form.Get("MaxResults")); m > 0 && m < page {
		page = m
	}
	end := min(len(match), start+page)
	out := describeInstancesResponse{RequestID: requestID}
	if end < len(match) {
		out.NextToken = strconv.Itoa(end)
	}
	for _, in := range match[min(start, end):end] {
		out.Reservations = append(out.Reservations, xReservation{ID: "r-" + in.id[2:], OwnerID: ownerID, Instances: []xInstance{in.xml()}})
	}
	writeXML(w, out)
	// Boot: what was pending is running by the next look.
	for _, in := range s.instances {
		if in.state == statePending {
			in.state = stateRunning
		}
	}
}

func (in *instance) matches(filters map[string][]string) bool {
	for name, values := range filters {
		var ok bool
		switch {
		case name == "instance-id":
			ok = slices.Contains(values, in.id)
		case name == "instance-state-name":
			ok = slices.Contains(values, in.state.Name)
		case name == "tag-key":
			for _, v := range values {
				_, has := in.tags[v]
				ok = ok || has
			}
		default:
			v, has := in.tags[strings.TrimPrefix(name, "tag:")]
			ok = has && slices.Contains(values, v)
		}
		if !ok {
			return false
		}
	}
	return true
}

func (s *Server) terminateInstances(form url.Values, w http.ResponseWriter) {
	ids := list(form, "InstanceId")
	if len(ids) == 0 {
		writeError(w, http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstanceId")
		return
	}
	for _, id := range ids {
		if _, ok := s.instances[id]; !ok {
			writeError(w, http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id))
			return
		}
	}
	out := terminateInstancesResponse{RequestID: requestID}
	for _, id := range ids {
		in := s.instances[id]
		change := xStateChange{ID: id, Previous: in.state, Current: stateShuttingDown}
		if in.state == stateTerminated {
			change.Current = stateTerminated
		}
		out.Instances = append(out.Instances, change)
		// It is gone by the next look.
		if in.state != stateTerminated {
			in.state, in.reason = stateTerminated, "Client.UserInitiatedShutdown: User initiated shutdown"
		}
	}
	writeXML(w, out)
}

func (s *Server) describeSpotPriceHistory(form url.Values, w http.ResponseWriter) {
	types := list(form, "InstanceType")
	zone := form.Get("AvailabilityZone")
	out := spotPriceHistoryResponse{RequestID: requestID}
	for _, p := range s.prices {
		if (len(types) == 0 || slices.Contains(types, p.InstanceType)) && (zone == "" || zone == p.Zone) {
			out.Prices = append(out.Prices, xSpotPrice{
				Zone: p.Zone, InstanceType: p.InstanceType, ProductDescription: "Linux/UNIX",
				SpotPrice: strconv.FormatFloat(p.Price, 'f', 6, 64), Timestamp: s.now.Add(-time.Hour).Format(time.RFC3339),
			})
		}
	}
	writeXML(w, out)
}

func (s *Server) price(zone, instanceType string) (float64, bool) {
	for _, p := range s.prices {
		if p.Zone == zone && p.InstanceType == instanceType {
			return p.Price, true
		}
	}
	return 0, false
}

// list reads the flattened list prefix.1, prefix.2, ...
func list(form url.Values, prefix string) []string {
	var out []string
	for i := 1; form.Has(fmt.Sprintf("%s.%d", prefix, i)); i++ {
		out = append(out, form.Get(fmt.Sprintf("%s.%d", prefix, i)))
	}
	return out
}

const (
	requestID = "7a62c49f-347e-4fc4-9331-6e8eEXAMPLE"
	ownerID   = "123456789012"
)

func (in *instance) xml() xInstance {
	x := xInstance{
		ID: in.id, ImageID: in.imageID, State: in.state, InstanceType: in.instanceType,
		LaunchTime: in.launched.Format(time.RFC3339), PrivateIP: in.privateIP, Lifecycle: in.lifecycle, ClientToken: in.token,
	}
	x.Placement.Zone = in.zone
	if in.reason != "" {
		code, _, _ := strings.Cut(in.reason, ": ")
		x.StateReason = &xReason{Code: code, Message: in.reason}
	}
	keys := slices.Sorted(maps.Keys(in.tags))
	for _, k := range keys {
		x.Tags = append(x.Tags, xTag{Key: k, Value: in.tags[k]})
	}
	return x
}

type xInstance struct {
	ID           string `xml:"instanceId"`
	ImageID      string `xml:"imageId"`
	State        state  `xml:"instanceState"`
	PrivateIP    string `xml:"privateIpAddress,omitempty"`
	InstanceType string `xml:"instanceType"`
	LaunchTime   string `xml:"launchTime"`
	Placement    struct {
		Zone string `xml:"availabilityZone"`
	} `xml:"placement"`
	Lifecycle   string   `xml:"instanceLifecycle,omitempty"`
	ClientToken string   `xml:"clientToken,omitempty"`
	StateReason *xReason `xml:"stateReason,omitempty"`
	Tags        []xTag   `xml:"tagSet>item"`
}

type xReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type runInstancesResponse struct {
	XMLName       xml.Name    `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ RunInstancesResponse"`
	RequestID     string      `xml:"requestId"`
	ReservationID string      `xml:"reservationId"`
	OwnerID       string      `xml:"ownerId"`
	Instances     []xInstance `xml:"instancesSet>item"`
}

type xReservation struct {
	ID        string      `xml:"reservationId"`
	OwnerID   string      `xml:"ownerId"`
	Instances []xInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	XMLName      xml.Name       `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeInstancesResponse"`
	RequestID    string         `xml:"requestId"`
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

type xStateChange struct {
	ID       string `xml:"instanceId"`
	Current  state  `xml:"currentState"`
	Previous state  `xml:"previousState"`
}

type terminateInstancesResponse struct {
	XMLName   xml.Name       `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ TerminateInstancesResponse"`
	RequestID string         `xml:"requestId"`
	Instances []xStateChange `xml:"instancesSet>item"`
}

type xSpotPrice struct {
	Zone               string `xml:"availabilityZone"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

type spotPriceHistoryResponse struct {
	XMLName   xml.Name     `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeSpotPriceHistoryResponse"`
	RequestID string       `xml:"requestId"`
	Prices    []xSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string       `xml:"nextToken,omitempty"`
}

type errorResponse struct {
	XMLName xml.Name `xml:"Response"`
	Errors  []struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Errors>Error"`
	RequestID string `xml:"RequestID"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	var e errorResponse
	e.Errors = append(e.Errors, struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}{code, message})
	e.RequestID = requestID
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(e)
}

func writeXML(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(v)
}
