// Package gangway holds Gangway's domain vocabulary: job specs and their
// validation, job and node identifiers, GPU assignments and job phases.
//
// It imports nothing internal, so every other package — the pure placement
// core, the deterministic workflows, the Redis view and the CLI — can share
// these types without pulling in I/O.
package gangway
