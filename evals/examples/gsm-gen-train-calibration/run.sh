#!/usr/bin/env bash
# The measurement behind the router's calibration table: every fixed strategy × budgets 512,
# 1024 and 2048 × the first 100 train-split problems of each gsm_gen level (levels 1 / 2 / 3
# are easy / medium / hard), two worked examples, seed 0, no verifier, on the default model.
# Also self-consistency with 2 and 4 samples at 512 (the narrow rows `auto`'s probe stops with
# or widens from), and best-of-8 (plain and weighted) scored by the learned outcome verifier at
# every budget (the rows `auto` chooses among on a server started with `--verifier learned`).
# 14,100 rows; five to seven hours of a 2-core machine.
#
# Resumable: rows are appended to results.jsonl beside this script as items finish (slim, without
# candidate texts, so the file can be committed) and a rerun skips them. Budgets 512 and 1024
# run first for every level, 2048 last: most strategies spend the same at 2048 as at 1024, so a
# run stopped early has the budgets that differ.
#
# Usage: bash evals/examples/gsm-gen-train-calibration/run.sh
#   PONDER_EVAL   the harness binary (default: ponder-eval on PATH)
#   CONCURRENCY   items in flight (default 16; results do not depend on it)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
strategies=a_star,ab_mcts,adaptive_parallel,answer_convergence,beam_search,best_of_n,deepconf,dvts,first_finish,mcts,self_consistency,short_m_of_k,weighted_best_of_n

# run_level LEVEL BUDGETS [more ponder-eval run arguments]
run_level() {
  local level=$1 budgets=$2
  shift 2
  "$eval_bin" run --dataset "$root/evals/data/gsm_gen.jsonl" --split train --level "$level" \
    --limit 100 --strategies "$strategies" --budgets "$budgets" --seeds 0 --shots 2 \
    --concurrency "${CONCURRENCY:-16}" --without-candidates --out "$here" "$@"
}

for level in 1 3 2; do run_level "$level" 512,1024; done
for level in 1 3 2; do run_level "$level" 2048; done
for level in 1 3 2; do
  for n in 2 4; do
    strategies=self_consistency run_level "$level" 512 --params "{\"self_consistency\": {\"n\": $n}}"
  done
done
orm8='{"n": 8, "score_by": "orm"}'
for level in 1 3 2; do
  strategies=best_of_n,weighted_best_of_n run_level "$level" 512,1024,2048 --verifier learned \
    --params "{\"best_of_n\": $orm8, \"weighted_best_of_n\": $orm8}"
done
"$eval_bin" calibrate "$here" --easy-max-level 1 --hard-min-level 3 --out "$here/calibration.json"
"$eval_bin" report "$here"
