#!/usr/bin/env python3
"""The tables of evals/examples/public-report (see run.sh), standard library only.

  shortlist GRID BUDGET...    the three most accurate complete fixed configurations of the fit
                              grid's rows at each budget (ties: the lower mean billed tokens)
  configs FILE...             the configurations of shortlist or choice files, and `sc BUDGET`,
                              as `budget strategies {strategy: params}` lines for run.sh: one
                              line a `ponder-eval run`, each strategy once in a line (so the
                              configurations of a budget share their draws where they can)
  choose SHORTLIST RUN...     per budget the configuration most accurate on the validation
                              runs' rows, pooled (ties: the cheaper), among those shortlisted at
                              that budget or a lower one: a fixed configuration's spend does
                              not grow with the request's budget, so every one measured at a
                              lower budget fits too (the compute-optimal choice is over all
                              that fit, Snell et al. 2024)
  defaults CHOICE RUN...      the server's measured defaults (data/router/defaults.json): per
                              budget `auto` or the validation choice, whichever the validation
                              runs' rows measured more accurate (ties: the cheaper)
  compare CHOICE WORK BUDGET...   report.md from the report runs under WORK

A configuration is (strategy, parameters as run, budget); `auto`'s rows are one arm per budget.
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from paired_stats import bootstrap, wilson  # noqa: E402

SHORTLIST = 3
# Sets with an acceptance target, then those reported without one.
TARGET_SETS = [("gsm8k_test", "GSM8K test (report sample)"), ("asdiv", "ASDiv (report role)"),
               ("math500", "MATH-500 levels 1-3")]
OTHER_SETS = [("amc23", "AMC 2023"), ("aime24", "AIME 2024"), ("aime25", "AIME 2025")]


def read_rows(path):
    """A results file's (or run directory's) rows; a later row of an item replaces an earlier."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.jsonl"
    out = {}
    if not path.exists():
        return []
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                key = (r["problem_id"], r["strategy"], r["budget"], r["seed"], r["verifier"],
                       json.dumps(r.get("params"), sort_keys=True), r.get("shots", 0))
                out[key] = r
    return list(out.values())


def config_of(r):
    return {"strategy": r["strategy"], "budget": r["budget"], "params": r.get("params")}


def name(c):
    if c["strategy"] == "auto":
        return "auto"
    params = ", ".join(f"{k} {v}" for k, v in sorted((c.get("params") or {}).items()))
    return f"{c['strategy']} ({params})"


def name_at(c):
    """`name` with the budget the configuration was measured at."""
    return f"{name(c)} @ {c['budget']}"


def ident(c):
    """A configuration's identity; `auto`'s is its budget (its parameters pin only the load)."""
    if c["strategy"] == "auto":
        return ("auto", c["budget"], "")
    return (c["strategy"], c["budget"], json.dumps(c.get("params"), sort_keys=True))


def by_config(rows):
    """{config identity: {problem id: row}} (errors count as wrong answers)."""
    out = defaultdict(dict)
    for r in rows:
        out[ident(config_of(r))][r["problem_id"]] = r
    return out


def summary(rs):
    n = len(rs)
    k = sum(1 for r in rs if r["correct"])
    spent = sum(r["spend"]["spent"] for r in rs) / max(n, 1)
    return n, k, spent


def ranked(groups, configs):
    """`configs` most accurate first (ties: the lower mean billed tokens, then the name)."""
    def key(c):
        n, k, spent = summary(list(groups[ident(c)].values()))
        return (-k / max(n, 1), spent, name(c))
    return sorted(configs, key=key)


def shortlist(grid, budgets):
    groups = by_config(r for r in read_rows(grid) if r["strategy"] != "auto")
    out = {}
    for b in budgets:
        at = [g for g in groups if g[1] == b]
        if not at:
            sys.exit(f"shortlist: the fit grid has no rows at budget {b} yet")
        full = max(len(groups[g]) for g in at)
        complete = [{"strategy": s, "budget": b, "params": json.loads(p)}
                    for (s, _, p) in at if len(groups[(s, b, p)]) == full]
        best = ranked(groups, complete)[:SHORTLIST]
        for c in best:
            n, k, spent = summary(list(groups[ident(c)].values()))
            c["fit"] = {"problems": n, "correct": k, "mean_billed_tokens": round(spent, 1)}
        out[str(b)] = best
    json.dump({"rule": f"the {SHORTLIST} most accurate complete configurations of the fit grid "
                       "per budget (ties: the lower mean billed tokens)",
               "budgets": out}, sys.stdout, indent=2)
    print()


