#!/usr/bin/env python3
"""Cross-check the grader acceptance set with HuggingFace's math-verify.

Runs math-verify (https://pypi.org/project/math-verify/, the release pinned in
verifiers/scripts/math-verify-requirements.txt) over verifiers/tests/fixtures/grader_pairs.jsonl.

Modes:
  (default)  report: print math-verify's agreement with the hand labels, per category, and every
             pair where it disagrees with the label, with the reason recorded for it.
  --check    as the report, and fail (exit 1) when a recorded "math_verify" verdict differs from
             the live one, when a pair has no recorded verdict, or when a pair where math-verify
             disagrees with the label has no "math_verify_note" saying why. CI runs this
             (scripts/test.sh).
  --write    record the live verdicts in the fixture as "math_verify" (true/false), which
             tests/grader_acceptance.rs reads to report math-verify's agreement next to ours.
             Notes are kept; write a "math_verify_note" by hand for each new disagreement.

Setup (once):
    python3 -m venv /tmp/mvenv
    /tmp/mvenv/bin/pip install -r verifiers/scripts/math-verify-requirements.txt
Run:
    /tmp/mvenv/bin/python verifiers/scripts/crosscheck_math_verify.py [--check | --write] [FIXTURE]

How each pair is given to math-verify, as its README and Open-R1's accuracy reward do:
the gold answer wrapped in $...$ (a gold that is a whole GSM8K solution: the text after
"####"; a gold that already holds \\boxed: as is), the prediction as the raw model output, and
verify(gold, prediction) with default settings.
"""

import argparse
import collections
import json
import pathlib
import sys

from math_verify import parse, verify

DEFAULT_FIXTURE = (
    pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "grader_pairs.jsonl"
)


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
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("fixture", nargs="?", default=str(DEFAULT_FIXTURE))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="record verdicts in the fixture")
    mode.add_argument(
        "--check", action="store_true", help="fail when recorded verdicts or reasons are stale"
    )
    args = ap.parse_args()

    path = pathlib.Path(args.fixture)
    rows = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    disagreements = []
    changed = []
    unrecorded = []
    per_category = collections.defaultdict(lambda: [0, 0])
    for row in rows:
        verdict = math_verify_verdict(row["gold"], row["pred"])
        recorded = row.get("math_verify")
        if recorded is None:
            unrecorded.append(row["id"])
        elif recorded != verdict:
            changed.append(f"{row['id']} (recorded {recorded}, live {verdict})")
        row["math_verify"] = verdict
        counts = per_category[row["category"]]
        counts[0] += 1
        if verdict == row["label"]:
            counts[1] += 1
        else:
            disagreements.append(row)

    n = len(rows)
    agree = n - len(disagreements)
    print(f"math-verify vs hand labels: {agree}/{n} agree ({100.0 * agree / n:.2f}%)")
    for category, (total, ok) in sorted(per_category.items()):
        print(f"  {category:22} {ok:4}/{total:<4} {100.0 * ok / total:6.2f}%")
    print("pairs where math-verify disagrees with the hand label, and why:")
    unexplained = []
    for row in disagreements:
        note = row.get("math_verify_note")
        if not note:
            unexplained.append(row["id"])
        print(f"  {row['id']}: label {row['label']}, math-verify {row['math_verify']}")
        print(f"    gold {row['gold']!r}")
        print(f"    pred {row['pred']!r}")
        print(f"    why: {note or '(no math_verify_note recorded)'}")
    stale_notes = [r["id"] for r in rows if r.get("math_verify_note") and r not in disagreements]
    if changed:
        print(f"verdicts that differ from the fixture: {changed}")
    if args.write:
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"wrote verdicts to {path}")
        return 0
    if args.check:
        problems = []
        if changed:
            problems.append(f"{len(changed)} recorded verdicts differ from math-verify's")
        if unrecorded:
            problems.append(f"no recorded verdict for {unrecorded}")
        if unexplained:
            problems.append(f"disagreements without a math_verify_note: {unexplained}")
        if stale_notes:
            problems.append(f"math_verify_note on pairs math-verify now gets right: {stale_notes}")
        if problems:
            print("FAILED: " + "; ".join(problems))
            return 1
        print("ok: every recorded verdict matches math-verify, every disagreement has a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
