#!/usr/bin/env bash
# Step 17's acceptance runs: `auto` as `ponder serve` runs it, against fixed configurations, at
# 1,024 and 2,048 billed tokens — the fixed configuration chosen on validation problems, every
# number reported on report problems (`ponder::roles`). In-process on the default model, seed 0;
# fixed configurations see the two nearest worked examples (the setting validation chose), `auto`
# as many as its calibration rows were measured with, from the server's pool; no verifier.
#
#   shortlist   the three most accurate fixed configurations of the fit grid at each budget
#               (fit-calibration/grid-outcomes.jsonl, complete configurations only; ties: the
#               cheaper) -> shortlist.json
#   validation  `auto` and the shortlist on 100 GSM8K-train and 100 ASDiv validation problems
#               (a fixed shuffle, seed 17)
#   choose      per budget the shortlisted configuration most accurate on validation (ties: the
#               cheaper) -> choice.json: the report's "best on validation" arm
#   defaults    per budget `auto` or the choice, whichever validation measured more accurate
#               (ties: the cheaper) -> data/router/defaults.json: what `ponder serve` runs for a
#               search that names no strategy
#   report      `auto`, the validation choice and self-consistency (n 4 at 1,024, n 8 at 2,048,
#               at most 256 tokens a sample) on GSM8K test's report sample (300, shuffle 17),
#               ASDiv's report role (300, shuffle 17) and MATH-500 levels 1-3; AMC 2023 and
#               AIME 2024/2025 with the same arms, reported without a target
#   save        every validation and report run's rows, redacted (`ponder-eval redact`: ids,
#               outcomes and spend; no gold answer, answer or text), to outcomes/ here, which is
#               committed: `validation` and `report` on a machine without those runs start from
#               them (RESTORE=0: not), so a long report carries over machines and sessions
#   compare     report.md: accuracy [95% Wilson] and mean billed tokens per set, budget and arm;
#               paired bootstrap differences (auto - choice per set, auto - self-consistency
#               pooled over GSM8K test + ASDiv); whether `auto` is on each budget's
#               accuracy-vs-spend front (over the problems every arm answered)
#   verifier    verifier.md: the shipped learned verifier (data/verifier/outcome.json) on the
#               report's self-consistency draws at 2,048 (8 candidates a problem, kept by the
#               report runs) of GSM8K test and ASDiv: AUROC, its weighted vote against the
#               majority and the oracle, the share of the gap closed; and leave one dataset
#               out (fitted on one set's fit candidates — public-verifier/run.sh candidates
#               draws them — judged on the other set's report candidates). Restored rows have
#               no candidates: run `report` with RESTORE=0 for them (SETS, ARMS below)
#
# The runs hold the problems' gold answers and stay under $WORK (default
# target/public-report); what is kept here is shortlist.json, choice.json, outcomes/ (redacted),
# report.md and verifier.md.
# `auto`'s rows depend on the router file it ran with ($PONDER_ROUTER, default the shipped
# one): after recalibrating, delete them (`ponder-eval` resumes everything else).
#
# Usage: bash evals/examples/public-report/run.sh
#          [shortlist|validation|choose|defaults|report|save|compare|verifier]... (default: all;
#          the steps named run in that order)
#   PONDER_EVAL      the harness binary (default: ponder-eval on PATH)
#   PONDER_DATASETS  the public benchmark files (default: ../shared/datasets beside the checkout)
#   BUDGETS          default "1024 2048";  VAL, REPORT  problems per set (default 100 and 300)
#   WHOLE            problems per set of MATH-500 L1-3, AMC and AIME (default: all of them)
#   SETS             the report's sets, in this order (default: gsm8k_test asdiv math500 amc23
#                    aime24 aime25);  ARMS  which arms run: auto, fixed or both (default)
#   RESTORE          1 (default): a run with no rows here starts from outcomes/; 0: from nothing
#   CONCURRENCY      items in flight (default 8; results do not depend on it)
#   KEEP_CANDIDATES  budgets whose fixed arms keep their candidates' texts (default 2048, which
#                    `verifier` reads; others are slim: --without-candidates)
#   PONDER           the ponder binary `verifier` runs (default: ponder on PATH)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
eval_bin=${PONDER_EVAL:-ponder-eval}
# shellcheck source=../../../scripts/lib/saved-rows.sh
source "$root/scripts/lib/saved-rows.sh"
datasets=${PONDER_DATASETS:-$root/../shared/datasets}
work=${WORK:-$root/target/public-report}
pool=$root/data/exemplars/gsm8k.json
budgets=${BUDGETS:-1024 2048}
analyse=(python3 "$here/analyse.py")

saved=$here/outcomes
# run DIR DATASET ROLE LIMIT [more ponder-eval run arguments]
run() {
  local dir=$1 set=$2 role=$3 limit=$4
  shift 4
  if [[ ${RESTORE:-1} == 1 ]]; then restore_rows "$saved/$dir.jsonl" "$work/$dir"; fi
  "$eval_bin" run --dataset "$datasets/$set.jsonl" --role "$role" --shuffle-seed 17 \
    --limit "$limit" --seeds 0 --concurrency "${CONCURRENCY:-8}" --out "$work/$dir" "$@"
}

