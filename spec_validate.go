package gangway

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults applied by JobSpec.Default, and the bounds Validate enforces.
// docs/jobspec.md lists the same numbers; change both together.
const (
	DefaultCPU         = "1"
	DefaultMemory      = "4Gi"
	DefaultMaxRuntime  = 24 * time.Hour
	DefaultSignal      = "SIGTERM"
	DefaultGracePeriod = 30 * time.Second

	MaxReplicas       = 256
	MaxGPUsPerReplica = 8
	MaxRetries        = 10
	MaxMaxRuntime     = 30 * 24 * time.Hour
	MaxGracePeriod    = time.Hour
	MaxKeep           = 100

	DefaultKeep          = 3
	DefaultIdleThreshold = 0.05
)

// checkpointSignals are the signals a job may ask for on preemption; all of
// them can be caught, which is the point: the process must get to save state.
var checkpointSignals = []string{"SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"}

// reservedEnv are variables the agent sets for every task (the workload
// contract in DESIGN.md); a spec that set them would be silently overridden.
var reservedEnv = []string{"CUDA_VISIBLE_DEVICES", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"}

const reservedEnvPrefix = "GANGWAY_"

// ErrInvalidSpec matches every *SpecError under errors.Is, for callers that
// only need to know the input was bad (a non-retryable failure).
var ErrInvalidSpec = errors.New("invalid job spec")

// FieldError is one problem with a job spec. Field is the path in YAML key
// names ("gang.gpusPerReplica", "env.FOO", "command[2]"); it is empty for a
// problem with the document as a whole (bad YAML syntax, an empty file).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// String renders the problem as "field: message".
func (e FieldError) String() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// SpecError reports every problem found in a job spec, in document order
// for decoding problems and field order for validation problems.
type SpecError struct {
	Problems []FieldError `json:"problems"`
}

// Error renders one problem as "field: message" and several as a list, one
// per line, so the CLI can print it as is.
func (e *SpecError) Error() string {
	switch len(e.Problems) {
	case 0:
		return "invalid job spec"
	case 1:
		return e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in job spec:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidSpec) true for any *SpecError.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// Fields lists the field of every problem, in order.
func (e *SpecError) Fields() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Field
	}
	return out
}

// problems collects FieldErrors; err returns nil when there are none so a
// validator can end with `return p.err()`.
type problems []FieldError

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &SpecError{Problems: p}
}

// Default fills in every optional field left empty. It is idempotent.
// Retries stays 0: a failed job is not run again unless it asks to be.
// A zero gracePeriod counts as unset, since it is indistinguishable from one.
func (s *JobSpec) Default() {
	if s.PriorityClass == "" {
		s.PriorityClass = PriorityNormal
	}
	if s.MaxRuntime.Duration == 0 {
		s.MaxRuntime.Duration = DefaultMaxRuntime
	}
	if s.Gang.CPU == "" {
		s.Gang.CPU = DefaultCPU
	}
	if s.Gang.Memory == "" {
		s.Gang.Memory = DefaultMemory
	}
	if s.Gang.GPUShare != "" && s.Gang.Sharing == "" {
		s.Gang.Sharing = SharingTimeSlicing
	}
	if s.Checkpoint.Signal == "" {
		s.Checkpoint.Signal = DefaultSignal
	}
	if s.Checkpoint.GracePeriod.Duration == 0 {
		s.Checkpoint.GracePeriod.Duration = DefaultGracePeriod
	}
	if s.Checkpoint.Keep == 0 {
		s.Checkpoint.Keep = DefaultKeep
	}
	if s.Idle.After.Duration > 0 {
		if s.Idle.Action == "" {
			s.Idle.Action = IdleRelease
		}
		if s.Idle.Threshold == 0 {
			s.Idle.Threshold = DefaultIdleThreshold
		}
	}
}

// Runtime is the expected length of one uninterrupted run:
// estimatedRuntime, or maxRuntime when none is given.
func (s JobSpec) Runtime() time.Duration {
	if s.EstimatedRuntime.Duration > 0 {
		return s.EstimatedRuntime.Duration
	}
	return s.MaxRuntime.Duration
}

