# Sourced by the evals' long-run scripts (fit-calibration, public-report): a run's rows kept in
# the checkout, redacted, so a run that takes hours carries over machines and sessions. The rows
# under target/ hold gold answers and texts; the kept ones hold ids, outcomes and spend only
# (`ponder-eval redact`), and a run restored from them resumes where they end.
#
#   restore_rows KEPT DIR   # KEPT -> DIR/results.jsonl, when DIR has no rows and KEPT has some
#   save_rows DIR KEPT      # DIR's rows, redacted, -> KEPT (uses $eval_bin, the harness binary)

restore_rows() {
    local kept=$1 dir=$2
    if [[ ! -s $dir/results.jsonl && -s $kept ]]; then
        mkdir -p "$dir"
        cp "$kept" "$dir/results.jsonl"
        echo "$(basename "$dir"): resumes from $(wc -l <"$kept") saved rows ($kept)" >&2
    fi
}

save_rows() {
    local dir=$1 kept=$2
    mkdir -p "$(dirname "$kept")"
    "${eval_bin:?save_rows needs eval_bin, the harness binary}" redact "$dir" --out "$kept"
}