# arms DIR DATASET ROLE LIMIT CONFIGS [more ponder-eval run arguments]: `auto` at each budget,
# then the fixed configurations of CONFIGS (`analyse.py configs` lines: budget, strategies and
# their parameters, one run each, sharing draws) whose budget is one of BUDGETS
arms() {
  local dir=$1 set=$2 role=$3 limit=$4 configs=$5
  shift 5
  if [[ ${ARMS:-auto fixed} == *auto* ]]; then
    for budget in $budgets; do
      run "$dir" "$set" "$role" "$limit" --strategies auto --budgets "$budget" \
        --without-candidates "$@"
    done
  fi
  [[ ${ARMS:-auto fixed} == *fixed* ]] || return 0
  local slim
  while read -r budget strategies params; do
    [[ -n $budget && " $budgets " == *" $budget "* ]] || continue
    slim=(--without-candidates)
    if [[ " ${KEEP_CANDIDATES-2048} " == *" $budget "* ]]; then slim=(); fi
    run "$dir" "$set" "$role" "$limit" --strategies "$strategies" --budgets "$budget" \
      --params "$params" --shots 2 --shots-from "$pool" --share-draws "${slim[@]}" "$@"
  done <<<"$configs"
}

# Steps run in this file's order, whichever order they are named in.
steps=" ${*:-all} "
for step in $steps; do
  case $step in shortlist | validation | choose | defaults | report | save | compare | verifier | all) ;;
  *) echo "public-report: unknown step $step" >&2; exit 2 ;;
  esac
done
wants() { [[ $steps == *" $1 "* || $steps == *" all "* ]]; }
if wants shortlist; then
  "${analyse[@]}" shortlist "$here/../fit-calibration/grid-outcomes.jsonl" $budgets \
    >"$here/shortlist.json"
  cat "$here/shortlist.json"
fi
if wants validation; then
  configs=$("${analyse[@]}" configs "$here/shortlist.json")
  for set in gsm8k_train asdiv; do
    arms "validation-$set" "$set" validation "${VAL:-100}" "$configs"
  done
fi
if wants choose; then
  "${analyse[@]}" choose "$here/shortlist.json" "$work/validation-gsm8k_train" \
    "$work/validation-asdiv" >"$here/choice.json"
  cat "$here/choice.json"
fi
if wants defaults; then
  "${analyse[@]}" defaults "$here/choice.json" "$work/validation-gsm8k_train" \
    "$work/validation-asdiv" >"$root/data/router/defaults.json"
  cat "$root/data/router/defaults.json"
fi
if wants report; then
  configs=$("${analyse[@]}" configs "$here/choice.json" $(printf 'sc:%s ' $budgets))
  for set in ${SETS:-gsm8k_test asdiv math500 amc23 aime24 aime25}; do
    case $set in
      gsm8k_test | asdiv) arms "report-$set" "$set" report "${REPORT:-300}" "$configs" ;;
      math500) arms report-math500 math500 report "${WHOLE:-1000}" "$configs" --preset math \
        --level 1,2,3 ;;
      amc23) arms report-amc23 amc23 report "${WHOLE:-1000}" "$configs" ;;
      aime24 | aime25) arms "report-$set" "$set" report "${WHOLE:-1000}" "$configs" --preset aime ;;
      *) echo "public-report: unknown report set $set" >&2; exit 2 ;;
    esac
  done
fi
if wants save; then
  for dir in "$work"/validation-* "$work"/report-*; do
    [[ -s $dir/results.jsonl ]] || continue
    save_rows "$dir" "$saved/$(basename "$dir").jsonl"
  done
fi
if wants compare; then
  "${analyse[@]}" compare "$here/choice.json" "$work" $budgets >"$here/report.md"
  cat "$here/report.md"
fi
if wants verifier; then
  fits=${VERIFIER_WORK:-$root/target/public-verifier}
  {
    echo "# The shipped learned verifier on report problems"
    echo
    echo "Candidates: self-consistency's 8 samples (at most 256 tokens each, 2,048-token budget,"
    echo "seed 0, two nearest worked examples) of the report runs; the verifier: the shipped"
    echo "data/verifier/outcome.json (fitted on fit problems, chosen on validation ones). Gap"
    echo "closed = (weighted − majority) / (oracle − majority). Written by public-report/run.sh"
    echo "verifier."
    for set in gsm8k_test asdiv; do
      said=$("$eval_bin" candidates "$work/report-$set" --dataset "$datasets/$set.jsonl" \
        --strategy self_consistency --budget 2048 --out "$work/verifier-$set.jsonl" 2>&1)
      if [[ $said != *"(0 rows without candidates"* ]]; then
        echo "public-report: $said — rows restored from outcomes/ have no candidates; draw them" \
          "with RESTORE=0 ARMS=fixed BUDGETS=2048 SETS=\"gsm8k_test asdiv\" WORK=<a new" \
          "directory> run.sh report verifier" >&2
        exit 1
      fi
      echo
      echo "## $set report, the shipped verifier"
      echo
      "${PONDER:-ponder}" verifier eval --model "$root/data/verifier/outcome.json" \
        --data "$work/verifier-$set.jsonl" 2>&1 >/dev/null
    done
    for pair in "gsm8k_train asdiv" "asdiv gsm8k_test"; do
      set -- $pair
      # public-verifier/run.sh train fits these too; the evaluation stored in the file is the
      # one thing that differs (here: on the other set's fit candidates).
      if [[ ! -s $fits/lodo-$1.json ]]; then
        other=$([[ $1 == asdiv ]] && echo gsm8k_train || echo asdiv)
        "${PONDER:-ponder}" verifier train --data "$fits/fit-$1.jsonl" \
          --heldout "$fits/fit-$other.jsonl" --out "$fits/lodo-$1.json" >/dev/null 2>&1
      fi
      echo
      echo "## Leave one dataset out: fitted on $1's fit candidates, judged on $2's report candidates"
      echo
      "${PONDER:-ponder}" verifier eval --model "$fits/lodo-$1.json" \
        --data "$work/verifier-$2.jsonl" 2>&1 >/dev/null
    done
  } >"$work/verifier.md"
  mv "$work/verifier.md" "$here/verifier.md"
  cat "$here/verifier.md"
fi
