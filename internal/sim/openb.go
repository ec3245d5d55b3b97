package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// OpenBPool is the pool every node of an openb node list belongs to.
const OpenBPool = "openb"

// NoTime marks a task time the trace does not carry (multigpu20 has no time
// columns; pending tasks have no scheduled_time).
const NoTime int64 = -1

// Task is one row of an openb pod list, as the trace gives it.
type Task struct {
	Name     string
	CPUMilli int64
	MemMiB   int64
	// NumGPU is the number of GPUs; GPUMilli is the share of each GPU in
	// milli-GPU (below 1000 only when NumGPU is 1: GPU sharing).
	NumGPU   int
	GPUMilli int
	// Models are the GPU models the task may run on (gpu_spec); empty means
	// any.
	Models []string
	QoS    string
	Phase  string
	// Creation, Deletion and Scheduled are seconds from the start of the
	// trace, NoTime where the trace has none.
	Creation, Deletion, Scheduled int64
}

// GPUMilliTotal is the task's GPU demand in milli-GPU: what the protocol's
// arrived workload and tuning count.
func (t *Task) GPUMilliTotal() int64 { return int64(t.NumGPU) * int64(t.GPUMilli) }

// perGPUMilli is the share of each GPU the task takes (0 for CPU-only).
func (t *Task) perGPUMilli() int {
	if t.NumGPU == 0 {
		return 0
	}
	return t.GPUMilli
}

// Job is the task as placement sees it, mapped as the FGD paper does: one
// GPU with gpu_milli below 1000 is a share of one GPU; otherwise num_gpu
// whole GPUs on one node; num_gpu 0 is a CPU-only task. CPU and memory are
// per task.
func (t *Task) Job() gangway.QueueEntry {
	j := gangway.QueueEntry{
		JobID:     t.Name,
		Replicas:  1,
		CPUMilli:  t.CPUMilli,
		MemMiB:    t.MemMiB,
		GPUModels: t.Models,
	}
	switch {
	case t.NumGPU == 0:
	case t.NumGPU == 1 && t.GPUMilli < placement.Whole:
		j.GPUsPerReplica, j.GPUMilli = 1, t.GPUMilli
	default:
		j.GPUsPerReplica = t.NumGPU
	}
	return j
}

// LoadOpenBNodes reads an openb node list (openb_node_list_*.csv: columns
// sn, cpu_milli, memory_mib, gpu, model). Every node is schedulable, in
// pool "openb", with one healthy GPU of the node's model per gpu.
func LoadOpenBNodes(path string) ([]placement.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpenBNodes(f, path)
}

