// Command bareserver serves the load test's bare handler (one EVALSHA per
// request) in a process of its own, started like a function instance:
// FC_SERVER_PORT, REDIS_URL and REDIS_KEY_PREFIX from the environment, listening on loopback.
// The load test builds it with the function's flags and spawns as many as it
// spawns instances, so that both pay for the same process boundaries.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/bare"
)

func main() {
	rdb, err := redisfast.Dial(os.Getenv("REDIS_URL"), 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareserver:", err)
		os.Exit(2)
	}
	srv := &http.Server{Addr: net.JoinHostPort("127.0.0.1", os.Getenv("FC_SERVER_PORT")),
		Handler: bare.Handler(rdb, os.Getenv("REDIS_KEY_PREFIX")), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintln(os.Stderr, "bareserver:", srv.ListenAndServe())
	os.Exit(1)
}
