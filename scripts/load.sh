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
source scripts/lib/serve.sh
CLIENTS="${1:-32}"
DURATION="${2:-60s}"
ponder_binary
trap stop_all EXIT
# shellcheck disable=SC2086
start_serve 0 ${PONDER_SERVE_ARGS:-}
PID="$SERVE_PID"
echo "ponder serve (pid $PID) on $SERVE_URL; $CLIENTS clients for $DURATION" >&2
"$PONDER" bench load --url "$SERVE_URL" --clients "$CLIENTS" --duration "$DURATION" --pid "$PID"
kill -TERM "$PID"
if wait "$PID"; then
    echo "ponder serve drained and exited 0 after SIGTERM" >&2
else
    code=$?
    echo "ponder serve exited $code after SIGTERM" >&2
    exit 1
fi
