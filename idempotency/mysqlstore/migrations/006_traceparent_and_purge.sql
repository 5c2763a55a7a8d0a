-- The W3C trace context the first delivery worked under (version 00: 55
-- characters); a takeover keeps it. Added last, so that MySQL 8.0 and
-- MariaDB 10.3 add it in place (ALGORITHM=INSTANT) without copying the table.
ALTER TABLE idempotency_record ADD COLUMN traceparent VARCHAR(55) NOT NULL DEFAULT '';
-- The purge finds audit rows whose record is gone by their age. Records need
-- no new index: the purge reads terminal records by (status, updated_at)
-- (idx_status_updated), their steps by parent_key (idx_parent_key), and
-- deletes by primary key; one more index over a column that changes on every
-- transition would cost every claim and renewal a write.
CREATE INDEX idx_replay_created ON idempotency_replay (created_at);
