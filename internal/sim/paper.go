package sim

import "path/filepath"

// paperDefault is the FGD artifact's unallocated GPU % at arrived workload
// = 100% on the default openb trace, mean of seeds 42-51
// (hkust-adsl/kubernetes-scheduler-simulator,
// experiments/analysis/expected_results/analysis_allo_discrete.csv).
var paperDefault = map[string]float64{
	"fgd":            4.77,
	"best-fit":       7.14,
	"gpu-packing":    8.22,
	"gpu-clustering": 8.35,
	"dot-product":    9.38,
	"random":         13.70,
}

// PaperReference is the paper's unallocated GPU % at 100% by policy for a
// trace, or nil when the paper has no number for it. The paper ran every
// pod list on the GPU node list only.
func PaperReference(nodesFile, tasksFile string) map[string]float64 {
	if filepath.Base(nodesFile) != "openb_node_list_gpu_node.csv" {
		return nil
	}
	switch filepath.Base(tasksFile) {
	case "openb_pod_list_default.csv":
		return paperDefault
	}
	return nil
}
