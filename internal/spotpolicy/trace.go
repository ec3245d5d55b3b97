package spotpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Trace is a spot availability trace: during tick i (of length Gap),
// Available[i] spot instances could be had (0: none, i.e. preempted or
// unobtainable) at Prices[i] per instance-hour (nil: the trace has no
// prices). The fake cloud follows one live (availability caps launches and
// reclaims instances, prices price its offers); Sim replays deadline jobs
// over one.
//
// Files are in the format of skypilot-org/spot-traces
// (../shared/traces/spot/), read by LoadTrace and ParseTrace:
//
//	{"metadata": {"gap_seconds": 32}, "data": [0, 1, 1, ...], "prices": [0.918, ...]}
//
// That repository names a file <zone>_<device>.json (device: accelerator
// and GPUs per instance, "v100_1" for a p3.2xlarge) and puts it under
// <N>-node/ when it recorded a pool of N instances, data[i] then counting
// how many of the N could be had. Metadata may also say so itself:
// "zone", "region", "device", "instance_type", "nodes", and the on-demand
// price as "on_demand_price" or "price_info": {"on_demand_price": P};
// LoadTrace fills what the metadata leaves out from the path.
type Trace struct {
	Name      string // for messages (LoadTrace: the file's base name)
	Gap       time.Duration
	Available []int
	Prices    []float64 // nil when the trace has none

	// What the trace was recorded for, where known (zero values when not).
	Zone, Device, InstanceType string
	// Nodes is the pool size the trace recorded (0: unknown; PoolSize
	// then falls back to the most instances any tick had).
	Nodes int
	// OnDemandPrice is the instance type's on-demand price per
	// instance-hour as the metadata gives it (0: not given; OnDemandFor
	// then looks the type up in OnDemandPrices).
	OnDemandPrice float64
}

// LoadTrace reads a trace file, named by its base name. It is the
// package's one function that does I/O: the fake cloud and the spot
// replay load their traces through it.
func LoadTrace(path string) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spot trace: %w", err)
	}
	t, err := ParseTrace(bytes.NewReader(data), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	t.describeFromPath(path)
	return t, nil
}

// describeFromPath fills what the metadata left out from the file's path
// in the layout of skypilot-org/spot-traces: zone and device from
// <zone>_<device>.json, the pool size from an <N>-node (or <N>-nodes)
// directory, and the instance type from the device (InstanceTypeOf).
func (t *Trace) describeFromPath(path string) {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if zone, device, ok := strings.Cut(base, "_"); ok {
		if t.Zone == "" {
			t.Zone = zone
		}
		if t.Device == "" {
			t.Device = device
		}
	}
	if t.Nodes == 0 {
		for _, dir := range strings.Split(filepath.ToSlash(filepath.Dir(path)), "/") {
			n, ok := strings.CutSuffix(dir, "-nodes")
			if !ok {
				n, ok = strings.CutSuffix(dir, "-node")
			}
			if v, err := strconv.Atoi(n); ok && err == nil && v > 0 {
				t.Nodes = v
			}
		}
	}
	if t.InstanceType == "" {
		t.InstanceType = InstanceTypeOf(t.Zone, t.Device)
	}
}

// PoolSize is how many instances the trace's pool holds: Nodes, or where
// that is unknown the most instances any tick had (at least 1).
func (t *Trace) PoolSize() int {
	if t.Nodes > 0 {
		return t.Nodes
	}
	return max(slices.Max(t.Available), 1)
}

// OnDemandFor is the on-demand price per instance-hour of the trace's
// instance type: the metadata's, else OnDemandPrices' (ok false when
// neither knows it).
func (t *Trace) OnDemandFor() (float64, bool) {
	if t.OnDemandPrice > 0 {
		return t.OnDemandPrice, true
	}
	p, ok := OnDemandPrices[t.InstanceType]
	return p, ok
}

