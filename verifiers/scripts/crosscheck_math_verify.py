#!/usr/bin/env python3
"""Cross-check the grader acceptance set with HuggingFace's math-verify.

Runs math-verify (https://pypi.org/project/math-verify/) over
verifiers/tests/fixtures/grader_pairs.jsonl and reports where its verdict differs from the hand
label. With --write it records each verdict in the fixture as "math_verify" (true/false), which
tests/grader_acceptance.rs reads to report math-verify's agreement next to ours.

Setup (once):
    python3 -m venv /tmp/mvenv && /tmp/mvenv/bin/pip install 'math-verify[antlr4_13_2]'
Run:
    /tmp/mvenv/bin/python verifiers/scripts/crosscheck_math_verify.py [--write] [FIXTURE]

How each pair is given to math-verify, as its README and Open-R1's accuracy reward do:
the gold answer wrapped in $...$ (a gold that is a whole GSM8K solution: the text after
"####"; a gold that already holds \\boxed: as is), the prediction as the raw model output, and
verify(gold, prediction) with default settings.
"""

import argparse
import json
import pathlib
import sys

from math_verify import parse, verify

DEFAULT_FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "grader_pairs.jsonl"


def gold_text(gold: str) -> str:
    if "####" in gold:
        gold = gold.rsplit("####", 1)[1].strip()
    if "\\boxed" in gold or "$" in gold:
        return gold
    return f"${gold}$"


def math_verify_verdict(gold: str, pred: str) -> bool:
    try:
        g = parse(gold_text(gold))
        p = parse(pred)
        return bool(verify(g, p))
    except Exception as e:  # math-verify can raise on odd inputs; that is a "no"
        print(f"  math-verify raised {type(e).__name__}: {e}", file=sys.stderr)
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixture", nargs="?", default=str(DEFAULT_FIXTURE))
    ap.add_argument("--write", action="store_true", help="record verdicts in the fixture")
    args = ap.parse_args()

    path = pathlib.Path(args.fixture)
    rows = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    disagreements = []
    changed = []
    for row in rows:
        verdict = math_verify_verdict(row["gold"], row["pred"])
        if row.get("math_verify") is not None and row["math_verify"] != verdict:
            changed.append(row["id"])
        row["math_verify"] = verdict
        if verdict != row["label"]:
            disagreements.append(row)

    n = len(rows)
    agree = n - len(disagreements)
    print(f"math-verify vs hand labels: {agree}/{n} agree ({100.0 * agree / n:.2f}%)")
    for row in disagreements:
        print(f"  {row['id']}: label {row['label']}, math-verify {row['math_verify']}")
        print(f"    gold {row['gold']!r}")
        print(f"    pred {row['pred']!r}")
    if changed:
        print(f"verdicts that changed since the fixture was last written: {changed}")
    if args.write:
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"wrote verdicts to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
