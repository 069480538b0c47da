#!/usr/bin/env python3
"""Writes tests/fixtures/smollm2_token_ids.json: token ids of fixed strings as llama.cpp
tokenizes them with SmolLM2's GGUF, so our GGUF-built tokenizer can be checked against it.

Run once by hand when the strings change (llama-cpp-python builds llama.cpp from source):
    python3 -m venv /tmp/lcp && /tmp/lcp/bin/pip install llama-cpp-python
    /tmp/lcp/bin/python scripts/make_tokenizer_fixture.py models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import pathlib
import sys

import llama_cpp

STRINGS = [
    "Hello, world!",
    "What is 2+3?",
    "The answer is \\boxed{42}.",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\n\n\nmany",
    "1234567890 and 3.14159 and -0.5e10",
    "Ünïcödé: naïve café, Straße, Ελληνικά, русский",
    "日本語のテキストと中文文本",
    "emoji 🎉🚀 and ZWJ 👩‍👩‍👧",
    "def f(x):\n    return x**2  # square",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "don't won't it's we've they're I'm you'll he'd",
    "$\\frac{1}{2} + \\sqrt{x^2+1}$",
    "https://example.com/path?query=1&b=2",
    "ALL CAPS SHOUTING and MiXeD cAsE",
    "a" * 40,
    "   ",
    "price: $1,000.00 (approx. 20%)",
    "<|endoftext|>after end",
    "Step 1: Let x = 5.\nStep 2: Then 2x = 10.",
]


def main() -> None:
    model = pathlib.Path(sys.argv[1])
    llm = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
    cases = [
        {"text": s, "ids": llm.tokenize(s.encode("utf-8"), add_bos=False, special=True)}
        for s in STRINGS
    ]
    out = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/smollm2_token_ids.json"
    lines = ",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases)
    producer = json.dumps(f"llama-cpp-python {llama_cpp.__version__}")
    out.write_text(f'{{"producer": {producer},\n "cases": [\n{lines}\n]}}\n')
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
