// Command cudaprobe is the workload of the agent's real-GPU sharing test
// (internal/agent/realgpu_test.go): it opens the CUDA driver (libcuda.so.1,
// loaded at run time, so it builds without the CUDA toolkit), reports the
// device it was given (CUDA_VISIBLE_DEVICES), creates a context, allocates
// memory, spins one thread on the GPU for -spin, holds the context for
// -hold, and prints what it saw as one JSON line. Under MPS it also reports
// the SMs its context may use and whether an allocation past
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT was refused.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;
typedef struct { unsigned char bytes[16]; } CUuuid;
typedef struct { int type; union { struct { unsigned int val; } smCount; } param; } CUexecAffinityParam;

static void *lib;
static CUresult (*p_init)(unsigned int);
static CUresult (*p_count)(int *);
static CUresult (*p_get)(CUdevice *, int);
static CUresult (*p_name)(char *, int, CUdevice);
static CUresult (*p_uuid)(CUuuid *, CUdevice);
static CUresult (*p_mem)(size_t *, CUdevice);
static CUresult (*p_attr)(int *, int, CUdevice);
static CUresult (*p_ctx)(CUcontext *, unsigned int, CUdevice);
static CUresult (*p_affinity)(CUexecAffinityParam *, int);
static CUresult (*p_alloc)(CUdeviceptr *, size_t);
static CUresult (*p_free)(CUdeviceptr);
static CUresult (*p_module)(CUmodule *, const void *);
static CUresult (*p_function)(CUfunction *, CUmodule, const char *);
static CUresult (*p_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
static CUresult (*p_sync)(void);
static CUresult (*p_destroy)(CUcontext);
static CUresult (*p_errname)(CUresult, const char **);

static void *sym(const char *a, const char *b) {
	void *p = dlsym(lib, a);
	if (!p && b) p = dlsym(lib, b);
	return p;
}

// load returns NULL, or what it could not find.
static const char *load(void) {
	lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) return dlerror();
#define NEED(v, a, b) if (!(*(void **)&v = sym(a, b))) return a;
	NEED(p_init, "cuInit", NULL)
	NEED(p_count, "cuDeviceGetCount", NULL)
	NEED(p_get, "cuDeviceGet", NULL)
	NEED(p_name, "cuDeviceGetName", NULL)
	NEED(p_uuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid")
	NEED(p_mem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem")
	NEED(p_attr, "cuDeviceGetAttribute", NULL)
	NEED(p_ctx, "cuCtxCreate_v2", "cuCtxCreate")
	NEED(p_alloc, "cuMemAlloc_v2", "cuMemAlloc")
	NEED(p_free, "cuMemFree_v2", "cuMemFree")
	NEED(p_module, "cuModuleLoadData", NULL)
	NEED(p_function, "cuModuleGetFunction", NULL)
	NEED(p_launch, "cuLaunchKernel", NULL)
	NEED(p_sync, "cuCtxSynchronize", NULL)
	NEED(p_destroy, "cuCtxDestroy_v2", "cuCtxDestroy")
	NEED(p_errname, "cuGetErrorName", NULL)
	*(void **)&p_affinity = sym("cuCtxGetExecAffinity", NULL); // CUDA 11.4+
	return NULL;
}

static const char *errname(CUresult r) {
	const char *s = "unknown";
	if (p_errname) p_errname(r, &s);
	return s;
}

static CUresult cu_init(void) { return p_init(0); }
static CUresult cu_count(int *n) { return p_count(n); }
static CUresult cu_get(CUdevice *d) { return p_get(d, 0); }
static CUresult cu_name(char *s, int n, CUdevice d) { return p_name(s, n, d); }
static CUresult cu_uuid(unsigned char *out, CUdevice d) {
	CUuuid u;
	CUresult r = p_uuid(&u, d);
	for (int i = 0; i < 16; i++) out[i] = u.bytes[i];
	return r;
}
static CUresult cu_mem(size_t *m, CUdevice d) { return p_mem(m, d); }
static CUresult cu_attr(int *v, int a, CUdevice d) { return p_attr(v, a, d); }
static CUresult cu_ctx(CUcontext *c, CUdevice d) { return p_ctx(c, 0, d); }
static CUresult cu_affinity(unsigned int *sms) {
	if (!p_affinity) return -1;
	CUexecAffinityParam p;
	CUresult r = p_affinity(&p, 0); // CU_EXEC_AFFINITY_TYPE_SM_COUNT
	*sms = p.param.smCount.val;
	return r;
}
static CUresult cu_alloc(CUdeviceptr *p, size_t n) { return p_alloc(p, n); }
static CUresult cu_free(CUdeviceptr p) { return p_free(p); }
static CUresult cu_sync(void) { return p_sync(); }
static CUresult cu_destroy(CUcontext c) { return p_destroy(c); }

// spin waits on the GPU for cycles clock cycles, on one thread.
static const char spinPTX[] =
	".version 7.0\n"
	".target sm_70\n"
	".address_size 64\n"
	".visible .entry spin(.param .u64 cycles)\n"
	"{\n"
	"	.reg .pred %p;\n"
	"	.reg .u64 %rd<5>;\n"
	"	ld.param.u64 %rd1, [cycles];\n"
	"	mov.u64 %rd2, %clock64;\n"
	"LOOP:\n"
	"	mov.u64 %rd3, %clock64;\n"
	"	sub.u64 %rd4, %rd3, %rd2;\n"
	"	setp.lt.u64 %p, %rd4, %rd1;\n"
	"	@%p bra LOOP;\n"
	"	ret;\n"
	"}\n";

static CUresult cu_spin(unsigned long long cycles) {
	CUmodule m;
	CUfunction f;
	CUresult r = p_module(&m, spinPTX);
	if (r) return r;
	if ((r = p_function(&f, m, "spin"))) return r;
	void *args[] = {&cycles};
	if ((r = p_launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL))) return r;
	return p_sync();
}
*/
import "C"

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// Report is what the probe saw; realgpu_test.go reads the same fields.
type Report struct {
	Visible     string `json:"visible"`
	Devices     int    `json:"devices"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"` // hex, without a GPU- or MIG- prefix
	MemMiB      int64  `json:"memMiB"`
	SMs         int    `json:"sms"`
	AffinitySMs int    `json:"affinitySMs"` // -1: not reported
	// MemLimitMiB is CUDA_MPS_PINNED_DEVICE_MEM_LIMIT for device 0 (0:
	// unset); OverLimitRefused whether allocating past it failed.
	MemLimitMiB      int64     `json:"memLimitMiB,omitempty"`
	OverLimitRefused *bool     `json:"overLimitRefused,omitempty"`
	ContextAt        time.Time `json:"contextAt"`
	SpinStart        time.Time `json:"spinStart"`
	SpinEnd          time.Time `json:"spinEnd"`
	DoneAt           time.Time `json:"doneAt"`
	Error            string    `json:"error,omitempty"`
}

func main() {
	spin := flag.Duration("spin", 1500*time.Millisecond, "how long one GPU thread spins")
	hold := flag.Duration("hold", 1500*time.Millisecond, "how long the context is held after the spin")
	flag.Parse()
	r := Report{Visible: os.Getenv("CUDA_VISIBLE_DEVICES"), AffinitySMs: -1}
	err := probe(&r, *spin, *hold)
	if err != nil {
		r.Error = err.Error()
	}
	r.DoneAt = time.Now()
	_ = json.NewEncoder(os.Stdout).Encode(r)
	if err != nil {
		os.Exit(1)
	}
}

func check(what string, res C.CUresult) error {
	if res != 0 {
		return fmt.Errorf("%s: %s (%d)", what, C.GoString(C.errname(res)), int(res))
	}
	return nil
}

func probe(r *Report, spin, hold time.Duration) error {
	if missing := C.load(); missing != nil {
		return fmt.Errorf("CUDA driver: %s", C.GoString(missing))
	}
	if err := check("cuInit", C.cu_init()); err != nil {
		return err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.cu_count(&n)); err != nil {
		return err
	}
	r.Devices = int(n)
	if n == 0 {
		return fmt.Errorf("no CUDA device visible")
	}
	var dev C.CUdevice
	if err := check("cuDeviceGet", C.cu_get(&dev)); err != nil {
		return err
	}
	name := make([]byte, 256)
	if err := check("cuDeviceGetName", C.cu_name((*C.char)(unsafe.Pointer(&name[0])), 256, dev)); err != nil {
		return err
	}
	r.Name = strings.TrimRight(string(name), "\x00")
	var u [16]byte
	if err := check("cuDeviceGetUuid", C.cu_uuid((*C.uchar)(unsafe.Pointer(&u[0])), dev)); err != nil {
		return err
	}
	r.UUID = fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	var mem C.size_t
	if err := check("cuDeviceTotalMem", C.cu_mem(&mem, dev)); err != nil {
		return err
	}
	r.MemMiB = int64(mem) >> 20
	var sms, clockKHz C.int
	if err := check("multiprocessor count", C.cu_attr(&sms, 16, dev)); err != nil {
		return err
	}
	if err := check("clock rate", C.cu_attr(&clockKHz, 13, dev)); err != nil {
		return err
	}
	r.SMs = int(sms)
	var ctx C.CUcontext
	if err := check("cuCtxCreate", C.cu_ctx(&ctx, dev)); err != nil {
		return err
	}
	defer C.cu_destroy(ctx)
	r.ContextAt = time.Now()
	var affinity C.uint
	if C.cu_affinity(&affinity) == 0 {
		r.AffinitySMs = int(affinity)
	}
	var p C.CUdeviceptr
	if err := check("cuMemAlloc 64 MiB", C.cu_alloc(&p, 64<<20)); err != nil {
		return err
	}
	C.cu_free(p)
	if limit := pinnedLimitMiB(os.Getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")); limit > 0 {
		r.MemLimitMiB = limit
		refused := C.cu_alloc(&p, C.size_t((limit+1024)<<20)) != 0
		if !refused {
			C.cu_free(p)
		}
		r.OverLimitRefused = &refused
	}
	r.SpinStart = time.Now()
	if err := check("spin kernel", C.cu_spin(C.ulonglong(spin.Seconds()*float64(clockKHz)*1000))); err != nil {
		return err
	}
	r.SpinEnd = time.Now()
	time.Sleep(hold)
	return nil
}

// pinnedLimitMiB reads device 0's limit from "0=35840M" ("G", "MB", "GB"
// too); 0 when there is none.
func pinnedLimitMiB(s string) int64 {
	for _, part := range strings.Split(s, ",") {
		dev, limit, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || dev != "0" {
			continue
		}
		limit = strings.TrimSuffix(strings.ToUpper(limit), "B")
		mult := int64(1)
		switch {
		case strings.HasSuffix(limit, "G"):
			mult, limit = 1024, strings.TrimSuffix(limit, "G")
		case strings.HasSuffix(limit, "M"):
			limit = strings.TrimSuffix(limit, "M")
		}
		v, err := strconv.ParseInt(limit, 10, 64)
		if err != nil {
			return 0
		}
		return v * mult
	}
	return 0
}
