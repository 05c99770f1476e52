from __future__ import annotations

import pytest

from embodied_r.core.scoring import mean_relative_accuracy, score_answer
from embodied_r.core.task_table import task_table


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


def reference_mra(prediction: float, target: float) -> float:
    """VSI-Bench's reference MRA, written from its definition: thresholds
    np.linspace(.5, .95, int((.95 - .5) / .05 + 2)), a hit when abs(p - t) / t <= 1 - θ in float64."""
    import numpy as np

    conf = np.linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))
    return float(np.mean(np.abs(np.float64(prediction) - target) / np.float64(target) <= 1 - conf))


def test_mra_equals_the_reference_on_a_dense_grid() -> None:
    import numpy as np

    pairs = [(float(p), float(t)) for t in range(1, 41) for p in range(0, 2 * t + 2)]  # counts, as integers
    rng = np.random.default_rng(0)
    targets = rng.uniform(0.2, 30.0, 400)  # distances and sizes in metres, room areas
    factors = rng.uniform(0.0, 2.2, 400)
    pairs += [(float(t * f), float(t)) for t, f in zip(targets, factors)]
    # Predictions placed on each threshold's boundary (and one ulp either side), where rounding decides.
    for t in (0.7, 1.0, 2.5, 3.3, 10.0, 17.5):
        for theta in np.linspace(0.5, 0.95, 10):
            for sign in (1, -1):
                edge = t + sign * t * (1 - theta)
                pairs += [(float(np.nextafter(edge, -np.inf)), t), (float(edge), t),
                          (float(np.nextafter(edge, np.inf)), t)]
    differing = [(p, t) for p, t in pairs if mean_relative_accuracy(p, t) != reference_mra(p, t)]
    assert len(pairs) > 2000 and differing == []
    assert mean_relative_accuracy(8.0, 10.0) == 0.6  # the reference's value (a tolerance would give 0.7)


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


def test_official_embodied_r_parser_accuracy_beside_ours() -> None:
    from embodied_r.evaluation.reference_names import embodied_r_official

    predictions = [
        # both parsers read B
        {"task": "t", "answer_type": "choice", "answer": "B", "parsed_answer": "B", "completion": "<answer>B</answer>"},
        # the official script reads the first <answer> letter; ours the last answer block
        {"task": "t", "answer_type": "choice", "answer": "C", "parsed_answer": "C",
         "completion": "<answer>A</answer> <answer>C</answer>"},
        # no tags: the official script falls back to the last "X." in the text
        {"task": "u", "answer_type": "choice", "answer": "D", "parsed_answer": None, "completion": "I pick D."},
        {"task": "u", "answer_type": "number", "answer": 3.0, "parsed_answer": 3.0, "completion": "<answer>3</answer>"},
    ]
    table = embodied_r_official(predictions)
    assert table["t_accuracy"] == 50.0 and table["u_accuracy"] == 100.0
    assert table["total_accuracy"] == 200 / 3 and table["parser_disagreements"] == 2
    assert embodied_r_official([predictions[-1]]) is None  # numeric questions are not the script's
