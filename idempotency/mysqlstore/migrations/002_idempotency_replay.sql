-- Audit of operator replays (docs/design.md §11): who re-drove which key, why, when,
-- and what state it was in before.
CREATE TABLE IF NOT EXISTS idempotency_replay (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  request_id   VARCHAR(64)   NOT NULL,
  reason       VARCHAR(1024) NOT NULL,
  operator     VARCHAR(128)  NOT NULL,
  prior_status VARCHAR(16)   NOT NULL,
  source       VARCHAR(32)   NOT NULL DEFAULT '',
  created_at   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY idx_replay_request_id (request_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
