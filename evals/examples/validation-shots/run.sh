#!/usr/bin/env bash
# Step 17's choice of worked examples, made on validation problems only (`ponder::roles`): the
# same search — self-consistency of 4 samples of at most 256 tokens at a 1,024-token budget,
# seed 0, no verifier, in-process on the default model — shown no example, the same two
# examples for every question (`--shot-rule fixed`: the first two of the pool), or each
# question's two nearest (`nearest`, the server's rule), from the shipped pool
# (data/exemplars/gsm8k.json: GSM8K train's fit role, with its similarity floor). The examples'
# tokens are prefilled and charged: the budget is the same billed budget for all three.
#
# Problems: 100 of GSM8K train's validation role and 100 of ASDiv's (a fixed shuffle, seed 17).
# Each arm is its own run directory (its rows share a configuration key with the others'):
# `none/`, `fixed/`, `nearest/`; `compare` writes each arm's report and the paired comparison
# of each arm with examples against `none/` (compare.md). The rows (results.jsonl) hold the
# public problems' gold answers and stay out of the repository (.gitignore); the reports are
# kept.
#
# Usage: bash evals/examples/validation-shots/run.sh [run|compare]  (default: both)
#   PONDER_EVAL      the harness binary (default: ponder-eval on PATH)
#   PONDER_DATASETS  the public benchmark files (default: ../shared/datasets beside the checkout)
#   CONCURRENCY      items in flight (default 8; results do not depend on it)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
datasets=${PONDER_DATASETS:-$root/../shared/datasets}
pool=$root/data/exemplars/gsm8k.json
params='{"self_consistency": {"n": 4, "max_tokens": 256}}'

# run DIR [more ponder-eval run arguments]
run() {
  local dir=$1
  shift
  for set in gsm8k_train asdiv; do
    "$eval_bin" run --dataset "$datasets/$set.jsonl" --role validation --shuffle-seed 17 \
      --limit 100 --strategies self_consistency --budgets 1024 --seeds 0 --params "$params" \
      --concurrency "${CONCURRENCY:-8}" --without-candidates --out "$here/$dir" "$@"
  done
}

what=${1:-all}
case $what in run | all)
  run none
  run nearest --shots 2 --shots-from "$pool"
  run fixed --shots 2 --shots-from "$pool" --shot-rule fixed
  ;;
esac
case $what in compare | all)
  {
    for arm in none fixed nearest; do
      "$eval_bin" report "$here/$arm" >/dev/null
      echo "## $arm"
      echo
      cat "$here/$arm/report.md"
      echo
    done
    for arm in fixed nearest; do
      echo "## $arm vs none (paired over the same problems)"
      echo
      "$eval_bin" pareto "$here/none" "$here/$arm"
      echo
    done
  } >"$here/compare.md"
  ;;
esac
