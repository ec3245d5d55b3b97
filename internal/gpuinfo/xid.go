package gpuinfo

import "fmt"

// Blame says whose fault a fault is, and so what the agent does about it.
type Blame string

const (
	// BlameGPU: the hardware is at fault. The GPU is fenced (marked
	// unhealthy, no new work) and the tasks on it are checkpointed and
	// moved without spending the job's retries.
	BlameGPU Blame = "gpu"
	// BlameApp: the application is at fault (an illegal address, an
	// exception in its kernels). Its task fails; the GPU stays in service.
	BlameApp Blame = "app"
	// BlameNone: worth recording, nothing to stop.
	BlameNone Blame = "none"
)

// xidInfo is what NVIDIA's Xid catalog says about one Xid.
type xidInfo struct {
	meaning string
	blame   Blame
}

// xids are the Xids seen in practice on data-centre GPUs, with the meaning
// NVIDIA's Xid catalog gives. The application Xids are the ones NVIDIA's
// Kubernetes device plugin skips (13, 31, 43, 45, 68, 109): the GPU is
// fine, the program that ran on it was not. Every other Xid, known or
// not, blames the GPU, as the device plugin does.
var xids = map[int]xidInfo{
	8:   {"GPU stopped processing (driver timeout waiting for the GPU)", BlameGPU},
	13:  {"graphics engine exception (the application hit an illegal instruction or address)", BlameApp},
	31:  {"GPU memory page fault (the application accessed an invalid address)", BlameApp},
	32:  {"invalid or corrupted push buffer stream", BlameGPU},
	38:  {"driver firmware error", BlameGPU},
	43:  {"GPU stopped processing (the application faulted; the GPU is healthy)", BlameApp},
	45:  {"preemptive cleanup after an earlier error (the application's context was torn down)", BlameApp},
	48:  {"double-bit ECC error (uncorrectable memory error)", BlameGPU},
	61:  {"internal micro-controller breakpoint or warning", BlameGPU},
	62:  {"internal micro-controller halt", BlameGPU},
	63:  {"ECC page retirement or row remapping event recorded", BlameGPU},
	64:  {"ECC page retirement or row remapping recording failed", BlameGPU},
	68:  {"video processor exception (NVDEC/NVENC; usually the application)", BlameApp},
	69:  {"graphics engine class error", BlameGPU},
	74:  {"NVLink error", BlameGPU},
	79:  {"GPU has fallen off the bus", BlameGPU},
	92:  {"high single-bit ECC error rate", BlameGPU},
	94:  {"contained ECC error (the application was stopped; a row remap is pending)", BlameGPU},
	95:  {"uncontained ECC error (the GPU needs a reset)", BlameGPU},
	109: {"context switch timeout (usually the application)", BlameApp},
	119: {"GSP RPC timeout (GPU System Processor not responding)", BlameGPU},
	120: {"GSP error (GPU System Processor fault)", BlameGPU},
	121: {"C2C link error", BlameGPU},
	140: {"unrecovered ECC error", BlameGPU},
	154: {"GPU recovery action changed (a reset or reboot is required)", BlameGPU},
}

// Xid returns what an Xid means and whom it blames. Unknown Xids blame the
// GPU: fencing a healthy GPU costs a restart, running a broken one costs
// every job placed on it.
func Xid(code int) (meaning string, blame Blame) {
	if x, ok := xids[code]; ok {
		return x.meaning, x.blame
	}
	return fmt.Sprintf("Xid %d (not in Gangway's table; treated as a hardware fault)", code), BlameGPU
}

// AppXid reports whether NVIDIA blames the application for code.
func AppXid(code int) bool {
	_, b := Xid(code)
	return b == BlameApp
}
