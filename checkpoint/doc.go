// Package checkpoint is where checkpoint storage lives: a Store interface
// with file:// and s3:// backends, the manifest of each checkpoint (job,
// attempt, step, files with sizes and SHA-256, GPU layout), retention, and
// atomic uploads so a half-written checkpoint is never the latest.
//
// It holds no code yet. The agent already gives every task the directory
// it will save to (GANGWAY_CHECKPOINT_DIR) and an empty GANGWAY_RESUME_DIR;
// saving on a preemption notice and resuming elsewhere are built here.
package checkpoint
