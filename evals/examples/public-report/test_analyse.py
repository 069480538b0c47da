"""The choice rules of analyse.py on synthetic validation rows (standard library only):
`choose` takes the most accurate configuration among every one that fits the budget, ties to
the cheaper, and `defaults` takes `auto` only where it measured more accurate than that choice;
`compare`'s accuracy-vs-spend front weighs every arm on the problems all of them answered.

Run: python3 -m unittest discover -s evals/examples/public-report -p 'test_*.py'
"""
import contextlib
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import analyse  # noqa: E402

BON4 = {"strategy": "best_of_n", "budget": 1024, "params": {"max_tokens": 256, "n": 4}}
DC4 = {"strategy": "deepconf", "budget": 1024, "params": {"max_tokens": 256, "n": 4}}
BON8 = {"strategy": "best_of_n", "budget": 2048, "params": {"max_tokens": 256, "n": 8}}
DC8 = {"strategy": "deepconf", "budget": 2048, "params": {"max_tokens": 256, "n": 8}}


def rows(config, correct, spent, problems=10):
    """`problems` result rows of `config`, the first `correct` of them right."""
    return [{"problem_id": f"p{i}", "strategy": config["strategy"], "budget": config["budget"],
             "seed": 0, "verifier": "none", "params": config.get("params"), "shots": 2,
             "correct": i < correct, "spend": {"spent": spent},
             "run": {"model": {"name": "m.gguf", "sha256": "ab"}}}
            for i in range(problems)]


class ChoiceRules(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, value):
        path = self.root / name
        if name.endswith(".jsonl"):
            path.write_text("".join(json.dumps(r) + "\n" for r in value))
        else:
            path.write_text(json.dumps(value))
        return str(path)

    def run_cmd(self, fn, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fn(*args)
        return json.loads(out.getvalue())

    def shortlist(self):
        return self.write("shortlist.json", {"budgets": {"1024": [BON4, DC4], "2048": [BON8, DC8]}})

    def test_a_lower_budgets_configuration_is_chosen_where_it_measured_best(self):
        runs = self.write("runs.jsonl", rows(BON4, 5, 800) + rows(DC4, 3, 780)
                          + rows(BON8, 4, 1300) + rows(DC8, 4, 1200))
        choice = self.run_cmd(analyse.choose, self.shortlist(), [runs])["budgets"]
        self.assertEqual((choice["1024"]["strategy"], choice["1024"]["budget"]), ("best_of_n", 1024))
        # At 2,048 the 1,024 configuration fits as measured and beat both 2,048 ones.
        self.assertEqual((choice["2048"]["strategy"], choice["2048"]["budget"]), ("best_of_n", 1024))
        # The 2,048 table lists every configuration that fit; the 1,024 one none of 2,048's.
        self.assertEqual(len(choice["2048"]["validation"]), 5)
        self.assertEqual(len(choice["1024"]["validation"]), 3)

    def test_ties_go_to_the_cheaper_and_a_budgets_own_configuration_wins_when_better(self):
        runs = self.write("runs.jsonl", rows(BON4, 3, 800) + rows(DC4, 3, 780)
                          + rows(BON8, 6, 1300) + rows(DC8, 6, 1200))
        choice = self.run_cmd(analyse.choose, self.shortlist(), [runs])["budgets"]
        self.assertEqual(choice["1024"]["strategy"], "deepconf", "3 = 3: the cheaper")
        self.assertEqual((choice["2048"]["strategy"], choice["2048"]["budget"]), ("deepconf", 2048))

    def test_defaults_take_auto_only_where_it_measured_more_accurate(self):
        auto = lambda b: {"strategy": "auto", "budget": b, "params": None}  # noqa: E731
        runs = self.write("runs.jsonl", rows(BON4, 5, 800) + rows(DC4, 3, 780)
                          + rows(BON8, 4, 1300) + rows(DC8, 4, 1200)
                          + rows(auto(1024), 4, 780) + rows(auto(2048), 7, 1200))
        choice = self.write("choice.json", self.run_cmd(analyse.choose, self.shortlist(), [runs]))
        by_budget = self.run_cmd(analyse.defaults, choice, [runs])["by_budget"]
        self.assertEqual([(e["budget"], e["strategy"]) for e in by_budget],
                         [(1024, "best_of_n"), (2048, "auto")])
        self.assertEqual(by_budget[0]["params"], BON4["params"])
        self.assertEqual(by_budget[0]["shots"], analyse.FIXED_SHOTS)
        self.assertNotIn("shots", by_budget[1], "auto takes the server's rule")


class Front(unittest.TestCase):
    def test_arms_are_compared_on_the_problems_all_of_them_answered(self):
        full = {f"p{i}": r for i, r in enumerate(rows(BON4, 2, 800.0, problems=10))}
        # A running arm: 4 problems answered so far, 2 right: better than BON4 on those 4?
        running = {f"p{i}": r for i, r in enumerate(rows(DC4, 2, 700.0, problems=4))}
        points, common = analyse.front_points([("bon", full), ("dc", running)])
        self.assertEqual(common, 4)
        self.assertEqual(points, [("bon", 0.5, 800.0), ("dc", 0.5, 700.0)],
                         "over p0-p3 only: BON4's 2 right are among them")
        self.assertEqual(analyse.front(points), {"dc"}, "as accurate and cheaper")

    def test_no_shared_problem_gives_no_points(self):
        a = {"p0": rows(BON4, 1, 800.0, problems=1)[0]}
        b = {"q0": rows(DC4, 1, 700.0, problems=1)[0]}
        self.assertEqual(analyse.front_points([("a", a), ("b", b)]), ([], 0))


if __name__ == "__main__":
    unittest.main()
