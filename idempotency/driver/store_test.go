package driver

import (
	"reflect"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	live, expired := now.Add(time.Minute), now.Add(-time.Second)
	req := ClaimRequest{Key: "k", PayloadHash: "ph", Owner: "r1", Try: 1, MaxAttempts: 3}
	cases := []struct {
		name string
		rec  Record
		req  func(ClaimRequest) ClaimRequest
		d    Decision
		act  Action
	}{
		{"other payload", Record{PayloadHash: "x", Status: StatusSucceeded}, nil, DecisionPayloadMismatch, ActNone},
		{"other payload, whatever its legacy hash", Record{PayloadHash: "x", Status: StatusSucceeded},
			func(r ClaimRequest) ClaimRequest { r.LegacyPayloadHash = "old"; return r }, DecisionPayloadMismatch, ActNone},
		{"the payload's legacy hash", Record{PayloadHash: "old", Status: StatusFailedRetryable, Attempt: 1},
			func(r ClaimRequest) ClaimRequest { r.LegacyPayloadHash = "old"; return r }, DecisionTakeover, ActTakeover},
		{"succeeded", Record{PayloadHash: "ph", Status: StatusSucceeded}, nil, DecisionRepeatDone, ActNone},
		{"final", Record{PayloadHash: "ph", Status: StatusFailedFinal}, nil, DecisionRepeatDone, ActNone},
		{"live lease of another owner", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r0", LeaseUntil: live, Attempt: 1},
			nil, DecisionRepeatOther, ActNone},
		{"expired lease", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r0", LeaseUntil: expired, Attempt: 1},
			nil, DecisionTakeover, ActTakeover},
		{"same owner, later try", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: 0, LeaseUntil: live, Attempt: 1},
			nil, DecisionRepeatSame, ActTakeover},
		{"same owner, same try (a concurrent copy)", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: 1,
			LeaseUntil: live, Attempt: 1}, nil, DecisionRepeatOther, ActMarkTry},
		// issue 20 case 4: a copy without a retry count must not take its
		// twin's live lease (it may be running beside it).
		{"same owner, unknown try, live lease", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: -1,
			LeaseUntil: live, Attempt: 1}, func(r ClaimRequest) ClaimRequest { r.Try = -1; return r }, DecisionRepeatOther, ActNone},
		{"same owner, unknown try against a known one", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: 1,
			LeaseUntil: live, Attempt: 1}, func(r ClaimRequest) ClaimRequest { r.Try = -1; return r }, DecisionRepeatOther, ActNone},
		// -1 sorts below every count FC sends: a known try is later than an
		// unknown one (as MySQL's finish claim and Redis's script rule too).
		{"same owner, a known try after an unknown one", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: -1,
			LeaseUntil: live, Attempt: 1}, func(r ClaimRequest) ClaimRequest { r.Try = 0; return r }, DecisionRepeatSame, ActTakeover},
		{"same owner, unknown try, expired lease", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: -1,
			LeaseUntil: expired, Attempt: 1}, func(r ClaimRequest) ClaimRequest { r.Try = -1; return r }, DecisionRepeatSame, ActTakeover},
		// issue 20 case 3: the go1 runtime reads a missing retry count as 0.
		// A copy of a known try marks its retry's count (ActMarkTry), so FC's
		// retry of the copy does not take the live holder's lease at once.
		{"same owner, try 0 again (go1)", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: 0,
			LeaseUntil: live, Attempt: 1}, func(r ClaimRequest) ClaimRequest { r.Try = 0; return r }, DecisionRepeatOther, ActMarkTry},
		// issue 20 case 8: a retryable failure's back-off.
		{"retryable in its back-off", Record{PayloadHash: "ph", Status: StatusFailedRetryable, LeaseOwner: "r0", Attempt: 1,
			RetryAfter: live}, nil, DecisionRepeatOther, ActNone},
		{"retryable in its back-off, the failed request's later try", Record{PayloadHash: "ph", Status: StatusFailedRetryable,
			LeaseOwner: "r1", LeaseTry: 0, Attempt: 1, RetryAfter: live}, nil, DecisionTakeover, ActTakeover},
		{"retryable in its back-off, the failed request's copy", Record{PayloadHash: "ph", Status: StatusFailedRetryable,
			LeaseOwner: "r1", LeaseTry: 1, Attempt: 1, RetryAfter: live}, nil, DecisionRepeatOther, ActNone},
		{"retryable in its back-off, the failed request's known try after an unknown one", Record{PayloadHash: "ph",
			Status: StatusFailedRetryable, LeaseOwner: "r1", LeaseTry: -1, Attempt: 1, RetryAfter: live},
			func(r ClaimRequest) ClaimRequest { r.Try = 0; return r }, DecisionTakeover, ActTakeover},
		{"retryable in its back-off, no retry count", Record{PayloadHash: "ph", Status: StatusFailedRetryable,
			LeaseOwner: "r1", LeaseTry: -1, Attempt: 1, RetryAfter: live}, func(r ClaimRequest) ClaimRequest { r.Try = -1; return r },
			DecisionRepeatOther, ActNone},
		{"retryable past its back-off", Record{PayloadHash: "ph", Status: StatusFailedRetryable, LeaseOwner: "r0", Attempt: 1,
			RetryAfter: expired}, nil, DecisionTakeover, ActTakeover},
		{"retryable with attempts left", Record{PayloadHash: "ph", Status: StatusFailedRetryable, Attempt: 2}, nil, DecisionTakeover, ActTakeover},
		{"retryable, budget spent", Record{PayloadHash: "ph", Status: StatusFailedRetryable, Attempt: 3}, nil, DecisionTakeover, ActSalvage},
		{"expired, budget spent", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r0", LeaseUntil: expired, Attempt: 3},
			nil, DecisionTakeover, ActSalvage},
		{"same owner's later try, budget spent", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "r1", LeaseTry: 0,
			LeaseUntil: live, Attempt: 3}, nil, DecisionRepeatSame, ActSalvage},
		{"empty owner is nobody's", Record{PayloadHash: "ph", Status: StatusRunning, LeaseOwner: "", LeaseTry: -1, LeaseUntil: live, Attempt: 1},
			func(r ClaimRequest) ClaimRequest { r.Owner, r.Try = "", -1; return r }, DecisionRepeatOther, ActNone},
		{"received ignores the budget", Record{PayloadHash: "ph", Status: StatusReceived, Attempt: 3}, nil, DecisionTakeover, ActTakeover},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := req
			if c.req != nil {
				r = c.req(r)
			}
			d, act := Decide(c.rec, r, now)
			if d != c.d || act != c.act {
				t.Fatalf("got %s/%d, want %s/%d", d, act, c.d, c.act)
			}
			rec := c.rec
			Apply(&rec, act, r, now)
			switch act {
			case ActTakeover:
				if rec.Status != StatusRunning || rec.Fence != c.rec.Fence+1 || rec.Attempt != c.rec.Attempt+1 ||
					rec.LeaseOwner != r.Owner || rec.LeaseTry != r.Try || !rec.RetryAfter.IsZero() {
					t.Fatalf("after takeover %+v", rec)
				}
			case ActSalvage:
				if rec.Status != StatusRunning || rec.Fence != c.rec.Fence+1 || rec.Attempt != c.rec.Attempt || rec.LeaseOwner != r.Owner {
					t.Fatalf("after salvage %+v", rec)
				}
			}
		})
	}
}

