#!/usr/bin/env bash
# Build SeaweedFS's `weed` binary (the object-store tests' second S3 server, beside moto) from the
# Go module proxy into a cache directory that is reused when present. Prints the binary's path on
# its last line.
#
#   OMNIGRAPH_CACHE   cache root (default: ~/.cache/omnigraph-spark)
#   GO                the go command (default: `go` on PATH, else /usr/local/go/bin/go)
#
# `go install module@version` refuses this module (its go.mod has replace directives), so the
# module is downloaded into the module cache and built there as the main module. The build is
# niced (it shares the machine with the tests); docs/object_storage.md has its measured time.
set -euo pipefail
MODULE=github.com/seaweedfs/seaweedfs
VERSION=v0.0.0-20261109003541-7506e5f91cd6
CACHE="${OMNIGRAPH_CACHE:-$HOME/.cache/omnigraph-spark}"
ROOT="$CACHE/seaweedfs-$VERSION"
BIN="$ROOT/bin/weed"

if [ -x "$BIN" ] && "$BIN" version >/dev/null 2>&1; then
  echo "$BIN"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
if [ ! -x "$GO" ] && ! command -v "$GO" >/dev/null 2>&1; then
  echo "install-seaweedfs: need Go (the go command; the module asks for go 1.26)" >&2
  exit 1
fi

start=$(date +%s)
DIR=$("$GO" mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$DIR" ] || [ ! -f "$DIR/go.mod" ]; then
  echo "install-seaweedfs: could not download $MODULE@$VERSION" >&2
  exit 1
fi
mkdir -p "$ROOT/bin"
# build to a temporary name: an interrupted build never leaves a half-written binary at $BIN
(cd "$DIR" && GOFLAGS=-buildvcs=false nice -n 10 "$GO" build -trimpath -o "$BIN.tmp" ./weed) >&2
mv "$BIN.tmp" "$BIN"
end=$(date +%s)
echo "install-seaweedfs: built weed ($MODULE@$VERSION) in $((end - start)) s" >&2
echo "$BIN"
