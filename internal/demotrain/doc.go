// Package demotrain is the stand-in training process `gangway demo-train`
// runs: it steps and sleeps, prints a falling loss, and honours the workload
// contract (docs/checkpointing.md) — it resumes from GANGWAY_RESUME_DIR,
// writes checkpoints into GANGWAY_CHECKPOINT_DIR (rank 0 only), and on a
// stop signal saves the last completed step and exits 128 + the signal.
// `gangway dev` and the tests run it as the job command; the cobra command
// and its flags stay in cmd/gangway.
package demotrain
