package gangway

import "time"

// JobSpec is what a user submits: the YAML document of docs/jobspec.md.
// Field names are the YAML keys; ParseJobSpec decodes strictly and Validate
// names the offending field in every error.
type JobSpec struct {
	// Name is the job's ID: unique, a DNS label (lowercase letters, digits, '-').
	Name          string            `yaml:"name" json:"name"`
	Team          string            `yaml:"team" json:"team"`
	Project       string            `yaml:"project,omitempty" json:"project,omitempty"`
	PriorityClass string            `yaml:"priorityClass,omitempty" json:"priorityClass,omitempty"`
	Command       []string          `yaml:"command" json:"command"`
	Args          []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env           map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	WorkingDir    string            `yaml:"workingDir,omitempty" json:"workingDir,omitempty"`
	Gang          Gang              `yaml:"gang" json:"gang"`
	// MaxRuntime bounds one attempt; a run that exceeds it fails for good.
	MaxRuntime Duration `yaml:"maxRuntime,omitempty" json:"maxRuntime,omitempty"`
	// Retries is how many times a gang that failed by its own fault is run
	// again. Restarts caused by infrastructure (a lost node) never count.
	Retries    int        `yaml:"retries,omitempty" json:"retries,omitempty"`
	Checkpoint Checkpoint `yaml:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	// Preemptible lets the scheduler stop the job for higher-priority work
	// (it is requeued, keeping its place, without spending a retry).
	Preemptible bool `yaml:"preemptible,omitempty" json:"preemptible,omitempty"`
	// Pools the job may run in; empty means any on-prem pool.
	Pools []string `yaml:"pools,omitempty" json:"pools,omitempty"`
}

// Gang is the shape of a job: Replicas members, each with GPUsPerReplica
// whole GPUs on one node, all started together or not at all.
type Gang struct {
	Replicas       int `yaml:"replicas" json:"replicas"`
	GPUsPerReplica int `yaml:"gpusPerReplica" json:"gpusPerReplica"`
	// GPUModels lists the models the job may run on; empty means any.
	GPUModels []string `yaml:"gpuModels,omitempty" json:"gpuModels,omitempty"`
	// CPU per replica in cores ("16", "500m") and memory ("64Gi", "512Mi").
	CPU    string `yaml:"cpu,omitempty" json:"cpu,omitempty"`
	Memory string `yaml:"memory,omitempty" json:"memory,omitempty"`
	// Topology keeps the gang's replicas together.
	Topology Topology `yaml:"topology,omitempty" json:"topology,omitzero"`
}

// Topology levels a gang can be kept within, innermost first.
const (
	TopologyNVLink = "nvlink" // GPUs sharing NVLink/NVSwitch (a rack-scale domain spans nodes)
	TopologyNode   = "node"
	TopologyRack   = "rack"
	TopologyBlock  = "block"
)

// Topology is a gang's locality constraint: all replicas within one group
// of Level. Required waits until that is possible; otherwise it is a
// preference the scheduler drops when it cannot be met.
type Topology struct {
	Level    string `yaml:"level,omitempty" json:"level,omitempty"`
	Required bool   `yaml:"required,omitempty" json:"required,omitempty"`
}

// Checkpoint holds the job's checkpoint settings. They are accepted and
// validated now; the checkpoint/resume path that acts on them is built on top.
type Checkpoint struct {
	Enabled     bool     `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	Signal      string   `yaml:"signal,omitempty" json:"signal,omitempty"`
	GracePeriod Duration `yaml:"gracePeriod,omitempty" json:"gracePeriod,omitempty"`
}

// Duration is a time.Duration written as "90s", "2h30m" in YAML and JSON.
type Duration struct{ time.Duration }
