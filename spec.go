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
	// RunAs picks the Unix user the job's tasks run as from those the
	// site allows its team (config jobs.users); "" is the team's default.
	RunAs string `yaml:"runAs,omitempty" json:"runAs,omitempty"`
	Gang  Gang   `yaml:"gang" json:"gang"`
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
	// EstimatedRuntime is how long one uninterrupted run is expected to
	// take; the burst decision and ETAs use it. Zero means maxRuntime.
	EstimatedRuntime Duration `yaml:"estimatedRuntime,omitempty" json:"estimatedRuntime,omitzero"`
	// Deadline is how long after submission the job must have finished;
	// zero means none. A deadline makes the burst decision weigh spot
	// interruptions against the time left.
	Deadline Duration `yaml:"deadline,omitempty" json:"deadline,omitzero"`
	// Burst lets the job run on rented cloud GPUs when that beats waiting.
	Burst Burst `yaml:"burst,omitempty" json:"burst,omitzero"`
	// Idle releases GPUs a job holds without using them (notebooks,
	// interactive sessions). Without it an idle job is reported, never stopped.
	Idle Idle `yaml:"idle,omitempty" json:"idle,omitzero"`
}

// Burst is the job's policy for rented cloud capacity.
type Burst struct {
	Enabled bool `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	// Pools lists the cloud pools the job may burst to; empty means any.
	Pools []string `yaml:"pools,omitempty" json:"pools,omitempty"`
	// CapacityTypes lists "spot" and/or "on-demand"; empty means both.
	CapacityTypes []CapacityType `yaml:"capacityTypes,omitempty" json:"capacityTypes,omitempty"`
	// MaxPricePerGPUHour caps what the job pays, in dollars; 0 means no cap
	// beyond the team's.
	MaxPricePerGPUHour float64 `yaml:"maxPricePerGPUHour,omitempty" json:"maxPricePerGPUHour,omitempty"`
}

// Idle actions.
const (
	IdleRelease              = "release"
	IdleCheckpointAndRelease = "checkpoint-and-release"
)

// Idle is the job's idle policy: when every GPU it holds stays below
// Threshold utilization for After, Action is taken.
type Idle struct {
	After  Duration `yaml:"after,omitempty" json:"after,omitzero"`
	Action string   `yaml:"action,omitempty" json:"action,omitempty"`
	// Threshold is the utilization (0–1) below which a GPU counts as idle;
	// 0 means DefaultIdleThreshold.
	Threshold float64 `yaml:"threshold,omitempty" json:"threshold,omitempty"`
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
	// GPUShare makes each replica a share of one GPU rather than whole
	// GPUs: a fraction ("0.5") or milli-GPU ("500m"), less than one GPU,
	// with GPUsPerReplica 1. Sharing says how the share is enforced on the
	// GPU: SharingTimeSlicing (the default: processes take turns) or
	// SharingMPS (NVIDIA MPS with an SM and memory limit per process).
	GPUShare string  `yaml:"gpuShare,omitempty" json:"gpuShare,omitempty"`
	Sharing  Sharing `yaml:"sharing,omitempty" json:"sharing,omitempty"`
	// MIGProfile makes each replica one MIG device of this profile
	// ("1g.10gb", "3g.40gb") instead of a whole GPU, with GPUsPerReplica
	// 1; it excludes GPUShare. See ParseMIGProfile and MIGMilli.
	MIGProfile string `yaml:"migProfile,omitempty" json:"migProfile,omitempty"`
}

// Sharing is how replicas that share one GPU share it.
type Sharing string

// Sharing modes.
const (
	SharingTimeSlicing Sharing = "time-slicing"
	SharingMPS         Sharing = "mps"
)

// Topology is a gang's locality constraint: all replicas within one group
// of Level. Required waits until that is possible; otherwise it is a
// preference the scheduler drops when it cannot be met.
type Topology struct {
	Level    Level `yaml:"level,omitempty" json:"level,omitempty"`
	Required bool  `yaml:"required,omitempty" json:"required,omitempty"`
}

// Checkpoint holds the job's checkpoint settings (docs/checkpointing.md).
type Checkpoint struct {
	// Enabled says the workload honours the checkpoint contract: it saves
	// to GANGWAY_CHECKPOINT_DIR on Signal and resumes from GANGWAY_RESUME_DIR.
	Enabled bool `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	// Signal is sent to the process to make it checkpoint and stop.
	Signal string `yaml:"signal,omitempty" json:"signal,omitempty"`
	// GracePeriod is how long the process has to save and exit after Signal.
	GracePeriod Duration `yaml:"gracePeriod,omitempty" json:"gracePeriod,omitempty"`
	// Interval is how often the workload checkpoints on its own; the burst
	// decision uses it to price the work a spot interruption loses. Zero
	// means only on a signal.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitzero"`
	// Keep is how many checkpoints are retained; 0 means DefaultKeep.
	Keep int `yaml:"keep,omitempty" json:"keep,omitempty"`
}

// Duration is a time.Duration written as "90s", "2h30m" in YAML and JSON.
type Duration struct{ time.Duration }
