// Package providertest is the conformance suite every providers.Provider
// passes: Run drives a provider through launch, describe, list by tag and
// terminate, idempotent launches by token (also after a launch whose
// answer is lost to a deadline), idempotent terminates, invalid requests,
// and, through a Controller that makes the backend misbehave, stockouts,
// throttling, partial fulfilment and all-or-nothing gangs.
//
// The fake runs it in-process; aws and gcp run it through their real SDK
// clients against local wire-format servers.
package providertest
