#!/usr/bin/env bash
# ratios-pinned.sh — issue #24's first-delivery ratios with the database on a CPU of its own
# (BENCHMARKS.md, "Issue #24"): BenchmarkRatios and a private Redis on CPU 0, its private MariaDB on
# CPU 1, so that MariaDB, which the ratios' phases all share, no longer competes with Redis and the
# client for the same cores, as it does not on FC. A measurement aid, not a test: it fails only when
# the benchmark does.
#   usage: scripts/ratios-pinned.sh [RUNS] [ROUNDS]     (default 3 runs of 24 rounds of 200 ms)
# Needs taskset, redis-server, mariadbd and mariadb-install-db, and at least 2 CPUs. Loopback only.
set -euo pipefail

runs=${1:-3}
rounds=${2:-24}
root=$(cd "$(dirname "$0")/.." && pwd)
[ "$(nproc)" -ge 2 ] || { echo "ratios-pinned: needs 2 CPUs" >&2; exit 2; }
for b in taskset redis-server redis-cli; do
  command -v "$b" >/dev/null || { echo "ratios-pinned: $b not found" >&2; exit 2; }
done
mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
[ -x "$mariadbd" ] || { echo "ratios-pinned: mariadbd not found" >&2; exit 2; }

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# testenv.PrivateMariaDB runs IDEMGATE_TEST_MARIADBD: this wrapper pins the server to CPU 1.
printf '#!/bin/sh\nexec taskset -c 1 %s "$@"\n' "$mariadbd" >"$work/mariadbd"
chmod +x "$work/mariadbd"
taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --daemonize yes --dir "$work" --pidfile "$work/redis.pid" --logfile "$work/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

cd "$root"
go test -c -o "$work/ratios.test" ./idempotency/benchmarks/
for i in $(seq "$runs"); do
  echo "== run $i of $runs"
  IDEMGATE_TEST_REDIS_URL="redis://127.0.0.1:$port/15" IDEMGATE_TEST_MARIADBD="$work/mariadbd" \
    taskset -c 0 "$work/ratios.test" -test.run '^$' -test.bench '^BenchmarkRatios$' -test.benchtime 1x \
    -private-mysql -ratios.rounds "$rounds" -ratios.slice 200ms \
    -ratios.phases '^(first-(redis\+mysql|mysql)|raw-insert\+update)$' 2>&1 | grep -v '^\[mysql\]'
done
