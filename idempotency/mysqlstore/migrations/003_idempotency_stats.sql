-- Per-minute counters the function keeps (main stats): decisions, fast-layer
-- rejects and store conflicts, flushed in batches by each instance.
CREATE TABLE IF NOT EXISTS idempotency_stats (
  minute DATETIME    NOT NULL,
  name   VARCHAR(32) NOT NULL,
  count  BIGINT      NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The sweeper looks for SUCCEEDED records whose publish step is missing, by
-- recency.
CREATE INDEX idx_status_updated ON idempotency_record (status, updated_at);
