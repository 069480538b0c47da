#!/usr/bin/env bash
# Step 18's sequential revision (Snell et al. 2024) against parallel sampling at equal billed
# budget, on report problems only (`ponder::roles`): 100 of GSM8K test's report role (a fixed
# shuffle, seed 17), seed 0, in-process on the default model, two nearest worked examples (the
# setting validation chose), no verifier (best-of-N ranks by the model's confidence), a budget of
# 1,024 tokens that binds every arm (prompt, revision prompts, answer probes and generation all
# count against it).
#
# Arms, each its own run directory:
# - `sc`: `self_consistency`, n 4, at most 256 tokens per sample (the calibration's 1,024 row);
# - `bon`: `best_of_n`, n 4, 256 (confidence-ranked);
# - `rev-2x2`: `revision`, 2 chains of 2 attempts (parallel-leaning);
# - `rev-1x4`: `revision`, 1 chain of 4 attempts (sequential; the budget may plan fewer rounds);
# both revision arms show every earlier attempt (context_attempts 4, the paper's), 256 tokens per
# attempt at most, answer by a vote over every attempt.
# `compare` writes compare.md: per arm accuracy with 95% Wilson intervals, mean billed tokens and
# attempts, and each revision arm minus `sc` and minus `bon`, paired over the same problems (95%
# paired bootstrap intervals).
#
# Usage: bash evals/examples/revision/run.sh [run|compare]  (default: both)
#   PONDER_EVAL      the harness binary (default: ponder-eval on PATH)
#   PONDER_DATASETS  the public benchmark files (default: ../shared/datasets beside the checkout)
#   CONCURRENCY      items in flight (default 8; results do not depend on it)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
datasets=${PONDER_DATASETS:-$root/../shared/datasets}
pool=$root/data/exemplars/gsm8k.json

# arm DIR STRATEGY PARAMS
arm() {
  local dir=$1 strategy=$2 params=$3
  "$eval_bin" run --dataset "$datasets/gsm8k_test.jsonl" --role report --shuffle-seed 17 \
    --limit 100 --strategies "$strategy" --budgets 1024 --seeds 0 \
    --params "{\"$strategy\": $params}" --shots 2 --shots-from "$pool" \
    --concurrency "${CONCURRENCY:-8}" --out "$here/$dir"
}

what=${1:-all}
case $what in run | all)
  arm sc self_consistency '{"n": 4, "max_tokens": 256}'
  arm bon best_of_n '{"n": 4, "max_tokens": 256}'
  arm rev-2x2 revision '{"chains": 2, "attempts": 2, "max_tokens": 256}'
  arm rev-1x4 revision '{"chains": 1, "attempts": 4, "max_tokens": 256}'
  ;;
esac
case $what in compare | all)
  python3 "$here/compare.py" "$here" >"$here/compare.md"
  cat "$here/compare.md"
  ;;
esac