// ReadOpenBNodes is LoadOpenBNodes on a reader; name is used in errors.
func ReadOpenBNodes(r io.Reader, name string) ([]placement.Node, error) {
	t, err := newTable(r, name, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"})
	if err != nil {
		return nil, err
	}
	var nodes []placement.Node
	seen := map[string]int{}
	for t.next() {
		n := placement.Node{
			ID:           t.str("sn"),
			Pool:         OpenBPool,
			CapacityType: "on-prem",
			Model:        t.str("model"),
			CPUMilli:     t.int64("cpu_milli", 0, -1),
			MemMiB:       t.int64("memory_mib", 0, -1),
			Schedulable:  true,
		}
		gpus := int(t.int64("gpu", 0, 1024))
		if t.err == nil && n.ID == "" {
			t.fail("sn", "want a node name, got an empty field")
		}
		if line, dup := seen[n.ID]; dup && t.err == nil {
			t.fail("sn", fmt.Sprintf("node %q already listed on line %d", n.ID, line))
		}
		if t.err != nil {
			break
		}
		seen[n.ID] = t.line
		n.GPUs = make([]placement.GPU, gpus)
		for i := range n.GPUs {
			n.GPUs[i] = placement.GPU{Index: i, Model: n.Model, Healthy: true}
		}
		nodes = append(nodes, n)
	}
	if t.err != nil {
		return nil, t.err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%s: no nodes", name)
	}
	return nodes, nil
}

// LoadOpenB reads an openb node list and pod list, as the FGD protocol and
// the sweep take them; an error is an *InputError naming "nodes" or "tasks",
// as `gangway replay` spells those flags.
func LoadOpenB(nodesPath, tasksPath string) ([]placement.Node, []Task, error) {
	nodes, err := LoadOpenBNodes(nodesPath)
	if err != nil {
		return nil, nil, &InputError{"nodes", err}
	}
	tasks, err := LoadOpenBTasks(tasksPath)
	if err != nil {
		return nil, nil, &InputError{"tasks", err}
	}
	return nodes, tasks, nil
}

// LoadOpenBTasks reads an openb pod list (openb_pod_list_*.csv). Columns
// are found by header name: name, cpu_milli, memory_mib, num_gpu and
// gpu_milli are required; gpu_spec, qos, pod_phase, creation_time,
// deletion_time and scheduled_time are read when present (multigpu20 has
// only the first five).
func LoadOpenBTasks(path string) ([]Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpenBTasks(f, path)
}

// ReadOpenBTasks is LoadOpenBTasks on a reader; name is used in errors.
func ReadOpenBTasks(r io.Reader, name string) ([]Task, error) {
	t, err := newTable(r, name, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"})
	if err != nil {
		return nil, err
	}
	var tasks []Task
	for t.next() {
		task := Task{
			Name:      t.str("name"),
			CPUMilli:  t.int64("cpu_milli", 0, -1),
			MemMiB:    t.int64("memory_mib", 0, -1),
			NumGPU:    int(t.int64("num_gpu", 0, 1024)),
			GPUMilli:  int(t.int64("gpu_milli", 0, placement.Whole)),
			Models:    splitModels(t.str("gpu_spec")),
			QoS:       t.str("qos"),
			Phase:     t.str("pod_phase"),
			Creation:  t.time("creation_time"),
			Deletion:  t.time("deletion_time"),
			Scheduled: t.time("scheduled_time"),
		}
		if t.err == nil {
			switch {
			case task.Name == "":
				t.fail("name", "want a task name, got an empty field")
			case task.NumGPU == 0 && task.GPUMilli != 0:
				t.fail("gpu_milli", fmt.Sprintf("want 0 for a task with num_gpu 0, got %d", task.GPUMilli))
			case task.NumGPU > 0 && task.GPUMilli == 0:
				t.fail("gpu_milli", fmt.Sprintf("want 1-%d for a task with num_gpu %d, got 0", placement.Whole, task.NumGPU))
			case task.NumGPU > 1 && task.GPUMilli != placement.Whole:
				t.fail("gpu_milli", fmt.Sprintf("want %d for a task with num_gpu %d (shares of several GPUs are not supported), got %d",
					placement.Whole, task.NumGPU, task.GPUMilli))
			}
		}
		if t.err != nil {
			return nil, t.err
		}
		tasks = append(tasks, task)
	}
	if t.err != nil {
		return nil, t.err
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", name)
	}
	return tasks, nil
}

func splitModels(spec string) []string {
	var out []string
	for m := range strings.SplitSeq(spec, "|") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// table reads a CSV file by header name and remembers the first bad field,
// reported as "file:line: column: problem".
type table struct {
	name string
	r    *csv.Reader
	col  map[string]int
	row  []string
	line int
	err  error
}

func newTable(r io.Reader, name string, required []string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty file, want a header line", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &table{name: name, r: cr, col: map[string]int{}}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		t.col[h] = i
	}
	var missing []string
	for _, c := range required {
		if _, ok := t.col[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s:1: missing column %s (header has %s)", name, strings.Join(missing, ", "), strings.Join(header, ","))
	}
	return t, nil
}

// next reads the next row; false at the end or on an error (t.err).
func (t *table) next() bool {
	if t.err != nil {
		return false
	}
	row, err := t.r.Read()
	if errors.Is(err, io.EOF) {
		return false
	}
	if err != nil {
		// FieldPos is only defined for a record Read returned; after an
		// error (an unterminated quote) it panics, so the line comes from
		// the ParseError.
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			t.err = fmt.Errorf("%s:%d: %w", t.name, pe.Line, pe.Err)
		} else {
			t.err = fmt.Errorf("%s: %w", t.name, err)
		}
		return false
	}
	t.line, _ = t.r.FieldPos(0)
	t.row = row
	return true
}

func (t *table) fail(col, msg string) {
	if t.err == nil {
		t.err = fmt.Errorf("%s:%d: %s: %s", t.name, t.line, col, msg)
	}
}

// str is the trimmed field of column c, "" if the file has no such column.
func (t *table) str(c string) string {
	i, ok := t.col[c]
	if !ok {
		return ""
	}
	if i >= len(t.row) {
		t.fail(c, fmt.Sprintf("want %d fields, got %d", len(t.col), len(t.row)))
		return ""
	}
	return strings.TrimSpace(t.row[i])
}

// int64 parses column c as an integer in [lo, hi] (hi < 0: no upper bound).
func (t *table) int64(c string, lo, hi int64) int64 {
	s := t.str(c)
	if t.err != nil {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.fail(c, fmt.Sprintf("want an integer, got %q", s))
		return 0
	}
	if v < lo || (hi >= 0 && v > hi) {
		if hi >= 0 {
			t.fail(c, fmt.Sprintf("want %d-%d, got %d", lo, hi, v))
		} else {
			t.fail(c, fmt.Sprintf("want at least %d, got %d", lo, v))
		}
		return 0
	}
	return v
}

// time is an optional time column: NoTime if the column or the value is
// absent.
func (t *table) time(c string) int64 {
	if _, ok := t.col[c]; !ok {
		return NoTime
	}
	if s := t.str(c); s == "" || t.err != nil {
		return NoTime
	}
	return t.int64(c, 0, -1)
}
