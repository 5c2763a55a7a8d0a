package main

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/customruntime"
)

// BenchmarkHTTPDuplicateRedis: the function's custom-runtime server in-process
// on loopback (logs written to /dev/null through a real file), hit by the load
// test's client with duplicates of one finished key, next to the bare handler
// with the same client. For profiles of the whole HTTP duplicate path:
//
//	go test -run '^$' -bench HTTPDuplicate -benchtime 20000x -cpuprofile /tmp/http.pprof ./scripts/loadtest/
func BenchmarkHTTPDuplicateRedis(b *testing.B) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devnull.Close() })
	a, body := finishedKey(b, devnull)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	srv := &customruntime.Server{Handle: a.Pipeline.Handle, Log: a.Log, Hooks: handler.Hooks{Secrets: a.Redactor.Hold}}
	addr := make(chan string, 1)
	go func() {
		_ = srv.ListenAndServe(ctx, "127.0.0.1:0", func(bound net.Addr) { addr <- bound.String() })
	}()
	base := "http://" + <-addr
	client := newClient(16, 0)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var r Result
			invoke(ctx, client, base, body, &r)
			if r.Err != "" || r.Decision != "REPEAT_DONE" {
				b.Errorf("duplicate: %+v", r)
				return
			}
		}
	})
}
