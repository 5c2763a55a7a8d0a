package e2e_test

// Hardening end to end: what any upstream can send, and what must never
// leak.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/ossresult/ossfake"
)

func rawEvent(data string) []byte {
	return []byte(`{"id":"ev-` + nonce() + `","source":"idemgate.test","specversion":"1.0","type":"idemgate:Task:Submitted",` +
		`"datacontenttype":"application/json","data":` + data + `}`)
}

func TestBadInputOverHTTP(t *testing.T) {
	inst := start(t, "STATE_DIR="+t.TempDir())
	deep := strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100)
	batch101 := "[" + strings.TrimSuffix(strings.Repeat(string(taskEvent("b", "x", nil))+",", 101), ",") + "]"
	cases := []struct {
		name      string
		body      []byte
		status    int
		errorType string
	}{
		{"empty", nil, 404, "malformed_event"},
		{"not JSON", []byte("hello"), 404, "malformed_event"},
		{"truncated JSON", []byte(`{"id":"x",`), 404, "malformed_event"},
		{"empty batch", []byte("[]"), 200, ""},
		{"array of non-objects", []byte("[1,2]"), 404, "invalid_batch"},
		{"missing id", []byte(`{"source":"s","specversion":"1.0","type":"t","data":{}}`), 404, "invalid_envelope"},
		{"missing source", []byte(`{"id":"i","specversion":"1.0","type":"t","data":{}}`), 404, "invalid_envelope"},
		{"missing specversion", []byte(`{"id":"i","source":"s","type":"t","data":{}}`), 404, "invalid_envelope"},
		{"wrong specversion", []byte(`{"id":"i","source":"s","specversion":"0.3","type":"t","data":{}}`), 404, "invalid_envelope"},
		{"data not an object", rawEvent(`5`), 404, "invalid_request"},
		{"missing tenant", rawEvent(`{"task_type":"summarize","operation":"summarize","input":{"content":"x"}}`), 404, "invalid_request"},
		{"missing input", rawEvent(`{"tenant_id":"t","task_type":"summarize","operation":"summarize"}`), 404, "invalid_request"},
		{"unknown task type", rawEvent(`{"tenant_id":"t","task_type":"nope","operation":"x","input":{}}`), 404, "invalid_request"},
		{"huge body", bytes.Repeat([]byte("x"), 7<<20), 404, "body_too_large"},
		{"body nested too deep", []byte(strings.Repeat("[", 600) + strings.Repeat("]", 600)), 404, "malformed_event"},
		{"input nested too deep", rawEvent(`{"tenant_id":"t","task_type":"summarize","operation":"summarize","input":` + deep + `}`), 404, "input_too_deep"},
		{"invalid UTF-8", append(rawEvent(`{"tenant_id":"t`), []byte("\xff\xfe\"}")...), 404, "malformed_event"},
		{"tenant too long", rawEvent(`{"tenant_id":"` + strings.Repeat("t", 200) + `","task_type":"summarize","operation":"summarize","input":{"content":"x"}}`), 404, "field_too_long"},
		{"request id with CRLF", rawEvent(`{"tenant_id":"t","task_type":"summarize","operation":"summarize","input":{"content":"x"},"request_id":"a\r\nSet-Cookie: x"}`), 404, "invalid_request"},
		{"batch too large", []byte(batch101), 404, "batch_too_large"},
		{"Redis key syntax in tenant", rawEvent(`{"tenant_id":"acme}:{idem:*","task_type":"summarize","operation":"summarize","input":{"content":"x"}}`), 200, ""},
		{"CRLF in tenant and input", rawEvent(`{"tenant_id":"acme\r\nX-Injected: 1","task_type":"summarize","operation":"summarize","input":{"content":"line\r\nSet-Cookie: y"}}`), 200, ""},
		{"SQL in tenant and input", rawEvent(`{"tenant_id":"x'); DROP TABLE idempotency_record; --","task_type":"summarize","operation":"summarize","input":{"content":"' OR 1=1 --"}}`), 200, ""},
		{"HTML and unicode", rawEvent(`{"tenant_id":"租户<script>","task_type":"summarize","operation":"summarize","input":{"content":"\u2028 & <b> 😀"}}`), 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := inst.invoke(t, c.body, "fc-"+nonce(), nil)
			if a.status != c.status {
				t.Fatalf("status %d, want %d: %.300s", a.status, c.status, a.body)
			}
			m := a.json(t)
			if c.status == 404 && (m["errorType"] != c.errorType || a.header.Get("x-fc-status") != "404" || m["errorMessage"] == "") {
				t.Fatalf("answer %.300s, want errorType %s", a.body, c.errorType)
			}
			if c.status == 200 && m["status"] != nil && m["status"] != "SUCCEEDED" {
				t.Fatalf("answer %.300s", a.body)
			}
		})
	}
	// The instance is alive and still works.
	if m := inst.invoke(t, taskEvent("ev-"+nonce(), "after the storm "+nonce(), nil), "fc-"+nonce(), nil).json(t); m["status"] != "SUCCEEDED" {
		t.Fatalf("after bad input: %v", m)
	}
}

