#!/usr/bin/env python3
"""Records one engine's /v1/completions responses as a fixture for tests/backend_engines.rs.

    python3 scripts/record_backend_fixture.py --url http://127.0.0.1:8000 --engine NAME \
        --version VERSION --source "how it was run" --out tests/fixtures/backends/NAME.json

Sends the SmolLM2/ChatML prompt for "What is 3 + 4?" (Ponder's default system prompt) and keeps
three real responses: `step` (a continuation that ended at the stop string "\n\n" — found by
trying seeds, and recognised by the engine's own field or, where it has none, by its logprob
tokens running on past the text into the stop string), `final` (one that ended at EOS without a
stop string asked for) and `length` (cut by max_tokens=2). Standard library only.
"""
import argparse
import json
import urllib.request

SYSTEM = ("Solve the problem step by step. Separate the steps with a blank line. "
          "Put the final answer in \\boxed{}.")
PROMPT = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nWhat is 3 + 4?<|im_end|>\n"
          "<|im_start|>assistant\n")
STOP = "\n\n"


def post(url, body):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def ended_at_stop(v):
    c = v["choices"][0]
    if c.get("finish_reason") != "stop":
        return False
    for field in ("stop_reason", "matched_stop", "stopping_word"):
        if c.get(field) == STOP:
            return True
    tokens = (c.get("logprobs") or {}).get("tokens") or []
    rest = "".join(tokens)
    return rest.startswith(c["text"]) and rest[len(c["text"]):].startswith(STOP)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--model", default="ponder")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    base = {"model": a.model, "prompt": PROMPT, "temperature": 0.8, "top_p": 1.0, "logprobs": 1}
    step = final = None
    for seed in range(64):
        v = post(a.url, dict(base, max_tokens=48, stop=[STOP], seed=seed))
        if ended_at_stop(v) and v["choices"][0]["text"].strip():
            step = v
            break
    for seed in range(64):
        v = post(a.url, dict(base, max_tokens=160, seed=seed))
        if v["choices"][0].get("finish_reason") == "stop" and not ended_at_stop(v):
            final = v
            break
    length = post(a.url, dict(base, max_tokens=2, seed=0))
    if step is None or final is None:
        raise SystemExit(f"no {'step' if step is None else 'final'} response in 64 seeds")
    out = {"engine": a.engine, "version": a.version, "source": a.source, "stop": STOP,
           "step": step, "final": final, "length": length}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
