#!/usr/bin/env bash
# GPU check for the kernels: on a machine with an NVIDIA GPU and driver, runs every CUDA
# kernel's parity test against its CPU reference (attention f32/f16/bf16, KV append/copy, the
# decoder layer's gathers, RMSNorm, RoPE, gate, bias, casts and random fill)
# and the shared-prefix decode timing (cascade vs ungrouped), then
# prints ONE JSON summary on stdout. Everything else (build and test logs) goes to stderr and
# to the log file named in the summary. Meant to finish well under 8 minutes on one H100/H200.
#
# The test binary:
#   PONDER_GPU_TEST_BIN=path  a binary built elsewhere (needs no cargo or nvcc here: the PTX is
#                             embedded; x86-64, glibc >= 2.34), e.g. in the repo root:
#                               cargo test -p ponder-kernels --features cuda --no-run
#                               (it prints "Executable tests/tests.rs (target/debug/deps/tests-<hash>)")
#                               mkdir -p .gpu && strip -o .gpu/kernels-tests target/debug/deps/tests-<hash>
#                               echo /.gpu/ >> .git/info/exclude
#                             (stripped it is ~5 MB, unstripped ~170 MB), then on the GPU machine
#                               PONDER_GPU_TEST_BIN=.gpu/kernels-tests bash scripts/gpu-check.sh
#   otherwise                 cargo builds it here (nvcc found as kernels/build_support/nvcc.rs
#                             says: $NVCC, $CUDA_HOME/bin, kernels/.cuda, PATH)
#
# Other knobs: PONDER_GPU_LOG (log file; default a temp file), PONDER_GPU_TIMEOUT (seconds for
# the test run, default 420).
# Exit status: 0 when every check ran on the GPU and passed; 1 otherwise (the JSON says why).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log=${PONDER_GPU_LOG:-$(mktemp -t ponder-gpu-check.XXXXXX)}
timeout_s=${PONDER_GPU_TIMEOUT:-420}
: >"$log"

source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu.sh"

start=$(date +%s)
if [ -n "${PONDER_GPU_TEST_BIN:-}" ]; then
  bin=$PONDER_GPU_TEST_BIN
  # The tests run from kernels/, so a relative path is taken from where the script was called.
  case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
  [ -x "$bin" ] || fail "PONDER_GPU_TEST_BIN=$bin is not an executable file"
  built=prebuilt
else
  command -v cargo >/dev/null 2>&1 ||
    fail "cargo is not installed and PONDER_GPU_TEST_BIN is not set: build the test binary elsewhere (cargo test -p ponder-kernels --features cuda --no-run) and pass its path in PONDER_GPU_TEST_BIN"
  echo "gpu-check: building the kernels' tests with --features cuda (log: $log)" >&2
  messages=$(cd "$root" && cargo test -p ponder-kernels --features cuda --no-run \
    --message-format=json 2>>"$log") ||
    fail "cargo could not build the kernels' tests with --features cuda; see the log"
  bin=$(printf '%s\n' "$messages" | grep '"reason":"compiler-artifact"' |
    grep '"name":"tests"' | grep '"test":true' |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n1)
  [ -n "$bin" ] && [ -x "$bin" ] || fail "could not find the built test binary in cargo's output"
  built=cargo
fi
build_s=$(($(date +%s) - start))

echo "gpu-check: running $bin" >&2
start=$(date +%s)
out=$(cd "$root/kernels" && timeout "$timeout_s" "$bin" gpu:: --include-ignored \
  --test-threads=1 --nocapture 2>&1)
rc=$?
run_s=$(($(date +%s) - start))
printf '%s\n' "$out" >>"$log"
printf '%s\n' "$out" >&2

summarise_run GPU_CHECK

printf '{"ok": %s, "device": %s, "driver": %s, "binary": %s, "built_by": "%s", "build_s": %d, "run_s": %d, "exit_code": %d, "timed_out": %s, "skipped_no_gpu": %s, "tests_passed": %s, "tests_failed": %s, "failed": [%s], "checks": [%s], "log": %s}\n' \
  "$ok" "$device" "$driver" "$(json_str "$bin")" "$built" "$build_s" "$run_s" "$rc" "$timed_out" \
  "$skipped" "${passed:-0}" "${nfailed:-0}" "$failed_json" "$checks" "$(json_str "$log")"
[ "$ok" = true ]
