-- A copy's mark kept apart from the lease (docs/design.md §6): the owner
-- whose copy met its own live lease, and the try its next lease starts at
-- at least, so that the mark outlives a lease of another owner (the
-- sweeper's, a double submit's) in between. Code from before this
-- migration neither reads nor writes them: its claims and marks act on
-- lease_try alone, as before, and leave a mark here as it was, which only
-- ever makes its owner's tries wait for a lease (docs/design.md §6).
-- Safe to re-run (migrate.go, guard): one column per statement.
ALTER TABLE idempotency_record ADD COLUMN mark_owner VARCHAR(128) NOT NULL DEFAULT '';
ALTER TABLE idempotency_record ADD COLUMN mark_try INT NOT NULL DEFAULT 0;
