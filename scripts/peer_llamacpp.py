#!/usr/bin/env python3
"""Peer benchmark: Ponder's `bench nsample` against llama.cpp (llama-cpp-python) on the same
GGUF, prompt, sample count and machine, measured in one run and printed as one JSON object.

    python3 scripts/peer_llamacpp.py [--n 16 --prompt-tokens 512 --new-tokens 128
                                      --threads 2 --repeat 3 --venv /tmp/ponder-peer-venv]

Run by hand, not in CI. It creates a venv at --venv, pip-installs llama-cpp-python 0.3.36 there
unless present (from PyPI: builds llama.cpp for the native CPU, minutes), re-executes itself in it
and measures, with n_threads = --threads, n_batch = n_ubatch >= P, the same prompt token ids:

(a) prefill: the P prompt tokens in one llama_decode (median of 3 after a warm-up);
(b) decode: T tokens of one sequence after the prompt, prefill excluded (median of --repeat runs);
(c) nsample the usual way: the high-level `Llama`, N samples one after another via `generate`
    with a seed each. Its prefix match keeps the prompt's KV between calls (each later call cuts
    the cache to P-1 tokens and re-decodes the last prompt token for fresh logits); the first
    call's prefill is timed too;
(d) nsample batched, as llama.cpp's examples/batched: the prompt decoded once as seq 0 into a
    unified KV cache, `llama_memory_seq_cp` to seqs 1..N-1 (cells shared, not copied), then one
    llama_decode per step with a token of every sequence, each sampled by its own sampler chain
    (median of --repeat runs, each from an empty cache, as Ponder's bench takes the median of
    --repeat batched runs).

Sampling matches Ponder's bench: temperature 0.8 only (no top-k/p, min-p or penalties), a seed per
sample, no stop tokens, exactly T tokens each (the first from the prompt's logits). Flash attention:
(a), (b), (d) run with it on and off (on a CPU neither wins everywhere); the report takes each one's
best and runs (c) with the decode winner. Then `ponder bench nsample` runs with the same n/P/T.
CPU seconds other processes used meanwhile are reported as `contention`.

AMX: llama.cpp's AMX kernels segfault in this project's Firecracker VMs (`ldtilecfg` faults on the
first multi-token decode), so the install builds without AMX (AVX-512 and VNNI stay). Ponder's own
AMX-INT8 path (batched matmuls and prefill, `kernels/src/cpu/amx.rs`) runs fine there; set
PONDER_NO_AMX=1 to compare without it. A --venv built with AMX runs with `use_extra_bufts=False`
(no AMX, no weight repacking: for this GGUF no loss, llama.cpp repacks neither Q4_1 nor its Q8_0
embeddings), see extra_buffer_types.
"""
import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
PONDER = ROOT / "target/release/ponder"
LCP_VERSION = "0.3.36"
NO_AMX = r"-mno-amx-tile\ -mno-amx-int8\ -mno-amx-bf16"  # escaped spaces: CMAKE_ARGS splits on spaces
TEMPERATURE = 0.8
SEED = 1000
TEXT = ("Ponder answers reasoning questions by spending test-time compute wisely: it samples many "
        "branches, scores them with verifiers and stops when the evidence is in. ")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16, help="samples")
    ap.add_argument("--prompt-tokens", type=int, default=512, help="prompt length P")
    ap.add_argument("--new-tokens", type=int, default=128, help="new tokens per sample T")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads (and RAYON_NUM_THREADS)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed runs of the batched job and of single-stream decode on each side (median)")
    ap.add_argument("--venv", type=Path, default=Path("/tmp/ponder-peer-venv"))
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args()


# --- setup: venv, then re-exec ------------------------------------------------------------------

def ensure_venv(venv: Path) -> Path:
    """Creates the venv and installs llama-cpp-python there unless it is already installed."""
    python = venv / "bin/python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(python), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != LCP_VERSION:
        print(f"installing llama-cpp-python=={LCP_VERSION} into {venv} (builds llama.cpp, minutes)",
              file=sys.stderr)
        env = dict(os.environ, CMAKE_ARGS=f"-DCMAKE_C_FLAGS={NO_AMX} -DCMAKE_CXX_FLAGS={NO_AMX}")
        subprocess.run([str(python), "-m", "pip", "install", "--no-cache-dir", "--no-binary", "llama-cpp-python",
                        f"llama-cpp-python=={LCP_VERSION}"], check=True, env=env)
    return python


