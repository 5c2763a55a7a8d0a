package benchmarks

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/idemhttp"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/idempotency/redisfast"
)

// BenchmarkHTTPReplay: a replayed request through idemhttp's middleware
// (MySQL + Redis; the repeat is answered by the Redis fast layer) against a
// bare handler that reads the body and does one Redis GET — the least a
// handler with any state does. Both are served in-process (ServeHTTP), so
// the HTTP stack does not hide the difference. The goal (docs/api.md,
// BENCHMARKS.md): the replay's throughput is at least 50 % of the bare
// handler's, i.e. "replay-throughput" ≥ 0.5, the median over rounds.
func BenchmarkHTTPReplay(b *testing.B) {
	r := setup(b)
	ctx := context.Background()
	body := []byte(`{"sku":"a-1","quantity":2,"note":"benchmark"}`)
	answer := []byte(`{"order":"o-42","status":"created"}`)
	bareKey := r.prefix + "bench:http:" + newKey()
	if err := r.rdb.Set(ctx, bareKey, answer, time.Minute).Err(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.rdb.Del(context.Background(), bareKey) })
	bare := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, err := io.ReadAll(req.Body); err != nil {
			b.Fatal(err)
		}
		v, err := r.rdb.Get(req.Context(), bareKey).Bytes()
		if err != nil {
			b.Fatal(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(v)
	})
	mw := idemhttp.New(r.eng).Handler(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	}), idemhttp.Route("POST /orders"), idemhttp.JSONBody())
	key := newKey()
	hk, _ := keys.HTTPRequest("", http.MethodPost, "POST /orders", key)
	b.Cleanup(func() { r.rdb.Del(context.Background(), r.prefix+redisfast.Key(hk)) })
	send := func(h http.Handler, wantReplay bool) {
		req := httptest.NewRequest(http.MethodPost, "/orders", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idemhttp.HeaderKey, `"`+key+`"`)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated || (w.Header().Get(idemhttp.HeaderReplayed) == "true") != wantReplay {
			b.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
	}
	send(mw, false) // the first request: stored
	ratios := interleaveRounds(b, func() { send(bare, false) }, func() { send(mw, true) })
	_, med, _ := median(ratios) // single rounds of 50 swing with the machine's load; their median does not
	b.ReportMetric(med, "replay-throughput")
}

// interleaveRounds alternates rounds of raw and subject calls and returns,
// per round, the subject's throughput as a share of raw's (raw time /
// subject time); it reports both costs per call over the whole run.
func interleaveRounds(b *testing.B, raw, subject func()) []float64 {
	const round = 50
	var ratios []float64
	var tRaw, tSub time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i += round {
		n := min(round, b.N-i)
		start := time.Now()
		for range n {
			raw()
		}
		r := time.Since(start)
		start = time.Now()
		for range n {
			subject()
		}
		s := time.Since(start)
		tRaw, tSub = tRaw+r, tSub+s
		ratios = append(ratios, float64(r)/float64(s))
	}
	b.StopTimer()
	b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(tSub.Nanoseconds())/float64(b.N), "subject-ns/op")
	b.ReportMetric(0, "ns/op")
	return ratios
}
