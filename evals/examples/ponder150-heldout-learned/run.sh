#!/usr/bin/env bash
# Does the learned outcome verifier carry over to problems unlike those it was fitted on? Best-of-8
# (plain and weighted) scored by it on every held-out problem of `ponder-150` (arithmetic,
# algebra, word problems, geometry, fractions, percentages, exponents, sequences; levels 1-5),
# a set whose problems the verifier never saw in training (it was fitted on `gsm_gen`'s train
# split only). `ponder-150` has no worked solutions, so the two worked examples come from
# `gsm_gen`'s train split (`--shots-from`), as README says an independent set would borrow them.
# Budget 1024, seed 0, in-process on the default model. The report's selection-vs-majority and
# oracle columns compare the verifier's pick with the majority vote over the same eight samples.
#
# Usage: bash evals/examples/ponder150-heldout-learned/run.sh
#   PONDER_EVAL   the harness binary (default: ponder-eval on PATH)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
orm8='{"n": 8, "score_by": "orm"}'
"$eval_bin" run --dataset "$root/evals/data/ponder-150.jsonl" --split held-out \
  --strategies best_of_n,weighted_best_of_n --budgets 1024 --seeds 0 \
  --shots 2 --shots-from "$root/evals/data/gsm_gen.jsonl" --verifier learned \
  --params "{\"best_of_n\": $orm8, \"weighted_best_of_n\": $orm8}" \
  --concurrency "${CONCURRENCY:-16}" --without-candidates --out "$here"
"$eval_bin" report "$here"
