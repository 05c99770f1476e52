from __future__ import annotations

import pytest

from embodied_r.evaluation.metrics import mean_relative_accuracy, score_answer, task_table


@pytest.mark.parametrize("pred,target,expected", [
    (10.0, 10.0, 1.0),    # exact
    (10.5, 10.0, 1.0),    # 5% error passes every threshold (<=, as the reference code)
    (11.0, 10.0, 0.9),    # 10% error fails only θ=0.95
    (14.0, 10.0, 0.3),    # 40%: passes 0.50, 0.55 and 0.60 (boundary inclusive)
    (15.0, 10.0, 0.1),    # 50%: passes 0.50 only (boundary inclusive)
    (16.0, 10.0, 0.0),    # 60%: fails all
    (4.0, 10.0, 0.0),     # 60% under: fails all
    (float("nan"), 10.0, 0.0),  # unusable prediction
])
def test_mean_relative_accuracy(pred: float, target: float, expected: float) -> None:
    assert mean_relative_accuracy(pred, target) == pytest.approx(expected)


def test_mra_rejects_non_positive_target() -> None:
    with pytest.raises(ValueError, match="positive target"):
        mean_relative_accuracy(1.0, 0.0)


def test_score_answer_by_type() -> None:
    assert score_answer("b", "B", "choice") == 1.0
    assert score_answer("C", "B", "choice") == 0.0
    assert score_answer(None, "B", "choice") == 0.0
    assert score_answer(11.0, 10.0, "number") == pytest.approx(0.9)
    assert score_answer("Go  Left", "go left", "open") == 1.0
    with pytest.raises(ValueError):
        score_answer("A", "A", "ranking")


def test_task_table_micro_and_macro_differ_when_tasks_unbalanced() -> None:
    rows = [{"task": "big", "score": 1.0, "parsed_answer": "A"}] * 3 + [
        {"task": "small", "score": 0.0, "parsed_answer": None}]
    table = task_table(rows)
    assert table["tasks"]["big"] == {"n": 3, "score": 1.0, "ci95": [0.4385, 1.0], "unparsed": 0}
    assert table["tasks"]["small"]["unparsed"] == 1
    assert table["overall"]["micro"] == pytest.approx(0.75)  # sample-weighted, the paper's "Avg"
    assert table["overall"]["macro"] == pytest.approx(0.5)   # mean of task means
    assert table["overall"]["unparsed_rate"] == pytest.approx(0.25)
