package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
)

// Verification is the at-most-once check of a main phase.
type Verification struct {
	Deliveries int // requests sent
	Non200     int // answers that were not a 200 outcome (or no answer)
	Actions    int // business actions (keys)
	Keys       int // keys named by the answers (Actions unless every answer of one failed)
	Injected   int // duplicate deliveries in the plan
	// Executions: answers with duplicate=false. Extra: those beyond the first
	// of their action (effective duplicates). NoExecution: actions none of
	// whose answers executed.
	Executions, Extra, NoExecution int
	KeyMismatch                    int // actions whose answers named more than one key
	Saved                          int // duplicate deliveries answered duplicate=true: model calls saved
	// MySQL: records of the run's keys; attempt > 1; status other than SUCCEEDED.
	// DBSkipped says why the check did not count (none of the keys is in the
	// database: -mysql-dsn is not the instances' database).
	DBChecked                           bool
	DBSkipped                           string
	DBRecords, DBAttemptsOver1, DBNotOK int
	// Result objects and model calls (spawned instances only): attempt
	// outputs per key in the fake OSS; calls per key to the fake model.
	ObjChecked                  bool
	Outputs, ExtraOutputs       int
	ModelCalls, ExtraModelCalls int
}

// SideEffects is what the fake services saw, by business key.
type SideEffects struct {
	Outputs    map[string]int // attempt outputs (tasks/<K>/attempt-NNN/output.json)
	Objects    map[string]int // every object under tasks/<K>/
	ModelCalls func(key string) int
	Notifies   func(key string) int
}

// EffectiveRate is the share of deliveries that executed although their
// action had executed already, in percent.
func (v Verification) EffectiveRate() float64 {
	if v.Deliveries == 0 {
		return 0
	}
	return 100 * float64(v.Extra) / float64(v.Deliveries)
}

// OK reports whether the phase took effect at most once per action and every
// delivery was answered 200.
func (v Verification) OK() bool {
	return v.Non200 == 0 && v.Extra == 0 && v.NoExecution == 0 && v.KeyMismatch == 0 &&
		v.DBAttemptsOver1 == 0 && v.DBNotOK == 0 && v.ExtraOutputs == 0 && v.ExtraModelCalls == 0 &&
		v.Keys == v.Actions && (!v.DBChecked || v.DBRecords == v.Keys) &&
		(!v.ObjChecked || (v.Outputs == v.Keys && v.ModelCalls == v.Keys))
}

// Verify checks the main phase's answers, then MySQL (db may be nil) and
// what the fake services saw (side may be nil). The actions are those the
// phase sent a delivery of (a paced phase may end before sending them all).
func Verify(ctx context.Context, plan *Plan, ph PhaseResult, db *sql.DB, side *SideEffects) (Verification, error) {
	v := Verification{Deliveries: len(ph.Results)}
	known := v.answers(plan, ph)
	if db != nil && len(known) > 0 {
		if err := v.checkDB(ctx, db, known); err != nil {
			return v, err
		}
	}
	if side != nil && len(known) > 0 {
		v.ObjChecked = true
		for _, k := range known {
			n, calls := side.Outputs[k], side.ModelCalls(k)
			v.Outputs += n
			v.ExtraOutputs += max(0, n-1)
			v.ModelCalls += calls
			v.ExtraModelCalls += max(0, calls-1)
		}
	}
	return v, nil
}

// answers checks the answers per action and returns the keys of the
// actions the answers named.
func (v *Verification) answers(plan *Plan, ph PhaseResult) []string {
	execs := make([]int, len(plan.Actions))
	sent := make([]bool, len(plan.Actions))
	keys := make([]string, len(plan.Actions))
	for i := range ph.Results {
		r := &ph.Results[i]
		sent[r.Action] = true
		if r.Kind != KindFirst {
			v.Injected++
		}
		if r.HTTPStatus != http.StatusOK || r.Err != "" {
			v.Non200++
			continue
		}
		if keys[r.Action] == "" {
			keys[r.Action] = r.Key
		} else if keys[r.Action] != r.Key {
			v.KeyMismatch++
		}
		if r.Duplicate {
			v.Saved++
		} else {
			execs[r.Action]++
			v.Executions++
		}
	}
	var known []string
	for a, n := range execs {
		if !sent[a] {
			continue
		}
		v.Actions++
		switch {
		case n == 0:
			v.NoExecution++
		case n > 1:
			v.Extra += n - 1
		}
		if keys[a] != "" {
			known = append(known, keys[a])
		}
	}
	v.Keys = len(known)
	return known
}

// checkDB counts the keys' records in MySQL: attempt > 1 or not SUCCEEDED
// is an execution too many or a task lost.
func (v *Verification) checkDB(ctx context.Context, db *sql.DB, known []string) error {
	v.DBChecked = true
	for start := 0; start < len(known); start += 500 {
		batch := known[start:min(start+500, len(known))]
		args := make([]any, len(batch))
		for i, k := range batch {
			args[i] = k
		}
		q := `SELECT COUNT(*), COALESCE(SUM(attempt > 1), 0), COALESCE(SUM(status <> 'SUCCEEDED'), 0)
 FROM idempotency_record WHERE request_id IN (?` + strings.Repeat(",?", len(batch)-1) + `)`
		var n, over, notOK int
		if err := db.QueryRowContext(ctx, q, args...).Scan(&n, &over, &notOK); err != nil {
			return fmt.Errorf("verify in MySQL: %w", err)
		}
		v.DBRecords += n
		v.DBAttemptsOver1 += over
		v.DBNotOK += notOK
	}
	if v.DBRecords == 0 {
		v.DBChecked = false
		v.DBSkipped = "none of the run's keys is in -mysql-dsn's database (not the instances' database?)"
	}
	return nil
}
