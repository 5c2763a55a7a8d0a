package idemtest

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// finishLabels (issue 38): a finish claim that takes the finish is labelled
// as driver.DecideFinish labels it, on every store (docs/design.md §6, as a
// task claim is): REPEAT_SAME for the holder's own request — its known later
// try, or any of its tries once its lease ended — and TAKEOVER for anyone
// else past the lease (an empty owner is nobody's). The fence it answers is
// the one the store recorded, and the claimant's finish ends with it.
func finishLabels(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	cases := []struct {
		name         string
		holder       string
		ended        bool // the holder's finish lease ran out before the claim
		owner        string
		try          int
		want         idempotency.Decision
		key          string
		fenceAtClaim int64
	}{
		{name: "the holder's later try beside its live lease", holder: "a", owner: "a", try: 1, want: idempotency.DecisionRepeatSame},
		{name: "the holder's later try past its lease", holder: "a", ended: true, owner: "a", try: 1, want: idempotency.DecisionRepeatSame},
		{name: "the holder's try again past its lease", holder: "a", ended: true, owner: "a", try: 0, want: idempotency.DecisionRepeatSame},
		{name: "the holder without a retry count past its lease", holder: "a", ended: true, owner: "a", try: -1, want: idempotency.DecisionRepeatSame},
		{name: "another request past the lease", holder: "a", ended: true, owner: "b", try: 0, want: idempotency.DecisionTakeover},
		{name: "the sweeper past the lease", holder: "a", ended: true, owner: "sweeper", try: -1, want: idempotency.DecisionTakeover},
		{name: "an empty owner past an empty holder's lease", holder: "", ended: true, owner: "", try: -1, want: idempotency.DecisionTakeover},
	}
	for i := range cases {
		c := &cases[i]
		c.key = NewKey()
		r := req(c.key, c.holder)
		if c.ended {
			r = short(r)
		}
		r.Try, r.FinishAfter = 0, true
		_, l := claim(t, e, r)
		if l == nil {
			t.Fatalf("%s: the first claim was not owned", c.name)
		}
		if err := l.Complete(ctx, "ref"); err != nil {
			t.Fatal(err)
		}
		c.fenceAtClaim = get(t, e, c.key).Fence
	}
	time.Sleep(shortLease + 150*time.Millisecond) // one wait for every lease that must end
	for _, c := range cases {
		res, g, err := e.ClaimFinish(ctx, c.key, c.owner, c.try)
		if err != nil || g == nil {
			t.Fatalf("%s: %s, %v; want the finish taken", c.name, res.Decision, err)
		}
		if res.Decision != c.want {
			t.Errorf("%s: labelled %s, want %s (driver.DecideFinish)", c.name, res.Decision, c.want)
		}
		rec := get(t, e, c.key)
		if res.Record.Fence != rec.Fence || rec.Fence != c.fenceAtClaim+1 {
			t.Fatalf("%s: answered fence %d, recorded %d, want %d", c.name, res.Record.Fence, rec.Fence, c.fenceAtClaim+1)
		}
		want(t, c.name+": the lease's owner", rec.LeaseOwner, c.owner)
		if err := g.Done(ctx); err != nil {
			t.Fatalf("%s: the new holder's done: %v", c.name, err)
		}
		want(t, c.name+": finish", get(t, e, c.key).Finish, driver.FinishDone)
	}
}
