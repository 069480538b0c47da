#!/usr/bin/env python3
"""Clients no one here wrote, against a real `ponder serve` on loopback (part of scripts/test.sh).

1. The official `openai` Python client: a chat completion, a streamed one with usage, a strategy
   chosen by model name with budget extensions, a legacy completion, and the proper exception
   classes for bad requests (404 unknown model, 400 over-limit n / budget as in OpenAI and vLLM, 400 bad value).
2. schemathesis against /openapi.json: no 5xx, status codes / content types / bodies as documented.
3. A thinking model's reply, read by the `openai` client: `ponder serve --backend` in front of a
   small stand-in engine (below) that answers `/v1/completions` as a thinking model writes
   (`<think>...</think>` then the answer): the thinking arrives as `reasoning_content` and
   `reasoning` apart from `content`, streamed and not, with `reasoning_tokens` counting it.
4. SIGTERM: each server drains and exits 0.

The server's log (warnings, errors, panics) is printed at the end; a schemathesis failure ends
with schemathesis's own list of failures and errors, so a CI log's tail says what went wrong.

The servers run with small limits (max_tokens, budget, n) so generated requests stay quick;
schemathesis's has the smaller budget cap (128 tokens).
Prints one JSON line of measurements at the end; exits non-zero on any failure.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def start(ponder, *extra, budget=384, exemplars="evals/data/gsm_gen.jsonl"):
    # The worked-example pool is the project's own templated problems (~900, embedded in
    # seconds): the shipped GSM8K pool's 6,338 questions cost a clean clone six minutes of
    # embedding before the first server listened (what loading it checks is a unit test).
    args = [ponder, "serve", "--port", "0", *extra, "--exemplars", exemplars,
            "--max-completion-tokens", "16", "--default-max-tokens", "16",
            "--max-budget-tokens", str(budget), "--max-n", "2", "--max-running", "4", "--max-queue", "64"]
    # The server's log goes to a file, so a failure can end with what the server said about it.
    log = tempfile.NamedTemporaryFile(mode="w+", prefix="ponder-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
    proc.log_path = log.name
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        with open(log.name) as f:
            sys.exit(f"ponder serve did not start: {line!r}\n{f.read()[-5000:]}")
    return proc, line.strip().rsplit(" ", 1)[-1]


def openai_checks(url, results):
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    t = time.time()
    r = client.chat.completions.create(model="ponder", messages=[{"role": "user", "content": "Say hello."}],
                                       max_tokens=8, temperature=0, seed=1)
    results["chat_latency_s"] = round(time.time() - t, 3)
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant", r
    assert isinstance(r.choices[0].message.content, str) and r.usage.completion_tokens > 0, r
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    results["chat_content"] = r.choices[0].message.content

    t = time.time()
    stream = client.chat.completions.create(model="ponder", messages=[{"role": "user", "content": "Say hello."}],
                                            max_tokens=8, temperature=0, seed=1, stream=True,
                                            stream_options={"include_usage": True})
    text, usage, chunks, first = "", None, 0, None
    for chunk in stream:
        chunks += 1
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.time() - t
            text += chunk.choices[0].delta.content
        if chunk.usage is not None:
            usage = chunk.usage
    assert text == r.choices[0].message.content, (text, r.choices[0].message.content)
    assert usage is not None and usage.completion_tokens == r.usage.completion_tokens, usage
    results["stream_chunks"] = chunks
    results["stream_ttft_s"] = round(first or 0, 3)

    s = client.chat.completions.create(model="ponder/self_consistency",
                                       messages=[{"role": "user", "content": "What is 2+3?"}],
                                       extra_body={"budget_tokens": 300, "strategy_params": {"n": 2, "max_tokens": 24}}, seed=2)
    extra = s.model_extra or {}
    assert extra.get("ponder", {}).get("strategy") == "self_consistency", s
    assert extra["ponder"]["spent"] <= 300, extra
    results["strategy_spent"] = extra["ponder"]["spent"]
    results["strategy_reasoning_tokens"] = s.usage.completion_tokens_details.reasoning_tokens

    c = client.completions.create(model="ponder", prompt="1, 2, 3,", max_tokens=4, temperature=0)
    assert c.object == "text_completion" and isinstance(c.choices[0].text, str), c

    errors = {}
    cases = [
        ("unknown_model", openai.NotFoundError, dict(model="gpt-nope")),
        ("n_over_limit", openai.BadRequestError, dict(n=3)),
        ("budget_over_limit", openai.BadRequestError, dict(extra_body={"budget_tokens": 100000})),
        ("bad_temperature", openai.BadRequestError, dict(temperature=9)),
    ]
    for name, exc, kw in cases:
        args = dict(model="ponder", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        args.update(kw)
        try:
            client.chat.completions.create(**args)
        except exc as e:
            assert isinstance(e.body, dict) and e.body.get("message"), e.body
            errors[name] = e.status_code
        else:
            raise AssertionError(f"{name}: expected {exc.__name__}")
    results["openai_errors"] = errors


THINKING_TOKENS = ["<think>", "\n", "Add", " 3", " and", " 4", ".", "\n", "</think>", "\n\n", "7"]


def thinking_engine():
    """A stand-in OpenAI completion server (stdlib only) whose every reply is THINKING_TOKENS."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path != "/v1/completions":
                self.send_response(404)
                self.end_headers()
                return
            offsets, at = [], 0
            for t in THINKING_TOKENS:
                offsets.append(at)
                at += len(t)
            body = json.dumps({
                "id": "cmpl-1", "object": "text_completion", "created": 0, "model": "thinker",
                "choices": [{"index": 0, "text": "".join(THINKING_TOKENS), "finish_reason": "stop",
                             "logprobs": {"tokens": THINKING_TOKENS, "text_offset": offsets,
                                          "token_logprobs": [-0.25] * len(THINKING_TOKENS),
                                          "top_logprobs": [{t: -0.25} for t in THINKING_TOKENS]}}],
                "usage": {"prompt_tokens": 20, "completion_tokens": len(THINKING_TOKENS),
                          "total_tokens": 20 + len(THINKING_TOKENS)}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def thinking_checks(ponder, results):
    import openai

    engine = thinking_engine()
    # No worked examples: the engine behind it is a stand-in that writes the same reply to any prompt.
    proc, url = start(ponder, "--backend", f"http://127.0.0.1:{engine.server_address[1]}", exemplars="none")
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
        messages = [{"role": "user", "content": "What is 3 + 4?"}]
        r = client.chat.completions.create(model="ponder", messages=messages, max_tokens=16)
        m = r.choices[0].message
        extra = m.model_extra or {}
        assert m.content == "7", m
        assert extra.get("reasoning_content") == "\nAdd 3 and 4.\n" == extra.get("reasoning"), m
        assert r.usage.completion_tokens_details.reasoning_tokens == 9, r.usage
        content, thinking = "", ""
        for chunk in client.chat.completions.create(model="ponder", messages=messages, max_tokens=16,
                                                    stream=True):
            if chunk.choices:
                delta = chunk.choices[0].delta
                content += delta.content or ""
                thinking += (delta.model_extra or {}).get("reasoning_content") or ""
        assert (content, thinking) == ("7", "\nAdd 3 and 4.\n"), (content, thinking)
        results["thinking_reasoning_tokens"] = r.usage.completion_tokens_details.reasoning_tokens
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        os.unlink(proc.log_path)
        engine.shutdown()


def schemathesis_checks(url, results, venv_bin):
    # One worker: with two, hypothesis describes strategies (`ast.parse`) on two threads, and the
    # machine's Python 3.11.7 then sometimes raises "SystemError: AST constructor recursion
    # depth mismatch" inside schemathesis (CPython gh-106905, fixed in 3.11.8), failing the run
    # with no request at fault.
    st = os.path.join(venv_bin, "schemathesis")
    cmd = [st, "run", url + "/openapi.json", "--checks",
           "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
           "--max-examples", os.environ.get("PONDER_SCHEMATHESIS_EXAMPLES", "12"), "--phases", "examples,coverage,fuzzing",
           "--workers", "1", "--request-timeout", "120", "--generation-database", "none", "--seed", "1", "--no-color"]
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    results["schemathesis_s"] = round(time.time() - t, 1)
    tail = "\n".join(p.stdout.strip().splitlines()[-25:])
    results["schemathesis_summary"] = [l.strip() for l in p.stdout.splitlines() if "passed" in l or "failed" in l or "test cases" in l][-4:]
    if p.returncode != 0:
        print(p.stdout[-20000:], p.stderr[-5000:], sep="\n")
        # CI shows a log's tail: end with schemathesis's own account of the failures and errors.
        lines = p.stdout.splitlines()
        start = next((i for i, l in enumerate(lines) if l.strip("= ") in ("FAILURES", "ERRORS")), max(len(lines) - 40, 0))
        end = next((i for i, l in enumerate(lines) if l.strip("= ") == "SUMMARY"), len(lines))
        raise AssertionError("schemathesis found failures:\n" + "\n".join(lines[start:end][-60:]))
    print(tail)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ponder", required=True)
    ap.add_argument("--skip-schemathesis", action="store_true")
    a = ap.parse_args()
    results = {}
    thinking_checks(a.ponder, results)
    codes = {}
    proc, url = start(a.ponder)
    results["url"] = url
    try:
        openai_checks(url, results)
    finally:
        codes["openai"] = stop(proc, results, "server_log_lines")
    if not a.skip_schemathesis:
        # Its own server, with a budget cap of 128 tokens: a generated search costs at most that
        # (at 384, its positive cases' searches were nine tenths of the step's time), and the
        # schema it tests says so (the document carries the server's limits).
        proc, url = start(a.ponder, budget=128)
        try:
            schemathesis_checks(url, results, os.path.dirname(sys.executable))
        finally:
            codes["schemathesis"] = stop(proc, results, "schemathesis_server_log_lines")
    results["sigterm_exit"] = codes
    print(json.dumps(results))
    if any(code != 0 for code in codes.values()):
        sys.exit(f"ponder serve did not exit cleanly on SIGTERM: {codes}")


def stop(proc, results, key):
    """SIGTERM: the server drains and exits; its log (warnings, errors and panics only) is
    shown, on success too. Returns its exit code."""
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "killed"
    with open(proc.log_path) as f:
        log = [l.rstrip() for l in f if l.strip()]
    os.unlink(proc.log_path)
    results[key] = len(log)
    if log:
        print("ponder serve's log (warnings, errors):", *log[-30:], sep="\n", flush=True)
    return code


if __name__ == "__main__":
    main()