// A REPEAT_OTHER answer is acknowledged only when another owner's live
// lease carries the work (issue 20 case 3).
func TestRetryLater(t *testing.T) {
	cases := []struct {
		name  string
		rec   Record
		owner string
		want  bool
	}{
		{"another owner's live lease", Record{Status: StatusRunning, LeaseOwner: "a"}, "b", false},
		{"the caller's own live lease", Record{Status: StatusRunning, LeaseOwner: "a"}, "a", true},
		{"empty owners are nobody's", Record{Status: StatusRunning, LeaseOwner: ""}, "", false},
		{"a retryable failure in its back-off", Record{Status: StatusFailedRetryable, LeaseOwner: "a"}, "b", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RetryLater(c.rec, c.owner); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestDecideFinish(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	live, expired := now.Add(time.Minute), now.Add(-time.Second)
	pending := func(owner string, try int, until time.Time) Record {
		return Record{Status: StatusSucceeded, Finish: FinishPending, LeaseOwner: owner, LeaseTry: try, LeaseUntil: until}
	}
	cases := []struct {
		name string
		rec  Record
		req  FinishRequest
		want Decision
	}{
		{"nothing pending", Record{Status: StatusSucceeded, Finish: FinishDone}, FinishRequest{Owner: "b"}, DecisionRepeatDone},
		{"failed finish waits for a replay", Record{Status: StatusSucceeded, Finish: FinishFailed}, FinishRequest{Owner: "b"}, DecisionRepeatDone},
		{"not succeeded", Record{Status: StatusRunning, Finish: FinishPending}, FinishRequest{Owner: "b"}, DecisionRepeatDone},
		{"held by a live lease", pending("a", 0, live), FinishRequest{Owner: "b", Try: 0}, DecisionRepeatOther},
		{"holder's lease ran out", pending("a", 0, expired), FinishRequest{Owner: "b", Try: 0}, DecisionTakeover},
		{"holder's later try", pending("a", 0, live), FinishRequest{Owner: "a", Try: 1}, DecisionRepeatSame},
		{"holder's copy without a retry count", pending("a", -1, live), FinishRequest{Owner: "a", Try: -1}, DecisionRepeatOther},
		{"holder's known try after an unknown one", pending("a", -1, live), FinishRequest{Owner: "a", Try: 0}, DecisionRepeatSame},
		{"holder's own expired lease", pending("a", -1, expired), FinishRequest{Owner: "a", Try: -1}, DecisionRepeatSame},
		{"a copy of the holder's try", pending("a", 1, live), FinishRequest{Owner: "a", Try: 1}, DecisionRepeatOther},
		{"empty owners never match", pending("", -1, live), FinishRequest{Owner: "", Try: -1}, DecisionRepeatOther},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DecideFinish(c.rec, c.req, now); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// TakeoverTry keeps a copy's mark whether the lease holds it (the same
// request's lease; code from before the mark was kept apart writes it
// there alone) or the record's mark does (another owner's lease came
// between), and neither for another request.
func TestTakeoverTry(t *testing.T) {
	for _, c := range []struct {
		name      string
		rec       Record
		owner     string
		try, want int
	}{
		{"the same request keeps a copy's mark", Record{LeaseOwner: "r1", LeaseTry: 1}, "r1", 0, 1},
		{"the same request's later try", Record{LeaseOwner: "r1", LeaseTry: 1}, "r1", 2, 2},
		{"the same request without a retry count keeps the mark", Record{LeaseOwner: "r1", LeaseTry: 1}, "r1", -1, 1},
		{"another request's try", Record{LeaseOwner: "r1", LeaseTry: 3}, "r2", 0, 0},
		{"an empty owner is nobody's", Record{LeaseTry: 3}, "", 0, 0},
		{"a mark outlives another owner's lease", Record{LeaseOwner: "sweep", LeaseTry: -1, MarkOwner: "r1", MarkTry: 3},
			"r1", 1, 3},
		{"a try past the mark", Record{LeaseOwner: "sweep", MarkOwner: "r1", MarkTry: 3}, "r1", 4, 4},
		{"the greater of the lease's try and the mark", Record{LeaseOwner: "r1", LeaseTry: 5, MarkOwner: "r1", MarkTry: 2},
			"r1", 0, 5},
		{"another request's mark", Record{LeaseOwner: "sweep", MarkOwner: "r2", MarkTry: 3}, "r1", 1, 1},
		{"an empty owner ignores every mark", Record{LeaseOwner: "sweep", MarkOwner: "r1", MarkTry: 3}, "", 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := TakeoverTry(c.rec, c.owner, c.try); got != c.want {
				t.Fatalf("TakeoverTry = %d, want %d", got, c.want)
			}
		})
	}
}

// A copy's mark is written to the lease's try and, apart, to the record's
// mark, which another owner's takeover leaves and the marked request's
// next takeover starts from (docs/design.md §6).
func TestTheMarkIsKeptApart(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	rec := Record{Status: StatusRunning, LeaseOwner: "r1", LeaseTry: 0, LeaseUntil: now.Add(time.Minute), Fence: 1, Attempt: 1}
	claim := func(owner string, try int, at time.Time) (Decision, Action) {
		req := ClaimRequest{Owner: owner, Try: try, Lease: time.Minute, MaxAttempts: 9}
		d, act := Decide(rec, req, at)
		Apply(&rec, act, req, at)
		return d, act
	}
	for _, try := range []int{0, 1} { // a copy of r1's try, and FC's retry of it
		if _, act := claim("r1", try, now); act != ActMarkTry {
			t.Fatalf("the copy at try %d: %v, want ActMarkTry", try, act)
		}
	}
	if rec.LeaseTry != 2 || rec.MarkOwner != "r1" || rec.MarkTry != 2 {
		t.Fatalf("after the copies: lease try %d, mark %q/%d; want 2, r1/2", rec.LeaseTry, rec.MarkOwner, rec.MarkTry)
	}
	later := now.Add(2 * time.Minute)
	if d, _ := claim("sweep", -1, later); d != DecisionTakeover || rec.MarkOwner != "r1" || rec.MarkTry != 2 {
		t.Fatalf("the sweeper's takeover: %s, mark %q/%d; want TAKEOVER, r1/2 kept", d, rec.MarkOwner, rec.MarkTry)
	}
	later = later.Add(2 * time.Minute)
	if d, _ := claim("r1", 1, later); d != DecisionTakeover || rec.LeaseTry != 2 {
		t.Fatalf("r1's retry after the sweeper's lease: %s at lease try %d; want TAKEOVER at 2", d, rec.LeaseTry)
	}
	if _, act := claim("r1", 2, later); act != ActMarkTry {
		t.Fatalf("FC's retry of the copy's retry: %v, want ActMarkTry (it is a copy of the live lease's try)", act)
	}
	if rec.MarkTry != 3 {
		t.Fatalf("mark %d, want 3", rec.MarkTry)
	}
	rec.LeaseOwner, rec.LeaseTry, rec.LeaseUntil = "r2", 0, later.Add(time.Minute) // r2 took it over meanwhile
	if _, act := claim("r2", 0, later); act != ActMarkTry || rec.MarkOwner != "r2" || rec.MarkTry != 1 {
		t.Fatalf("another request's copy: %v, mark %q/%d; want ActMarkTry, r2/1 (one mark: it replaces r1's)", act,
			rec.MarkOwner, rec.MarkTry)
	}
}

// ApplyFinish writes only what its decision asks for: a takeover moves the
// owner, try and fence; a copy of the holder's try marks its try, nothing
// else; every other answer leaves the record as it was (another
// finisher's claim must not move the holder's try, or a copy's retry
// counts as the holder's later try). LeaseLeft is the finish lease's.
func TestApplyFinish(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	live, expired := now.Add(time.Minute), now.Add(-time.Second)
	const lease = 30 * time.Second
	pending := func(owner string, try int, until time.Time) Record {
		return Record{Status: StatusSucceeded, Finish: FinishPending, LeaseOwner: owner, LeaseTry: try, LeaseUntil: until, Fence: 2}
	}
	cases := []struct {
		name      string
		rec       Record
		req       FinishRequest
		d         Decision
		write     bool
		owner     string
		try       int
		fence     int64
		leaseLeft time.Duration
	}{
		{"the holder's lease ran out", pending("a", 0, expired), FinishRequest{Owner: "b", Try: 0},
			DecisionTakeover, true, "b", 0, 3, lease},
		{"the holder's later try", pending("a", 0, live), FinishRequest{Owner: "a", Try: 1},
			DecisionRepeatSame, true, "a", 1, 3, lease},
		{"a copy of the holder's try marks its try", pending("a", 1, live), FinishRequest{Owner: "a", Try: 1},
			DecisionRepeatOther, true, "a", 2, 2, time.Minute},
		{"a copy below the mark", pending("a", 2, live), FinishRequest{Owner: "a", Try: 1},
			DecisionRepeatOther, false, "a", 2, 2, time.Minute},
		{"another finisher leaves the holder's try", pending("a", 1, live), FinishRequest{Owner: "sweeper", Try: -1},
			DecisionRepeatOther, false, "a", 1, 2, time.Minute},
		{"nothing pending", Record{Status: StatusSucceeded, Finish: FinishDone, LeaseOwner: "a", LeaseTry: 0, Fence: 2},
			FinishRequest{Owner: "a", Try: 0}, DecisionRepeatDone, false, "a", 0, 2, 0},
		{"a running task has no finish to mark or lease to report",
			Record{Status: StatusRunning, LeaseOwner: "a", LeaseTry: 0, LeaseUntil: live, Fence: 2},
			FinishRequest{Owner: "a", Try: 0}, DecisionRepeatDone, false, "a", 0, 2, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Lease = lease
			rec := c.rec
			res, write := ApplyFinish(&rec, c.req, now)
			if res.Decision != c.d || write != c.write || res.LeaseLeft != c.leaseLeft {
				t.Fatalf("got %s write=%t lease left %s, want %s write=%t lease left %s",
					res.Decision, write, res.LeaseLeft, c.d, c.write, c.leaseLeft)
			}
			if rec.LeaseOwner != c.owner || rec.LeaseTry != c.try || rec.Fence != c.fence {
				t.Fatalf("record holds %s at try %d, fence %d; want %s at try %d, fence %d",
					rec.LeaseOwner, rec.LeaseTry, rec.Fence, c.owner, c.try, c.fence)
			}
			if write && !res.Decision.Owned() && (rec.MarkOwner != c.req.Owner || rec.MarkTry != c.req.Try+1) {
				t.Fatalf("a copy's mark: %q/%d, want %s/%d kept apart from the lease", rec.MarkOwner, rec.MarkTry,
					c.req.Owner, c.req.Try+1)
			}
			if !write && !reflect.DeepEqual(rec, c.rec) {
				t.Fatalf("nothing to write, but the record changed: %+v", rec)
			}
			if res.Decision.Owned() && res.Record.Fence != rec.Fence {
				t.Fatalf("the answer carries fence %d, the record %d", res.Record.Fence, rec.Fence)
			}
		})
	}
}
