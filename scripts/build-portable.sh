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
# tables for profiling): the image needs none, its binary is smaller, and the build spends less
# CPU. Symbols stay, so backtraces still name functions.
#
#   scripts/build-portable.sh              the image's binary: `cargo build --release --bin ponder`
#   scripts/build-portable.sh CMD ARGS...  `cargo CMD --release ARGS...` built the same way:
#                                          scripts/test.sh builds and runs the tests so, and the
#                                          image's build then reuses their compiled dependencies
#
#   TARGET_CPU           default x86-64 (`native` builds for this host)
#   CARGO_TARGET_DIR     default target/portable (its own: other RUSTFLAGS rebuild every crate)
#   PORTABLE_TARGET_DIR  overrides it for cargo alone (`--target-dir`), so tests run by
#                        `scripts/build-portable.sh test` still see the caller's CARGO_TARGET_DIR
#
# Prints the binary's path last (the image's build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir="${PORTABLE_TARGET_DIR:-${CARGO_TARGET_DIR:-target/portable}}"
if [ $# -eq 0 ]; then
  set -- build --locked --bin ponder
  image=1
fi
cmd=$1
shift
CARGO_PROFILE_RELEASE_DEBUG="${CARGO_PROFILE_RELEASE_DEBUG:-0}" \
  RUSTFLAGS="-C target-cpu=${TARGET_CPU:-x86-64}" cargo "$cmd" --release --target-dir "$dir" "$@"
if [ -n "${image:-}" ]; then
  echo "$dir/release/ponder"
fi
