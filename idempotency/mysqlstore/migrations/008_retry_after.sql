-- A retryable failure's back-off (docs/design.md §6, §10): until retry_after
-- (the database's clock) only the failed request's own later try may take
-- the record over, so that copies of one action cannot spend the attempt
-- budget on one transient error. A takeover clears it.
-- Safe to re-run on MariaDB and MySQL 8 (which has no ADD COLUMN IF NOT
-- EXISTS): the column is added only when information_schema lacks it.
SET @idemgate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
  AND table_name = 'idempotency_record' AND column_name = 'retry_after') = 0,
  'ALTER TABLE idempotency_record ADD COLUMN retry_after DATETIME(3) NULL', 'DO 0');
PREPARE idemgate_stmt FROM @idemgate_ddl;
EXECUTE idemgate_stmt;
DEALLOCATE PREPARE idemgate_stmt;
