-- A retryable failure's back-off (docs/design.md §6, §10): until retry_after
-- (the database's clock) only the failed request's own later try may take
-- the record over, so that copies of one action cannot spend the attempt
-- budget on one transient error. A takeover clears it.
-- Safe to re-run on MariaDB and MySQL 8 (which has no ADD COLUMN IF NOT
-- EXISTS): Migrate adds the column only when information_schema lacks it
-- (migrate.go, guard), under the store's table names.
ALTER TABLE idempotency_record ADD COLUMN retry_after DATETIME(3) NULL;