# --- llama.cpp low-level helpers ----------------------------------------------------------------

def use_extra_bufts(lc, extra):
    """Makes every model load (ours and `Llama`'s) use or skip the extra weight buffer types."""
    default = lc.llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = extra
        return p

    lc.llama_cpp.llama_model_default_params = params


def new_context(lc, model, n_ctx, n_seq, threads, flash):
    """A context with n_batch = n_ubatch = n_ctx and a unified KV cache."""
    p = lc.llama_context_default_params()
    p.n_ctx = p.n_batch = p.n_ubatch = n_ctx
    p.n_seq_max = n_seq
    p.n_threads = p.n_threads_batch = threads
    p.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
    p.kv_unified = True
    p.no_perf = True
    ctx = lc.llama_init_from_model(model, p)
    if not ctx:
        raise RuntimeError("llama_init_from_model failed")
    return ctx


def decode(lc, ctx, batch, items):
    """Decodes `items` = [(token, pos, seq, wants_logits)] as one batch; waits for the result."""
    for i, (tok, pos, seq, out) in enumerate(items):
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = tok, pos, 1
        batch.seq_id[i][0], batch.logits[i] = seq, out
    batch.n_tokens = len(items)
    rc = lc.llama_decode(ctx, batch)
    if rc != 0:
        raise RuntimeError(f"llama_decode returned {rc}")
    lc.llama_synchronize(ctx)


def tokenize(lc, model, text):
    """Token ids as `Llama.tokenize(text, add_bos=False, special=True)` gives them."""
    raw = text.encode("utf-8")
    buf = (lc.llama_token * (len(raw) + 8))()
    n = lc.llama_tokenize(lc.llama_model_get_vocab(model), raw, len(raw), buf, len(buf), False, True)
    return list(buf[:n])


def prompt_items(prompt):
    """The prompt as seq 0 with logits only for its last token."""
    return [(t, i, 0, i == len(prompt) - 1) for i, t in enumerate(prompt)]


def temp_sampler(lc, seed):
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_temp(TEMPERATURE))
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(seed))
    return chain


def measure_single(lc, model, prompt, t, threads, flash, repeat):
    """(a) prefill tok/s (median of 3 warm runs); (b) one stream's decode tok/s, prefill excluded
    (median of `repeat` runs, each after a fresh prefill)."""
    p = len(prompt)
    ctx = new_context(lc, model, p + t, 1, threads, flash)
    batch = lc.llama_batch_init(p, 0, 1)
    mem = lc.llama_get_memory(ctx)
    prefill = []
    for _ in range(4):  # the first run is the warm-up
        lc.llama_memory_clear(mem, True)
        t0 = time.perf_counter()
        decode(lc, ctx, batch, prompt_items(prompt))
        prefill.append(time.perf_counter() - t0)
    decodes = []
    for r in range(max(1, repeat)):
        if r > 0:  # the cache still holds the previous run's tokens: start again from the prompt
            lc.llama_memory_clear(mem, True)
            decode(lc, ctx, batch, prompt_items(prompt))
        smpl = temp_sampler(lc, SEED + r)
        tok = lc.llama_sampler_sample(smpl, ctx, -1)  # first token: from the prompt's logits
        t0 = time.perf_counter()
        for i in range(t - 1):
            decode(lc, ctx, batch, [(tok, p + i, 0, True)])
            tok = lc.llama_sampler_sample(smpl, ctx, -1)
        decodes.append(time.perf_counter() - t0)
        lc.llama_sampler_free(smpl)
    decode_s = statistics.median(decodes)
    lc.llama_batch_free(batch)
    lc.llama_free(ctx)
    prefill_s = statistics.median(prefill[1:])
    return {"prefill_s": prefill_s, "prefill_tok_s": p / prefill_s,
            "decode_s": decode_s, "decode_tok_s": (t - 1) / decode_s, "decode_runs_s": decodes}


