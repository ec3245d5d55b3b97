package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
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

// reportLeftovers says whether any cloud instance outlived the demo,
// giving terminations a few seconds to land.
func reportLeftovers(ctx context.Context, c *fullstack.Cloud, out io.Writer) {
	if len(c.Registry.Names()) == 0 {
		return
	}
	left := c.WaitNoLeftovers(ctx, 15*time.Second)
	if len(left) == 0 {
		fmt.Fprintln(out, "\ncloud: no instance left running")
		return
	}
	fmt.Fprintf(out, "\ncloud: %d instances still running: %s (the reconciler terminates orphans after a minute)\n",
		len(left), strings.Join(left, ", "))
}
