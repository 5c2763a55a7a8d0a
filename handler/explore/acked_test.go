package explore_test

// An enumerated window of the acknowledgement invariant (features_test.go,
// checkAcked): a delivery's Store claim commits but reports failure, so the
// engine drops its fast-layer claim and the delivery is answered retryably;
// another request's delivery registers its own fast claim on its way to the
// Store, and FC's retry of the first races it. Answered "in progress" from
// that unconfirmed registration, the retry was acknowledged while the
// Store's lease was the dead first try's, the other delivery was answered
// "in progress" by the Store, and the key ended input_missing.
func init() {
	scenarios = append(scenarios, scenario{name: "claim-reported-failed", stores: "bolt+redis",
		about: "a claim commits but reports failure; another delivery registers in Redis; FC's retry of the first races it",
		setup: func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor {
			s := w.spec(scriptOK, false)
			d := w.newDelivery(s, "fc-a")
			d.scripted = 1
			first := w.tryActor(d, 0)
			first.failAt = "store.Claim " + s.k.Key + " done"
			retry := w.tryActor(d, 1)
			retry.after = first
			return []*actor{first, w.tryActor(w.newDelivery(s, "fc-b"), 0), retry}
		}})
}
