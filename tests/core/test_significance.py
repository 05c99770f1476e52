"""Exact paired tests decide before/after verdicts; seeds are pooled as samples only when nothing else differs."""

from __future__ import annotations

import itertools
import math

import pytest

from embodied_r.core import significance
from embodied_r.core.intervals import format_comparison, paired_difference
from embodied_r.core.significance import across_seeds, check_poolable, sign_flip_test, sign_test, t_quantile_975


def accuracy_pair(n: int, improved: int, worsened: int) -> tuple[dict[str, float], dict[str, float]]:
    """0/1 scores of ``n`` questions: the first ``improved`` go 0 -> 1, the next ``worsened`` go 1 -> 0."""
    before = {f"q{i}": 0.0 for i in range(n)}
    after = dict(before)
    for i in range(improved):
        after[f"q{i}"] = 1.0
    for i in range(improved, improved + worsened):
        before[f"q{i}"] = 1.0
    return before, after


# ---------------------------------------------------------------------------------------------------
# Accuracy: the sign test on discordant pairs
# ---------------------------------------------------------------------------------------------------


def test_one_improved_question_gives_no_verdict() -> None:
    diff = paired_difference({"a": 0.0}, {"a": 1.0})
    assert diff["ci95"] == [1.0, 1.0]  # the bootstrap claims certainty; the verdict does not follow it
    assert diff["verdict"] == "too few differing answers" and diff["p_value"] == 1.0
    assert (diff["test"], diff["improved"], diff["worsened"]) == ("sign", 1, 0)


def test_four_improved_of_160_is_too_few() -> None:
    diff = paired_difference(*accuracy_pair(160, 4, 0))
    assert diff["p_value"] == 0.125 and diff["verdict"] == "too few differing answers"
    assert diff["ci95"][0] > 0  # the old interval verdict would have said "better"


def test_twenty_improved_two_worse_of_160_is_better() -> None:
    diff = paired_difference(*accuracy_pair(160, 20, 2))
    expected = 2 * sum(math.comb(22, k) for k in range(3)) / 2 ** 22
    assert diff["p_value"] == pytest.approx(expected) and diff["p_value"] < 0.05
    assert diff["verdict"] == "better" and (diff["improved"], diff["worsened"], diff["n"]) == (20, 2, 160)
    assert format_comparison(diff).endswith("p < 0.001, better (20 improved, 2 worse of 160)")


def test_worse_and_unchanged_verdicts() -> None:
    worse = paired_difference(*accuracy_pair(160, 2, 15))
    assert worse["verdict"] == "worse" and worse["p_value"] < 0.05 and worse["difference"] < 0
    mixed = paired_difference(*accuracy_pair(160, 6, 4))
    assert mixed["verdict"] == "no measurable change" and mixed["p_value"] == pytest.approx(0.75390625)
    assert "p = 0.754, no measurable change (6 improved, 4 worse of 160)" in format_comparison(mixed)


def test_six_differing_answers_can_decide() -> None:
    # 2 * 0.5**6 = 0.031 < 0.05: six discordant pairs all one way is the smallest "better".
    assert paired_difference(*accuracy_pair(20, 6, 0))["verdict"] == "better"
    assert paired_difference(*accuracy_pair(20, 5, 0))["verdict"] == "too few differing answers"


def test_sign_test_is_symmetric_and_capped_at_one() -> None:
    assert sign_test(2, 20) == sign_test(20, 2)
    assert sign_test(0, 0) == 1.0 and sign_test(5, 5) == 1.0


# ---------------------------------------------------------------------------------------------------
# MRA: the sign-flip permutation test
# ---------------------------------------------------------------------------------------------------


def test_sign_flip_enumeration_matches_a_hand_count() -> None:
    differences = [0.3, 0.2, -0.1, 0.0]  # the zero cannot flip: 2^3 patterns, observed sum 0.4
    # By hand, the 8 sums of ±0.3 ±0.2 ±0.1 are 0.6, 0.4, 0.2, 0.0, 0.0, -0.2, -0.4, -0.6:
    # four have |sum| >= 0.4, so p = 4 / 8.
    p_value, method = sign_flip_test(differences)
    assert method == "exact" and p_value == 0.5
    # The same count, enumerated independently.
    sums = [sum(s * d for s, d in zip(signs, differences[:3], strict=True))
            for signs in itertools.product((1, -1), repeat=3)]
    assert sum(abs(x) >= 0.4 - 1e-12 for x in sums) / 8 == p_value
    assert sign_flip_test([0.3, 0.2, 0.1])[0] == 0.25  # only all-plus and all-minus reach 0.6


def test_mra_comparison_uses_the_sign_flip_test() -> None:
    before = {f"q{i}": 0.5 for i in range(12)}
    after = {f"q{i}": 0.5 + (0.1 + 0.02 * i if i < 8 else 0.0) for i in range(12)}
    diff = paired_difference(before, after)
    # 8 positive differences, no negative: only the all-plus and all-minus patterns reach |sum|.
    assert diff["test"] == "sign-flip" and diff["method"] == "exact"
    assert diff["p_value"] == pytest.approx(2 / 2 ** 8) and diff["verdict"] == "better"
    assert (diff["improved"], diff["worsened"]) == (8, 0)
    few = paired_difference({"a": 0.2, "b": 0.4}, {"a": 0.9, "b": 0.8})
    assert few["test"] == "sign-flip" and few["verdict"] == "too few differing answers"


