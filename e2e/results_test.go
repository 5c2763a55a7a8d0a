package e2e_test

// Results and model end to end: the binary against the OSS fake (which
// checks the SDK's V4 signatures and the STS token), the LLM fake and a
// webhook receiver.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/ossresult"
	"github.com/idemgate/idemgate/ossresult/ossfake"
)

const (
	ossBucket = "idemgate-results"
	ossRegion = "cn-hangzhou"
	stsID     = "STS.test-key-id"
	stsSecret = "test-secret-value-1234"
	stsToken  = "CAIS-test-security-token"
)

type ossRig struct {
	fake *ossfake.Server
	env  []string
}

func newOSSRig(t *testing.T) *ossRig {
	fake := ossfake.New(ossfake.Config{Bucket: ossBucket, Region: ossRegion, AccessKeyID: stsID,
		AccessKeySecret: stsSecret, SecurityToken: stsToken, RequireTag: ossresult.TagKind, RequireTagPrefix: "tasks/"})
	t.Cleanup(fake.Close)
	return &ossRig{fake: fake, env: []string{"OSS_ENDPOINT=" + fake.Endpoint(), "OSS_BUCKET=" + ossBucket, "OSS_REGION=" + ossRegion}}
}

// stsHeaders are the credentials FC passes to each invocation.
func stsHeaders(secret string) map[string]string {
	return map[string]string{"x-fc-access-key-id": stsID, "x-fc-access-key-secret": secret, "x-fc-security-token": stsToken}
}

type webhook struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

// hookSecret signs the notifications; the receiver counts only verified ones.
const hookSecret = "hook-signing-secret-0123456789abcdef"

