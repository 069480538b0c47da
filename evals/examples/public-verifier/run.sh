#!/usr/bin/env bash
# Step 17's verifier on public data: labelled candidates from best-of-8 (at most 256 tokens a
# sample, 2,048-token budget, the two nearest worked examples, seed 0, in-process on the
# default model) on fit problems (GSM8K train and ASDiv, 100 each — the fit grid's 2,048
# stage, whose candidates are reused, so the fit draws nothing new; a fixed shuffle, seed 17)
# to train on, and on validation problems (100 each) to choose on; then the learned verifier
# trained on the fit candidates and evaluated on the validation ones (AUROC, selection vs
# majority vs oracle, the share of the majority-to-oracle gap closed), and leave one dataset
# out (fit on GSM8K's candidates, judge on ASDiv's, and the reverse).
#
# `train` writes the served learned verifier (`--verifier learned`), data/verifier/outcome.json,
# with the generator's SHA-256 and the fit problems' ids; the tables go to eval.md here. The
# runs and candidate files hold the problems' text, so they stay out of the repository (under
# $WORK, default target/public-verifier).
#
# `hidden` (after `train`) fits the hidden-state head instead — a logistic regression on the
# generator's own final-normed hidden state at the end of each solution (Cobbe et al. 2021's
# outcome verifier on a frozen generator; the L2 penalty chosen by 5-fold cross-validation on
# the fit problems) — on the same candidates, evaluates it the same way beside a one-hidden-
# layer MLP (logistic vs MLP is chosen on validation), and appends its section and a side-by-
# side table to eval.md. Its readings are cached under target/verifier-hidden.
#
# Usage: bash evals/examples/public-verifier/run.sh [candidates|train|hidden] (default: all)
#   PONDER, PONDER_EVAL  the binaries (default: ponder and ponder-eval on PATH)
#   PONDER_DATASETS      the public benchmark files (default: ../shared/datasets)
#   FIT, VAL             problems per set (default 100 and 100); CONCURRENCY (default 8)
#   ROLES                whose candidates `candidates` draws (default "fit validation"; the
#                        report's leave-one-dataset-out fits need only "fit")
#   GRID                 the fit grid's rows (default target/fit-calibration/grid/results.jsonl)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
ponder=${PONDER:-ponder}
eval_bin=${PONDER_EVAL:-ponder-eval}
datasets=${PONDER_DATASETS:-$root/../shared/datasets}
work=${WORK:-$root/target/public-verifier}
mkdir -p "$work"
# Run from the checkout with paths relative to it: the fitted files record the candidate sets'
# paths (the shipped verifier's are `ponder verifier train`'s defaults), naming no machine.
cd "$root"
work=${work#"$root"/}
model=data/verifier/outcome.json
params='{"best_of_n": {"n": 8, "max_tokens": 256}}'

# The fit grid's best-of-8 rows at 2,048 tokens (fit-calibration/run.sh keeps their
# candidates) are this run's on the grid's problems: the same configuration, shuffle, seed and
# examples. A fit run starts from them (the calibration's candidates, reused), and `ponder-eval
# run` draws only the problems the grid has not.
grid=${GRID:-$root/target/fit-calibration/grid/results.jsonl}
from_grid() {
  local set=$1 out=$2
  [[ -s $grid && ! -s $out/results.jsonl ]] || return 0
  mkdir -p "$out"
  python3 - "$grid" "$set" "$out/results.jsonl" <<'PY'
import json, sys
grid, dataset, out = sys.argv[1:]
prefix = {"gsm8k_train": "gsm8k-train-", "asdiv": "asdiv-"}[dataset]
kept = 0
with open(grid) as f, open(out, "w") as o:
    for line in f:
        r = json.loads(line)
        if (r["strategy"] == "best_of_n" and r["budget"] == 2048 and r["seed"] == 0
                and r["params"] == {"n": 8, "max_tokens": 256} and r.get("shots") == 2
                and r["verifier"] == "none" and r["problem_id"].startswith(prefix)
                and r.get("candidates") and not r.get("redacted")):
            o.write(line)
            kept += 1
print(f"public-verifier: {kept} {dataset} fit rows from the fit grid", file=sys.stderr)
PY
}

# sample ROLE LIMIT: best-of-8 with candidates on both sets' problems of ROLE
sample() {
  local role=$1 limit=$2
  for set in gsm8k_train asdiv; do
    if [[ $role == fit ]]; then from_grid "$set" "$work/$role-$set"; fi
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
  for role in ${ROLES:-fit validation}; do
    case $role in
      fit) sample fit "${FIT:-100}" ;;
      validation) sample validation "${VAL:-100}" ;;
      *) echo "public-verifier: unknown role $role" >&2; exit 2 ;;
    esac
  done
  ;;