def batched_run(lc, ctx, batch, mem, prompt, n, t):
    """One timed (d) run from an empty cache: the outputs and the wall time."""
    p = len(prompt)
    lc.llama_memory_clear(mem, True)
    samplers = [temp_sampler(lc, SEED + s) for s in range(n)]
    outs = [[] for _ in range(n)]
    t0 = time.perf_counter()
    decode(lc, ctx, batch, prompt_items(prompt))
    for s in range(1, n):
        lc.llama_memory_seq_cp(mem, 0, s, -1, -1)
    for s in range(n):  # every sequence's first token from the prompt's logits
        outs[s].append(lc.llama_sampler_sample(samplers[s], ctx, p - 1))
    for step in range(1, t):
        decode(lc, ctx, batch, [(outs[s][-1], p + step - 1, s, True) for s in range(n)])
        for s in range(n):
            outs[s].append(lc.llama_sampler_sample(samplers[s], ctx, s))
    wall = time.perf_counter() - t0
    for smpl in samplers:
        lc.llama_sampler_free(smpl)
    assert all(len(o) == t for o in outs)
    return outs, wall


def measure_batched(lc, model, prompt, n, t, threads, flash, repeat):
    """(d) prompt once as seq 0, seq_cp to 1..n-1, then all n sequences decoded together; the
    median of `repeat` runs."""
    p = len(prompt)
    ctx = new_context(lc, model, p + n * t, n, threads, flash)
    batch = lc.llama_batch_init(max(p, n), 0, 1)
    mem = lc.llama_get_memory(ctx)
    decode(lc, ctx, batch, prompt_items(prompt))  # warm-up, then forget it
    runs = [batched_run(lc, ctx, batch, mem, prompt, n, t) for _ in range(max(1, repeat))]
    lc.llama_batch_free(batch)
    lc.llama_free(ctx)
    walls = [wall for _, wall in runs]
    wall = statistics.median(walls)
    return {"nsample_batched_wall_s": wall, "batched_aggregate_tok_s": n * t / wall,
            "batched_runs_s": walls, "batched_distinct_samples": len({tuple(o) for o in runs[0][0]})}


# --- llama.cpp high-level: the usual way --------------------------------------------------------

def measure_usual(llm, prompt, n, t):
    """(c) n samples one after another with `Llama.generate`, the prompt's KV reused between them."""
    llm.eval(prompt)  # warm-up; reset() then makes the first timed call prefill from scratch
    llm.reset()
    outs, per_sample = [], []
    t0 = time.perf_counter()
    for s in range(n):
        ts = time.perf_counter()
        llm.set_seed(SEED + s)
        gen = llm.generate(prompt, temp=TEMPERATURE, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0,
                           repeat_penalty=1.0, reset=True)
        outs.append([next(gen) for _ in range(t)])  # no stop tokens: exactly t tokens
        gen.close()
        per_sample.append(time.perf_counter() - ts)
    wall = time.perf_counter() - t0
    return {"nsample_usual_wall_s": wall, "usual_first_sample_s": per_sample[0],
            "usual_later_sample_s_median": statistics.median(per_sample[1:] or per_sample),
            "usual_distinct_samples": len({tuple(o) for o in outs})}


