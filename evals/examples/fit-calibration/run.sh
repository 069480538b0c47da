#!/usr/bin/env bash
# Step 17's calibration grid, on fit problems only (`ponder::roles`): the configurations `auto`
# may run, each scaling with the budget (its N grows from 1,024 to 2,048 tokens), on 500 GSM8K
# train fit problems and 500 ASDiv fit problems (a fixed shuffle, seed 17), seed 0, in-process on
# the default model, with the worked-example setting validation chose
# (evals/examples/validation-shots/compare.md; SHOTS below), without a verifier; rows at 1,024
# tokens are slim (answers, scores and spend: --without-candidates), rows at 2,048 keep their
# candidates (best-of-8's are what the learned verifier is refitted on). Self-consistency,
# best-of-N and weighted best-of-N run with equal N and cap, so each problem's samples are drawn
# once for the three (--share-draws: the rows separate runs write, for a third of their
# generation).
#
# Pruned with the 1,024 table: at 2,048 the grid runs the six parallel configurations only.
# At 1,024 revision's two ratios were the least accurate rows (0.020 and 0.010 of 200) and the
# tree searches (beam search, AB-MCTS) no more accurate than best-of-4 (0.030 each) at three to
# six times its CPU time; at 2,048 they would take ~50 of the stage's ~60 CPU-hours. They stay
# rows at 1,024 (PRUNE=none runs them at 2,048 too).
#
# Then `probe` runs the two-sample probe `auto` draws (self-consistency of 2 at 256 tokens) on
# the same problems: its agreement and confidence bin every fit problem after the fact
# (`ponder-eval calibrate --bins-from`), and `calibrate` writes the table with each row's
# per-problem outcomes, which the allocator's paired non-inferiority test reads.
#
# Every step is resumable (rows are appended as items finish; a rerun skips them). The runs hold
# the public problems' gold answers, so they stay out of the repository (under $WORK, default
# target/fit-calibration). The grid takes many CPU-hours, more than one session on one machine:
# `save` writes its rows redacted (`ponder-eval redact`: ids, outcomes and spend; no gold answer,
# answer or text) to grid-outcomes.jsonl here, which is committed, and `grid` on a machine that
# has no grid yet starts from them. The table (ids and outcomes) is kept here too.
#
# Usage: bash evals/examples/fit-calibration/run.sh [grid|save|probe|calibrate] (default: all)
#   PONDER_EVAL      the harness binary (default: ponder-eval on PATH)
#   PONDER_DATASETS  the public benchmark files (default: ../shared/datasets beside the checkout)
#   BUDGETS          default "1024 2048";  LIMIT  problems per set (default 500)
#   STRATEGIES       the parallel configurations `grid` runs (default all eight; empty: none)
#   REVISION         1 (default): `grid` runs revision's two ratios too; 0: not
#   PRUNE            budget:configuration pairs `grid` skips (default: the tree searches and
#                    revision at 2,048, above; "none": skip nothing)
#   KEEP_CANDIDATES  budgets whose rows keep their candidates' texts (default 2048; others are
#                    slim: --without-candidates)
#   CONCURRENCY      items in flight (default 8; results do not depend on it)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
# shellcheck source=../../../scripts/lib/saved-rows.sh
source "$root/scripts/lib/saved-rows.sh"
work=${WORK:-$root/target/fit-calibration}
datasets=${PONDER_DATASETS:-$root/../shared/datasets}
pool=$root/data/exemplars/gsm8k.json
shots=(--shots "${SHOTS:-2}" --shots-from "$pool")
strategies=${STRATEGIES-self_consistency,best_of_n,weighted_best_of_n,deepconf,answer_convergence,adaptive_parallel,beam_search,ab_mcts}

