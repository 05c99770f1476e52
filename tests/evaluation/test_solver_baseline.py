"""The solver baseline: a method's exact solver reached through the row's method, its applicable share, its
ceiling over the applicable questions only, copies and reasons; a solver's bug is raised, never recorded."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_solver import fake_method, row

from embodied_r.core.solving import Solved
from embodied_r.evaluation.solver_baseline import OTHER_REASONS, solver_predictions, solver_table
from embodied_r.methods import EMBODIED_R, ROBOT_R1, Method

OPTIONS = ["A. left", "B. right", "C. front", "D. back"]


@pytest.fixture
def method() -> Iterator[Method]:
    with fake_method() as registered:
        yield registered


def rows_of_two_tasks() -> list:
    return [
        # A choice task: one copy right, one computed wrong, two the text does not determine.
        row("c1", "direction", "SOLVE B copy", "B", OPTIONS, detail="words"),
        row("c2", "direction", "SOLVE A", "C", OPTIONS, detail="map"),
        row("c3", "direction", "NONE the sofa is in no frame", "D", OPTIONS, detail="words"),
        row("c4", "direction", "NONE the sofa is in no frame", "A", OPTIONS),
        # A numeric task, scored by MRA: 8 for 10 is 0.6, 4 for 4 is 1.
        row("n1", "counting", "SOLVE 8 copy", 10.0, detail="bearings"),
        row("n2", "counting", "SOLVE 4 copy", 4.0, detail="bearings"),
        row("n3", "counting", "NONE no count stated", 3.0, detail="bearings"),
    ]


def test_the_shipped_methods_name_their_solvers() -> None:
    assert EMBODIED_R.solver == "embodied_r.methods.embodied_r.solver:solve_row"
    assert ROBOT_R1.solver is None
    choice = row("r", "t", "SOLVE A", "A", OPTIONS, version="robot_r1_mw_v1")
    assert ROBOT_R1.solve(choice) == Solved(reason="method robot_r1 has no solver")


def test_applicable_share_ceiling_over_applicable_copies_and_reasons(method: Method) -> None:
    table = solver_table(rows_of_two_tasks())
    direction, counting = table["tasks"]["direction"], table["tasks"]["counting"]

    assert (direction["n"], direction["n_applicable"], direction["applicable"]) == (4, 2, 0.5)
    assert direction["ceiling"] == 0.5  # 1 of the 2 applicable, not of the 4
    assert direction["score"] == pytest.approx((1 + 0 + 0.25 + 0.25) / 4)  # not applicable: 1/#options
    assert (direction["copy"], direction["n_copy"]) == ("mixed", 1)
    assert direction["not_applicable"] == {"the sofa is in no frame": 2}
    assert direction["detail"] == {"map": 1, "missing": 1, "words": 2}

    assert (counting["n"], counting["n_applicable"]) == (3, 2) and counting["applicable"] == pytest.approx(2 / 3)
    assert counting["ceiling"] == pytest.approx((0.6 + 1.0) / 2)  # MRA, over the applicable questions
    assert counting["score"] == pytest.approx(1.6 / 3)  # a number not applicable scores 0
    assert (counting["copy"], counting["n_copy"]) == (True, 2)
    assert counting["not_applicable"] == {"no count stated": 1} and counting["detail"] == {"bearings": 3}

    overall = table["overall"]
    assert (overall["n"], overall["n_applicable"], overall["n_copy"]) == (7, 4, 3)
    assert overall["applicable"] == pytest.approx(4 / 7) and overall["ceiling"] == pytest.approx((1 + 0 + 1.6) / 4)
    assert overall["micro"] == pytest.approx((1.5 + 1.6) / 7)
    assert (table["name"], table["status"], table["solvers"]) == ("solver", "ok", {"fake_solver": "fake_solver:solve"})


def test_predictions_say_what_each_row_got(method: Method) -> None:
    by_id = {p["id"]: p for p in solver_predictions(rows_of_two_tasks())}
    assert (by_id["c1"]["parsed_answer"], by_id["c1"]["score"], by_id["c1"]["copy"]) == ("B", 1.0, True)
    assert (by_id["c2"]["parsed_answer"], by_id["c2"]["correct"], by_id["c2"]["copy"]) == ("A", False, False)
    assert (by_id["c3"]["applicable"], by_id["c3"]["reason"], by_id["c3"]["parsed_answer"]) == (
        False, "the sofa is in no frame", None)
    assert by_id["n1"]["score"] == pytest.approx(0.6) and by_id["n1"]["method"] == "fake_solver"
    assert by_id["c4"]["detail"] is None and by_id["n1"]["detail"] == "bearings"


def test_a_task_of_copies_only_or_none_applicable(method: Method) -> None:
    none = solver_table([row("x", "size", "NONE no sizes", 3.0)])["tasks"]["size"]
    assert (none["applicable"], none["ceiling"], none["copy"], none["score"]) == (0.0, None, None, 0.0)
    computed = solver_table([row("y", "dir", "SOLVE C", "C", OPTIONS)])["tasks"]["dir"]
    assert (computed["applicable"], computed["ceiling"], computed["copy"]) == (1.0, 1.0, False)


def test_rows_of_a_method_without_a_solver_are_not_applicable(method: Method) -> None:
    rows = [row("a", "t", "SOLVE B", "B", OPTIONS), row("b", "t", "SOLVE B", "B", OPTIONS, version="robot_r1_mw_v1")]
    t = solver_table(rows)["tasks"]["t"]
    assert (t["n_applicable"], t["ceiling"]) == (1, 1.0)
    assert t["not_applicable"] == {"method robot_r1 has no solver": 1}
    assert t["score"] == pytest.approx((1 + 0.25) / 2)
    assert solver_table(rows)["solvers"] == {"fake_solver": "fake_solver:solve", "robot_r1": None}


def test_the_most_frequent_reasons_are_listed_and_the_rest_counted(method: Method) -> None:
    reasons = ["a", "a", "a", "b", "b", "c", "d", "e", "f", "g"]
    t = solver_table([row(f"r{i}", "t", f"NONE {r}", "A", OPTIONS) for i, r in enumerate(reasons)])["tasks"]["t"]
    assert t["not_applicable"] == {"a": 3, "b": 2, "c": 1, "d": 1, "e": 1, OTHER_REASONS: 2}
    assert sum(t["not_applicable"].values()) == len(reasons)


def test_a_solver_that_raises_is_a_bug_and_propagates(method: Method, tmp_path: Path) -> None:
    from embodied_r.evaluation.analysis import run_baselines

    rows = [row("ok", "t", "SOLVE A", "A", OPTIONS), row("bad", "t", "RAISE", "A", OPTIONS)]
    with pytest.raises(RuntimeError, match="fake solver bug on row bad"):
        solver_table(rows)
    with pytest.raises(RuntimeError, match="fake solver bug on row bad"):
        run_baselines(["solver"], rows, tmp_path, lambda: None, batch_size=1, direct_max_new_tokens=1)
    with pytest.raises(TypeError, match="must return embodied_r.core.solving.Solved"):
        solver_table([row("junk", "t", "JUNK", "A", OPTIONS)])


def test_run_baselines_writes_each_rows_result(method: Method, tmp_path: Path) -> None:
    from embodied_r.evaluation.analysis import run_baselines

    tables = run_baselines(["solver"], rows_of_two_tasks(), tmp_path, lambda: None, batch_size=1,
                           direct_max_new_tokens=1)
    assert tables["solver"]["tasks"]["direction"]["ceiling"] == 0.5
    written = [json.loads(line) for line in (tmp_path / "baselines" / "solver.jsonl").read_text().splitlines()]
    assert [p["id"] for p in written] == ["c1", "c2", "c3", "c4", "n1", "n2", "n3"]
    assert [p["applicable"] for p in written] == [True, True, False, False, True, True, False]


def test_evaluation_reaches_the_solver_only_through_the_method() -> None:
    """The baseline imports ``embodied_r.methods`` (the seam), never a method's own package."""
    import embodied_r.evaluation.solver_baseline as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "embodied_r.methods" in imported
    assert not [name for name in imported if name.startswith("embodied_r.methods.")]
    # Importing it, and solving a row of a method without a solver, loads no method's package either.
    code = ("import sys\nfrom embodied_r.core.records import PromptRow\n"
            "from embodied_r.evaluation.solver_baseline import solver_table\n"
            "meta = {'prompt_version': 'robot_r1_mw_v1'}\n"
            "solver_table([PromptRow('q', 't', [], 'A', 'choice', ['A. x'], meta=meta)])\n"
            "print(sorted(m for m in sys.modules if m.startswith('embodied_r.methods.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
