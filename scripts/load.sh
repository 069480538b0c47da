#!/usr/bin/env bash
# The full load run (RELIABILITY.md's figures): builds `ponder` in release, starts `ponder serve`
# with the installed default model on a free loopback port, drives it with Ponder's own load
# generator (`ponder bench load`: a seeded mix of plain, streamed, cancelled, small-budget strategy
# and over-limit requests), prints the JSON report, then SIGTERMs the server and checks it exits 0.
# CI runs the short form as the test `reliability::a_short_mixed_load_gets_no_5xx_and_leaves_the_server_idle`.
#
#   bash scripts/load.sh [CLIENTS] [DURATION]      # defaults: 32 clients, 60s
#   PONDER_SERVE_ARGS="--max-running 16" bash scripts/load.sh
#   PONDER_BIN=target/debug/ponder bash scripts/load.sh   # an already built binary, no release build
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CLIENTS="${1:-32}"
DURATION="${2:-60s}"
TARGET="${CARGO_TARGET_DIR:-target}"
if [ -n "${PONDER_BIN:-}" ]; then
    PONDER="$PONDER_BIN"
else
    cargo build --release --bin ponder
    PONDER="$TARGET/release/ponder"
fi
LOG="$(mktemp)"
# shellcheck disable=SC2086
"$PONDER" serve --port 0 ${PONDER_SERVE_ARGS:-} >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 1 600); do
    URL="$(sed -n 's/^ponder listening on \(http:[^ ]*\)$/\1/p' "$LOG")"
    [ -n "$URL" ] && break
    kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 0.1
done
[ -n "${URL:-}" ] || { echo "ponder serve did not start" >&2; cat "$LOG" >&2; exit 1; }
echo "ponder serve (pid $PID) on $URL; $CLIENTS clients for $DURATION" >&2
"$PONDER" bench load --url "$URL" --clients "$CLIENTS" --duration "$DURATION" --pid "$PID"
kill -TERM "$PID"
if wait "$PID"; then
    echo "ponder serve drained and exited 0 after SIGTERM" >&2
else
    code=$?
    echo "ponder serve exited $code after SIGTERM" >&2
    exit 1
fi
trap 'rm -f "$LOG"' EXIT