// Validate checks a defaulted spec (call Default first; ParseJobSpec does
// both) and reports every problem, each naming its field, as a *SpecError.
// opts relax the default policy (AllowEnv).
func (s JobSpec) Validate(opts ...ValidateOption) error {
	var o validateOptions
	for _, opt := range opts {
		opt(&o)
	}
	var p problems

	checkLabel(&p, "name", s.Name)
	checkLabel(&p, "team", s.Team)
	if !slices.Contains([]string{PriorityLow, PriorityNormal, PriorityHigh}, s.PriorityClass) {
		p.add("priorityClass", "must be one of %s, %s, %s, got %q", PriorityLow, PriorityNormal, PriorityHigh, s.PriorityClass)
	}

	switch {
	case len(s.Command) == 0:
		p.add("command", "required: the program and its arguments, e.g. [torchrun, train.py]")
	case s.Command[0] == "":
		p.add("command[0]", "must not be empty: it is the program to run")
	}
	for _, k := range sortedKeys(s.Env) {
		switch {
		case !isEnvName(k):
			p.add(keyPath("env", k), "not a valid environment variable name: letters, digits and '_', not starting with a digit")
		case strings.HasPrefix(k, reservedEnvPrefix) || slices.Contains(reservedEnv, k):
			p.add(keyPath("env", k), "reserved: the agent sets %s* and CUDA_VISIBLE_DEVICES for every task, and the CUDA_MPS_* limits for GPU shares", reservedEnvPrefix)
		}
	}
	s.validateLimits(&p, o)
	if s.RunAs != "" && !IsUnixUser(s.RunAs) {
		p.add("runAs", "must be a Unix user name (lowercase letters, digits, '_', '-', at most 32), got %q", s.RunAs)
	} else if o.users != nil {
		if _, err := o.users.For(s.Team, s.RunAs); err != nil {
			p.add("runAs", "%v", err)
		}
	}

	g := s.Gang
	if g.Replicas < 1 || g.Replicas > MaxReplicas {
		p.add("gang.replicas", "must be between 1 and %d, got %d", MaxReplicas, g.Replicas)
	}
	if g.GPUsPerReplica < 1 || g.GPUsPerReplica > MaxGPUsPerReplica {
		p.add("gang.gpusPerReplica", "must be between 1 and %d, got %d", MaxGPUsPerReplica, g.GPUsPerReplica)
	}
	checkList(&p, "gang.gpuModels", g.GPUModels, func(m string) string {
		if strings.TrimSpace(m) == "" {
			return "must not be empty"
		}
		return ""
	})
	if g.Topology.Level.Rank() < 0 {
		p.add("gang.topology.level", "must be one of %s, %s, %s, %s, got %q",
			LevelNVLink, LevelNode, LevelRack, LevelBlock, string(g.Topology.Level))
	}
	if g.Topology.Required && g.Topology.Level == "" {
		p.add("gang.topology.required", "needs gang.topology.level")
	}
	if g.GPUShare != "" {
		switch milli, err := ParseGPUShare(g.GPUShare); {
		case err != nil:
			p.add("gang.gpuShare", "must be a fraction of one GPU such as \"0.5\" or milli-GPU such as \"500m\", got %q", g.GPUShare)
		case milli <= 0 || milli >= MilliPerGPU:
			p.add("gang.gpuShare", "must be more than 0 and less than one GPU (%dm), got %q (for whole GPUs leave it out)", MilliPerGPU, g.GPUShare)
		case g.GPUsPerReplica != 1:
			p.add("gang.gpuShare", "is a share of one GPU: needs gang.gpusPerReplica 1, got %d", g.GPUsPerReplica)
		}
	}
	if g.MIGProfile != "" {
		switch _, err := ParseMIGProfile(g.MIGProfile); {
		case err != nil:
			p.add("gang.migProfile", "must be a MIG profile such as \"1g.10gb\" or \"3g.40gb\" (compute slices, then memory), got %q", g.MIGProfile)
		case g.GPUShare != "":
			p.add("gang.migProfile", "cannot be combined with gang.gpuShare: a replica takes one MIG device or a share of a whole GPU, not both")
		case g.GPUsPerReplica != 1:
			p.add("gang.migProfile", "is one MIG device per replica: needs gang.gpusPerReplica 1, got %d", g.GPUsPerReplica)
		}
	}
	switch {
	case g.Sharing != "" && g.GPUShare == "":
		p.add("gang.sharing", "applies to GPU shares only: set gang.gpuShare too, or leave it out")
	case g.Sharing != "" && g.Sharing != SharingTimeSlicing && g.Sharing != SharingMPS:
		p.add("gang.sharing", "must be %s or %s, got %q", SharingTimeSlicing, SharingMPS, string(g.Sharing))
	}
	if milli, err := ParseCPU(g.CPU); err != nil {
		p.add("gang.cpu", "must be a CPU quantity such as \"16\", \"2.5\" or \"500m\", got %q", g.CPU)
	} else if milli <= 0 {
		p.add("gang.cpu", "must be positive, got %q", g.CPU)
	}
	if mib, err := ParseMemory(g.Memory); err != nil {
		p.add("gang.memory", "must be a memory quantity such as \"64Gi\", \"512Mi\" or \"1G\", got %q", g.Memory)
	} else if mib <= 0 {
		p.add("gang.memory", "must be positive, got %q", g.Memory)
	}

	switch d := s.MaxRuntime.Duration; {
	case d <= 0:
		p.add("maxRuntime", "must be positive, got %s", Duration{d})
	case d > MaxMaxRuntime:
		p.add("maxRuntime", "must be at most %s (30 days), got %s", Duration{MaxMaxRuntime}, Duration{d})
	}
	if s.Retries < 0 || s.Retries > MaxRetries {
		p.add("retries", "must be between 0 and %d, got %d", MaxRetries, s.Retries)
	}
	if !slices.Contains(checkpointSignals, s.Checkpoint.Signal) {
		p.add("checkpoint.signal", "must be one of %s, got %q", strings.Join(checkpointSignals, ", "), s.Checkpoint.Signal)
	}
	if d := s.Checkpoint.GracePeriod.Duration; d < 0 || d > MaxGracePeriod {
		p.add("checkpoint.gracePeriod", "must be between 0s and %s, got %s", Duration{MaxGracePeriod}, Duration{d})
	}

	if d := s.Checkpoint.Interval.Duration; d < 0 {
		p.add("checkpoint.interval", "must not be negative, got %s", Duration{d})
	}
	if s.Checkpoint.Keep < 0 || s.Checkpoint.Keep > MaxKeep {
		p.add("checkpoint.keep", "must be between 1 and %d (0 means %d), got %d", MaxKeep, DefaultKeep, s.Checkpoint.Keep)
	}

	poolName := func(pool string) string {
		if !IsDNSLabel(pool) {
			return fmt.Sprintf("must be a pool name (a DNS label), got %q", pool)
		}
		return ""
	}
	checkList(&p, "pools", s.Pools, poolName)
	s.validateTimes(&p)
	s.validateBurst(&p, poolName)
	s.validateIdle(&p)
	return p.err()
}

