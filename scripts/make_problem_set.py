#!/usr/bin/env python3
"""Writes evals/data/ponder-150.jsonl: the project's own problem set (seeded, reproducible).

150 problems with exact answers in five levels, 30 each:
  1  one-step arithmetic                      (the 135M default model often succeeds)
  2  two-step arithmetic and short word problems
  3  multi-step word problems, percents, fractions
  4  linear equations and simple algebra
  5  MATH-style algebra: quadratics, systems, sequences, exponents
Fields: id, problem, answer (LaTeX-free where possible, fractions as a/b), level, subject.
Run: python3 scripts/make_problem_set.py  (rewrites the file identically for the same seed).
"""
import json
import random
from fractions import Fraction
from pathlib import Path

rng = random.Random(20261130)
OUT = Path(__file__).resolve().parent.parent / "evals" / "data" / "ponder-150.jsonl"


def frac(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def term(c: int, var: str, first: bool) -> str:
    """`c·var` as a polynomial term: signs folded, unit coefficients and zero terms dropped."""
    if c == 0:
        return ""
    mag = "" if abs(c) == 1 and var else str(abs(c))
    if first:
        return ("-" if c < 0 else "") + mag + var
    return (" - " if c < 0 else " + ") + mag + var


def linear(a: int, x: str, b: int, y: str) -> str:
    return term(a, x, True) + term(b, y, False)


def level1():
    a, b = rng.randint(2, 60), rng.randint(2, 40)
    op = rng.choice(["+", "-", "*", "/"])
    if op == "+":
        return f"What is {a} + {b}?", a + b, "arithmetic"
    if op == "-":
        a, b = max(a, b), min(a, b)
        return f"What is {a} - {b}?", a - b, "arithmetic"
    if op == "*":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return f"What is {a} times {b}?", a * b, "arithmetic"
    b = rng.randint(2, 12)
    q = rng.randint(2, 12)
    return f"What is {b * q} divided by {b}?", q, "arithmetic"


NAMES = ["Tom", "Sara", "Ali", "Mia", "Ken", "Ana", "Leo", "Zoe"]
ITEMS = ["apples", "books", "coins", "pencils", "stickers", "marbles"]


def level2():
    n, it = rng.choice(NAMES), rng.choice(ITEMS)
    kind = rng.randrange(4)
    if kind == 0:
        a, b, c = rng.randint(5, 30), rng.randint(2, 15), rng.randint(1, 5)
        return f"{n} has {a} {it}, buys {b} more and gives away {c}. How many {it} does {n} have now?", a + b - c, "word"
    if kind == 1:
        boxes, per = rng.randint(2, 9), rng.randint(3, 12)
        return f"A box holds {per} {it}. How many {it} are in {boxes} boxes?", boxes * per, "word"
    if kind == 2:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        c = rng.randint(1, 20)
        return f"What is {a} times {b} plus {c}?", a * b + c, "arithmetic"
    speed, hours = rng.randint(20, 80), rng.randint(2, 5)
    return f"A car drives {speed} miles per hour for {hours} hours. How many miles does it drive?", speed * hours, "word"


def level3():
    kind = rng.randrange(4)
    if kind == 0:
        p, x = rng.choice([10, 20, 25, 50, 75]), rng.choice([40, 60, 80, 120, 200])
        return f"What is {p} percent of {x}?", Fraction(p * x, 100), "percent"
    if kind == 1:
        a, b, c, d = rng.randint(1, 5), rng.randint(2, 6), rng.randint(1, 5), rng.randint(2, 6)
        return f"What is {a}/{b} + {c}/{d}? Give the answer as a fraction in lowest terms.", Fraction(a, b) + Fraction(c, d), "fractions"
    if kind == 2:
        price, qty, paid = rng.randint(2, 9), rng.randint(2, 6), 50
        return f"Pens cost {price} dollars each. Mia buys {qty} pens and pays with a {paid} dollar bill. How much change does she get?", paid - price * qty, "word"
    w, l = rng.randint(3, 15), rng.randint(3, 15)
    return f"A rectangle is {w} cm wide and {l} cm long. What is its perimeter in cm?", 2 * (w + l), "geometry"


def level4():
    kind = rng.randrange(3)
    if kind == 0:
        a, x, b = rng.randint(2, 9), rng.randint(-10, 12), rng.randint(-20, 20)
        return f"Solve for x: {linear(a, 'x', b, '')} = {a * x + b}.", x, "algebra"
    if kind == 1:
        a, b = rng.randint(2, 6), rng.randint(1, 9)
        x = rng.randint(1, 9)
        return f"If f(x) = {a}x^2 + {b}, what is f({x})?", a * x * x + b, "algebra"
    a, c, x = rng.randint(2, 7), rng.randint(1, 9), rng.randint(2, 9)
    return f"Solve for x: {a}(x - {c}) = {a * (x - c)}.".replace("= -", "= -"), x, "algebra"


def level5():
    kind = rng.randrange(4)
    if kind == 0:
        r1, r2 = rng.randint(-9, 9), rng.randint(-9, 9)
        s, p = r1 + r2, r1 * r2
        return (f"What is the sum of the roots of x^2{term(-s, 'x', False)}{term(p, '', False)} = 0?", s, "algebra")
    if kind == 1:
        x, y = rng.randint(-6, 9), rng.randint(-6, 9)
        a, b, c, d = rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 5)
        while a * d - b * c == 0:
            d = rng.randint(1, 6)
        return (f"If {linear(a, 'x', b, 'y')} = {a * x + b * y} and {linear(c, 'x', d, 'y')} = {c * x + d * y}, what is x + y?", x + y, "algebra")
    if kind == 2:
        a1, d, n = rng.randint(1, 9), rng.randint(2, 7), rng.randint(8, 20)
        return (f"An arithmetic sequence starts {a1}, {a1 + d}, {a1 + 2 * d}, ... What is its {n}th term?", a1 + (n - 1) * d, "sequences")
    b, e1, e2 = rng.choice([2, 3, 5]), rng.randint(2, 6), rng.randint(2, 6)
    return (f"Simplify {b}^{e1} * {b}^{e2} / {b}^{e1 + e2 - 2}.", b ** 2, "exponents")


def main():
    rows = []
    for level, make in enumerate([level1, level2, level3, level4, level5], start=1):
        seen = set()
        while len([r for r in rows if r["level"] == level]) < 30:
            problem, answer, subject = make()
            if problem in seen:
                continue
            seen.add(problem)
            ans = frac(answer) if isinstance(answer, Fraction) else str(answer)
            rows.append({"id": f"p150-L{level}-{len(seen):02d}", "problem": problem, "answer": ans, "level": level, "subject": subject})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"wrote {len(rows)} problems to {OUT}")


if __name__ == "__main__":
    main()
