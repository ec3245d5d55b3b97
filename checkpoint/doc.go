// Package checkpoint stores the checkpoints of jobs so that a job stopped
// on one set of GPUs — a spot notice, a preemption, a drained or lost
// node — resumes on another from where it stopped.
//
// It owns the Store interface and its backends, chosen by URL in Open:
//
//	file:///path          a directory, usually shared storage every node mounts (default)
//	s3://bucket/prefix    AWS S3, or an S3-compatible service (MinIO, Ceph RGW)
//	                      via Options.Endpoint and Options.UsePathStyle
//
// A checkpoint is a directory tree the workload wrote (GANGWAY_CHECKPOINT_DIR)
// plus a Manifest: job, attempt, training step if the workload reported one
// (ReadStep), creation time, every file's path, size and SHA-256, the total,
// and the GPU layout it was taken on. Restore verifies every file against
// the manifest before moving the tree into place (GANGWAY_RESUME_DIR).
//
// # Atomic saves
//
// Both backends keep the same layout under their root:
//
//	<job>/<id>/files/<path>     the checkpoint's files
//	<job>/<id>/manifest.json    written last: a checkpoint exists once its manifest does
//
// Each object is itself written atomically (S3: a PUT or a completed
// multipart upload; file: a synced temporary file renamed into place, its
// directory synced). Writing the manifest only after every file is stored
// is the commit: a save cut short by a crash, a killed agent or a cancelled
// context leaves files without a manifest, which Latest, List and Restore
// ignore. Save removes what it uploaded when it fails; what a crash leaves
// Prune removes once it is older than Options.AbandonAfter (younger ones
// may be saves still in progress). Removal goes the other way: manifest
// first, so a half-removed checkpoint is uncommitted, never corrupt.
//
// IDs are "<unix nanos, 20 digits>-a<attempt>-<8 random hex>": they sort as
// strings in time order, one Store never issues the same time twice, and the
// random part keeps two agents saving the same job at once apart. "Newest"
// therefore trusts the savers' clocks; nodes are expected to run NTP.
//
// # Workload step report
//
// A workload may report its training step at the top of its checkpoint
// directory, in a file named "step" holding a decimal integer or in a
// "manifest.json" with a numeric top-level "step". Save records it unless
// the caller passes a step; a malformed report is ignored rather than fail
// the save.
//
// The conformance suite every backend passes is in checkpoint/storetest.
// This package knows nothing of Temporal or placement: the agent and the
// workflows decide when to save, restore and prune.
package checkpoint