func (s JobSpec) validateTimes(p *problems) {
	if d := s.EstimatedRuntime.Duration; d < 0 || (d > s.MaxRuntime.Duration && s.MaxRuntime.Duration > 0) {
		p.add("estimatedRuntime", "must be between 0s and maxRuntime (%s), got %s", s.MaxRuntime, Duration{d})
	}
	if d := s.Deadline.Duration; d < 0 {
		p.add("deadline", "must not be negative, got %s", Duration{d})
	} else if d > 0 && d < s.Runtime() {
		p.add("deadline", "%s is shorter than the job's own runtime (%s): it can never be met", Duration{d}, Duration{s.Runtime()})
	}
}

func (s JobSpec) validateBurst(p *problems, poolName func(string) string) {
	b := s.Burst
	checkList(p, "burst.pools", b.Pools, poolName)
	checkList(p, "burst.capacityTypes", b.CapacityTypes, func(c CapacityType) string {
		if !c.Cloud() {
			return fmt.Sprintf("must be %q or %q, got %q", CapacitySpot, CapacityOnDemand, string(c))
		}
		return ""
	})
	if b.MaxPricePerGPUHour < 0 {
		p.add("burst.maxPricePerGPUHour", "must not be negative, got %v", b.MaxPricePerGPUHour)
	}
	if !b.Enabled && (len(b.Pools) > 0 || len(b.CapacityTypes) > 0 || b.MaxPricePerGPUHour > 0) {
		p.add("burst.enabled", "burst settings are given but burst is not enabled; add enabled: true")
	}
}

