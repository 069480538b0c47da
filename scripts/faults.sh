#!/usr/bin/env bash
# The full remote-backend fault run (RELIABILITY.md's figures): a backend `ponder serve` (B) and
# a front `ponder serve --backend B` (A) on loopback; CLIENTS clients drive A with strategy
# requests (streamed and not, which A runs on B) and plain chat (which A runs itself) for
# DURATION; B is SIGKILLed at KILL_AT and started again on the same port at RESTART_AT. Prints
# `ponder bench load`'s JSON (its `timeline` shows the fault come and go), then checks: only
# 200/400/429/502/503, no transport error (a request hung past the 120 s request timeout would be
# one), no cut stream, the fault noticed, the last window clean, A idle afterwards.
# CI runs the short form as the test
# `reliability::a_backend_killed_and_restarted_under_load_gives_clean_errors_and_the_front_recovers`.
#
#   bash scripts/faults.sh [CLIENTS] [DURATION_S] [KILL_AT_S] [RESTART_AT_S]   # 32 60 20 35
#   PONDER_BIN=target/debug/ponder bash scripts/faults.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/serve.sh
CLIENTS="${1:-32}"
DURATION="${2:-60}"
KILL_AT="${3:-20}"
RESTART_AT="${4:-35}"
ponder_binary
trap stop_all EXIT
start_serve 0
B_PID="$SERVE_PID"
B_URL="$SERVE_URL"
B_PORT="${B_URL##*:}"
start_serve 0 --backend "$B_URL"
A_PID="$SERVE_PID"
A_URL="$SERVE_URL"
echo "backend B (pid $B_PID) on $B_URL, front A (pid $A_PID) on $A_URL; $CLIENTS clients for ${DURATION}s" >&2
REPORT="$(mktemp)"
"$PONDER" bench load --url "$A_URL" --clients "$CLIENTS" --duration "${DURATION}s" --pid "$A_PID" \
    --kinds strategy,streamed_strategy,chat --request-timeout 120s >"$REPORT" &
LOAD=$!
sleep "$KILL_AT"
kill -KILL "$B_PID"
echo "$(date +%T) killed backend B" >&2
sleep $((RESTART_AT - KILL_AT))
start_serve "$B_PORT"
echo "$(date +%T) backend B restarted (pid $SERVE_PID) on $SERVE_URL" >&2
wait "$LOAD"
cat "$REPORT"
python3 - "$REPORT" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
last = r["timeline"][-1]
checks = {
    "only 200/400/429/502/503": set(r["by_status"]) <= {"200", "400", "429", "502", "503"},
    "no transport errors (nothing hung)": r["transport_errors"] == 0,
    "no cut streams": r["truncated_streams"] == 0,
    "the fault was noticed": r["server_errors"] + r["stream_errors"] > 0,
    "the last window is clean": last["ok"] > 0 and last["server_errors"] == 0 and last["stream_errors"] == 0,
    "front idle afterwards": r["running_after"] == 0 and r["queued_after"] == 0 and r["kv_blocks_used_after"] == r["kv_blocks_used_before"],
}
for name, ok in checks.items():
    print(("ok    " if ok else "FAIL  ") + name, file=sys.stderr)
sys.exit(0 if all(checks.values()) else 1)
PY
