#!/usr/bin/env bash
# The release `ponder` binary for any x86-64 CPU: what `deploy/Dockerfile` runs to build its image,
# and what `scripts/test.sh` runs so CI builds the image's binary too.
#
# The repository builds for the host's CPU (`target-cpu=native` in .cargo/config.toml); an image
# built so would carry the build host's instruction set. Here RUSTFLAGS replaces that with
# `-C target-cpu=$TARGET_CPU` (default `x86-64`: SSE2 only at compile time); the kernels pick
# their AVX2 / AVX-512 paths at run time (BENCHMARKS.md, "Portable build").
#
# Without debug info (`CARGO_PROFILE_RELEASE_DEBUG=0`; the repository's release profile keeps line
# tables for profiling): the image needs none, its binary is smaller, and the build, which CI runs
# beside the tests, spends less CPU. Symbols stay, so backtraces still name functions.
#
#   TARGET_CPU        default x86-64 (`native` builds for this host)
#   CARGO_TARGET_DIR  default target/portable (its own: other RUSTFLAGS rebuild every crate)
#
# Prints the binary's path last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/portable}"
CARGO_PROFILE_RELEASE_DEBUG="${CARGO_PROFILE_RELEASE_DEBUG:-0}" \
  RUSTFLAGS="-C target-cpu=${TARGET_CPU:-x86-64}" cargo build --release --locked --bin ponder
echo "$CARGO_TARGET_DIR/release/ponder"
