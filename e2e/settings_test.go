package e2e_test

// WAIT_IN_FLIGHT_SECONDS and LOCAL_CACHE_SIZE over the binary.

import (
	"database/sql"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// A duplicate that meets the first delivery's live lease: answered "in
// progress" by default, the first delivery's result with a wait.
func TestWaitInFlightOverTheBinary(t *testing.T) {
	for _, c := range []struct {
		name, wait, wantStatus string
	}{
		{"default: in progress at once", "", "RUNNING"},
		{"waits for the result", "WAIT_IN_FLIGHT_SECONDS=20", "SUCCEEDED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			llm := newLLMFake(t, 1500*time.Millisecond)
			env := append(llm.Env(), "STATE_DIR="+t.TempDir())
			if c.wait != "" {
				env = append(env, c.wait)
			}
			inst := start(t, env...)
			id := "ev-" + nonce()
			done := make(chan answer, 1)
			go func() { done <- inst.invoke(t, taskEvent(id, "slow "+id, nil), "fc-1-"+nonce(), nil) }()
			for llm.Total() == 0 { // the first delivery holds the lease and is in the model call
				time.Sleep(10 * time.Millisecond)
			}
			dup := inst.invoke(t, taskEvent(id, "slow "+id, nil), "fc-2-"+nonce(), nil)
			first := <-done
			d, f := dup.json(t), first.json(t)
			if f["status"] != "SUCCEEDED" || d["status"] != c.wantStatus || d["duplicate"] != true {
				t.Fatalf("first %s\nduplicate %d %s", first.body, dup.status, dup.body)
			}
			if c.wantStatus == "SUCCEEDED" && (d["result_ref"] != f["result_ref"] || dup.status != 200) {
				t.Fatalf("another result: %s / %s", dup.body, first.body)
			}
			if llm.Total() != 1 {
				t.Fatalf("%d model calls", llm.Total())
			}
		})
	}
}

// With the local cache a repeat is answered from the instance's memory: a
// record deleted behind the instance's back (as an operator's purge would)
// is still answered as done; without it the repeat runs again.
func TestLocalCacheOverTheBinary(t *testing.T) {
	for _, c := range []struct {
		name   string
		env    []string
		cached bool
	}{
		{"off by default", nil, false},
		{"on", []string{"LOCAL_CACHE_SIZE=100", "LOCAL_CACHE_TTL_SECONDS=30"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := testenv.FreshMySQLDSN(t)
			env := append([]string{"STATE_DIR=" + t.TempDir(), "MYSQL_DSN=" + dsn}, c.env...)
			migrate(t, env)
			inst := start(t, env...)
			id := "ev-" + nonce()
			first := inst.invoke(t, taskEvent(id, "cached "+id, nil), "fc-1-"+nonce(), nil).json(t)
			if again := inst.invoke(t, taskEvent(id, "cached "+id, nil), "fc-2-"+nonce(), nil).json(t); again["decision"] != "REPEAT_DONE" {
				t.Fatalf("%v", again)
			}
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`DELETE FROM idempotency_record WHERE request_id = ?`, first["idempotency_key"]); err != nil {
				t.Fatal(err)
			}
			third := inst.invoke(t, taskEvent(id, "cached "+id, nil), "fc-3-"+nonce(), nil).json(t)
			if want := map[bool]string{true: "REPEAT_DONE", false: "FIRST"}[c.cached]; third["decision"] != want {
				t.Fatalf("after the delete: %v, want %s", third, want)
			}
		})
	}
}
