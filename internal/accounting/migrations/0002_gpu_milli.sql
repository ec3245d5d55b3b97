-- Version 2: what a segment's GPUs count for together, in milli-GPU (each
-- GPU at its share: 500 for a half-GPU share, a MIG device's share of its
-- parent GPU, 1000 for a whole GPU), so a shared job is billed its share.
-- 0 means the segment's gpus are whole GPUs (gpus × 1000): every segment
-- recorded before this version, and any a writer that does not know the
-- column records.
ALTER TABLE usage_segments ADD COLUMN gpu_milli BIGINT NOT NULL DEFAULT 0;