# Per budget, each configuration's parameters: N (or its width) doubles with the budget.
declare -A params_of=(
  [self_consistency]='{"by_budget": {"1024": {"n": 4, "max_tokens": 256},
                                     "2048": {"n": 8, "max_tokens": 256}}}'
  [best_of_n]='{"by_budget": {"1024": {"n": 4, "max_tokens": 256},
                              "2048": {"n": 8, "max_tokens": 256}}}'
  [weighted_best_of_n]='{"by_budget": {"1024": {"n": 4, "max_tokens": 256},
                                       "2048": {"n": 8, "max_tokens": 256}}}'
  [deepconf]='{"by_budget": {"1024": {"n": 4, "warmup": 2, "max_tokens": 256},
                             "2048": {"n": 8, "warmup": 3, "max_tokens": 256}}}'
  [answer_convergence]='{"by_budget": {"1024": {"n": 1}, "2048": {"n": 2}}}'
  [adaptive_parallel]='{"by_budget": {"1024": {"initial": 2, "grow": 4, "max_n": 4, "max_tokens": 256},
                                      "2048": {"initial": 4, "grow": 8, "max_n": 8, "max_tokens": 256}}}'
  [beam_search]='{"by_budget": {"1024": {"n": 4, "width": 2}, "2048": {"n": 8, "width": 2}}}'
  [ab_mcts]='{"by_budget": {"1024": {"iterations": 2, "batch": 2, "max_tokens": 256},
                            "2048": {"iterations": 4, "batch": 2, "max_tokens": 256}}}'
)
for name in ${strategies//,/ }; do
  if [[ -z ${params_of[$name]:-} ]]; then
    echo "fit-calibration: STRATEGIES names $name, which the grid has no parameters for" >&2
    exit 2
  fi
done
# params_for NAMES: --params for exactly the comma-separated configurations NAMES (the harness
# refuses parameters of others)
params_for() {
  local name params=
  for name in ${1//,/ }; do params+="${params:+, }\"$name\": ${params_of[$name]}"; done
  echo "{$params}"
}

# each STRATEGIES BUDGET DIR [more ponder-eval run arguments]: both fit sets
each() {
  local strategies=$1 budget=$2 dir=$3
  shift 3
  for set in gsm8k_train asdiv; do
    "$eval_bin" run --dataset "$datasets/$set.jsonl" --role fit --shuffle-seed 17 \
      --limit "${LIMIT:-500}" --strategies "$strategies" --budgets "$budget" --seeds 0 \
      --concurrency "${CONCURRENCY:-8}" --out "$work/$dir" "$@"
  done
}

# Sequential revision (Step 18) at two sequential/parallel ratios per budget: the same strategy
# under other parameters is another configuration (another row of the table).
revision_ratios=(
  '{"revision": {"by_budget": {"1024": {"chains": 2, "attempts": 2, "max_tokens": 256},
                               "2048": {"chains": 4, "attempts": 2, "max_tokens": 256}}}}'
  '{"revision": {"by_budget": {"1024": {"chains": 1, "attempts": 4, "max_tokens": 256},
                               "2048": {"chains": 2, "attempts": 4, "max_tokens": 256}}}}'
)
# pruned BUDGET NAME: whether PRUNE drops configuration NAME at BUDGET
prune=${PRUNE:-2048:beam_search 2048:ab_mcts 2048:revision}
pruned() { [[ " ${prune//,/ } " == *" $1:$2 "* ]]; }

saved=$here/grid-outcomes.jsonl
what=${1:-all}
case $what in grid | all)
  restore_rows "$saved" "$work/grid"
  for budget in ${BUDGETS:-1024 2048}; do
    slim=(--without-candidates)
    if [[ " ${KEEP_CANDIDATES-2048} " == *" $budget "* ]]; then slim=(); fi
    kept=
    for name in ${strategies//,/ }; do
      pruned "$budget" "$name" || kept+="${kept:+,}$name"
    done
    if [[ -n $kept ]]; then
      each "$kept" "$budget" grid --params "$(params_for "$kept")" "${shots[@]}" "${slim[@]}" \
        --share-draws
    fi
    if [[ ${REVISION:-1} == 1 ]] && ! pruned "$budget" revision; then
      for ratio in "${revision_ratios[@]}"; do
        each revision "$budget" grid --params "$ratio" "${shots[@]}" "${slim[@]}"
      done
    fi
  done
  ;;
esac
case $what in save | all)
  save_rows "$work/grid" "$saved"
  ;;
esac
case $what in probe | all)
  each self_consistency 2048 probe --params '{"self_consistency": {"n": 2, "max_tokens": 256}}' \
    "${shots[@]}"
  ;;
esac
case $what in calibrate | all)
  # Run from the checkout with paths relative to it, so the table's `source` names no machine.
  rel() { if [[ $1 == "$root"/* ]]; then echo "${1#"$root"/}"; else echo "$1"; fi; }
  (cd "$root" && "$eval_bin" calibrate "$(rel "$work/grid")" --bins-from "$(rel "$work/probe")" \
    --out "$here/calibration.json")
  ;;
esac