def sc_config(budget):
    """Self-consistency scaled with the budget as the fit grid runs it: n = budget / 256 samples
    of at most 256 tokens."""
    return {"strategy": "self_consistency", "budget": budget,
            "params": {"max_tokens": 256, "n": budget // 256}}


def configs(sources):
    """Prints run.sh's lines for the configurations of `sources` (files, or `sc:BUDGET`)."""
    every = []
    for src in sources:
        if src.startswith("sc:"):
            every.append(sc_config(int(src[3:])))
            continue
        for cs in json.load(open(src))["budgets"].values():
            every.extend(cs if isinstance(cs, list) else [cs])
    lines = []  # (budget, {strategy: params})
    for c in {ident(c): c for c in every}.values():
        line = next((l for b, l in lines if b == c["budget"] and c["strategy"] not in l), None)
        if line is None:
            line = {}
            lines.append((c["budget"], line))
        line[c["strategy"]] = c["params"]
    for b, line in lines:
        print(b, ",".join(line), json.dumps(line, sort_keys=True))


def choose(short, runs):
    rows = [r for run in runs for r in read_rows(run)]
    groups = by_config(rows)
    out = {}
    listed = json.load(open(short))["budgets"]
    for b in sorted(listed, key=int):
        # Shortlisted at this budget or a lower one: each fits this budget as measured.
        have = [c for lower in listed if int(lower) <= int(b) for c in listed[lower]
                if groups.get(ident(c))]
        if not have:
            sys.exit(f"choose: no validation rows at budget {b}")
        best = ranked(groups, have)[0]
        table = []
        for c in ranked(groups, have):
            n, k, spent = summary(list(groups[ident(c)].values()))
            table.append({"configuration": name_at(c), "problems": n, "correct": k,
                          "mean_billed_tokens": round(spent, 1)})
        auto = groups.get(ident({"strategy": "auto", "budget": int(b)}), {})
        n, k, spent = summary(list(auto.values()))
        table.append({"configuration": f"auto @ {b}", "problems": n, "correct": k,
                      "mean_billed_tokens": round(spent, 1)})
        out[b] = {"strategy": best["strategy"], "budget": best["budget"],
                  "params": best["params"], "validation": table}
    json.dump({"rule": "per budget the configuration most accurate on the validation problems "
                       "of GSM8K train and ASDiv, pooled (ties: the cheaper), among those "
                       "shortlisted at that budget or a lower one",
               "budgets": out}, sys.stdout, indent=2)
    print()


# Worked examples the fixed arms are shown (run.sh's --shots); `auto` takes the server's rule
# (as many as its calibration rows were measured with).
FIXED_SHOTS = 2


def defaults(choice_path, runs):
    """The measured defaults (src/router/defaults.rs's format) from the validation runs."""
    rows = [r for run in runs for r in read_rows(run)]
    if not rows:
        sys.exit("defaults: no validation rows")
    models = {json.dumps(r["run"]["model"], sort_keys=True) for r in rows}
    if len(models) != 1:
        sys.exit(f"defaults: the validation rows ran {len(models)} models")
    groups = by_config(rows)
    by_budget = []
    for b, c in sorted(json.load(open(choice_path))["budgets"].items(), key=lambda x: int(x[0])):
        arms = [a for a in ({"strategy": "auto", "budget": int(b), "params": None}, c)
                if groups.get(ident(a))]
        if not arms:
            sys.exit(f"defaults: no validation rows at budget {b}")
        best = ranked(groups, arms)[0]
        n, k, spent = summary(list(groups[ident(best)].values()))
        entry = {"budget": int(b), "strategy": best["strategy"], "params": best["params"]}
        if best["strategy"] != "auto":
            entry["shots"] = FIXED_SHOTS
        entry.update({"accuracy": round(k / n, 4), "mean_spent": round(spent, 1)})
        by_budget.append(entry)
    json.dump({"format": 1, "model": json.loads(models.pop()),
               "command": "bash evals/examples/public-report/run.sh defaults",
               "problems": sorted({r["problem_id"] for r in rows}),
               "by_budget": by_budget}, sys.stdout, indent=2)
    print()


def paired_line(label, a, b):
    ids = sorted(set(a) & set(b))
    if not ids:
        return f"| {label} | 0 | | |"
    diffs = [int(a[i]["correct"]) - int(b[i]["correct"]) for i in ids]
    lo, hi = bootstrap(diffs)
    return f"| {label} | {len(ids)} | {sum(diffs) / len(ids):+.3f} | [{lo:+.3f}, {hi:+.3f}] |"


def front(points):
    """Names of the points (name, accuracy, spend) no other point dominates."""
    return {p[0] for p in points
            if not any(q[1] >= p[1] and q[2] <= p[2] and (q[1] > p[1] or q[2] < p[2])
                       for q in points)}


def front_points(arms):
    """(points, problems) for `front`: each arm's (label, accuracy, mean spend) over the problems
    every arm answered, so an arm still running is not compared on other problems than the
    rest; `arms` is [(label, {problem key: row})], problems the count they share."""
    common = set.intersection(*(set(rows) for _, rows in arms)) if arms else set()
    if not common:
        return [], 0
    points = []
    for label, rows in arms:
        n, k, spent = summary([rows[i] for i in common])
        points.append((label, k / n, spent))
    return points, len(common)


def compare(choice_path, work, budgets):
    choice = json.load(open(choice_path))["budgets"]
    work = Path(work)
    arms = {}
    for b in budgets:
        c = choice[str(b)]
        arms[b] = [("auto", ident({"strategy": "auto", "budget": b})),
                   (f"best on validation: {name_at(c)}", ident(c)),
                   (f"self_consistency (n {b // 256}, max_tokens 256)", ident(sc_config(b)))]
    sets = {s: by_config(read_rows(work / f"report-{s}")) for s, _ in TARGET_SETS + OTHER_SETS}
    print("# `auto` on public report problems\n")
    print("Written by `analyse.py compare` from the runs of `run.sh`: the default model")
    print("(SmolLM2-135M-Instruct), seed 0, in-process; `auto` as `ponder serve` runs it with")
    print("the shipped router, the fixed arms with the two nearest worked examples; no verifier.")
    print("Accuracy with its 95% Wilson interval; billed tokens are the mean per problem.\n")
    for b in budgets:
        print(f"## Budget {b}\n")
        print("| set | arm | problems | accuracy | 95% CI | mean billed tokens |")
        print("|---|---|---:|---:|---|---:|")
        for s, title in TARGET_SETS + OTHER_SETS:
            for label, key in arms[b]:
                rs = list(sets[s].get(key, {}).values())
                if not rs:
                    continue
                n, k, spent = summary(rs)
                lo, hi = wilson(k, n)
                print(f"| {title} | {label} | {n} | {k / n:.3f} | [{lo:.3f}, {hi:.3f}] | "
                      f"{spent:.0f} |")
        print("\n### Paired differences (same problems; 95% bootstrap interval)\n")
        print("| comparison | problems | accuracy difference | 95% CI |")
        print("|---|---:|---:|---|")
        auto_key, best_key, sc_key = (k for _, k in arms[b])
        for s, title in TARGET_SETS:
            print(paired_line(f"{title}: auto − best on validation",
                              sets[s].get(auto_key, {}), sets[s].get(best_key, {})))
        pooled = {s: sets[s] for s in ("gsm8k_test", "asdiv")}
        a = {i: r for g in pooled.values() for i, r in g.get(auto_key, {}).items()}
        c = {i: r for g in pooled.values() for i, r in g.get(sc_key, {}).items()}
        print(paired_line("GSM8K test + ASDiv: auto − self_consistency", a, c))
        points, common = front_points(
            [(label, {(s, i): r for s, _ in TARGET_SETS
                      for i, r in sets[s].get(key, {}).items()}) for label, key in arms[b]])
        on = front(points)
        if not common:
            print("\nAccuracy-vs-spend front: no problem of the sets with a target has been "
                  "answered by every arm yet\n")
            continue
        print(f"\nAccuracy-vs-spend front over the {common} problems of the sets with a target "
              "that every arm answered, pooled: " +
              ", ".join(f"{p[0]} ({p[1]:.3f} @ {p[2]:.0f}){' on the front' if p[0] in on else ''}"
                        for p in points) + "\n")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "shortlist":
        shortlist(args[0], [int(b) for b in args[1:]])
    elif cmd == "configs":
        configs(args)
    elif cmd == "choose":
        choose(args[0], args[1:])
    elif cmd == "defaults":
        defaults(args[0], args[1:])
    elif cmd == "compare":
        compare(args[0], args[1], [int(b) for b in args[2:]])
    else:
        sys.exit(f"unknown command {cmd}: shortlist, configs, choose, defaults or compare")


if __name__ == "__main__":
    main()
