// Package bare is the floor the measurements compare with: SetIfAbsent, the
// smallest claim script, and a net/http handler that reads the body and
// answers after one EVALSHA of it, with a small JSON answer shaped like the
// function's outcome. The load test runs the handler in processes of its own
// (scripts/loadtest/bareserver, spawned like the function's instances) and
// in-process; nothing else may be added to it, or the floor moves.
package bare

import (
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// SetIfAbsent is the raw fast-path floor of the load test and the library
// benchmarks: the smallest possible claim.
var SetIfAbsent = redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 'FIRST' or 'REPEAT'`)

// Handler answers every POST /invoke with one EVALSHA keyed by the body's
// hash (under prefix, as the function's keys are under REDIS_KEY_PREFIX),
// and /initialize with 200 after a PING (as the function warms its clients
// there).
func Handler(rdb redis.UniversalClient, prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/initialize" {
			if err := rdb.Ping(r.Context()).Err(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h := fnv.New64a()
		h.Write(body)
		key := prefix + "loadtest:bare:" + strconv.FormatUint(h.Sum64(), 16)
		v, err := SetIfAbsent.Run(r.Context(), rdb, []string{key}, "x", 300000).Text()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"idempotency_key":%q,"status":"SUCCEEDED","duplicate":%t,"decision":"%s","attempt":1,"result_ref":"","request_id":%q}`,
			key, v == "REPEAT", v, r.Header.Get("x-fc-request-id"))
	})
}
