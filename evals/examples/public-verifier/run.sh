#!/usr/bin/env bash
# Step 17's verifier on public data: labelled candidates from best-of-8 (at most 256 tokens a
# sample, 2,048-token budget, the two nearest worked examples, seed 0, in-process on the
# default model) on fit problems (GSM8K train and ASDiv, 300 each, a fixed shuffle, seed 17)
# to train on, and on validation problems (100 each) to choose on; then the learned verifier
# trained on the fit candidates and evaluated on the validation ones (AUROC, selection vs
# majority vs oracle, the share of the majority-to-oracle gap closed), and leave one dataset
# out (fit on GSM8K's candidates, judge on ASDiv's, and the reverse).
#
# The runs and candidate files hold the problems' text, so they stay out of the repository
# (under $WORK, default target/public-verifier); the fitted model and the evaluation tables
# are what is kept here (model.json, eval.md).
#
# Usage: bash evals/examples/public-verifier/run.sh [candidates|train] (default: both)
#   PONDER, PONDER_EVAL  the binaries (default: ponder and ponder-eval on PATH)
#   PONDER_DATASETS      the public benchmark files (default: ../shared/datasets)
#   FIT, VAL             problems per set (default 300 and 100); CONCURRENCY (default 8)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
ponder=${PONDER:-ponder}
eval_bin=${PONDER_EVAL:-ponder-eval}
datasets=${PONDER_DATASETS:-$root/../shared/datasets}
work=${WORK:-$root/target/public-verifier}
mkdir -p "$work"
params='{"best_of_n": {"n": 8, "max_tokens": 256}}'

# sample ROLE LIMIT: best-of-8 with candidates on both sets' problems of ROLE
sample() {
  local role=$1 limit=$2
  for set in gsm8k_train asdiv; do
    "$eval_bin" run --dataset "$datasets/$set.jsonl" --role "$role" --shuffle-seed 17 \
      --limit "$limit" --strategies best_of_n --budgets 2048 --seeds 0 --params "$params" \
      --shots 2 --shots-from "$root/data/exemplars/gsm8k.json" \
      --concurrency "${CONCURRENCY:-8}" --out "$work/$role-$set"
    "$eval_bin" candidates "$work/$role-$set" --dataset "$datasets/$set.jsonl" \
      --out "$work/$role-$set.jsonl"
  done
  cat "$work/$role-gsm8k_train.jsonl" "$work/$role-asdiv.jsonl" >"$work/$role.jsonl"
}

what=${1:-all}
case $what in candidates | all)
  sample fit "${FIT:-300}"
  sample validation "${VAL:-100}"
  ;;
esac
case $what in train | all)
  {
    echo "## Fit on both sets' fit candidates, judged on both sets' validation candidates"
    "$ponder" verifier train --data "$work/fit.jsonl" --heldout "$work/validation.jsonl" \
      --out "$here/model.json" 2>&1 >/dev/null
    for set in gsm8k_train asdiv; do
      echo
      echo "### judged on $set validation only"
      "$ponder" verifier eval --model "$here/model.json" --data "$work/validation-$set.jsonl" \
        2>&1 >/dev/null
    done
    echo
    echo "## The shipped verifier (fitted on gsm_gen candidates) judged on the same validation candidates"
    "$ponder" verifier eval --model "$root/data/verifier/outcome.json" \
      --data "$work/validation.jsonl" 2>&1 >/dev/null
    echo
    echo "## Leave one dataset out"
    for pair in "gsm8k_train asdiv" "asdiv gsm8k_train"; do
      set -- $pair
      echo
      echo "### fit on $1's fit candidates, judged on $2's validation candidates"
      "$ponder" verifier train --data "$work/fit-$1.jsonl" --heldout "$work/validation-$2.jsonl" \
        --out "$work/lodo-$1.json" 2>&1 >/dev/null
    done
  } >"$here/eval.md"
  ;;
esac