// Bounds on a trace's tick: one shorter than minGap would round to
// nothing, and one longer than maxGap is no availability trace.
const (
	minGap = time.Millisecond
	maxGap = 24 * time.Hour
	// maxTraceSpan (about 100 years) keeps Duration, the whole trace's
	// length, inside a time.Duration.
	maxTraceSpan = 100 * 365 * 24 * time.Hour
)

// ParseTrace decodes a trace; name appears in its errors, which name the
// JSON field at fault.
func ParseTrace(r io.Reader, name string) (*Trace, error) {
	var raw struct {
		Metadata *struct {
			GapSeconds    float64 `json:"gap_seconds"`
			Zone          string  `json:"zone"`
			Region        string  `json:"region"`
			Device        string  `json:"device"`
			InstanceType  string  `json:"instance_type"`
			Nodes         int     `json:"nodes"`
			OnDemandPrice float64 `json:"on_demand_price"`
			PriceInfo     struct {
				OnDemandPrice float64 `json:"on_demand_price"`
			} `json:"price_info"`
		} `json:"metadata"`
		Data   []int     `json:"data"`
		Prices []float64 `json:"prices"`
	}
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Errorf("spot trace %s: field %s: want %s, got JSON %s", name, typeErr.Field, typeErr.Type, typeErr.Value)
		}
		return nil, fmt.Errorf("spot trace %s: not valid JSON: %w", name, err)
	}
	switch {
	case raw.Metadata == nil:
		return nil, fmt.Errorf("spot trace %s: missing \"metadata\" (want {\"metadata\":{\"gap_seconds\":N},\"data\":[...]})", name)
	case raw.Metadata.GapSeconds <= 0:
		return nil, fmt.Errorf("spot trace %s: metadata.gap_seconds must be positive, got %v", name, raw.Metadata.GapSeconds)
	case raw.Metadata.GapSeconds < minGap.Seconds() || raw.Metadata.GapSeconds > maxGap.Seconds():
		return nil, fmt.Errorf("spot trace %s: metadata.gap_seconds must be between %v and %v, got %v",
			name, minGap.Seconds(), maxGap.Seconds(), raw.Metadata.GapSeconds)
	case len(raw.Data) == 0:
		return nil, fmt.Errorf("spot trace %s: \"data\" is missing or empty", name)
	case float64(len(raw.Data))*raw.Metadata.GapSeconds > maxTraceSpan.Seconds():
		return nil, fmt.Errorf("spot trace %s: %d data ticks of %vs cover more than 100 years", name, len(raw.Data), raw.Metadata.GapSeconds)
	case raw.Prices != nil && len(raw.Prices) != len(raw.Data):
		return nil, fmt.Errorf("spot trace %s: %d prices for %d data ticks; want one price per tick", name, len(raw.Prices), len(raw.Data))
	}
	for i, n := range raw.Data {
		if n < 0 {
			return nil, fmt.Errorf("spot trace %s: data[%d] is %d; availability cannot be negative", name, i, n)
		}
	}
	for i, p := range raw.Prices {
		if p < 0 {
			return nil, fmt.Errorf("spot trace %s: prices[%d] is %v; a price cannot be negative", name, i, p)
		}
	}
	md := raw.Metadata
	od := md.OnDemandPrice
	if od == 0 {
		od = md.PriceInfo.OnDemandPrice
	}
	switch {
	case od < 0:
		return nil, fmt.Errorf("spot trace %s: metadata on-demand price %v: want a positive price", name, od)
	case md.Nodes < 0:
		return nil, fmt.Errorf("spot trace %s: metadata.nodes %d: want a positive pool size", name, md.Nodes)
	}
	zone := md.Zone
	if zone == "" {
		zone = md.Region
	}
	return &Trace{
		Name:          name,
		Gap:           time.Duration(md.GapSeconds * float64(time.Second)),
		Available:     raw.Data,
		Prices:        raw.Prices,
		Zone:          zone,
		Device:        md.Device,
		InstanceType:  md.InstanceType,
		Nodes:         md.Nodes,
		OnDemandPrice: od,
	}, nil
}

