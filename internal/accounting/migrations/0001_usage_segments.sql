-- Version 1: the usage segments. One row per run segment; the primary key
-- is the segment's identity (job, attempt, pool, start), so recording it
-- again is a conflict that changes nothing. Times are Unix nanoseconds
-- (UTC): exact on both SQLite and PostgreSQL, whose timestamps stop at
-- microseconds.
CREATE TABLE usage_segments (
    job_id             TEXT             NOT NULL,
    attempt            INTEGER          NOT NULL,
    pool               TEXT             NOT NULL,
    start_ns           BIGINT           NOT NULL,
    end_ns             BIGINT           NOT NULL,
    team               TEXT             NOT NULL,
    project            TEXT             NOT NULL,
    capacity_type      TEXT             NOT NULL,
    gpus               INTEGER          NOT NULL,
    price_per_gpu_hour DOUBLE PRECISION NOT NULL,
    recorded_at_ns     BIGINT           NOT NULL,
    PRIMARY KEY (job_id, attempt, pool, start_ns)
);

-- Reports and budgets read a window: segments that end after its start.
CREATE INDEX usage_segments_by_end ON usage_segments (end_ns);
