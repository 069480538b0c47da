# Sourced by the load and fault scripts: build (or take) the `ponder` binary and start
# `ponder serve` processes on loopback.
#
#   ponder_binary            # sets PONDER: $PONDER_BIN, or a fresh release build
#   start_serve PORT ARGS... # starts `ponder serve --port PORT ARGS...` (PORT 0: a free one);
#                            # sets SERVE_PID and SERVE_URL once it listens
#   stop_all                 # kills every server started here (the scripts trap EXIT with it)

SERVE_PIDS=()
SERVE_LOGS=()

ponder_binary() {
    if [ -n "${PONDER_BIN:-}" ]; then
        PONDER="$PONDER_BIN"
    else
        cargo build --release --bin ponder
        PONDER="${CARGO_TARGET_DIR:-target}/release/ponder"
    fi
}

start_serve() {
    local port="$1" log
    shift
    log="$(mktemp)"
    "$PONDER" serve --port "$port" "$@" >"$log" 2>&1 &
    SERVE_PID=$!
    SERVE_PIDS+=("$SERVE_PID")
    SERVE_LOGS+=("$log")
    SERVE_URL=""
    # Up to 10 minutes: a first start on a cold cache embeds the worked examples before it
    # listens (src/api/cli.rs, `exemplars`).
    for _ in $(seq 1 6000); do
        SERVE_URL="$(sed -n 's/^ponder listening on \(http:[^ ]*\)$/\1/p' "$log")"
        [ -n "$SERVE_URL" ] && return 0
        kill -0 "$SERVE_PID" 2>/dev/null || { cat "$log" >&2; return 1; }
        sleep 0.1
    done
    echo "ponder serve did not start" >&2
    cat "$log" >&2
    return 1
}

stop_all() {
    local pid
    for pid in "${SERVE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -f "${SERVE_LOGS[@]}"
}
