package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// TestRealGPUSharing runs two real CUDA processes on one GPU in each
// sharing mode, with the environment the agent gives tasks
// (Agent.environ) and the node inventory it registers (NVML):
//
//   - time-slicing: both get the same GPU in CUDA_VISIBLE_DEVICES, see that
//     GPU (its UUID) and hold contexts on it at the same time;
//   - mps: the same under an MPS control daemon (the node's if one runs,
//     else one the test starts in its own pipe directory and stops), each
//     client, a quarter share, limited to its share of the SMs
//     (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and of the memory
//     (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: an allocation past it is refused);
//   - mig: two MIG devices of one GPU in MIG mode, each process seeing only
//     its own device (by MIG UUID) with that device's memory.
//
// The workload is testdata/cudaprobe, which loads the CUDA driver at run
// time, spins a GPU thread and reports what it saw. The test never changes
// the GPUs' settings (MIG mode, compute mode): a mode the machine does not
// offer is skipped, saying why. It runs only with GANGWAY_GPU_TESTS=1 on a
// machine with an NVIDIA driver (docs/jobspec.md, "Checking sharing on a
// real GPU").
func TestRealGPUSharing(t *testing.T) {
	if os.Getenv("GANGWAY_GPU_TESTS") != "1" {
		t.Skip("real-GPU test: set GANGWAY_GPU_TESTS=1 on a machine with an NVIDIA GPU to run it")
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no NVIDIA driver here: nvidia-smi is not on PATH")
	}
	g, err := OpenNodeGPUs(nvml.New(), NodeGPUOptions{NodeID: "gpu-test", Pool: "test", Addr: "127.0.0.1"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Skipf("no NVIDIA GPU through NVML: %v", err)
	}
	defer func() { _ = g.Close() }()
	node := g.Node
	for _, s := range node.GPUs {
		t.Logf("slot %d: %s %s (%d MiB) MIG %q", s.Index, s.Model, s.UUID, s.MemMiB, s.MIGProfile)
	}
	probe := cudaProbe(t)
	a := New(Config{Node: node}, nil)

	whole := -1
	for _, s := range node.GPUs {
		if !s.IsMIG() {
			whole = s.Index
			break
		}
	}
	t.Run("time-slicing", func(t *testing.T) {
		if whole < 0 {
			t.Skip("every GPU is in MIG mode: no whole GPU to time-slice")
		}
		if mode := computeMode(node.GPUs[whole].UUID); strings.HasPrefix(mode, "Exclusive") {
			t.Skipf("GPU %d is in %s compute mode: one process at a time (or one MPS server) may use it", whole, mode)
		}
		rs := runPair(t, a, probe, shared(whole, gangway.SharingTimeSlicing), shared(whole, gangway.SharingTimeSlicing))
		for i, r := range rs {
			if r.Devices != 1 || !sameUUID(r.UUID, node.GPUs[whole].UUID) {
				t.Errorf("process %d saw %d devices, %s; want GPU %d alone, %s", i, r.Devices, r.UUID, whole, node.GPUs[whole].UUID)
			}
		}
	})
	t.Run("mps", func(t *testing.T) {
		if whole < 0 {
			t.Skip("every GPU is in MIG mode: no whole GPU for MPS")
		}
		if _, err := exec.LookPath("nvidia-cuda-mps-control"); err != nil {
			t.Skip("no MPS here: nvidia-cuda-mps-control is not on PATH")
		}
		logDir := startMPS(t)
		// Quarter shares: each client's memory limit plus the gigabyte the
		// probe tries past it fits beside the other's, so a refusal is the
		// limit's doing, not a full GPU's.
		const milli = 250
		in := shared(whole, gangway.SharingMPS)
		in.GPUMilli = milli
		rs := runPair(t, a, probe, in, in)
		for i, r := range rs {
			if !sameUUID(r.UUID, node.GPUs[whole].UUID) {
				t.Errorf("process %d saw %s, want GPU %d, %s", i, r.UUID, whole, node.GPUs[whole].UUID)
			}
			// 25% of the threads: about a quarter of the SMs (MPS rounds
			// to its own granularity).
			if want := r.SMs * milli / 1000; r.AffinitySMs >= 0 && (r.AffinitySMs >= r.SMs || r.AffinitySMs > want+r.SMs/10+1) {
				t.Errorf("process %d may use %d of %d SMs, want about %d", i, r.AffinitySMs, r.SMs, want)
			}
			if r.OverLimitRefused == nil || !*r.OverLimitRefused {
				t.Errorf("process %d: allocating past its %d MiB limit was not refused (%v); MPS logs: %s", i, r.MemLimitMiB, r.OverLimitRefused, mpsLogs(logDir))
			}
		}
	})
	t.Run("mig", func(t *testing.T) {
		var pair []gangway.GPU
		for _, s := range node.GPUs {
			if !s.IsMIG() {
				continue
			}
			if len(pair) == 1 && pair[0].ParentIndex != s.ParentIndex {
				continue
			}
			if pair = append(pair, s); len(pair) == 2 {
				break
			}
		}
		if len(pair) < 2 {
			t.Skip("no GPU in MIG mode with two MIG devices: an operator partitions one (nvidia-smi mig); the test does not change MIG settings")
		}
		in := func(s gangway.GPU) workflows.RunTaskInput {
			return workflows.RunTaskInput{GPUs: []int{s.Index}, MIGProfile: s.MIGProfile}
		}
		rs := runPair(t, a, probe, in(pair[0]), in(pair[1]))
		for i, r := range rs {
			want := pair[i]
			if r.Devices != 1 || !sameUUID(r.UUID, want.UUID) || !strings.Contains(r.Name, "MIG") {
				t.Errorf("process %d saw %d devices, %s %q; want MIG device %s alone", i, r.Devices, r.UUID, r.Name, want.UUID)
			}
			if diff := r.MemMiB - int64(want.MemMiB); diff > int64(want.MemMiB)/10 || -diff > int64(want.MemMiB)/10 {
				t.Errorf("process %d saw %d MiB, want its MIG device's %d", i, r.MemMiB, want.MemMiB)
			}
		}
		if rs[0].UUID == rs[1].UUID {
			t.Errorf("both processes saw %s: the MIG devices are not apart", rs[0].UUID)
		}
	})
}

// computeMode is nvidia-smi's compute mode of the GPU with uuid ("" if it
// cannot tell).
func computeMode(uuid string) string {
	out, err := exec.Command("nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader", "-i", uuid).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// probeReport is what testdata/cudaprobe prints.
type probeReport struct {
	Visible          string    `json:"visible"`
	Devices          int       `json:"devices"`
	Name             string    `json:"name"`
	UUID             string    `json:"uuid"`
	MemMiB           int64     `json:"memMiB"`
	SMs              int       `json:"sms"`
	AffinitySMs      int       `json:"affinitySMs"`
	MemLimitMiB      int64     `json:"memLimitMiB"`
	OverLimitRefused *bool     `json:"overLimitRefused"`
	ContextAt        time.Time `json:"contextAt"`
	SpinStart        time.Time `json:"spinStart"`
	SpinEnd          time.Time `json:"spinEnd"`
	DoneAt           time.Time `json:"doneAt"`
	Error            string    `json:"error"`
}

// cudaProbe is the probe binary: $GANGWAY_CUDA_PROBE, or built now.
func cudaProbe(t *testing.T) string {
	if p := os.Getenv("GANGWAY_CUDA_PROBE"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "cudaprobe")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/cudaprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the CUDA probe: %v\n%s", err, b)
	}
	return out
}

// shared is a half-GPU task on GPU g in mode.
func shared(g int, mode gangway.Sharing) workflows.RunTaskInput {
	return workflows.RunTaskInput{GPUs: []int{g}, GPUMilli: 500, Sharing: mode}
}

// runPair claims the GPUs of both tasks as RunTask does, runs the probe
// for both at once with the environment the agent gives each, and checks
// that both succeeded and held their contexts at the same time.
func runPair(t *testing.T, a *Agent, probe string, tasks ...workflows.RunTaskInput) []probeReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, len(tasks))
	outs := make([]*bytes.Buffer, len(tasks))
	for i := range tasks {
		in := &tasks[i]
		in.JobID, in.Team, in.Attempt, in.Rank, in.WorldSize, in.NodeID = fmt.Sprintf("gpu-test-%d", i), "test", 1, 0, 1, a.cfg.Node.ID
		task := fmt.Sprintf("%s/attempt-1/rank-0", in.JobID)
		if err := a.claimMIG(in.GPUs, in.MIGProfile); err != nil {
			t.Fatal(err)
		}
		if err := a.claim(in.GPUs, in.GPUMilli, task); err != nil {
			t.Fatal(err)
		}
		defer a.unclaim(in.GPUs, task)
		cmds[i] = exec.CommandContext(ctx, probe, "-spin", "2s", "-hold", "1500ms")
		cmds[i].Env = a.environ(*in, nil, "", "")
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		t.Logf("task %d: %s", i, strings.Join(gangwayEnv(cmds[i].Env), " "))
	}
	for i, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatalf("start process %d: %v", i, err)
		}
	}
	rs := make([]probeReport, len(cmds))
	for i, c := range cmds {
		err := c.Wait()
		line := strings.TrimSpace(outs[i].String())
		if j := strings.LastIndexByte(line, '\n'); j >= 0 {
			line = line[j+1:]
		}
		if jerr := json.Unmarshal([]byte(line), &rs[i]); jerr != nil || err != nil || rs[i].Error != "" {
			t.Fatalf("process %d: %v, %v: %s", i, err, jerr, outs[i])
		}
		r := rs[i]
		t.Logf("process %d: %s (%s, %d MiB, %d SMs, %d for its context), spun 2s of GPU time in %v",
			i, r.Name, r.UUID, r.MemMiB, r.SMs, r.AffinitySMs, r.SpinEnd.Sub(r.SpinStart).Round(time.Millisecond))
	}
	if !(rs[0].ContextAt.Before(rs[1].DoneAt) && rs[1].ContextAt.Before(rs[0].DoneAt)) {
		t.Errorf("the processes held their contexts %v–%v and %v–%v: not at the same time",
			rs[0].ContextAt, rs[0].DoneAt, rs[1].ContextAt, rs[1].DoneAt)
	}
	return rs
}

