package gangway

import (
	"regexp"
	"time"
)

// CapacityType is how a pool's GPUs are paid for: owned (on-prem), rented
// by the hour and reclaimable (spot), or rented by the hour (on-demand).
// Nodes, offers, assignments and usage records all carry one.
type CapacityType string

// Capacity types.
const (
	CapacityOnPrem   CapacityType = "on-prem"
	CapacitySpot     CapacityType = "spot"
	CapacityOnDemand CapacityType = "on-demand"
)

// Cloud reports whether the capacity is rented from a cloud.
func (c CapacityType) Cloud() bool { return c == CapacitySpot || c == CapacityOnDemand }

// Level is a topology level a gang can be kept within. The values are the
// strings of the job spec's gang.topology.level; Rank orders them.
type Level string

// Topology levels, innermost first. LevelNone ("") means no constraint.
const (
	LevelNone   Level = ""
	LevelNVLink Level = "nvlink" // GPUs sharing NVLink/NVSwitch (a rack-scale domain spans nodes)
	LevelNode   Level = "node"
	LevelRack   Level = "rack"
	LevelBlock  Level = "block"
)

// Levels lists the topology levels innermost first, LevelNone excluded.
var Levels = []Level{LevelNVLink, LevelNode, LevelRack, LevelBlock}

// Rank orders levels innermost first: 0 for LevelNone, 1 for nvlink, up to
// 4 for block; -1 for a string that is not a level.
func (l Level) Rank() int {
	switch l {
	case LevelNone:
		return 0
	case LevelNVLink:
		return 1
	case LevelNode:
		return 2
	case LevelRack:
		return 3
	case LevelBlock:
		return 4
	}
	return -1
}

// String returns the level's spec value, "none" for LevelNone.
func (l Level) String() string {
	if l == LevelNone {
		return "none"
	}
	return string(l)
}

// Offer is cloud capacity a job may rent: an instance type in a zone of a
// provider's region at a capacity type, with its price now. Providers list
// offers, placement prices them for each waiting job, and a burst carries
// the chosen ones to the job's workflow, so the JSON field names are part
// of the workflow contract.
type Offer struct {
	Provider string `json:"provider"`
	// Pool names the offer as placement and accounting see it (a DNS
	// label); instances launched from it join this pool.
	Pool            string `json:"pool"`
	Region          string `json:"region,omitempty"`
	Zone            string `json:"zone"`
	InstanceType    string `json:"instanceType"`
	GPUModel        string `json:"gpuModel"`
	GPUsPerInstance int    `json:"gpusPerInstance"`
	// CapacityType is CapacitySpot or CapacityOnDemand.
	CapacityType CapacityType `json:"capacityType"`
	// PricePerHour is per instance, in dollars: the live spot price, or
	// the on-demand list price.
	PricePerHour float64 `json:"pricePerHour"`
	// InterruptionRate is the observed rate at which the cloud reclaims
	// running instances, in interruptions per instance-hour (0 for
	// on-demand). The burst decision turns it into expected restarts.
	InterruptionRate float64 `json:"interruptionRate,omitempty"`
}

// PricePerGPUHour is the offer's price per GPU-hour of the instance.
func (o Offer) PricePerGPUHour() float64 {
	if o.GPUsPerInstance == 0 {
		return o.PricePerHour
	}
	return o.PricePerHour / float64(o.GPUsPerInstance)
}

// PricePerGPUHourFor is what each GPU a replica of gpusPerReplica GPUs
// costs on the offer: a replica rents a whole instance, so the GPUs it
// leaves idle are paid for too. Placement prices bursts with it and the
// ledger bills them with it. gpusPerReplica <= 0 gives PricePerGPUHour.
func (o Offer) PricePerGPUHourFor(gpusPerReplica int) float64 {
	if gpusPerReplica <= 0 {
		return o.PricePerGPUHour()
	}
	return o.PricePerHour / float64(gpusPerReplica)
}

// BurstOffer is one offer chosen for one waiting job: Count instances, one
// per replica, with what placement expects the job to cost and take there.
type BurstOffer struct {
	Offer
	Count int `json:"count"`
	// ExpectedCost (dollars) and ExpectedDuration are to completion,
	// counting the work the offer's interruptions are expected to redo.
	ExpectedCost     float64       `json:"expectedCost,omitempty"`
	ExpectedDuration time.Duration `json:"expectedDuration,omitempty"`
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// IsDNSLabel reports whether s is an RFC 1123 DNS label: 1 to 63 lowercase
// letters, digits and '-', starting and ending with a letter or digit. Job
// names, teams, pools and node IDs are DNS labels.
func IsDNSLabel(s string) bool { return dnsLabelRE.MatchString(s) }