def test_mra_with_mixed_signs_is_no_measurable_change() -> None:
    before = {f"q{i}": 0.5 for i in range(10)}
    after = {f"q{i}": 0.5 + (0.1 if i % 2 else -0.08) for i in range(10)}
    diff = paired_difference(before, after)
    assert diff["verdict"] == "no measurable change" and diff["p_value"] > 0.05


def test_many_differences_use_a_seeded_monte_carlo(monkeypatch: pytest.MonkeyPatch) -> None:
    differences = [0.1 + 0.01 * i for i in range(25)] + [-0.05] * 5
    p_value, method = sign_flip_test(differences)
    assert method == f"monte carlo ({significance.MONTE_CARLO_FLIPS} flips, seed 0)"
    assert significance.MONTE_CARLO_FLIPS >= 20_000
    assert 0 < p_value < 0.001 and sign_flip_test(differences) == (p_value, method)  # reproducible
    # Where enumeration is still possible, the Monte Carlo agrees with it.
    small = [0.3, -0.2, 0.25, 0.1, -0.05, 0.15, 0.2, -0.1, 0.05, 0.12]
    exact, _ = sign_flip_test(small)
    monkeypatch.setattr(significance, "EXACT_FLIP_LIMIT", 5)
    sampled, method = sign_flip_test(small)
    assert method.startswith("monte carlo") and sampled == pytest.approx(exact, abs=0.01)


# ---------------------------------------------------------------------------------------------------
# Seeds as the unit
# ---------------------------------------------------------------------------------------------------


def test_across_seeds_is_a_t_interval_over_seeds() -> None:
    result = across_seeds([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)
    assert result["n_seeds"] == 5 and result["mean"] == 3.0
    assert result["ci95"] == pytest.approx([3 - half, 3 + half], abs=1e-3)
    assert (result["better_in"], result["worse_in"], result["verdict"]) == (5, 0, "better")


def test_across_seeds_verdicts() -> None:
    split = across_seeds([0.19, -0.02, 0.01, -0.03])  # one seed read, the others did not
    assert split["verdict"] == "no measurable change" and (split["better_in"], split["worse_in"]) == (2, 2)
    assert across_seeds([-0.1, -0.12, -0.09])["verdict"] == "worse"
    assert across_seeds([0.2])["verdict"] == "too few seeds" and across_seeds([0.2])["ci95"] is None
    assert across_seeds([])["n_seeds"] == 0


def test_seeds_that_all_differ_alike_decide_only_with_every_seed_s_own_test() -> None:
    # One question worse on each of five seeds: a zero-width interval, but no seed's own test found a change.
    alike = across_seeds([-1 / 44] * 5, ["no measurable change"] * 5)
    assert alike["degenerate"] and alike["verdict"] == "no measurable change"
    assert across_seeds([-1 / 44] * 5)["verdict"] == "no measurable change"  # no seed tests given
    assert across_seeds([0.25] * 3, ["better"] * 3)["verdict"] == "better"
    assert across_seeds([0.25] * 3, ["better", "better", "no measurable change"])["verdict"] == "no measurable change"
    spread = across_seeds([0.25, 0.26, 0.24], ["no measurable change"] * 3)
    assert spread["verdict"] == "better" and "degenerate" not in spread  # a real interval: the seeds' tests aside
    assert "degenerate" not in across_seeds([0.0, 0.0])  # no difference at all: nothing to decide


def test_t_quantiles() -> None:
    assert t_quantile_975(1) == 12.7062 and t_quantile_975(30) == 2.0423
    assert abs(t_quantile_975(31) - 2.0395) < 1e-4 and abs(t_quantile_975(10_000) - 1.9602) < 1e-4
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_check_poolable_refuses_a_learning_rate_difference() -> None:
    runs = {"seed0": {"learning_rate": 5e-5, "seed": 0, "grpo": {"beta": 0.04}},
            "seed1": {"learning_rate": 1e-4, "seed": 1, "grpo": {"beta": 0.04}}}
    with pytest.raises(ValueError, match=r"seed1 vs seed0: learning_rate \(0.0001 vs 5e-05\)"):
        check_poolable(runs)


def test_check_poolable_compares_nested_settings_and_passes_seed_only() -> None:
    runs = {"a": {"learning_rate": 5e-5, "seed": 0, "grpo": {"beta": 0.04, "seed": 3}},
            "b": {"learning_rate": 5e-5, "seed": 1, "grpo": {"beta": 0.04, "seed": 4}}}
    check_poolable(runs)  # only seeds differ
    runs["b"]["grpo"]["beta"] = 0.0
    runs["b"]["steps"] = 40
    with pytest.raises(ValueError, match=r"grpo\.beta \(0\.0 vs 0\.04\), steps \(40 vs missing\)"):
        check_poolable(runs)