esac
case $what in train | all)
  {
    echo "## Fit on both sets' fit candidates, judged on both sets' validation candidates"
    "$ponder" verifier train --data "$work/fit.jsonl" --heldout "$work/validation.jsonl" \
      --out "$model" 2>&1 >/dev/null
    for set in gsm8k_train asdiv; do
      echo
      echo "### judged on $set validation only"
      "$ponder" verifier eval --model "$model" --data "$work/validation-$set.jsonl" \
        2>&1 >/dev/null
    done
    echo
    echo "## The verifier shipped before (fitted on gsm_gen candidates; now a test fixture) judged on the same validation candidates"
    "$ponder" verifier eval --model tests/fixtures/verifier/gsm_gen-outcome.json \
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

# evaluation JSON → one row of the side-by-side table
row() {
  jq -r --arg name "$1" '
    def r(x): "\(x.correct)/\(x.of)";
    def gap: if .oracle.rate > .majority.rate
      then ((.weighted.rate - .majority.rate) / (.oracle.rate - .majority.rate) * 100 | round / 100)
      else "n/a" end;
    "| \($name) | \(.auroc * 1000 | round / 1000) | \(r(.majority)) | \(r(.weighted)) | \(r(.top1)) | \(r(.oracle)) | \(.weighted_share_of_oracle * 100 | round / 100) | \(gap) |"'
}

case $what in hidden | all)
  evals=$work/evals
  mkdir -p "$evals"
  quiet() { "$@" 2>/dev/null; }
  # The feature verifier's evaluations, as JSON, for the table.
  quiet "$ponder" verifier eval --model "$model" --data "$work/validation.jsonl" >"$evals/features-all.json"
  for set in gsm8k_train asdiv; do
    quiet "$ponder" verifier eval --model "$model" --data "$work/validation-$set.jsonl" \
      >"$evals/features-$set.json"
  done
  quiet "$ponder" verifier train --data "$work/fit-gsm8k_train.jsonl" \
    --heldout "$work/validation-asdiv.jsonl" --out "$work/lodo-gsm8k_train.json" >"$evals/features-lodo-g2a.json"
  quiet "$ponder" verifier train --data "$work/fit-asdiv.jsonl" \
    --heldout "$work/validation-gsm8k_train.jsonl" --out "$work/lodo-asdiv.json" >"$evals/features-lodo-a2g.json"
  section=$work/hidden-section.md
  {
    echo
    echo "# The hidden-state head (\`ponder verifier … --head hidden\`)"
    echo
    echo "## Fit on both sets' fit candidates, judged on both sets' validation candidates"
    "$ponder" verifier train --head hidden --data "$work/fit.jsonl" \
      --heldout "$work/validation.jsonl" --out "$here/hidden.json" 2>&1 >"$evals/hidden-all.json"
    for set in gsm8k_train asdiv; do
      echo
      echo "### judged on $set validation only"
      "$ponder" verifier eval --head hidden --model "$here/hidden.json" \
        --data "$work/validation-$set.jsonl" 2>&1 >"$evals/hidden-$set.json"
    done
    echo
    echo "## The MLP head (16 hidden units), same fit and validation candidates"
    "$ponder" verifier train --head hidden --mlp-units 16 --data "$work/fit.jsonl" \
      --heldout "$work/validation.jsonl" --out "$work/hidden-mlp16.json" 2>&1 \
      >"$evals/hidden-mlp16-all.json"
    echo
    echo "## Leave one dataset out"
    for pair in "gsm8k_train asdiv g2a" "asdiv gsm8k_train a2g"; do
      set -- $pair
      echo
      echo "### fit on $1's fit candidates, judged on $2's validation candidates"
      "$ponder" verifier train --head hidden --data "$work/fit-$1.jsonl" \
        --heldout "$work/validation-$2.jsonl" --out "$work/hidden-lodo-$1.json" 2>&1 \
        >"$evals/hidden-lodo-$3.json"
    done
    echo
    echo "## Side by side (validation candidates)"
    echo
    echo "gap closed = (weighted − majority) / (oracle − majority); weighted / oracle is the"
    echo "share of the oracle's accuracy the weighted vote reaches (the tables' last line)."
    echo
    echo "| verifier, judged on | AUROC | majority | weighted | top-1 | oracle | weighted / oracle | gap closed |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for head in features hidden; do
      row "$head, both sets" <"$evals/$head-all.json"
      row "$head, gsm8k_train" <"$evals/$head-gsm8k_train.json"
      row "$head, asdiv" <"$evals/$head-asdiv.json"
      row "$head, fit gsm8k_train → asdiv" <"$evals/$head-lodo-g2a.json"
      row "$head, fit asdiv → gsm8k_train" <"$evals/$head-lodo-a2g.json"
    done
    row "hidden MLP-16, both sets" <"$evals/hidden-mlp16-all.json"
    echo
    echo "What the rows say, and which verifier ships: evals/examples/public-data-results.md."
  } >"$section"
  # Replace the hidden section of eval.md (everything from its heading on).
  sed -i '/^# The hidden-state head/,$d' "$here/eval.md"
  sed -i '${/^$/d}' "$here/eval.md"
  cat "$section" >>"$here/eval.md"
  ;;
esac