def measure_llamacpp(args):
    """Runs (a), (b), (d) with flash attention on and off, then (c) with the faster decode setting.

    The top-level numbers are each measurement's best setting (named in `flash_attn`)."""
    import llama_cpp as lc

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's log, as verbose=False
    extra = "AMX_INT8 = 1" not in lc.llama_print_system_info().decode()
    use_extra_bufts(lc, extra)
    p, t, n, threads, repeat = args.prompt_tokens, args.new_tokens, args.n, args.threads, args.repeat
    lc.llama_backend_init()
    model = lc.llama_model_load_from_file(str(MODEL).encode(), lc.llama_cpp.llama_model_default_params())
    unit = tokenize(lc, model, TEXT)
    prompt = [unit[i % len(unit)] for i in range(p)]
    by_fa = {}
    for flash in (True, False):
        by_fa["on" if flash else "off"] = (measure_single(lc, model, prompt, t, threads, flash, repeat)
                                           | measure_batched(lc, model, prompt, n, t, threads, flash, repeat))
    lc.llama_model_free(model)
    best = {key: max(by_fa, key=lambda fa: sign * by_fa[fa][key])
            for key, sign in (("prefill_tok_s", 1), ("decode_tok_s", 1), ("nsample_batched_wall_s", -1))}
    llm = lc.Llama(model_path=str(MODEL), n_ctx=p + t, n_batch=p, n_ubatch=p, n_threads=threads,
                   n_threads_batch=threads, flash_attn=best["decode_tok_s"] == "on", verbose=False)
    usual = measure_usual(llm, prompt, n, t)
    del llm
    batched = by_fa[best["nsample_batched_wall_s"]]
    out = {
        "prefill_tok_s": by_fa[best["prefill_tok_s"]]["prefill_tok_s"],
        "decode_tok_s": by_fa[best["decode_tok_s"]]["decode_tok_s"],
        "nsample_usual_wall_s": usual.pop("nsample_usual_wall_s"),
        "nsample_batched_wall_s": batched["nsample_batched_wall_s"],
        "batched_aggregate_tok_s": batched["batched_aggregate_tok_s"],
        "flash_attn": {"prefill": best["prefill_tok_s"], "decode": best["decode_tok_s"],
                       "usual": best["decode_tok_s"], "batched": best["nsample_batched_wall_s"]},
        "usual": usual,
        "by_flash_attn": by_fa,
        "prompt_unit_tokens": len(unit),
        "extra_buffer_types": extra,
    }
    return out, lc


# --- Ponder and the report ----------------------------------------------------------------------

def run_ponder(args):
    if not PONDER.exists():
        raise SystemExit(f"{PONDER} is missing: run `cargo build --release` first")
    cmd = [str(PONDER), "bench", "nsample", "--n", str(args.n), "--prompt-tokens",
           str(args.prompt_tokens), "--new-tokens", str(args.new_tokens), "--repeat", str(args.repeat)]
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    return json.loads(done.stdout)


def cpu_meter():
    """Busy CPU seconds of the whole machine, ours (incl. waited children) and wall time, now."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait
    t = os.times()
    return busy, t.user + t.system + t.children_user + t.children_system, time.perf_counter()


def contention(before):
    """CPU seconds others used since `before`, and their share of the machine's capacity."""
    now = cpu_meter()
    wall = now[2] - before[2]
    others = max(0.0, (now[0] - before[0]) - (now[1] - before[1]))
    return {"wall_s": wall, "others_cpu_s": others, "others_share": others / (wall * os.cpu_count())}


def machine(lc):
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "llama_cpp_python": lc.__version__,
            "llama_cpp_system_info": lc.llama_print_system_info().decode().strip()}


def measure(args):
    load_before, meter = os.getloadavg(), cpu_meter()
    llama, lc = measure_llamacpp(args)
    llama_contention, meter = contention(meter), cpu_meter()
    ponder = run_ponder(args)
    ponder_contention = contention(meter)
    load_after = os.getloadavg()
    pw = ponder["wall_s"]
    report = {
        "workload": "nsample", "n": args.n, "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens, "threads": args.threads, "repeat": args.repeat,
        "temperature": TEMPERATURE,
        "model": str(MODEL.relative_to(ROOT)),
        "machine": machine(lc) | {"loadavg_before": load_before, "loadavg_after": load_after,
                                  "contention": {"llamacpp": llama_contention, "ponder": ponder_contention}},
        "llamacpp": llama,
        "ponder": ponder,
        "ratios": {
            "ponder_wall_over_usual_wall": pw / llama["nsample_usual_wall_s"],
            "ponder_wall_over_batched_wall": pw / llama["nsample_batched_wall_s"],
            "ponder_single_stream_over_llama_decode":
                ponder["single_stream_tokens_per_s"] / llama["decode_tok_s"],
        },
        "targets": {"ponder_wall_over_usual_wall": "<= 0.5", "ponder_wall_over_batched_wall": "<= 0.8",
                    "ponder_single_stream_over_llama_decode": ">= 0.8"},
    }
    print(json.dumps(report, indent=2))


def main():
    args = parse_args()
    if args.in_venv:
        measure(args)
        return
    if not MODEL.exists():
        raise SystemExit(f"{MODEL} is missing: run `bash scripts/setup-models.sh` first")
    python = ensure_venv(args.venv)
    os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:], "--in-venv"])


if __name__ == "__main__":
    main()
