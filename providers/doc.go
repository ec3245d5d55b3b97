// Package providers is where cloud capacity plugs into Gangway: the Provider
// interface (offers, launch with an idempotency token, describe, terminate,
// list by tag), one package per cloud (aws, gcp) and an in-process fake for
// `gangway dev` and the simulator, all held to one conformance suite.
//
// It holds no code yet: today every job runs on registered on-prem nodes.
// Bursting to spot and on-demand capacity is built here on top of the
// placement plan and JobWorkflow's provisioning step.
package providers