func (s JobSpec) validateIdle(p *problems) {
	i := s.Idle
	switch {
	case i.After.Duration < 0:
		p.add("idle.after", "must not be negative, got %s", i.After)
	case i.After.Duration == 0 && (i.Action != "" || i.Threshold != 0):
		p.add("idle.after", "required when idle.action or idle.threshold is set, e.g. 60m")
	}
	if i.Action != "" && i.Action != IdleRelease && i.Action != IdleCheckpointAndRelease {
		p.add("idle.action", "must be %q or %q, got %q", IdleRelease, IdleCheckpointAndRelease, i.Action)
	}
	if i.Action == IdleCheckpointAndRelease && !s.Checkpoint.Enabled {
		p.add("idle.action", "%q needs checkpoint.enabled: true", IdleCheckpointAndRelease)
	}
	if i.Threshold < 0 || i.Threshold >= 1 {
		p.add("idle.threshold", "must be at least 0 and below 1, got %v", i.Threshold)
	}
}

// checkLabel reports a required field that is not a DNS label.
func checkLabel(p *problems, field, v string) {
	switch {
	case v == "":
		p.add(field, "required")
	case len(v) > 63:
		p.add(field, "must be at most 63 characters, got %d", len(v))
	case !IsDNSLabel(v):
		p.add(field, "must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit), got %q", v)
	}
}

