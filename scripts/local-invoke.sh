#!/usr/bin/env bash
# local-invoke.sh — the Docker-free stand-in for `s local invoke` (usage: -h).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/local-invoke.sh EVENT_FILE [REQUEST_ID]

The Docker-free stand-in for `s local invoke`: builds the function into
$TARGET_DIR/main (on first use, then incrementally), starts it as a
custom-runtime server on a free loopback port, calls /initialize, sends
EVENT_FILE to /invoke with the headers FC sends, prints the answer on stdout
and the server's log on stderr, and stops the server.

  EVENT_FILE   the event to send (testdata/events/*.json)
  REQUEST_ID   the FC request id (default local-<nanoseconds>): reuse one to
               simulate FC's retry of the same request

environment:
  TARGET_DIR   where the binary is built (default ./target)
  everything the function reads is passed through: MYSQL_DSN, REDIS_URL,
  STATE_DIR, LLM_*, OSS_* … (`go run . help env` lists them); unset, it runs on the
  embedded store and the offline model

exit status: 0 when the function answered 200, 1 when it answered a failure,
2 for bad usage (no or missing EVENT_FILE).
EOF
}

case "${1:-}" in
  -h|--help|help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
esac
[ $# -le 2 ] || { echo "local-invoke.sh: too many arguments (-h for usage)" >&2; exit 2; }
event=$1
request_id=${2:-local-$(date +%s%N)}
# Checked here: curl would send a missing file as an empty body.
[ -e "$event" ] || { echo "local-invoke.sh: $event: file not found" >&2; exit 2; }
[ -f "$event" ] && [ -r "$event" ] || { echo "local-invoke.sh: $event: not a readable file" >&2; exit 2; }
event=$(cd "$(dirname "$event")" && pwd)/$(basename "$event")

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" # STATE_DIR's default, ./.idemgate, is the repository's, as with `go run . invoke`
target=${TARGET_DIR:-$root/target}
mkdir -p "$target"
bin=$target/main

# build runs the Go build; the first one takes a while, so say so (with the
# seconds going by on a terminal). Later builds are incremental and quiet.
build() {
  CGO_ENABLED=0 go build -trimpath -o "$bin" .
}
if [ -x "$bin" ]; then
  build
else
  echo "local-invoke.sh: building $bin (first use; later runs reuse it)…" >&2
  start=$SECONDS
  if [ -t 2 ]; then
    build & pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      printf '\r  building… %ds' $((SECONDS - start)) >&2
      sleep 1
    done
    printf '\r\033[K' >&2
    wait "$pid"
  else
    build
  fi
  echo "local-invoke.sh: built in $((SECONDS - start))s" >&2
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp)
body=$(mktemp)
FC_SERVER_PORT=$port "$bin" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log" "$body"' EXIT
# FC calls the initializer first; a failure there (MySQL down, not migrated)
# is the answer, so it is shown and nothing is invoked.
init=000
for _ in $(seq 1 100); do
  init=$(curl -s -o "$body" -w '%{http_code}' -X POST -H "x-fc-request-id: init-$request_id" \
    "http://127.0.0.1:$port/initialize" || true)
  [ "$init" = 000 ] || break
  kill -0 $pid 2>/dev/null || break # the server exited (bad configuration)
  sleep 0.1
done
if [ "$init" != 200 ]; then
  echo "--- server log" >&2
  cat "$log" >&2
  echo "--- /initialize answered HTTP $init" >&2
  cat "$body"; echo
  exit 1
fi
code=$(curl -sS -o "$body" -w '%{http_code}' -X POST "http://127.0.0.1:$port/invoke" \
  -H 'Content-Type: application/octet-stream' -H "x-fc-request-id: $request_id" \
  -H 'x-fc-function-name: idemgate' -H 'x-fc-region: cn-hangzhou' -H 'x-fc-function-timeout: 120' \
  --data-binary @"$event")
echo "--- server log" >&2
cat "$log" >&2
echo "--- HTTP $code, request $request_id" >&2
cat "$body"; echo
[ "$code" = 200 ] || exit 1
