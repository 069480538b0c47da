#!/usr/bin/env python3
"""Writes tests/fixtures/minilm_embeddings.json: all-MiniLM-L6-v2 sentence embeddings of fixed
sentences as the reference implementation (sentence-transformers on PyTorch, CPU) computes
them, so the router's candle encoder can be checked against it (tests/router.rs, cosine >= 0.999).

Run once by hand when the sentences change; the model is read from the local directory the
setup installs (never from a hub):
    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install torch sentence-transformers
    HF_HUB_OFFLINE=1 /tmp/stvenv/bin/python scripts/make_embedding_fixture.py models/all-minilm-l6-v2
"""
import json
import pathlib
import sys

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

SENTENCES = [
    "What is 12 + 7?",
    "How do I reverse a linked list in Rust?",
    "Who wrote the novel War and Peace?",
    "Hi there, how are you doing today?",
    "Prove that the square root of 2 is irrational.",
    "Write a haiku about the first snow of winter.",
    "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies?",
    "The quick brown fox jumps over the lazy dog.",
    "Ünïcödé, émojis 🎉 and 日本語 in one query.",
    "A train leaves at 3:15 pm travelling 80 km/h; another leaves at 4 pm at 100 km/h. When does the second catch up?",
]


def main() -> None:
    model_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "models/all-minilm-l6-v2")
    out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "minilm_embeddings.json"
    model = SentenceTransformer(str(model_dir), device="cpu")
    vectors = model.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_numpy=True, normalize_embeddings=False)
    fixture = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "produced_by": f"scripts/make_embedding_fixture.py (sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, CPU)",
        "max_seq_length": model.max_seq_length,
        "sentences": [{"text": s, "embedding": [round(float(x), 7) for x in v]} for s, v in zip(SENTENCES, vectors)],
    }
    # One sentence per line: a diff shows which vector moved.
    head = {k: v for k, v in fixture.items() if k != "sentences"}
    lines = ",\n".join("  " + json.dumps(x, ensure_ascii=False) for x in fixture["sentences"])
    out.write_text(json.dumps(head, ensure_ascii=False)[:-1] + ',\n "sentences": [\n' + lines + "\n ]\n}\n")
    print(f"wrote {out} ({len(SENTENCES)} sentences, dim {vectors.shape[1]})")


if __name__ == "__main__":
    main()
