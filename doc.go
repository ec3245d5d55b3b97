// Package gangway holds Gangway's domain vocabulary: job specs and their
// validation, job and node identifiers, queue entries, GPU assignments, job
// phases, cloud offers, capacity types, topology levels and the DNS-label
// rule names follow. Each concept has one type here, shared by the placement
// core, the workflows, the Redis view, the providers and the CLI.
//
// It imports nothing internal, so every other package — the pure placement
// core, the deterministic workflows, the Redis view and the CLI — can share
// these types without pulling in I/O.
package gangway
