-- The work that follows a completion (publishing the result, notifying) is
-- recorded on the task's own row: finish = PENDING from the completing
-- statement on, held by lease_owner until lease_until (so the completing
-- worker's crash never loses it: the sweeper lists it), then DONE or FAILED.
-- sweep_after lets the sweeper set a record aside (an input not saved yet)
-- without it holding the head of the queue; a takeover clears it.
-- One column per statement, each guarded (a re-run after a failure between
-- them adds only the missing one).
ALTER TABLE idempotency_record ADD COLUMN finish VARCHAR(16) NOT NULL DEFAULT '' AFTER last_error;
ALTER TABLE idempotency_record ADD COLUMN sweep_after DATETIME(3) NULL AFTER finish;

-- Records completed before: their publish and notify step records tell the
-- finish state. A recent one without a notify record is finished again (its
-- stored input says whether it asks for notify). Only rows whose finish is
-- still the new column's default are set, so a re-run (after the version
-- row failed to be written) leaves what it or the function set since.
UPDATE idempotency_record r
  LEFT JOIN idempotency_record p ON p.request_id = SHA2(CONCAT(r.request_id, ':publish'), 256)
  LEFT JOIN idempotency_record n ON n.request_id = SHA2(CONCAT(r.request_id, ':notify'), 256)
  SET r.finish = CASE
      WHEN p.status = 'FAILED_FINAL' OR n.status = 'FAILED_FINAL' THEN 'FAILED'
      WHEN p.status = 'SUCCEEDED' AND n.status = 'SUCCEEDED' THEN 'DONE'
      WHEN p.status = 'SUCCEEDED' AND n.status IS NULL AND r.updated_at < NOW(3) - INTERVAL 1 DAY THEN 'DONE'
      ELSE 'PENDING' END,
    r.lease_until = CASE
      WHEN p.status = 'FAILED_FINAL' OR n.status = 'FAILED_FINAL' THEN NULL
      WHEN p.status = 'SUCCEEDED' AND n.status = 'SUCCEEDED' THEN NULL
      WHEN p.status = 'SUCCEEDED' AND n.status IS NULL AND r.updated_at < NOW(3) - INTERVAL 1 DAY THEN NULL
      ELSE r.updated_at END
  WHERE r.status = 'SUCCEEDED' AND r.parent_key = '' AND r.finish = '';
