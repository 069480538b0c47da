#!/usr/bin/env bash
# The held-out accuracy-vs-spend comparison in README: every fixed strategy and `auto` on 200
# held-out gsm_gen problems (the held-out split after its first 80, which were read while
# designing the calculation check), budgets 512, 1024 and 2048, two worked examples (`auto`:
# as many as its rows were measured with, which is two), seed 0,
# no verifier, in-process on the default model, `auto` pinned at load 0; and best-of-8 (plain
# and weighted) scored by the learned outcome verifier beside `auto` with that verifier.
#
# `fixed/` and `auto/` are separate run directories because `auto`'s rows depend on the shipped
# router file (data/router/router.json), which the run's keys do not name: after retraining or
# recalibrating the router, delete auto/results.jsonl and rerun. Both are resumable (rows are
# appended as items finish, slim, and a rerun skips them); then `pareto` pools them. Budget 1024
# runs first for every configuration, then 512, then 2048, so a run stopped early has whole
# budgets to compare.
#
# Usage: bash evals/examples/gsm-gen-heldout-pareto/run.sh [auto|fixed|pareto]  (default: all)
#   PONDER_EVAL   the harness binary (default: ponder-eval on PATH)
#   CONCURRENCY   items in flight (default 16; results do not depend on it)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
fixed=a_star,ab_mcts,adaptive_parallel,answer_convergence,beam_search,best_of_n,deepconf,dvts,first_finish,mcts,self_consistency,short_m_of_k,weighted_best_of_n

orm8='{"n": 8, "score_by": "orm"}'

# run STRATEGIES DIR BUDGET [more ponder-eval run arguments]
run() {
  local strategies=$1 dir=$2 budget=$3
  shift 3
  "$eval_bin" run --dataset "$root/evals/data/gsm_gen.jsonl" --split held-out --skip 80 \
    --limit 200 --strategies "$strategies" --budgets "$budget" --seeds 0 \
    --concurrency "${CONCURRENCY:-16}" --without-candidates --out "$here/$dir" "$@"
}

what=${1:-all}
case $what in auto | all)
  # No --shots: `auto` is shown as many worked examples as its rows were measured with (two),
  # from the server's default pool, as `ponder serve` runs it.
  for budget in 1024 512 2048; do
    run auto auto "$budget"
    run auto auto "$budget" --verifier learned
  done
  ;;
esac
case $what in fixed | all)
  for budget in 1024 512 2048; do
    run "$fixed" fixed "$budget" --shots 2
    run best_of_n,weighted_best_of_n fixed "$budget" --shots 2 --verifier learned \
      --params "{\"best_of_n\": $orm8, \"weighted_best_of_n\": $orm8}"
  done
  ;;
esac
case $what in pareto | all)
  "$eval_bin" pareto "$here/fixed" "$here/auto" --out "$here/pareto.json" >"$here/pareto.md"
  mkdir -p "$here/all" && cat "$here/fixed/results.jsonl" "$here/auto/results.jsonl" >"$here/all/results.jsonl"
  "$eval_bin" report "$here/all" && mv "$here"/all/report.* "$here"/all/accuracy_vs_spend.* "$here"/ && rm -r "$here/all"
  ;;
esac
