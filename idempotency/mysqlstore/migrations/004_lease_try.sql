-- The holder's try (FC's x-fc-retry-count): a copy of the same try arriving
-- concurrently is in progress; only a later try of the same request takes a
-- live lease over.
ALTER TABLE idempotency_record ADD COLUMN lease_try INT NOT NULL DEFAULT 0 AFTER lease_owner;
