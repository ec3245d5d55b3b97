package main

import (
	"time"

	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/sim"
)

// The fake cloud of `gangway dev`.
const (
	// devBurstAfter is short so that the demo's short jobs burst: the
	// default (10m) is for real fleets.
	devBurstAfter = 15 * time.Second
	// devSpotTrace is the trace the spot pool follows when present and
	// --spot-trace names none, relative to the repository root.
	devSpotTrace = "../shared/traces/spot/preemption/1-node/aws-04-22-2023/us-west-2b_v100_1.json"
)

// devCloud is the cloud section `gangway dev` runs (config.DevCloud), its
// spot pool following --spot-trace, else devSpotTrace where present.
func devCloud(c config.CloudConfig, o devOptions) (config.CloudConfig, error) {
	trace := o.spotTrace
	if trace == "" {
		trace = sim.LocateTrace(devSpotTrace)
	}
	return config.DevCloud(c, o.cloud, trace)
}