// gangwayEnv is the variables the agent sets for sharing, for the log.
func gangwayEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "CUDA_") || strings.HasPrefix(kv, "GANGWAY_GPU") || strings.HasPrefix(kv, "GANGWAY_MIG") {
			out = append(out, kv)
		}
	}
	return out
}

// sameUUID compares a UUID as the CUDA driver reports it (hex) with
// NVML's ("GPU-…", "MIG-…").
func sameUUID(cuda, nvml string) bool {
	_, hex, _ := strings.Cut(nvml, "-")
	return cuda != "" && strings.EqualFold(cuda, hex)
}

// startMPS makes sure an MPS control daemon serves the test's processes:
// the node's, if CUDA_MPS_PIPE_DIRECTORY names one that runs, else one
// started in a directory of the test's own and stopped when it ends. It
// returns the daemon's log directory.
func startMPS(t *testing.T) string {
	if dir := os.Getenv("CUDA_MPS_PIPE_DIRECTORY"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "control")); err == nil {
			t.Logf("using the MPS control daemon of %s", dir)
			return os.Getenv("CUDA_MPS_LOG_DIRECTORY")
		}
	}
	// Unix socket paths are short: keep the pipe directory near /tmp.
	dir, err := os.MkdirTemp("", "mps")
	if err != nil {
		t.Fatal(err)
	}
	pipes, logs := filepath.Join(dir, "pipe"), filepath.Join(dir, "log")
	for _, d := range []string{pipes, logs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", pipes)
	t.Setenv("CUDA_MPS_LOG_DIRECTORY", logs)
	if b, err := exec.Command("nvidia-cuda-mps-control", "-d").CombinedOutput(); err != nil {
		t.Skipf("could not start an MPS control daemon: %v: %s", err, b)
	}
	t.Cleanup(func() {
		quit := exec.Command("nvidia-cuda-mps-control")
		quit.Stdin = strings.NewReader("quit\n")
		if b, err := quit.CombinedOutput(); err != nil {
			t.Errorf("stop the MPS control daemon: %v: %s", err, b)
		}
		t.Logf("MPS logs: %s", mpsLogs(logs))
		_ = os.RemoveAll(dir)
	})
	t.Logf("started an MPS control daemon in %s", pipes)
	return logs
}

// mpsLogs is the tail of the MPS daemon's logs.
func mpsLogs(dir string) string {
	if dir == "" {
		return "(no log directory)"
	}
	var b strings.Builder
	for _, f := range []string{"control.log", "server.log"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "\n%s: %s", f, strings.Join(lines[max(0, len(lines)-8):], "\n  "))
	}
	return b.String()
}
