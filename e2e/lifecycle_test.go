package e2e_test

// FC's lifecycle calls on the real binary, on both runtimes: pre-stop comes
// before a freeze as well as before destruction, so it flushes the decision
// counters and leaves the instance able to serve; only the end of the
// process (SIGTERM) closes the clients.

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/runtimeapi"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// firstCount is the number of FIRST decisions the instances have flushed to
// the MySQL database of dsn.
func firstCount(t *testing.T, dsn string) int {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COALESCE(SUM(count), 0) FROM idempotency_stats WHERE name = 'first'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// preStop sends GET /pre-stop as FC does.
func (i *instance) preStop(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, i.Base+"/pre-stop", nil)
	req.Header.Set("x-fc-request-id", "prestop-"+nonce())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pre-stop answered %d", resp.StatusCode)
	}
}

func TestPreStopKeepsTheInstanceServing(t *testing.T) {
	cases := []struct {
		name  string
		mysql bool
	}{
		{"MySQL and Redis", true},
		{"embedded store", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := []string{"STATE_DIR=" + t.TempDir(), "LLM_MODEL=offline"}
			dsn := ""
			if c.mysql {
				dsn = testenv.FreshMySQLDSN(t)
				env = append(env, "MYSQL_DSN="+dsn, "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t))
				migrate(t, env)
			}
			inst := start(t, env...)
			before := taskEvent("ev-"+nonce(), "before pre-stop "+nonce(), nil)
			if m := inst.invoke(t, before, "fc-"+nonce(), nil).json(t); m["status"] != "SUCCEEDED" {
				t.Fatalf("before pre-stop: %v", m)
			}
			inst.preStop(t)
			// The counters are in the store now, well before the recorder's
			// own 10 s flush.
			if c.mysql {
				if n := firstCount(t, dsn); n != 1 {
					t.Fatalf("after pre-stop the store counts %d FIRST decisions, want 1", n)
				}
			}
			after := inst.invoke(t, taskEvent("ev-"+nonce(), "after pre-stop "+nonce(), nil), "fc-"+nonce(), nil)
			if m := after.json(t); after.status != 200 || m["status"] != "SUCCEEDED" {
				t.Fatalf("an invocation after pre-stop answered %d %s", after.status, after.body)
			}
			if m := inst.invoke(t, before, "fc-"+nonce(), nil).json(t); m["duplicate"] != true {
				t.Fatalf("a duplicate after pre-stop: %v", m)
			}
			inst.preStop(t) // again: FC may freeze and thaw more than once
			inst.Stop()
			if code := inst.Cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("exit code %d after SIGTERM:\n%s", code, inst.Tail(2000))
			}
			if c.mysql {
				if n := firstCount(t, dsn); n != 2 {
					t.Fatalf("after SIGTERM the store counts %d FIRST decisions, want 2", n)
				}
			}
		})
	}
}

// The go1 runtime: the binary with FC_RUNTIME_API, driven by a stand-in of
// the runtime API.
func TestGo1PreStopKeepsTheInstanceServing(t *testing.T) {
	dsn := testenv.FreshMySQLDSN(t)
	env := []string{"STATE_DIR=" + t.TempDir(), "LLM_MODEL=offline", "MYSQL_DSN=" + dsn, "REDIS_URL=" + testenv.RedisURL(t), "REDIS_KEY_PREFIX=" + testenv.RedisPrefix(t)}
	migrate(t, env)
	api := runtimeapi.Start()
	out := &proc.Buffer{}
	cmd := exec.Command(binary)
	cmd.Env = proc.BaseEnv(append(env, "FC_RUNTIME_API="+api.Addr())...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		api.Close()
		if t.Failed() {
			t.Logf("function output:\n%s", out)
		}
	})
	call := func(inv runtimeapi.Invocation) runtimeapi.Post {
		t.Helper()
		api.Add(inv)
		select {
		case p := <-api.Posts():
			if p.ID != inv.ID {
				t.Fatalf("answer for %q while waiting for %q: %s %s", p.ID, inv.ID, p.Kind, p.Body)
			}
			return p
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer for %s", inv.ID)
		}
		return runtimeapi.Post{}
	}
	succeeded := func(p runtimeapi.Post) bool {
		var m map[string]any
		return p.Kind == "response" && json.Unmarshal(p.Body, &m) == nil && m["status"] == "SUCCEEDED"
	}
	if p := call(runtimeapi.Invocation{ID: "init-1", FuncType: runtimeapi.TypeInitializer}); p.Kind != "response" {
		t.Fatalf("initializer: %s %s", p.Kind, p.Body)
	}
	event := func(what string) string { return string(taskEvent("ev-"+nonce(), what+" "+nonce(), nil)) }
	if p := call(runtimeapi.Invocation{ID: "fc-before", Body: event("before pre-stop")}); !succeeded(p) {
		t.Fatalf("before pre-stop: %s %s", p.Kind, p.Body)
	}
	if p := call(runtimeapi.Invocation{ID: "stop-1", FuncType: runtimeapi.TypePreStop}); p.Kind != "response" {
		t.Fatalf("pre-stop: %s %s", p.Kind, p.Body)
	}
	if n := firstCount(t, dsn); n != 1 {
		t.Fatalf("after pre-stop the store counts %d FIRST decisions, want 1", n)
	}
	if p := call(runtimeapi.Invocation{ID: "fc-after", Body: event("after pre-stop")}); !succeeded(p) {
		t.Fatalf("an invocation after pre-stop: %s %s", p.Kind, p.Body)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the process did not exit after SIGTERM")
	}
	if n := firstCount(t, dsn); n != 2 {
		t.Fatalf("after SIGTERM the store counts %d FIRST decisions, want 2", n)
	}
}
