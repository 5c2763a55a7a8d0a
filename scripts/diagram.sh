#!/usr/bin/env bash
# diagram.sh — renders docs/architecture.dot into docs/architecture.png with
# Graphviz (apt-get install graphviz) and records the source's SHA-256 beside
# it, which go test ./docs/ compares with the source (a stale picture fails).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v dot >/dev/null || { echo "diagram.sh: needs Graphviz's dot (apt-get install graphviz)" >&2; exit 2; }
dot -Tpng -Gdpi=110 -o docs/architecture.png docs/architecture.dot
sha256sum docs/architecture.dot | cut -d' ' -f1 >docs/architecture.png.sha256
echo "wrote docs/architecture.png ($(wc -c <docs/architecture.png) bytes)"
