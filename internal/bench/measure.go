package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// quantile is the q-quantile of sorted values by the nearest rank; 0 when
// there are none.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// peakRate is the most events in any window of the given length, per
// second; starts are sorted.
func peakRate(starts []time.Time, window time.Duration) float64 {
	if len(starts) == 0 || window <= 0 {
		return 0
	}
	best, lo := 0, 0
	for hi := range starts {
		for starts[hi].Sub(starts[lo]) >= window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return float64(best) / window.Seconds()
}

// cycleMetric is the server's dispatch cycle histogram.
const cycleMetric = "gangway_dispatch_cycle_duration_seconds"

// histogram is a cumulative Prometheus histogram summed over its labels.
type histogram struct {
	bounds []float64 // upper bounds, rising; the last is +Inf
	counts []float64 // cumulative
	count  float64
}

// scrapeCycles reads the cycle histogram from the server's /metrics.
func scrapeCycles(ctx context.Context, addr string) (histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return histogram{}, fmt.Errorf("metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return histogram{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return histogram{}, fmt.Errorf("metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return histogram{}, fmt.Errorf("metrics: %w", err)
	}
	var h histogram
	fam := fams[cycleMetric]
	if fam == nil {
		return h, nil // no cycle yet
	}
	for _, m := range fam.GetMetric() {
		mh := m.GetHistogram()
		if mh == nil {
			continue
		}
		if h.bounds == nil {
			for _, b := range mh.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
			h.bounds = append(h.bounds, math.Inf(1))
			h.counts = make([]float64, len(h.bounds))
		}
		for i, b := range mh.GetBucket() {
			if i < len(h.counts)-1 {
				h.counts[i] += float64(b.GetCumulativeCount())
			}
		}
		h.counts[len(h.counts)-1] += float64(mh.GetSampleCount())
		h.count += float64(mh.GetSampleCount())
	}
	return h, nil
}

// minus is what was observed between before and h.
func (h histogram) minus(before histogram) histogram {
	if len(before.counts) != len(h.counts) {
		return h
	}
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), count: h.count - before.count}
	for i := range h.counts {
		out.counts[i] = h.counts[i] - before.counts[i]
	}
	return out
}

// quantile interpolates linearly within the bucket the q-quantile falls
// in, as Prometheus's histogram_quantile does; the +Inf bucket reports its
// lower bound.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 {
		return 0
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if math.IsInf(h.bounds[i], 1) {
				return lower
			}
			if c == below {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.bounds[i], c
	}
	return lower
}

// components are the CPU consumers a step reports, in report order.
var components = []string{"redis", "temporal", "gangway", "tasks"}

// pids are the processes whose CPU a step reads.
type pids struct{ redis, temporal int }

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTick = 100

// read returns each component's CPU seconds so far: the two servers', this
// process's own (server, agent host, load generator), and its reaped
// children's (the tasks).
func (p pids) read() cpuTimes {
	out := cpuTimes{}
	if u, s, _, _, err := procCPU(strconv.Itoa(p.redis)); err == nil {
		out["redis"] = u + s
	}
	if u, s, _, _, err := procCPU(strconv.Itoa(p.temporal)); err == nil {
		out["temporal"] = u + s
	}
	if u, s, cu, cs, err := procCPU("self"); err == nil {
		out["gangway"] = u + s
		out["tasks"] = cu + cs
	}
	return out
}

// procCPU reads utime, stime, cutime and cstime of /proc/<pid>/stat, in
// seconds.
func procCPU(pid string) (utime, stime, cutime, cstime float64, err error) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("cpu of %s: %w", pid, err)
	}
	return parseStat(string(data))
}

// parseStat reads the CPU fields of a /proc/<pid>/stat line. The command
// name (field 2) may hold spaces and parentheses, so fields are counted
// from the last ')'.
func parseStat(line string) (utime, stime, cutime, cstime float64, err error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, 0, 0, 0, fmt.Errorf("stat line without a command: %.40q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state); utime..cstime are fields 14..17.
	if len(f) < 15 {
		return 0, 0, 0, 0, fmt.Errorf("stat line with %d fields after the command, want at least 15", len(f))
	}
	var v [4]float64
	for k := range v {
		n, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return 0, 0, 0, 0, fmt.Errorf("stat field %d: %w", 14+k, err)
		}
		v[k] = n / clockTick
	}
	return v[0], v[1], v[2], v[3], nil
}

// cpuTimes are CPU seconds by component.
type cpuTimes map[string]float64

// minus is the CPU used between before and p, to 10 ms.
func (p cpuTimes) minus(before cpuTimes) map[string]float64 {
	out := map[string]float64{}
	for k, v := range p {
		out[k] = math.Round((v-before[k])*100) / 100
	}
	return out
}

// busiest names the component that used the most CPU.
func busiest(cpu map[string]float64) string {
	best := ""
	for _, k := range components {
		if best == "" || cpu[k] > cpu[best] {
			best = k
		}
	}
	return best
}

// loadAvg is the 1-minute load average; 0 if /proc/loadavg cannot be read.
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
