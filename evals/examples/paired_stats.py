"""The statistics the examples' compare.py scripts report, standard library only: a result
directory's rows by problem, a 95% Wilson interval for a share, and the paired bootstrap interval
of an accuracy difference over the problems two arms share (10,000 resamples, seed 0)."""
import json
import math
import random


def rows(path):
    """`path/results.jsonl`'s rows by problem id (a later row of a problem replaces an earlier)."""
    with open(path / "results.jsonl") as f:
        out = {}
        for line in f:
            r = json.loads(line)
            out[r["problem_id"]] = r
        return out


def wilson(k, n, z=1.96):
    """The 95% Wilson score interval of k successes in n."""
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def paired(a, b, resamples=10_000):
    """Arm `a` minus arm `b` over their shared problems: (problems, accuracy difference, 95%
    bootstrap interval low, high)."""
    ids = sorted(set(a) & set(b))
    diffs = [int(a[i]["correct"]) - int(b[i]["correct"]) for i in ids]
    lo, hi = bootstrap(diffs, resamples)
    return len(ids), sum(diffs) / len(diffs), lo, hi


def bootstrap(values, resamples=10_000):
    """The 95% bootstrap interval of the mean of `values` (seed 0)."""
    rng = random.Random(0)
    means = sorted(
        sum(values[rng.randrange(len(values))] for _ in values) / len(values) for _ in range(resamples)
    )
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]
