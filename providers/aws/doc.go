// Package aws is the EC2 provider: spot and on-demand GPU instances
// through aws-sdk-go-v2, behind a private interface of the four calls it
// makes (RunInstances, DescribeInstances, TerminateInstances,
// DescribeSpotPriceHistory).
//
// Offers come from a table of instance types (GPU model and count,
// on-demand list price, spot interruption rate) joined with the live spot
// price per zone from DescribeSpotPriceHistory.
//
// # RunInstances, not CreateFleet
//
// Launch makes one RunInstances call per request, with
// InstanceMarketOptions spot (one-time, terminate on interruption) or
// on-demand, in the offer's one zone, MinCount = req.Min(), MaxCount =
// req.Count and ClientToken = the launch token. CreateFleet (instant,
// capacity-optimized across zones) was the alternative; it is not used
// because:
//
//   - A gang must come up whole and in one zone (NCCL traffic, no
//     cross-zone transfer charges). RunInstances with MinCount = MaxCount
//     is atomic: all members or nothing. An instant fleet answers a
//     shortage with partial fulfilment (fleetInstanceSet and errorSet in
//     one 200), leaving a partial gang to clean up, and spreads it over
//     zones unless pinned to one, where it adds nothing.
//   - Choosing among zones and types is placement's job: it weighs each
//     offer's price times expected restarts (the interruption rate) against
//     the queue's ETA, which capacity-optimized allocation would override
//     with AWS's own ranking. On ErrNoCapacity the workflow moves to the
//     next offer, a round trip per stocked-out zone.
//   - ClientToken on RunInstances returns the original reservation to any
//     retry (the SDK's, a retried activity's), so nothing launches twice,
//     and there are no fleet objects to delete afterwards.
//
// Partial fulfilment is still there when asked for: MinCount < Count lets
// EC2 launch between the two (for elastic jobs), reported by the length of
// the result.
//
// Errors: EC2 error codes are mapped to the providers sentinels (see
// codes in errors.go) and wrapped with %w around the SDK's error, so
// errors.As(err, &smithy.APIError) still works. Terminate retries without
// the IDs EC2 no longer knows; Describe uses an instance-id filter so an
// unknown ID is left out instead of failing the call.
package aws
