-- A task's steps are checkpointed on its own row (a JSON object of step name
-- to result, written by the lease holder under the fence), instead of in a
-- step record each: one statement per completed step that another follows,
-- none for a single-step task.
ALTER TABLE idempotency_record ADD COLUMN steps TEXT NULL AFTER finish;
