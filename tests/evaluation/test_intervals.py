"""Intervals of scores and of paired differences: deterministic, with verdicts from the exact paired test."""

from __future__ import annotations

from embodied_r.core.intervals import bootstrap_ci, paired_difference, prediction_difference, score_interval
from embodied_r.core.task_table import task_table


def test_bootstrap_interval_contains_the_mean_and_narrows_with_n() -> None:
    small = bootstrap_ci([1.0, 0.0, 1.0, 0.0])
    large = bootstrap_ci([1.0, 0.0] * 200)
    assert small[0] <= 0.5 <= small[1] and large[0] <= 0.5 <= large[1]
    assert large[1] - large[0] < (small[1] - small[0]) / 4
    assert bootstrap_ci([1.0, 0.0, 1.0, 0.0]) == small  # fixed seed: the same report every time
    assert bootstrap_ci([]) is None


def test_paired_difference_uses_shared_questions_only() -> None:
    before = {f"q{i}": 0.0 for i in range(40)}
    after = {f"q{i}": 1.0 if i < 30 else 0.0 for i in range(40)}
    after["extra"] = 1.0  # not in before: ignored
    diff = paired_difference(before, after)
    assert diff["n"] == 40 and diff["difference"] == 0.75 and diff["verdict"] == "better"
    assert diff["test"] == "sign" and diff["p_value"] == 2 / 2 ** 30 and (diff["improved"], diff["worsened"]) == (30, 0)
    assert 0.55 < diff["ci95"][0] < 0.75 < diff["ci95"][1] < 0.9
    worse = paired_difference(after, before)
    assert worse["verdict"] == "worse" and worse["difference"] == -0.75 and worse["worsened"] == 30
    assert paired_difference({"a": 1.0}, {"b": 1.0})["verdict"] == "no shared questions"


def test_prediction_difference_counts_each_id_once() -> None:
    before = [{"id": "a", "score": 0.0}, {"id": "b", "score": 0.0}, {"id": "a", "score": 1.0}]
    after = [{"id": "a", "score": 1.0}, {"id": "b", "score": 1.0}]
    assert prediction_difference(before, after)["difference"] == 1.0


def test_task_tables_carry_intervals() -> None:
    predictions = [{"task": "t", "score": float(i % 2), "parsed_answer": "A"} for i in range(10)]
    table = task_table(predictions)
    low, high = table["tasks"]["t"]["ci95"]
    assert low < 0.5 < high and table["overall"]["ci95"] == [low, high]


def test_score_interval_is_honest_at_small_n() -> None:
    assert score_interval([1.0])[0] < 0.25  # one right answer says little: not [100, 100]
    assert score_interval([0.0, 1.0] * 50) == [0.4038, 0.5962]  # Wilson, n = 100
    assert score_interval([0.2, 0.4]) is None and score_interval([0.2, 0.4, 0.6]) is not None  # MRA: bootstrap
