package e2e_test

// main forget over the binary: on the embedded store (the server stopped,
// as its file is one process's) and on MySQL with Redis (the server running).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/dev/testenv"
)

func TestForgetOverTheBinary(t *testing.T) {
	for _, c := range []struct {
		name     string
		mysql    bool
		stopping bool // the embedded store: one process at a time
	}{
		{"embedded", false, true},
		{"mysql and redis", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			llm := newLLMFake(t, 0)
			state := t.TempDir()
			env := append(llm.Env(), "STATE_DIR="+state)
			if c.mysql {
				env = append(env, "MYSQL_DSN="+testenv.FreshMySQLDSN(t), "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t))
				migrate(t, env)
			}
			id := "ev-" + nonce()
			event := taskEvent(id, "forget me "+id, nil)
			inst := start(t, env...)
			first := inst.invoke(t, event, "fc-1-"+nonce(), nil).json(t)
			k, _ := first["idempotency_key"].(string)
			if first["status"] != "SUCCEEDED" || llm.Total() != 1 {
				t.Fatalf("first: %v, %d model calls", first, llm.Total())
			}
			inst.preStop(t) // writes the batched finish mark: a finish still held is refused
			if c.stopping {
				inst.Kill()
			}
			// Unknown key: exit 3, nothing changed; bad usage: exit 2.
			if _, code := cli(t, env, "forget", "--key", strings.Repeat("a", 64), "--reason", "r", "--operator", "o"); code != 3 {
				t.Fatalf("unknown key: exit %d", code)
			}
			if _, code := cli(t, env, "forget", "--key", k, "--operator", "o"); code != 2 {
				t.Fatalf("no reason: exit %d", code)
			}
			if _, code := cli(t, env, "forget", "--key", "not-a-key", "--reason", "r", "--operator", "o"); code != 2 {
				t.Fatalf("a malformed key: exit %d", code)
			}
			out, code := cli(t, env, "forget", "--key", k, "--reason", "the summary was wrong", "--operator", "ops@example")
			var rep struct {
				Key     string   `json:"idempotency_key"`
				Prior   string   `json:"prior_status"`
				Objects []string `json:"objects_deleted"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Key != k || rep.Prior != "SUCCEEDED" || len(rep.Objects) != 3 {
				t.Fatalf("forget: exit %d: %s", code, out)
			}
			if !c.mysql { // the objects are gone
				for _, o := range rep.Objects {
					if _, err := os.Stat(filepath.Join(state, "results", o)); !os.IsNotExist(err) {
						t.Fatalf("%s still there: %v", o, err)
					}
				}
			}
			if c.stopping {
				inst = start(t, env...)
			}
			again := inst.invoke(t, event, "fc-2-"+nonce(), nil)
			a := again.json(t)
			if again.status != 200 || a["status"] != "SUCCEEDED" || a["decision"] == "REPEAT_DONE" || a["attempt"] != 1.0 || llm.Total() != 2 {
				t.Fatalf("after the forget: %d %s, %d model calls", again.status, again.body, llm.Total())
			}
			if dup := inst.invoke(t, event, "fc-3-"+nonce(), nil).json(t); dup["decision"] != "REPEAT_DONE" || llm.Total() != 2 {
				t.Fatalf("a duplicate of the new life: %v", dup)
			}
			if c.stopping {
				inst.Kill()
			}
			insp, code := cli(t, env, "inspect", "--key", k)
			if code != 0 || !strings.Contains(insp, `"forget"`) || !strings.Contains(insp, "ops@example") {
				t.Fatalf("inspect does not show the audit row: exit %d\n%s", code, insp)
			}
		})
	}
}
