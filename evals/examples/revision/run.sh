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
. "$(dirname "${BASH_SOURCE[0]}")/../report-arm.sh"

# arm DIR STRATEGY PARAMS
arm() { report_arm "$1" "$2" "$3" 1024; }

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