// Recognisable secrets through success, failure, panic and timeout paths:
// none may appear in the output, an answer, a stored record or an object.
func TestSecretsNeverLeak(t *testing.T) {
	const (
		llmKey    = "sk-SECRET-llm-0001"
		akSecret  = "ak-SECRET-env-0002"
		stsSecret = "sts-SECRET-hdr-0003"
		stsToken  = "tok-SECRET-sts-0004"
	)
	dbPass := "dsn-SECRET-pw-" + nonce() // no run's password is another's
	secrets := []string{llmKey, akSecret, stsSecret, stsToken, dbPass}

	// A database account with a password, on a database of its own; both
	// are the test's and dropped at its end (testenv.MySQLAccount).
	dsn := testenv.MySQLAccount(t, testenv.FreshMySQLDSN(t), dbPass)

	// OSS accepts the environment's AccessKey (the fallback when FC sends no
	// credentials); the model fake echoes whatever Authorization it got into
	// its error body, as a careless proxy would.
	oss := ossfake.New(ossfake.Config{Bucket: ossBucket, Region: ossRegion, AccessKeyID: "LTAI-env-id", AccessKeySecret: akSecret})
	defer oss.Close()
	llm := newLLMFake(t, 0)
	env := []string{"LLM_BASE_URL=" + llm.URL, "LLM_API_KEY=" + llmKey, "LLM_MODEL=qwen-plus", "LLM_TIMEOUT_SECONDS=1",
		"MYSQL_DSN=" + dsn, "REDIS_URL=" + testenv.RedisURL(t), "REDIS_KEY_PREFIX=" + testenv.RedisPrefix(t), "STATE_DIR=" + t.TempDir(),
		"OSS_ENDPOINT=" + oss.Endpoint(), "OSS_BUCKET=" + ossBucket, "OSS_REGION=" + ossRegion,
		"ALIBABA_CLOUD_ACCESS_KEY_ID=LTAI-env-id", "ALIBABA_CLOUD_ACCESS_KEY_SECRET=" + akSecret}
	migrate(t, env)
	inst := start(t, env...)
	panicky := start(t, append(env, "IDEMGATE_FAULT=before_steps:panic")...)
	var answers bytes.Buffer
	send := func(i *instance, headers map[string]string) {
		a := i.invoke(t, taskEvent("ev-"+nonce(), "secret path "+nonce(), nil), "fc-"+nonce(), headers)
		answers.Write(a.body)
	}
	// The model fake is wrong on purpose: its 401 body quotes the key (the LLM
	// fake answers 401 whenever the Authorization header is not sk-test-key).
	send(inst, nil) // model failure path: 401 quoting "Bearer sk-SECRET-llm-0001"
	llm.Set(func(int64) (time.Duration, int) { return 2 * time.Second, 200 })
	send(inst, nil) // timeout path (still 401 first: the fake checks the key before sleeping)
	send(panicky, nil)
	send(inst, map[string]string{"x-fc-access-key-id": "STS.hdr", "x-fc-access-key-secret": stsSecret, "x-fc-security-token": stsToken})
	// And a success: the fake accepts our key from here on.
	llm.Accept(llmKey)
	llm.Set(func(int64) (time.Duration, int) { return 0, 200 })
	send(inst, nil)
	llm.Set(func(int64) (time.Duration, int) { return 2 * time.Second, 200 })
	send(inst, nil) // a real timeout

	if !strings.Contains(answers.String(), `"SUCCEEDED"`) || !strings.Contains(answers.String(), `"timeout"`) ||
		!strings.Contains(answers.String(), `"panic"`) || !strings.Contains(answers.String(), `"permission_denied"`) {
		t.Fatalf("not every path was taken: %s", answers.String())
	}
	var stored bytes.Buffer
	appDB, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer appDB.Close()
	for _, table := range []string{"idempotency_record", "idempotency_replay", "idempotency_stats"} {
		rows, err := appDB.QueryContext(context.Background(), "SELECT * FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			_ = rows.Scan(ptrs...)
			for _, v := range vals {
				stored.Write(v)
				stored.WriteByte(' ')
			}
		}
		rows.Close()
	}
	for k, o := range oss.Objects() {
		fmt.Fprintf(&stored, "%s %s %v ", k, o.Body, o.Meta)
	}
	d := &drill{t: t, env: env}
	stats, _ := d.cli("stats", "--json")
	for name, text := range map[string]string{"instance output": inst.Output() + panicky.Output(),
		"answers": answers.String(), "records and objects": stored.String(), "stats": stats} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				i := strings.Index(text, s)
				t.Errorf("%s contains %s: …%s…", name, s, text[max(0, i-120):min(len(text), i+40)])
			}
		}
	}
}
