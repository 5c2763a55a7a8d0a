package cli

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
)

// `main purge` on MySQL: a finished task whose record is older than the
// retention is retired to its tombstone and its step records go; inspect
// showed when its dedup window would end (when the tombstone goes, two days
// after its objects expired); the tombstone answers the same event without
// running it; once as old as the objects' lifetime and the margin, the
// tombstone goes too, the key is unknown, and the same event runs again (the
// offline model answers it byte for byte as before, so the re-run meets its
// own earlier objects and succeeds). A younger task stays.
func TestPurgeCommandOnMySQL(t *testing.T) {
	env := migrated(t, "RETENTION_DAYS=30")
	old, young := uniqueTask(t), uniqueTask(t)
	keyOf := map[string]string{}
	for _, ev := range []string{old, young} {
		stdout, stderr, code := cli("invoke", "--event", ev)
		o := outcome(t, stdout)
		if code != ExitOK || o["status"] != "SUCCEEDED" {
			t.Fatalf("invoke: exit %d\n%s%s", code, stdout, stderr)
		}
		keyOf[ev] = o["idempotency_key"].(string)
	}
	var ins handler.Inspection
	stdout, _, code := cli("inspect", "--key", keyOf[old])
	if err := json.Unmarshal([]byte(stdout), &ins); code != ExitOK || err != nil {
		t.Fatalf("inspect: exit %d, %v\n%s", code, err, stdout)
	}
	if want := ins.Record.UpdatedAt.Add(32 * 24 * time.Hour).UTC().Format(time.RFC3339); ins.DedupWindowEnds != want {
		t.Fatalf("dedup_window_ends %q, want updated_at + 30 + 2 days = %s", ins.DedupWindowEnds, want)
	}

	db, err := sql.Open("mysql", strings.TrimPrefix(env[0], "MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE idempotency_record SET updated_at = updated_at - INTERVAL 31 DAY
 WHERE request_id = ? OR parent_key = ?`, keyOf[old], keyOf[old]); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"purge", "--older-than", "7d"}, {"purge", "--older-than", "191h"}} {
		if _, stderr, code := cli(args...); code != ExitUsage || !strings.Contains(stderr, "--older-than: want from 8d") {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	stdout, stderr, code := cli("purge")
	var rep handler.PurgeReport
	if err := json.Unmarshal([]byte(stdout), &rep); code != ExitOK || err != nil {
		t.Fatalf("purge: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if rep.Records != 1 || rep.Steps != 0 || rep.More || rep.OlderThan != "720h0m0s" {
		t.Fatalf("purge report %s", stdout)
	}
	stdout, _, code = cli("inspect", "--key", keyOf[old])
	if err := json.Unmarshal([]byte(stdout), &ins); code != ExitOK || err != nil || !ins.Record.Tombstone {
		t.Fatalf("inspect of the purged key: exit %d, %v\n%s", code, err, stdout)
	}
	if _, _, code := cli("inspect", "--key", keyOf[young]); code != ExitOK {
		t.Fatalf("inspect of the young key: exit %d", code)
	}
	stdout, stderr, code = cli("invoke", "--event", old)
	if o := outcome(t, stdout); code != ExitOK || o["decision"] != "REPEAT_DONE" || o["status"] != "SUCCEEDED" {
		t.Fatalf("the purged key's event, answered by its tombstone: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := db.Exec(`UPDATE idempotency_record SET updated_at = updated_at - INTERVAL 2 DAY WHERE request_id = ?`, keyOf[old]); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = cli("purge")
	if err := json.Unmarshal([]byte(stdout), &rep); code != ExitOK || err != nil || rep.Tombstones != 1 || rep.Records != 0 {
		t.Fatalf("purge of the tombstone: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if _, _, code := cli("inspect", "--key", keyOf[old]); code != ExitNotFound {
		t.Fatalf("inspect of the key whose tombstone went: exit %d", code)
	}
	// The dedup window has ended: the same event is a new action.
	stdout, stderr, code = cli("invoke", "--event", old)
	if o := outcome(t, stdout); code != ExitOK || o["decision"] != "FIRST" || o["status"] != "SUCCEEDED" {
		t.Fatalf("the purged key's event again: exit %d\n%s%s", code, stdout, stderr)
	}
}
