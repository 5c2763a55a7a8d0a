// Command netrig is the benchmark rig of issue 41: the load test
// (scripts/loadtest) with MariaDB, Redis, the function's instances and the
// load generator each in a network namespace of its own, joined by veths on
// a private range that exists only inside those namespaces, a one-way delay
// on the links to Redis and MariaDB, and taskset placing the servers and
// the caller on different CPUs where the machine has them. On FC the
// function never shares a CPU with Redis or the database, which are other
// hosts 0.1–0.5 ms away; on a loopback benchmark a round trip's CPU is
// taken from the database, and no figure can say which is which.
//
// Per configuration (concurrency × delay) and run it reports, side by side:
// throughput, p50 and p99, and the CPU per delivery of each process (the
// function's instances, Redis, MariaDB, the load generator, the delay
// proxies; from /proc), for first deliveries with Redis and on MySQL alone,
// the raw pipeline, Redis and MySQL duplicates and the raw INSERT + UPDATE
// floor; then issue 41's goals as min / median / max over the runs, met or
// not met by the median. It fails on a setup error, a wrong answer or an
// effective duplicate, a raw-pipeline task that did not do the whole work,
// or anything left behind; never on a figure.
//
// The raw pipeline the goals compare with is the raw function
// (scripts/loadtest/rawfn): the same external work as a first delivery
// (INSERT, model call, three signed PUTs, UPDATE, notify) and nothing else,
// in as many processes as there are instances with Redis, in the
// function's namespace and on its CPUs, invoked over the same HTTP
// protocol, and its CPU read from /proc as the instances' is. The load test
// checks that each of its tasks made one scratch row, one model call, three
// objects and one notify POST. The same work inside the load generator
// ("raw pipeline, in generator") is printed beside it, not judged.
//
//	go run ./scripts/netrig                         # the full form: c = 32 and 400, 150 and 500 µs, 3 runs each
//	go run ./scripts/netrig -short                  # CI's: c = 32, 150 µs, one short run
//	go run ./scripts/netrig -delay 0 -c 32 -runs 1  # today's figures: servers reached directly, no delay
//	go run ./scripts/netrig -c 32 -delay 150us -runs 1 -profile /tmp/rigprof  # and where the CPU goes
//
// -profile DIR records, with perf record -e cpu-clock -g (no hardware
// counters needed), the function's instances with Redis during the
// first-delivery and Redis-duplicate phases and the raw function during its
// own, each only while one of that phase's measured slices runs (the load
// test's -perf-dir, scripts/loadtest/perf.go: perf's control FIFO), and
// writes per configuration and phase DIR/c32-150µs/<phase>/perf.data,
// self.txt (perf report --no-children: the samples by symbol) and
// by-function.txt (the 40 symbols with the most CPU, callees included), so
// that the function's own CPU can be read beside the raw function's. With
// it the two binaries keep their symbol tables (built without -s -w: the
// same machine code), and the profiled phases' CPU figures include the cost
// of perf's sampling. Without perf on PATH it fails naming it.
//
// Its work directory (the binaries, the private MariaDB's data, the
// instances' files) is under TMPDIR; on a machine whose disk other work
// shares, TMPDIR=/dev/shm keeps MariaDB's fsyncs off it (with the data on a
// busy disk a commit can stall for seconds, and the engine's 5 s bound on the
// completing write then answers "timeout": a wrong answer to the rig).
//
// Needs root (ip netns), ip, taskset, and tc unless -delay-mode proxy;
// redis-server, redis-cli, mariadbd, mariadb-install-db and mariadb-admin;
// perf with -profile.
// It starts and stops everything itself: namespaces igrig<pid>-*, a private
// Redis and MariaDB inside them, and removes them, the work directory and
// every process on every exit path, then checks that nothing is left.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/dev/netrig"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "proxy" {
		os.Exit(proxyMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// proxyMain serves one delay proxy (the rig starts it in a server's
// namespace): it prints "listening ADDR" once it accepts, and writes its
// Stats to -stats at SIGTERM.
func proxyMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netrig proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address to accept on")
	to := fs.String("to", "", "the server's address")
	delay := fs.Duration("delay", 0, "one-way delay of each direction")
	stats := fs.String("stats", "", "write the proxy's stats here as JSON at exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *listen == "" || *to == "" || *delay <= 0 {
		fmt.Fprintln(stderr, "netrig proxy: give -listen, -to and a -delay > 0")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "netrig proxy:", err)
		return 2
	}
	// The delay line's thread keeps its P while it sleeps (netrig.Proxy):
	// the readers and writers need others, also on one pinned CPU.
	runtime.GOMAXPROCS(max(4, runtime.NumCPU()))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := &netrig.Proxy{Delay: *delay, Upstream: *to}
	errc := make(chan error, 1)
	go func() { errc <- p.Serve(ctx, ln) }()
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	err = <-errc
	if *stats != "" {
		b, _ := json.Marshal(p.Stats())
		_ = os.WriteFile(*stats, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(stderr, "netrig proxy:", err)
		return 1
	}
	return 0
}

// waitGrace bounds how long a server is given to stop (a variable only so
// that TestRigStopsStuckServers need not wait it out).
var waitGrace = 20 * time.Second
