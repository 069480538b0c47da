#!/usr/bin/env bash
# Coverage-guided fuzzing of Ponder's hostile-input surfaces with cargo-fuzz (libFuzzer), run by
# hand (CI replays the committed corpora instead: tests/fuzz_corpus.rs). Installs cargo-fuzz from
# crates.io if missing; builds on the stable toolchain (RUSTC_BOOTSTRAP=1 admits the nightly
# flags cargo-fuzz passes; no sanitizer, so panics and aborts are what is caught). Each target
# runs SECONDS, growing fuzz/corpus/<target>/, which is then minimised (cargo fuzz cmin) so the
# committed corpus keeps only inputs that add coverage. A crash leaves its input in
# fuzz/artifacts/<target>/ and makes the script exit non-zero.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     # default: 150 s each, every target
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_EACH="${1:-150}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(request_json sse_data answer_grader chat_template gguf_header)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
status=0
for t in "${TARGETS[@]}"; do
    echo "== $t: ${SECONDS_EACH}s" >&2
    if ! cargo fuzz run -s none -O "$t" -- -max_total_time="$SECONDS_EACH" -rss_limit_mb=4096 -print_final_stats=1 2>&1 \
        | grep -E '^(stat::|#[0-9]+ +DONE)|panicked|ERROR|SUMMARY'; then
        :
    fi
    if [ -n "$(ls -A "fuzz/artifacts/$t" 2>/dev/null)" ]; then
        echo "$t: crash inputs in fuzz/artifacts/$t/" >&2
        status=1
        continue
    fi
    cargo fuzz cmin -s none -O "$t" 2>&1 | grep -E 'MERGE-OUTER: [0-9]+ new files' || true
    echo "$t: $(ls "fuzz/corpus/$t" | wc -l) corpus files after cmin" >&2
done
exit $status
