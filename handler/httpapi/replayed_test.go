package httpapi

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemhttp"
)

// Idempotency-Replayed marks only an answer taken from the key's record
// (REPEAT_DONE). A takeover of a crashed owner's expired lease and the same
// request's later try are duplicates to the engine (Decision.Duplicate), but
// they ran the task again: a client told "replayed" would not retry an answer
// that is not the stored one (docs/api.md, "The Idempotency-Replayed header").
func TestReplayedMarksOnlyTheRecordsAnswer(t *testing.T) {
	final := false
	cases := []struct {
		name     string
		decision driver.Decision
		replayed bool
	}{
		{name: "first execution", decision: driver.DecisionFirst},
		{name: "takeover of an expired lease", decision: driver.DecisionTakeover},
		{name: "the same request's later try", decision: driver.DecisionRepeatSame},
		{name: "the stored outcome answered again", decision: driver.DecisionRepeatDone, replayed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := handler.Outcome{IdempotencyKey: "k", Status: string(driver.StatusSucceeded),
				Decision: string(c.decision), Duplicate: c.decision.Duplicate()}
			w := httptest.NewRecorder()
			writeOutcome(w, o)
			if got := w.Header().Get(idemhttp.HeaderReplayed) == "true"; got != c.replayed {
				t.Errorf("a success decided %s: replayed %v, want %v", c.decision, got, c.replayed)
			}
			o.Status, o.ErrorType, o.Retryable = string(driver.StatusFailedFinal), "policy_rejected", &final
			w = httptest.NewRecorder()
			idemhttp.WriteProblem(w, (&API{}).problemOf(context.Background(), o))
			if got := w.Header().Get(idemhttp.HeaderReplayed) == "true"; got != c.replayed || w.Code != 422 {
				t.Errorf("a FINAL failure decided %s: %d, replayed %v, want 422 and %v", c.decision, w.Code, got, c.replayed)
			}
		})
	}
}