// Validate checks the shape of a trace built in code (ParseTrace's
// traces are valid).
func (t *Trace) Validate() error {
	switch {
	case t.Gap <= 0:
		return fmt.Errorf("spot trace %s: tick length %v: want a positive duration", t.Name, t.Gap)
	case len(t.Available) == 0:
		return fmt.Errorf("spot trace %s: no ticks", t.Name)
	case t.Prices != nil && len(t.Prices) != len(t.Available):
		return fmt.Errorf("spot trace %s: %d prices for %d ticks; want one per tick", t.Name, len(t.Prices), len(t.Available))
	}
	return nil
}

// Duration is how long the trace covers.
func (t *Trace) Duration() time.Duration { return time.Duration(len(t.Available)) * t.Gap }

// Availability is the share of ticks with spot available.
func (t *Trace) Availability() float64 {
	up := 0
	for _, n := range t.Available {
		if n > 0 {
			up++
		}
	}
	return float64(up) / float64(len(t.Available))
}

// Tick is the number of the tick that offset (from the trace's start)
// falls in, not wrapped: tick k covers [k*Gap, (k+1)*Gap).
func (t *Trace) Tick(offset time.Duration) int {
	k := int(offset / t.Gap)
	if offset < 0 && offset%t.Gap != 0 {
		k--
	}
	return k
}

// wrap maps a tick number into the trace, so a trace replays for ever.
func (t *Trace) wrap(k int) int {
	n := len(t.Available)
	return ((k % n) + n) % n
}

// At is the availability and price (ok false when the trace has no prices)
// at offset from the trace's start, wrapping around its end.
func (t *Trace) At(offset time.Duration) (available int, price float64, ok bool) {
	return t.AtTick(t.Tick(offset))
}

// AtTick is the availability and price (ok false when the trace has no
// prices) of tick k, wrapping around the trace's end.
func (t *Trace) AtTick(k int) (available int, price float64, ok bool) {
	i := t.wrap(k)
	if t.Prices != nil {
		return t.Available[i], t.Prices[i], true
	}
	return t.Available[i], 0, false
}

// InterruptionRate is how often the trace took instances away, in
// interruptions per instance-hour: every drop in availability counts the
// instances lost, divided by the instance-hours available.
func (t *Trace) InterruptionRate() float64 {
	lost, held := 0, 0
	for i, n := range t.Available {
		held += n
		if i > 0 && n < t.Available[i-1] {
			lost += t.Available[i-1] - n
		}
	}
	if held == 0 {
		return 0
	}
	return float64(lost) / (float64(held) * t.Gap.Hours())
}

// MeanPrice is the mean of the trace's prices (0, false when it has none).
func (t *Trace) MeanPrice() (float64, bool) {
	if len(t.Prices) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, p := range t.Prices {
		sum += p
	}
	return sum / float64(len(t.Prices)), true
}

// ScalePrices returns the trace with its prices scaled so their mean is
// price, and the trace itself when it has no prices or price is not
// positive: a trace recorded for one instance type can drive a pool of
// another, keeping its movement at the pool's own price level.
func (t *Trace) ScalePrices(price float64) *Trace {
	mean, ok := t.MeanPrice()
	if !ok || price <= 0 || mean <= 0 {
		return t
	}
	out := *t
	out.Prices = make([]float64, len(t.Prices))
	for i, p := range t.Prices {
		// To a millionth of a dollar an hour: the mean of a constant
		// trace is not its price to the last bit, and 12.0000000000008
		// is not a price anyone quotes.
		out.Prices[i] = math.Round(p*price/mean*1e6) / 1e6
	}
	return &out
}

// LongestAvailable is the first tick of the trace's longest run of ticks
// with capacity (0 when it has none): where a run started on the trace
// goes longest before a preemption.
func (t *Trace) LongestAvailable() int {
	best, bestAt, run := 0, 0, 0
	for i, n := range t.Available {
		if n == 0 {
			run = 0
			continue
		}
		run++
		if run > best {
			best, bestAt = run, i-run+1
		}
	}
	return bestAt
}
