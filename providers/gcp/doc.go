// Package gcp is the Compute Engine provider: spot and standard GPU VMs
// through cloud.google.com/go/compute's InstancesClient (REST), behind a
// private interface of the calls it makes (Insert, Get, Delete, List).
//
// Offers come from config alone: a table of machine types (GPU model and
// count, accelerator to attach for N1 types, interruption rate) and a
// table of prices per machine type and region, since the Compute API does
// not serve prices.
//
// Launch inserts one VM per instance, named <token>-<i>, with
// provisioningModel SPOT and instanceTerminationAction DELETE (or
// STANDARD), onHostMaintenance TERMINATE (GPUs cannot live-migrate), the
// gangway-* labels and the agent's boot script as startup-script, and waits
// for each insert operation. Each insert carries its own requestId
// (providers.TokenUUID(token, i), a version 5 UUID): GCE answers a repeated
// requestId with the first operation, and after that window the name is
// taken (409 alreadyExists), so a retry adopts what an earlier try made.
// GCE does not check that a repeated requestId repeats the request, so
// Launch first lists the token's VMs and refuses a reuse with another zone,
// type or count. When fewer than MinCount come up it deletes the rest.
//
// Instance IDs are "zone/name"; the node ID is the name. Labels only take
// lowercase letters, digits, '_' and '-': tag values are folded into that
// alphabet (job IDs and Gangway's own tags already fit), and ListByTag
// folds its value the same way.
//
// Errors: stockouts (ZONE_RESOURCE_POOL_EXHAUSTED in the operation, or a
// 503 saying so), QUOTA_EXCEEDED, 404, 401/403 and 429 (and 403 rate
// limits) map to the providers sentinels, wrapped with %w around the
// googleapi error.
package gcp
