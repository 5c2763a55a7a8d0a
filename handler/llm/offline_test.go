package llm

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/idempotency"
)

const article = `Summarise in at most 120 words:

Idempotency keys let a client retry a request safely. The server stores the first result under the key.
A later request with the same key gets the stored result instead of running again! Weather was nice today.
Retries without idempotency keys can charge a customer twice. Keys should expire after a retention window.`

func TestOfflineIsDeterministicAndLabelled(t *testing.T) {
	req := Request{Key: "k", System: "sys", Prompt: article}
	a, err := NewOffline().Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // map iteration order must not leak into the answer
		b, err := (&Offline{}).Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Fatalf("run %d differs:\n%+v\n%+v", i, a, b)
		}
	}
	if !strings.HasPrefix(a.Text, OfflineLabel+"\n") {
		t.Errorf("text does not start with the label: %q", a.Text)
	}
	if !a.Offline || a.Model != "offline" || !strings.HasPrefix(a.ID, "offline-") || a.PromptTokens == 0 || a.CompletionTokens == 0 {
		t.Errorf("response metadata = %+v", a)
	}
	body := strings.TrimPrefix(a.Text, OfflineLabel)
	if strings.Contains(body, "Summarise in at most") {
		t.Errorf("instruction line leaked into the summary: %q", body)
	}
	if strings.Contains(body, "Weather") {
		t.Errorf("off-topic sentence chosen: %q", body)
	}
	if !strings.Contains(body, "idempotency keys") && !strings.Contains(body, "Idempotency keys") {
		t.Errorf("summary misses the topic: %q", body)
	}

	other, _ := NewOffline().Complete(context.Background(), Request{Key: "k", Prompt: article + " Extra sentence about keys."})
	if other.ID == a.ID {
		t.Error("different prompts share an ID")
	}
}

func TestOfflineLimits(t *testing.T) {
	long := strings.Repeat("alpha beta gamma delta epsilon. ", 200)
	r, err := NewOffline().Complete(context.Background(), Request{Prompt: long, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(strings.TrimPrefix(r.Text, OfflineLabel))); n > 11 { // 10 words + "…"
		t.Errorf("MaxTokens 10 gave %d words", n)
	}
	cjk, err := NewOffline().Complete(context.Background(), Request{Prompt: "幂等键让客户端安全重试。服务器保存第一次的结果。今天天气很好。"})
	if err != nil || !strings.Contains(cjk.Text, "。") {
		t.Errorf("CJK prompt: %q, %v", cjk.Text, err)
	}
}

func TestOfflineErrors(t *testing.T) {
	_, err := NewOffline().Complete(context.Background(), Request{Prompt: " "})
	if c, code := idempotency.Classify(err); c != idempotency.ClassFinal || code != CodeInvalidRequest {
		t.Errorf("empty prompt: %s/%s", c, code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = NewOffline().Complete(ctx, Request{Prompt: "p"})
	if c, code := idempotency.Classify(err); c != idempotency.ClassRetryable || code != CodeTimeout {
		t.Errorf("canceled: %s/%s", c, code)
	}
}
