package driver

import (
	"errors"
	"testing"
	"time"
)

func TestApplyForget(t *testing.T) {
	now := time.Now()
	base := Record{Key: "k", Status: StatusSucceeded, Attempt: 2, Fence: 3, ResultRef: "r", PayloadHash: "p",
		LastErrorCode: "x", Finish: FinishDone, Steps: map[string]string{"a": "b"}, TenantID: "t"}
	for _, c := range []struct {
		name    string
		mod     func(*Record)
		rp      Replay
		refused bool
	}{
		{"succeeded", func(*Record) {}, Replay{}, false},
		{"failed final", func(r *Record) { r.Status = StatusFailedFinal }, Replay{}, false},
		{"failed retryable, in its back-off", func(r *Record) { r.Status, r.RetryAfter = StatusFailedRetryable, now.Add(time.Hour) }, Replay{}, false},
		{"a failed finish", func(r *Record) { r.Finish = FinishFailed }, Replay{}, false},
		{"a tombstone", func(r *Record) { r.Tombstone, r.Steps = true, nil }, Replay{}, false},
		{"running, live", func(r *Record) { r.Status, r.LeaseUntil = StatusRunning, now.Add(time.Minute) }, Replay{}, true},
		{"running, expired", func(r *Record) { r.Status, r.LeaseUntil = StatusRunning, now.Add(-time.Hour) }, Replay{}, true},
		{"finish pending, expired", func(r *Record) { r.Finish, r.LeaseUntil = FinishPending, now.Add(-time.Hour) }, Replay{}, true},
		{"changed since read", func(*Record) {}, Replay{ExpectFence: 2}, true},
		{"a step record", func(r *Record) { r.ParentKey = "p" }, Replay{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := base
			c.mod(&rec)
			before := rec
			err := ApplyForget(&rec, c.rp, now)
			if c.refused {
				if !errors.Is(err, ErrNotReplayable) || rec.Fence != before.Fence || rec.Status != before.Status {
					t.Fatalf("%v, %+v", err, rec)
				}
				return
			}
			if err != nil || rec.Status != StatusReceived || rec.Fence != before.Fence+1 || rec.Attempt != 0 || rec.Tombstone ||
				rec.ResultRef != "" || rec.LastErrorCode != "" || !rec.RetryAfter.IsZero() || rec.Finish != FinishNone || rec.Steps != nil ||
				rec.PayloadHash != "p" || rec.TenantID != "t" {
				t.Fatalf("%v, %+v", err, rec)
			}
		})
	}
}
