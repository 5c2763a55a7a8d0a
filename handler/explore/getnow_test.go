package explore_test

import (
	"time"

	"github.com/idemgate/idemgate/ossresult"
)

// The store path of the engine's GetNow (storeW is a driver.NowReader):
// instants the store stamped are judged on the store's clock. In the world
// a process's clock runs ahead of the stores' by every jump so far
// (clock_test.go), so a judgement on the process's clock counts each jump
// twice.
func init() {
	scenarios = append(scenarios, scenario{name: "input-horizon-store-clock", stores: "bolt,mysql",
		about: "a delivery dies before saving input.json and FC's retry is still to come; 31 minutes on (its lease over, " +
			"half the input horizon on the store's clock, past it on a clock that counts the jump twice) the sweeper " +
			"reads the record's age with GetNow: it must leave the key to FC's retry, not give it up input_missing",
		setup: func(w *world) []*actor {
			s := w.spec(scriptOK, false)
			input, err := ossresult.InputKey(s.k.Key)
			if err != nil {
				w.t.Fatal(err)
			}
			w.crashAt(w.tryActor(w.newDelivery(s, "fc-a"), 0), "oss.Put "+input) // FC adds its retry
			w.advance(31 * time.Minute)
			return nil
		},
		actors: func(w *world) []*actor {
			return []*actor{w.sweepActor(), w.pendingTry("fc-a", 1)}
		}})
}