// checkList reports each element bad() describes, and each duplicate.
func checkList[S ~string](p *problems, field string, list []S, bad func(S) string) {
	seen := make(map[S]int, len(list))
	for i, v := range list {
		elem := fmt.Sprintf("%s[%d]", field, i)
		if msg := bad(v); msg != "" {
			p.add(elem, "%s", msg)
			continue
		}
		if j, dup := seen[v]; dup {
			p.add(elem, "duplicate of %s[%d] (%q)", field, j, v)
			continue
		}
		seen[v] = i
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func isEnvName(s string) bool { return envNameRE.MatchString(s) }

// keyPath names the entry key of the mapping at parent: env.FOO, or
// env["a b"] when the key would not read as one path element. The top
// level has parent "".
func keyPath(parent, key string) string {
	if key != "" && strings.IndexFunc(key, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return joinPath(parent, key)
	}
	return fmt.Sprintf("%s[%q]", parent, key)
}

// sortedKeys ranges over a map but returns the keys sorted, so workflows may
// call it: the result is deterministic.
//
//workflowcheck:ignore
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// quantityRE is the decimal part of a Kubernetes-style quantity and its
// suffix. Exponents ("1e3") and signs are not accepted: nobody writes them
// in a job spec, and a negative request is never meant.
var quantityRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([A-Za-z]*)$`)

// maxQuantityLen bounds the input so no one can make us do big-number
// arithmetic on a megabyte of digits.
const maxQuantityLen = 40

// ParseCPU parses a CPU quantity in cores ("16", "2.5") or millicores
// ("500m") and returns millicores, rounding a fraction of a millicore up.
func ParseCPU(s string) (int64, error) {
	num, suffix, ok := splitQuantity(s)
	if !ok {
		return 0, fmt.Errorf("cpu quantity %q: want cores such as \"16\", \"2.5\" or \"500m\"", s)
	}
	var scale int64
	switch suffix {
	case "":
		scale = 1000
	case "m":
		scale = 1
	default:
		return 0, fmt.Errorf("cpu quantity %q: unknown suffix %q (want none for cores or \"m\" for millicores)", s, suffix)
	}
	v, ok := scaleCeil(num, big.NewInt(scale), big.NewInt(1))
	if !ok {
		return 0, fmt.Errorf("cpu quantity %q: too large", s)
	}
	return v, nil
}

// ParseGPUShare parses a GPU share as a fraction of one GPU ("0.5") or in
// milli-GPU ("500m") and returns milli-GPU, rounding a fraction of a
// milli-GPU up. It reads the quantity as ParseCPU reads cores.
func ParseGPUShare(s string) (int64, error) {
	v, err := ParseCPU(s)
	if err != nil {
		return 0, fmt.Errorf("gpu share %q: want a fraction of one GPU such as \"0.5\" or milli-GPU such as \"500m\"", s)
	}
	return v, nil
}

var memoryUnits = map[string]*big.Int{
	"":   big.NewInt(1),
	"k":  big.NewInt(1e3),
	"M":  big.NewInt(1e6),
	"G":  big.NewInt(1e9),
	"T":  big.NewInt(1e12),
	"P":  big.NewInt(1e15),
	"E":  big.NewInt(1e18),
	"Ki": big.NewInt(1 << 10),
	"Mi": big.NewInt(1 << 20),
	"Gi": big.NewInt(1 << 30),
	"Ti": big.NewInt(1 << 40),
	"Pi": big.NewInt(1 << 50),
	"Ei": big.NewInt(1 << 60),
}

// ParseMemory parses a memory quantity: plain bytes, a decimal suffix (k, M,
// G, T, P, E) or a binary one (Ki, Mi, Gi, Ti, Pi, Ei), as Kubernetes writes
// them. It returns MiB, rounding up: "1G" is 954 MiB, "1" byte is 1 MiB.
func ParseMemory(s string) (int64, error) {
	num, suffix, ok := splitQuantity(s)
	if !ok {
		return 0, fmt.Errorf("memory quantity %q: want bytes with an optional suffix, such as \"64Gi\", \"512Mi\" or \"1G\"", s)
	}
	unit, ok := memoryUnits[suffix]
	if !ok {
		return 0, fmt.Errorf("memory quantity %q: unknown suffix %q (want Ki, Mi, Gi, Ti, Pi, Ei or k, M, G, T, P, E)", s, suffix)
	}
	v, ok := scaleCeil(num, unit, big.NewInt(1<<20))
	if !ok {
		return 0, fmt.Errorf("memory quantity %q: too large", s)
	}
	return v, nil
}

func splitQuantity(s string) (num, suffix string, ok bool) {
	if len(s) > maxQuantityLen {
		return "", "", false
	}
	m := quantityRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// scaleCeil returns ceil(num × mul / div), and false if it does not fit an
// int64.
func scaleCeil(num string, mul, div *big.Int) (int64, bool) {
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, false
	}
	r.Mul(r, new(big.Rat).SetFrac(mul, div))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, false
	}
	return q.Int64(), true
}

// CPUMilli is the gang's CPU per replica in millicores, 0 if invalid.
func (s JobSpec) CPUMilli() int64 {
	v, err := ParseCPU(s.Gang.CPU)
	if err != nil {
		return 0
	}
	return v
}

// GPUMilli is each replica's share of one GPU in milli-GPU, 0 for whole
// GPUs (or an invalid share).
func (s JobSpec) GPUMilli() int {
	if s.Gang.GPUShare == "" {
		return 0
	}
	v, err := ParseGPUShare(s.Gang.GPUShare)
	if err != nil || v <= 0 || v >= MilliPerGPU {
		return 0
	}
	return int(v)
}

// MemMiB is the gang's memory per replica in MiB, 0 if invalid.
func (s JobSpec) MemMiB() int64 {
	v, err := ParseMemory(s.Gang.Memory)
	if err != nil {
		return 0
	}
	return v
}

// FleetNode is what the submit-time fleet check needs to know of a node:
// its GPU model, its pool and how many GPUs it has in all. A cloud pool is
// one FleetNode too (FleetOfOffers), with Cloud set: the shape of the
// instances it launches, as many as a burst asks for.
type FleetNode struct {
	Model string
	Pool  string
	GPUs  int
	// Cloud marks a cloud pool's instance shape; CapacityType is its
	// capacity type.
	Cloud        bool
	CapacityType CapacityType
}

// FleetOf summarises registered nodes for ValidateFleet. It counts every
// GPU, healthy or not: a failed GPU is replaced, and the question asked is
// whether the gang could ever fit, not whether it fits today.
func FleetOf(nodes []Node) []FleetNode {
	out := make([]FleetNode, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, FleetNode{Model: n.Model(), Pool: n.Pool, GPUs: len(n.GPUs)})
	}
	return out
}

// FleetOfOffers summarises cloud offers for ValidateFleet: one entry per
// pool, whatever its price or availability today.
func FleetOfOffers(offers []Offer) []FleetNode {
	out := make([]FleetNode, 0, len(offers))
	for _, o := range offers {
		out = append(out, FleetNode{Model: o.GPUModel, Pool: o.Pool, GPUs: o.GPUsPerInstance, Cloud: true, CapacityType: o.CapacityType})
	}
	return out
}

// ValidateFleet rejects a gang that the fleet could never hold, even with
// every GPU free, so the job fails at submit instead of waiting forever.
// A replica needs GPUsPerReplica GPUs on one node of an allowed model and
// pool; the fleet can host floor(GPUs/gpusPerReplica) replicas per node.
// An empty on-prem fleet means the fleet is unknown, and nothing is
// rejected. It assumes a valid spec; Validate reports bad gang numbers.
//
// nodes is everything the job could ever run on: the registered nodes
// (FleetOf) and the configured cloud pools (FleetOfOffers), which launch
// one instance per replica. A job that may burst (burst.enabled, the
// pool and capacity type allowed by burst.pools and burst.capacityTypes)
// fits when a cloud pool's instances hold a replica, whether or not any
// instance runs now. A rejected job is told which cloud pool would hold
// it, and what to change in the spec for that.
func (s JobSpec) ValidateFleet(nodes []FleetNode) error {
	g := s.Gang
	if g.Replicas < 1 || g.GPUsPerReplica < 1 {
		return nil
	}
	modelOK := func(n FleetNode) bool { return len(g.GPUModels) == 0 || slices.Contains(g.GPUModels, n.Model) }
	poolOK := func(n FleetNode) bool { return len(s.Pools) == 0 || slices.Contains(s.Pools, n.Pool) }

	var onPrem, cloud []FleetNode
	for _, n := range nodes {
		if n.Cloud {
			cloud = append(cloud, n)
		} else {
			onPrem = append(onPrem, n)
		}
	}
	// A cloud pool whose instances hold a replica of an allowed model:
	// the job fits there if its burst policy lets it go.
	var hint string
	for _, n := range cloud {
		if !modelOK(n) || n.GPUs < g.GPUsPerReplica {
			continue
		}
		b := s.Burst
		switch {
		case b.Enabled && allowedIn(b.Pools, n.Pool) && allowedIn(b.CapacityTypes, n.CapacityType):
			return nil
		case hint != "":
		case !b.Enabled:
			hint = fmt.Sprintf("; cloud pool %s (%s, %d × %s) could hold it with burst.enabled: true", n.Pool, n.CapacityType, n.GPUs, n.Model)
		case !allowedIn(b.Pools, n.Pool):
			hint = fmt.Sprintf("; cloud pool %s (%s, %d × %s) could hold it if burst.pools listed it", n.Pool, n.CapacityType, n.GPUs, n.Model)
		default:
			hint = fmt.Sprintf("; cloud pool %s (%s, %d × %s) could hold it if burst.capacityTypes allowed %s", n.Pool, n.CapacityType, n.GPUs, n.Model, n.CapacityType)
		}
	}
	if len(onPrem) == 0 {
		return nil
	}

	var p problems
	// withGPUs ⊇ modelMatch ⊇ matching: each narrows by one constraint, so
	// the error can name the constraint that rules everything out.
	var withGPUs, modelMatch, matching []FleetNode
	for _, n := range onPrem {
		if n.GPUs <= 0 {
			continue
		}
		withGPUs = append(withGPUs, n)
		if modelOK(n) {
			modelMatch = append(modelMatch, n)
			if poolOK(n) {
				matching = append(matching, n)
			}
		}
	}
	switch {
	case len(modelMatch) == 0 && len(g.GPUModels) > 0:
		p.add("gang.gpuModels", "no node in the fleet has %s (the fleet has %s%s)%s",
			oneOf(g.GPUModels), orNone(distinct(withGPUs, func(n FleetNode) string { return n.Model })), cloudPools(cloud), hint)
		return p.err()
	case len(matching) == 0 && len(modelMatch) > 0:
		in := distinct(modelMatch, func(n FleetNode) string { return n.Pool })
		p.add("pools", "no node with a matching GPU is in %s (matching nodes are in %s)%s",
			listOf(s.Pools, "pool", "pools"), listOf(in, "pool", "pools"), hint)
		return p.err()
	case len(matching) == 0:
		p.add("gang", "the fleet has no GPUs%s", hint)
		return p.err()
	}

	largest, fit := 0, 0
	for _, n := range matching {
		largest = max(largest, n.GPUs)
		fit += n.GPUs / g.GPUsPerReplica
	}
	nodesDesc := fmt.Sprintf("%d matching %s", len(matching), Plural(len(matching), "node", "nodes"))
	if largest < g.GPUsPerReplica {
		p.add("gang.gpusPerReplica", "%d GPUs per replica can never fit: the largest matching node has %d GPUs (%s)%s",
			g.GPUsPerReplica, largest, nodesDesc, hint)
		return p.err()
	}
	if fit < g.Replicas {
		p.add("gang", "%d × %d GPUs (%s) can never fit: the fleet holds at most %d such %s (largest matching node has %d GPUs, %s)%s",
			g.Replicas, g.GPUsPerReplica, s.constraintDesc(), fit, Plural(fit, "replica", "replicas"), largest, nodesDesc, hint)
	}
	return p.err()
}

// constraintDesc says which GPUs the gang may use: "H100", "H100, A100 in
// pool onprem-a", "any model".
func (s JobSpec) constraintDesc() string {
	d := "any model"
	if len(s.Gang.GPUModels) > 0 {
		d = strings.Join(s.Gang.GPUModels, ", ")
	}
	if len(s.Pools) > 0 {
		d += " in " + listOf(s.Pools, "pool", "pools")
	}
	return d
}

// cloudPools says which cloud pools there are and their GPUs, for the
// "the fleet has" list: "; cloud pools fake-spot (A100), fake-od (A100)".
func cloudPools(cloud []FleetNode) string {
	if len(cloud) == 0 {
		return ""
	}
	var names []string
	for _, n := range cloud {
		names = append(names, fmt.Sprintf("%s (%s)", n.Pool, n.Model))
	}
	slices.Sort(names)
	return "; cloud " + listOf(names, "pool", "pools")
}

func allowedIn[S ~string](list []S, v S) bool { return len(list) == 0 || slices.Contains(list, v) }

func distinct(nodes []FleetNode, key func(FleetNode) string) []string {
	var out []string
	for _, n := range nodes {
		if k := key(n); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// listOf writes "pool a" or "pools a, b".
func listOf(list []string, one, many string) string {
	return Plural(len(list), one, many) + " " + orNone(list)
}

func oneOf(list []string) string {
	if len(list) == 1 {
		return list[0]
	}
	return "any of " + strings.Join(list, ", ")
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// QueueEntry is the spec as the dispatch loop queues it. attempt counts
// placements; submittedAt is the original submit time (kept across
// requeues) and enqueuedAt when this attempt joined the queue. Slices are
// copied so the entry does not alias the spec.
func (s JobSpec) QueueEntry(attempt int, submittedAt, enqueuedAt time.Time) QueueEntry {
	return QueueEntry{
		JobID:              s.Name,
		Team:               s.Team,
		Project:            s.Project,
		PriorityClass:      s.PriorityClass,
		Priority:           PriorityValue(s.PriorityClass),
		Attempt:            attempt,
		Replicas:           s.Gang.Replicas,
		GPUsPerReplica:     s.Gang.GPUsPerReplica,
		GPUMilli:           s.GPUMilli(),
		MIGProfile:         s.Gang.MIGProfile,
		GPUModels:          slices.Clone(s.Gang.GPUModels),
		CPUMilli:           s.CPUMilli(),
		MemMiB:             s.MemMiB(),
		Pools:              slices.Clone(s.Pools),
		MaxRuntime:         s.MaxRuntime.Duration,
		Preemptible:        s.Preemptible,
		Topology:           s.Gang.Topology,
		Runtime:            s.Runtime(),
		Deadline:           s.deadlineAt(submittedAt),
		Burst:              s.Burst,
		Checkpointable:     s.Checkpoint.Enabled,
		CheckpointInterval: s.Checkpoint.Interval.Duration,
		SubmittedAt:        submittedAt,
		EnqueuedAt:         enqueuedAt,
	}
}

func (s JobSpec) deadlineAt(submittedAt time.Time) time.Time {
	if s.Deadline.Duration <= 0 {
		return time.Time{}
	}
	return submittedAt.Add(s.Deadline.Duration)
}
