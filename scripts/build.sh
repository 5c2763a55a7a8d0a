#!/usr/bin/env bash
# build.sh — builds the deploy artefacts of the function (docs/design.md §2):
#   $OUT_DIR/target/main         linux/amd64, CGO off, -trimpath, stripped (s.yaml: code: ./target)
#   $OUT_DIR/dist/function.zip   `main` at the zip root, mode 0755 kept (template.yml: code from OSS)
# OUT_DIR defaults to the repository root; GOOS/GOARCH/CGO are fixed, whatever the caller's environment.
# Needs only Go, bash and python3 (or `zip`). Called by s.yaml's pre-deploy / pre-local actions.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT_DIR:-$root}
mkdir -p "$out/target" "$out/dist"
out=$(cd "$out" && pwd)
bin=$out/target/main
zipfile=$out/dist/function.zip

cd "$root"
GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$bin" .
chmod 0755 "$bin"

rm -f "$zipfile"
if command -v python3 >/dev/null 2>&1; then
  # zipfile with explicit Unix attributes: mode 0755 survives on every platform,
  # and a fixed timestamp makes the zip depend on the binary only.
  python3 - "$bin" "$zipfile" <<'PY'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
info = zipfile.ZipInfo("main", date_time=(2020, 1, 1, 0, 0, 0))
info.create_system = 3                      # Unix, so external_attr carries st_mode
info.external_attr = (0o100755 & 0xFFFF) << 16   # regular file, rwxr-xr-x
info.compress_type = zipfile.ZIP_DEFLATED
with open(src, "rb") as f, zipfile.ZipFile(dst, "w") as z:
    z.writestr(info, f.read())
PY
elif command -v zip >/dev/null 2>&1; then
  (cd "$out/target" && zip -q -X -j "$zipfile" main)   # Info-ZIP keeps the Unix mode
else
  echo "build.sh: need python3 or zip to write $zipfile" >&2
  exit 1
fi

size() { wc -c <"$1" | tr -d ' '; }
printf 'binary %s  %s bytes\n' "$bin" "$(size "$bin")"
printf 'zip    %s  %s bytes\n' "$zipfile" "$(size "$zipfile")"
