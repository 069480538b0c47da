# Sourced by the examples' run.sh scripts: where things are, and one arm on report problems.
#
# Sets `here` (the sourcing script's directory), `root` (the checkout), `eval_bin` (PONDER_EVAL,
# default ponder-eval on PATH), `datasets` (PONDER_DATASETS, default ../shared/datasets beside the
# checkout) and `pool` (the GSM8K worked-example pool), and defines
#   report_arm DIR STRATEGY PARAMS BUDGET
# which runs STRATEGY with PARAMS (a JSON object) at BUDGET on 100 of GSM8K test's report role (a
# fixed shuffle, seed 17), seed 0, in-process on the default model, with the two nearest worked
# examples (the setting validation chose), rows into DIR under the sourcing script's directory
# (CONCURRENCY items in flight, default 8; results do not depend on it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
datasets=${PONDER_DATASETS:-$root/../shared/datasets}
pool=$root/data/exemplars/gsm8k.json

report_arm() {
  local dir=$1 strategy=$2 params=$3 budget=$4
  "$eval_bin" run --dataset "$datasets/gsm8k_test.jsonl" --role report --shuffle-seed 17 \
    --limit 100 --strategies "$strategy" --budgets "$budget" --seeds 0 \
    --params "{\"$strategy\": $params}" --shots 2 --shots-from "$pool" \
    --concurrency "${CONCURRENCY:-8}" --out "$here/$dir"
}
