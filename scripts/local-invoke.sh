#!/usr/bin/env bash
# local-invoke.sh FILE [REQUEST_ID] — the Docker-free stand-in for `s local invoke`:
# builds target/main, starts it as a custom-runtime server on a free port, sends
# FILE to /invoke with the headers FC sends, prints the answer, stops the server.
# The environment is passed through (MYSQL_DSN, REDIS_URL, LLM_*, STATE_DIR …).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 EVENT_FILE [REQUEST_ID]" >&2; exit 2; }
event=$1
request_id=${2:-local-$(date +%s%N)}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p target
CGO_ENABLED=0 go build -trimpath -o target/main .
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp)
FC_SERVER_PORT=$port ./target/main >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  curl -fsS -X POST -H "x-fc-request-id: init-$request_id" "http://127.0.0.1:$port/initialize" >/dev/null 2>&1 && break
  sleep 0.1
done
body=$(mktemp)
code=$(curl -sS -o "$body" -w '%{http_code}' -X POST "http://127.0.0.1:$port/invoke" \
  -H 'Content-Type: application/octet-stream' -H "x-fc-request-id: $request_id" \
  -H 'x-fc-function-name: idemgate' -H 'x-fc-region: cn-hangzhou' -H 'x-fc-function-timeout: 120' \
  --data-binary @"$event")
echo "--- server log" >&2
cat "$log" >&2
echo "--- HTTP $code, request $request_id" >&2
cat "$body"; echo
rm -f "$body"
[ "$code" = 200 ]
