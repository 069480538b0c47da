#!/usr/bin/env python3
"""compare.md and plot.svg for evals/examples/budget-forcing (see run.sh): per arm the
parsed-answer rate (the reply, after any thinking block, marks an answer: `\boxed{}`, `####`,
"the answer is", or the forced "Final Answer:"; the grader reads some number from nearly any
text, so "an answer was extracted" says nothing), accuracy with 95% Wilson intervals and the mean
generated tokens; each
budget-forcing arm against truncation at the same thinking budget, paired over the same problems
(95% paired bootstrap interval of the accuracy difference, 10,000 resamples, seed 0); accuracy vs
thinking budget as an SVG. Standard library only."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from paired_stats import bootstrap, paired, rows, wilson  # noqa: E402

BUDGETS = [64, 128, 256]
MINIMA = [128, 224]
PATIENCES = [2, 3]






MARKED = re.compile(r"\\boxed\{|####|answer is|Final Answer:", re.IGNORECASE)


def marked(row):
    """Whether the chosen reply marks its answer (after its thinking block, if any)."""
    texts = [c.get("text") or "" for c in row.get("candidates") or []]
    reply = texts[0].rsplit("</think>", 1)[-1] if texts else ""
    return bool(MARKED.search(reply))


# What an early exit writes after the block: the delimiter and the probed answer, nothing more.
EXITED = re.compile(r"^\s*Final Answer: \\boxed\{.*\}\s*$", re.DOTALL)


def reply(row):
    """The chosen reply after its thinking block."""
    texts = [c.get("text") or "" for c in row.get("candidates") or []]
    return texts[0].rsplit("</think>", 1)[-1] if texts else ""


def summary(rs):
    n = len(rs)
    correct = sum(1 for r in rs.values() if r["correct"])
    parsed = sum(1 for r in rs.values() if marked(r))
    gen = sum(r["spend"]["generated_tokens"] for r in rs.values()) / max(n, 1)
    errors = sum(1 for r in rs.values() if r.get("error"))
    return n, correct, parsed, gen, errors




def svg(points):
    """points: {series: [(M, acc, lo, hi)]} -> an SVG line chart."""
    w, h, left, bottom, top, right = 560, 340, 60, 50, 30, 140
    top_acc = max(hi for s in points.values() for (_, _, _, hi) in s) * 1.15 or 0.1
    xs = {m: left + (i + 0.5) * (w - left - right) / len(BUDGETS) for i, m in enumerate(BUDGETS)}
    y = lambda a: h - bottom - a / top_acc * (h - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2 - 60}" y="18">accuracy vs thinking budget (GSM8K test, report, n=100)</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>']
    for m, x in xs.items():
        out.append(f'<text x="{x - 10}" y="{h - bottom + 16}">{m}</text>')
    out.append(f'<text x="{(w - right) / 2}" y="{h - 12}">thinking tokens (M)</text>')
    for i in range(5):
        a = top_acc * i / 4
        out.append(f'<text x="8" y="{y(a) + 4}">{a:.2f}</text>')
        out.append(f'<line x1="{left}" y1="{y(a)}" x2="{w - right}" y2="{y(a)}" stroke="#ddd"/>')
    colours = {"budget_forcing": "#1f77b4", "truncation": "#d62728"}
    for k, (name, pts) in enumerate(points.items()):
        c = colours.get(name, "black")
        path = " ".join(f"{xs[m] + (k - 0.5) * 6},{y(acc)}" for (m, acc, _, _) in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
        for (m, acc, lo, hi) in pts:
            x = xs[m] + (k - 0.5) * 6
            out.append(f'<line x1="{x}" y1="{y(lo)}" x2="{x}" y2="{y(hi)}" stroke="{c}"/>')
            out.append(f'<circle cx="{x}" cy="{y(acc)}" r="3" fill="{c}"/>')
        out.append(f'<text x="{w - right + 10}" y="{top + 20 + 18 * k}" fill="{c}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main():
    here = Path(sys.argv[1])
    arms = [f"bf-{m}" for m in BUDGETS] + [f"trunc-{m}" for m in BUDGETS] + [f"bf-256-min{k}" for k in MINIMA]
    arms += [f"bf-256-exit{p}" for p in PATIENCES]
    data = {a: rows(here / a) for a in arms if (here / a / "results.jsonl").exists()}
    print("# Budget forcing vs truncation (GSM8K test, report role, 100 problems)\n")
    print("Written by `compare.py` from the rows `run.sh` produced; the default model")
    print("(SmolLM2-135M-Instruct), seed 0, two nearest worked examples, no verifier.\n")
    print("| arm | problems | parsed answers | 95% CI | accuracy | 95% CI | mean generated tokens | errors |")
    print("|---|---|---|---|---|---|---|---|")
    acc = {}
    for a, rs in data.items():
        n, k, parsed, gen, errors = summary(rs)
        pl, ph = wilson(parsed, n)
        al, ah = wilson(k, n)
        acc[a] = (k / max(n, 1), al, ah)
        print(f"| `{a}` | {n} | {parsed / max(n, 1):.2f} | [{pl:.2f}, {ph:.2f}] | {k / max(n, 1):.3f} | [{al:.3f}, {ah:.3f}] | {gen:.1f} | {errors} |")
    print("\n## Budget forcing minus truncation at the same thinking budget (paired)\n")
    print("| M | problems | accuracy difference | 95% paired bootstrap CI |")
    print("|---|---|---|---|")
    for m in BUDGETS:
        a, b = data.get(f"bf-{m}"), data.get(f"trunc-{m}")
        if a and b:
            n, d, lo, hi = paired(a, b)
            print(f"| {m} | {n} | {d:+.3f} | [{lo:+.3f}, {hi:+.3f}] |")
    exits = [f"bf-256-exit{p}" for p in PATIENCES if f"bf-256-exit{p}" in data]
    if exits and "bf-256" in data:
        print("\n## Early exit inside the thinking against budget forcing alone (M 256, paired)\n")
        print("Dynasor-CoT's probe every 32 thinking tokens; the thinking stops once P probes in a row")
        print("agree. Billed tokens count the probes (generated and prefilled) with everything else.\n")
        print("| arm | problems | accuracy difference | 95% CI | mean billed tokens (vs bf-256) | billed difference | 95% CI | exited early |")
        print("|---|---|---|---|---|---|---|---|")
        base = data["bf-256"]
        for a in exits:
            n, d, lo, hi = paired(data[a], base)
            ids = sorted(set(data[a]) & set(base))
            spent = lambda rs: [rs[i]["spend"]["spent"] for i in ids]
            sa, sb = spent(data[a]), spent(base)
            diffs = [x - y for x, y in zip(sa, sb)]
            blo, bhi = bootstrap(diffs)
            early = sum(1 for i in ids if EXITED.match(reply(data[a][i])))
            print(f"| `{a}` | {n} | {d:+.3f} | [{lo:+.3f}, {hi:+.3f}] | {sum(sa) / n:.0f} (vs {sum(sb) / n:.0f}) | {sum(diffs) / n:+.0f} | [{blo:+.0f}, {bhi:+.0f}] | {early} |")
    points = {
        "budget_forcing": [(m, *acc[f"bf-{m}"]) for m in BUDGETS if f"bf-{m}" in acc],
        "truncation": [(m, *acc[f"trunc-{m}"]) for m in BUDGETS if f"trunc-{m}" in acc],
    }
    if all(points.values()):
        (here / "plot.svg").write_text(svg(points))
        print("\n![accuracy vs thinking budget](plot.svg)")


if __name__ == "__main__":
    main()