func newWebhook(t *testing.T) *webhook {
	w := &webhook{calls: map[string]int{}}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify(hookSecret, r.Header.Get(notify.SignatureHeader), body, time.Minute); err != nil {
			t.Errorf("webhook: %v", err)
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.mu.Lock()
		w.calls[r.Header.Get("Idempotency-Key")]++
		w.mu.Unlock()
		rw.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// env allows the receiver (plain http on loopback) and signs for it.
func (w *webhook) env() []string {
	return []string{"NOTIFY_ALLOWED_HOSTS=" + w.srv.URL + ";loopback", "NOTIFY_SIGNING_SECRET=" + hookSecret}
}

// 50 tasks with duplicates mixed in (redeliveries, double submits, bursts)
// over two instances: exactly one model call, one approved object and one
// notification per business key.
func TestResultsFiftyTasksOnOSS(t *testing.T) {
	oss, llm, hook := newOSSRig(t), newLLMFake(t, 20*time.Millisecond), newWebhook(t)
	env := append(append(append(llm.Env(), oss.env...), hook.env()...), "MYSQL_DSN="+testenv.FreshMySQLDSN(t),
		"REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t), "STATE_DIR="+t.TempDir())
	migrate(t, env)
	insts := []*instance{start(t, env...), start(t, env...)}
	run := nonce()
	type delivery struct {
		body  []byte
		reqID string
		retry int
	}
	// A chain is delivered in order by one worker: FC retries a request only
	// after its previous try answered, never alongside it.
	var plan [][]delivery
	total := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		content := fmt.Sprintf("task %d of run %s", i, run)
		notify := map[string]any{"notify": map[string]any{"url": hook.srv.URL + "/done"}}
		first := taskEvent(fmt.Sprintf("ev-%d-%s", i, run), content, notify)
		chain := []delivery{{first, "fc-" + nonce(), 0}}
		for range rng.IntN(4) {
			switch rng.IntN(3) {
			case 0: // EventBridge redelivers the same event: a new invocation
				plan = append(plan, []delivery{{first, "fc-" + nonce(), 0}})
			case 1: // the user double-clicks: a new event, same action
				plan = append(plan, []delivery{{taskEvent("ev-"+nonce(), content, notify), "fc-" + nonce(), 0}})
			default: // FC retries the same request
				chain = append(chain, delivery{first, chain[0].reqID, len(chain)})
			}
		}
		plan = append(plan, chain)
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	keys := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan []delivery)
	for w := range 8 {
		wg.Go(func() {
			for chain := range work {
				for _, d := range chain {
					h := stsHeaders(stsSecret)
					h["x-fc-retry-count"] = fmt.Sprint(d.retry)
					a := insts[w%2].invoke(t, d.body, d.reqID, h)
					if a.status != 200 {
						t.Errorf("delivery: %d %s", a.status, a.body)
						continue
					}
					m := a.json(t)
					mu.Lock()
					keys[m["idempotency_key"].(string)] = true
					total++
					mu.Unlock()
				}
			}
		})
	}
	for _, c := range plan {
		work <- c
	}
	close(work)
	wg.Wait()
	if len(keys) != 50 {
		t.Fatalf("%d keys, want 50 (%d deliveries)", len(keys), total)
	}
	objects := oss.fake.Objects()
	for k := range keys {
		if n := llm.Calls(k); n != 1 {
			t.Errorf("key %s: %d model calls", k[:8], n)
		}
		if n := hook.calls[k+":notify"]; n != 1 {
			t.Errorf("key %s: %d notifications", k[:8], n)
		}
		approved, ok := objects["tasks/"+k+"/approved/result.md"]
		output, ok2 := objects["tasks/"+k+"/attempt-001/output.json"]
		input := objects["tasks/"+k+"/input.json"]
		if approved.Tags[ossresult.TagKind] != "approved" || output.Tags[ossresult.TagKind] != "attempt" || input.Tags[ossresult.TagKind] != "input" {
			t.Errorf("key %s: tags approved %v, output %v, input %v", k[:8], approved.Tags, output.Tags, input.Tags)
		}
		var out struct{ Text string }
		if !ok || !ok2 || json.Unmarshal(output.Body, &out) != nil || out.Text != string(approved.Body) {
			t.Errorf("key %s: approved %v output %v: approved/result.md must equal the output's text", k[:8], ok, ok2)
			continue
		}
		if approved.Meta["idempotency-key"] != k || !strings.HasPrefix(approved.Meta["request-id"], "req-ev-") {
			t.Errorf("key %s: metadata %v", k[:8], approved.Meta)
		}
		if _, ok := objects["tasks/"+k+"/input.json"]; !ok {
			t.Errorf("key %s: no input.json", k[:8])
		}
	}
	t.Logf("%d deliveries of 50 tasks; %d model calls; %d objects", total, llm.Total(), len(objects))
}

// Each failure ends in its class of docs/design.md §10.
func TestResultsFailureClasses(t *testing.T) {
	oss, llm := newOSSRig(t), newLLMFake(t, 0)
	env := append(append(llm.Env(), oss.env...), "STATE_DIR="+t.TempDir(), "LLM_TIMEOUT_SECONDS=1")
	inst := start(t, env...)
	policy := `{"error":{"code":"data_inspection_failed","message":"Input data may contain inappropriate content.","type":"data_inspection_failed"}}`
	cases := []struct {
		name      string
		secret    string
		setup     func(t *testing.T, content string)
		llm       func(n int64) (time.Duration, int)
		body      string
		status    int
		errorType string
		retryable bool
	}{
		{name: "success", status: 200},
		{name: "wrong credentials", secret: "not-the-secret-0000", status: 404, errorType: "permission_denied"},
		{name: "503 then success", setup: func(*testing.T, string) { oss.fake.FailNext(1, 503) }, status: 200},
		{name: "409 with different content", setup: func(t *testing.T, content string) {
			k := keyOf(t, content)
			s, err := ossresult.NewOSS(ossresult.OSSConfig{Endpoint: oss.fake.Endpoint(), Bucket: ossBucket, Region: ossRegion})
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.With(ossresult.Credentials{AccessKeyID: stsID, AccessKeySecret: stsSecret, SecurityToken: stsToken})
			if err != nil {
				t.Fatal(err)
			}
			key, _ := ossresult.AttemptKey(k, 1)
			if _, err := b.PutOnce(context.Background(), key, []byte(`{"text":"someone else's"}`), "application/json", ossresult.Meta{IdempotencyKey: k}); err != nil {
				t.Fatal(err)
			}
		}, status: 404, errorType: "result_conflict"},
		{name: "model timeout", llm: func(int64) (time.Duration, int) { return 2 * time.Second, 200 }, status: 404,
			errorType: "timeout", retryable: true},
		{name: "429", llm: func(int64) (time.Duration, int) { return 0, 429 }, status: 404, errorType: "rate_limited", retryable: true},
		{name: "503 from the model", llm: func(int64) (time.Duration, int) { return 0, 503 }, status: 404,
			errorType: "temporary_unavailable", retryable: true},
		{name: "400", llm: func(int64) (time.Duration, int) { return 0, 400 }, status: 404, errorType: "invalid_request"},
		{name: "policy refusal", llm: func(int64) (time.Duration, int) { return 0, 400 }, body: policy, status: 404,
			errorType: "policy_rejected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			content := "classes " + c.name + " " + nonce()
			if c.setup != nil {
				c.setup(t, content)
			}
			llm.Set(func(int64) (time.Duration, int) { return 0, 200 })
			if c.llm != nil {
				llm.Set(c.llm)
			}
			llm.SetErrorBody("")
			if c.body != "" {
				llm.SetErrorBody(c.body)
			}
			secret := stsSecret
			if c.secret != "" {
				secret = c.secret
			}
			a := inst.invoke(t, taskEvent("ev-"+nonce(), content, nil), "fc-"+nonce(), stsHeaders(secret))
			m := a.json(t)
			if a.status != c.status || (c.status != 200 && (m["errorType"] != c.errorType || m["retryable"] != c.retryable)) {
				t.Fatalf("got %d %v, want %d %s retryable=%v", a.status, m, c.status, c.errorType, c.retryable)
			}
			wantStatus := map[bool]string{true: "FAILED_RETRYABLE", false: "FAILED_FINAL"}[c.retryable]
			if c.status == 200 {
				wantStatus = "SUCCEEDED"
			}
			if m["status"] != wantStatus {
				t.Fatalf("recorded %v, want %s", m["status"], wantStatus)
			}
			if strings.Contains(string(a.body), secret) || strings.Contains(inst.Output(), stsSecret) ||
				strings.Contains(inst.Output(), stsToken) || strings.Contains(inst.Output(), "sk-test-key") {
				t.Fatal("a secret reached the answer or the log")
			}
		})
	}
}

// keyOf is the business key of taskEvent's task with this content.
func keyOf(t *testing.T, content string) string {
	t.Helper()
	input, _ := json.Marshal(map[string]any{"content": content})
	d, err := keys.Derive(keys.Fields{TenantID: "acme", TaskType: "summarize", Operation: "summarize", Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return d.Key
}
