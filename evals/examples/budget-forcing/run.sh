#!/usr/bin/env bash
# Step 18's budget forcing (s1) against plain truncation, on report problems only
# (`ponder::roles`): 100 of GSM8K test's report role (a fixed shuffle, seed 17), seed 0,
# in-process on the default model, two nearest worked examples (the setting validation chose),
# no verifier, a 2,048-token budget that never binds (each arm's own caps do).
#
# Arms, each its own run directory (rows of one strategy share a configuration key):
# - `bf-M`: `budget_forcing` with max_thinking_tokens M (64, 128, 256), answer_tokens 32: the
#   block is closed for the model at M and "Final Answer:" appended;
# - `bf-256-minK`: the same at M 256 with min_thinking_tokens K (128, 224): an early end is taken
#   back and "Wait" appended (at most 2 times), so the thinking runs longer;
# - `trunc-M`: plain truncation at the same length, one sample of at most M + 32 tokens whose
#   answer is whatever its text marks (`self_consistency`, n 1, force_answer false).
# - `bf-256-exitP`: the same as `bf-256` with Dynasor-CoT's early exit inside the thinking: an
#   answer probe every 32 thinking tokens, the thinking stopped once P probes in a row agree (P 2,
#   3); measured against `bf-256` alone (`run.sh exit` runs only these arms).
# `compare` writes compare.md: per arm the parsed-answer rate and accuracy with 95% Wilson
# intervals, mean generated tokens, and the paired accuracy difference of each `bf-M` against
# `trunc-M` (the same problems); and accuracy vs thinking budget as a plot (plot.svg).
#
# Usage: bash evals/examples/budget-forcing/run.sh [run|exit|compare]  (default: all)
#   PONDER_EVAL      the harness binary (default: ponder-eval on PATH)
#   PONDER_DATASETS  the public benchmark files (default: ../shared/datasets beside the checkout)
#   CONCURRENCY      items in flight (default 8; results do not depend on it)
. "$(dirname "${BASH_SOURCE[0]}")/../report-arm.sh"

# arm DIR STRATEGY PARAMS
arm() { report_arm "$1" "$2" "$3" 2048; }

what=${1:-all}
case $what in run | all)
  for m in 64 128 256; do
    arm "bf-$m" budget_forcing "{\"max_thinking_tokens\": $m, \"answer_tokens\": 32}"
    arm "trunc-$m" self_consistency "{\"n\": 1, \"max_tokens\": $((m + 32)), \"force_answer\": false}"
  done
  for k in 128 224; do
    arm "bf-256-min$k" budget_forcing \
      "{\"max_thinking_tokens\": 256, \"min_thinking_tokens\": $k, \"answer_tokens\": 32}"
  done
  ;;
esac
case $what in exit | all)
  for patience in 2 3; do
    arm "bf-256-exit$patience" budget_forcing \
      "{\"max_thinking_tokens\": 256, \"answer_tokens\": 32, \"probe_every\": 32, \"probe_patience\": $patience}"
  done
  ;;
esac
case $what in compare | all)
  python3 "$here/compare.py" "$here" >"$here/compare.md"
  cat "$here/compare.md"
  ;;
esac
