#!/usr/bin/env bash
# GPU check for the engine on `--device cuda`: on a machine with an NVIDIA GPU, its driver and a
# CUDA toolkit's cuBLAS (loaded at run time; every other kernel is PTX from kernels/cuda/,
# embedded in the binary), runs the `engine_cuda` tests of a PREBUILT test binary: CPU-vs-CUDA
# parity of greedy forked branches (tokens equal, logprobs within a stated tolerance; short
# prompt and a >1024-token shared prefix that the CUDA plan groups) and the decode throughput
# of a random 1B-shape bf16 model for 1 vs 16 branches over a 2048-token prompt. Prints ONE
# JSON summary on stdout; logs go to stderr and
# to the log file named in the summary. Needs no cargo, nvcc or network.
#
# Build the binary on the build machine (repo root):
#   cargo test --features cuda --test tests --no-run    # prints "Executable ... (target/.../tests-<hash>)"
#   mkdir -p .gpu && strip -o .gpu/engine-tests <that executable>
# then on the GPU machine:
#   PONDER_GPU_TEST_BIN=.gpu/engine-tests bash scripts/gpu-engine-check.sh
#
# Knobs: PONDER_GPU_LOG (log file; default a temp file), PONDER_GPU_TIMEOUT (seconds, default
# 400), CUDA_LIB_DIR (where libcublas lives; default /usr/local/cuda/lib64).
# Exit status: 0 when every check ran on the GPU and passed; 1 otherwise (the JSON says why).
set -uo pipefail

log=${PONDER_GPU_LOG:-$(mktemp -t ponder-gpu-engine.XXXXXX)}
timeout_s=${PONDER_GPU_TIMEOUT:-400}
: >"$log"

source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu.sh"
cuda_lib=${CUDA_LIB_DIR:-/usr/local/cuda/lib64}
[ -d "$cuda_lib" ] && export LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

[ -n "${PONDER_GPU_TEST_BIN:-}" ] || fail "set PONDER_GPU_TEST_BIN to the stripped test binary (cargo test --features cuda --test tests --no-run; strip -o .gpu/engine-tests <executable>)"
bin=$PONDER_GPU_TEST_BIN
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
[ -x "$bin" ] || fail "PONDER_GPU_TEST_BIN=$bin is not an executable file"

echo "gpu-engine-check: running $bin engine_cuda:: (log: $log)" >&2
start=$(date +%s)
out=$(timeout "$timeout_s" "$bin" engine_cuda:: --include-ignored --test-threads=1 --nocapture 2>&1)
rc=$?
run_s=$(($(date +%s) - start))
printf '%s\n' "$out" >>"$log"
printf '%s\n' "$out" >&2

summarise_run GPU_ENGINE

printf '{"ok": %s, "device": %s, "driver": %s, "binary": %s, "run_s": %d, "exit_code": %d, "timed_out": %s, "skipped_no_gpu": %s, "tests_passed": %s, "tests_failed": %s, "failed": [%s], "checks": [%s], "log": %s}\n' \
  "$ok" "$device" "$driver" "$(json_str "$bin")" "$run_s" "$rc" "$timed_out" \
  "$skipped" "${passed:-0}" "${nfailed:-0}" "$failed_json" "$checks" "$(json_str "$log")"
[ "$ok" = true ]
