#!/usr/bin/env bash
# Install the Omnigraph 0.7.2 engine CLI (the interop test oracle) from crates.io into a cache
# directory that is reused when present. Prints the binary's path on its last line.
#
#   OMNIGRAPH_CACHE   cache root (default: ~/.cache/omnigraph-spark)
#   OMNIGRAPH_JOBS    cargo build jobs (default: number of cores)
#   OMNIGRAPH_OPT     the release profile's opt-level (default 1, no LTO: the binary is the
#                     interop tests' oracle on small graphs, and builds in about half the time)
#
# A cold build compiles Lance, DataFusion and Arrow: long (see docs/interop.md for the measured time).
set -euo pipefail
VERSION=0.7.2
CACHE="${OMNIGRAPH_CACHE:-$HOME/.cache/omnigraph-spark}"
ROOT="$CACHE/omnigraph-cli-$VERSION"
BIN="$ROOT/bin/omnigraph"

if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "$VERSION"; then
  echo "$BIN"
  exit 0
fi

if ! command -v protoc >/dev/null 2>&1 || [ ! -d /usr/include/google/protobuf ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler libprotobuf-dev
  else
    echo "install-omnigraph: need protobuf-compiler and libprotobuf-dev (Debian packages)" >&2
    exit 1
  fi
fi

mkdir -p "$ROOT"
# A persistent target dir lets an interrupted build resume instead of starting over.
export CARGO_TARGET_DIR="$CACHE/cargo-target"
export CARGO_PROFILE_RELEASE_OPT_LEVEL="${OMNIGRAPH_OPT:-1}" CARGO_PROFILE_RELEASE_LTO=off \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=64 CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_INCREMENTAL=0
start=$(date +%s)
cargo install omnigraph-cli --version "$VERSION" --locked --root "$ROOT" -j "${OMNIGRAPH_JOBS:-$(nproc)}" >&2
end=$(date +%s)
echo "install-omnigraph: built omnigraph-cli $VERSION in $((end - start)) s" >&2
echo "$BIN"
