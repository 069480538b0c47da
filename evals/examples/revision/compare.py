#!/usr/bin/env python3
"""compare.md for evals/examples/revision (see run.sh): per arm the accuracy with a 95% Wilson
interval, the mean billed tokens (generated + prefill computed + verifier) and attempts per
problem; each revision arm minus self-consistency and minus best-of-N, paired over the same
problems (95% paired bootstrap interval of the accuracy difference, 10,000 resamples, seed 0).
Standard library only."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from paired_stats import paired, rows, wilson  # noqa: E402

ARMS = {
    "sc": "self_consistency, n 4",
    "bon": "best_of_n, n 4 (confidence)",
    "rev-2x2": "revision, 2 chains x 2 attempts",
    "rev-1x4": "revision, 1 chain x 4 attempts",
}


def main():
    here = Path(sys.argv[1])
    data = {a: rows(here / a) for a in ARMS if (here / a / "results.jsonl").exists()}
    print("# Sequential revision vs parallel sampling (GSM8K test, report role, 100 problems)\n")
    print("Written by `compare.py` from the rows `run.sh` produced; the default model")
    print("(SmolLM2-135M-Instruct), seed 0, two nearest worked examples, no verifier, a binding")
    print("budget of 1,024 billed tokens per problem.\n")
    print("| arm | configuration | problems | accuracy | 95% CI | oracle (right answer among attempts) | mean billed tokens | mean attempts | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for a, rs in data.items():
        n = len(rs)
        k = sum(1 for r in rs.values() if r["correct"])
        oracle = sum(1 for r in rs.values() if (r.get("candidates_correct") or 0) > 0)
        lo, hi = wilson(k, n)
        billed = sum(r["spend"]["spent"] for r in rs.values()) / max(n, 1)
        attempts = sum(len(r.get("candidate_answers") or []) for r in rs.values()) / max(n, 1)
        errors = sum(1 for r in rs.values() if r.get("error"))
        print(f"| `{a}` | {ARMS[a]} | {n} | {k / max(n, 1):.3f} | [{lo:.3f}, {hi:.3f}] | {oracle / max(n, 1):.3f} | {billed:.0f} | {attempts:.2f} | {errors} |")
    print("\n## Revision minus parallel sampling (paired, same problems)\n")
    print("| revision arm | against | problems | accuracy difference | 95% paired bootstrap CI |")
    print("|---|---|---|---|---|")
    for rev in ("rev-2x2", "rev-1x4"):
        for base in ("sc", "bon"):
            a, b = data.get(rev), data.get(base)
            if a and b:
                n, d, lo, hi = paired(a, b)
                print(f"| `{rev}` | `{base}` | {n} | {d:+.3f} | [{lo:+.3f}, {hi:+.3f}] |")


if __name__ == "__main__":
    main()
