"""The reference harness's per-question rules (lmms-eval 0.7.3), against values worked out by hand from
its definitions, and beside our parser where the two differ on purpose."""

from __future__ import annotations

import pytest

from embodied_r.core.scoring import score_completion
from embodied_r.evaluation.reference_rules import (
    mvbench_answer,
    mvbench_item_score,
    reference_text,
    vsibench_choice_score,
    vsibench_number,
    vsibench_number_score,
)

OPTIONS = ["A. left", "B. right", "C. back"]


@pytest.mark.parametrize("text,gold,reference,ours", [
    ("B", "B", 1.0, 1.0),
    ("B.", "B", 1.0, 1.0),
    ("b", "B", 1.0, 1.0),
    ("B. right", "B", 1.0, 1.0),
    ("(B)", "B", 0.0, 1.0),          # the token is "(B)"
    ("**B**", "B", 0.0, 1.0),
    ("Option B", "B", 0.0, 1.0),     # the token is "Option"
    ("B: right", "B", 0.0, 1.0),     # the token is "B:"
    ("right", "B", 0.0, 1.0),        # the option's text alone
    ("A or B", "A", 1.0, 0.0),       # the reference takes "A"; ours reads no single choice
    ("B\nright", "B", 0.0, 1.0),     # split on spaces only: the token is "B\nright"
    ("", "B", 0.0, 0.0),
])
def test_vsibench_choice_rule_against_ours(text: str, gold: str, reference: float, ours: float) -> None:
    assert vsibench_choice_score(text, gold) == reference
    assert score_completion(f"<answer>{text}</answer>", gold, "choice", OPTIONS).score == ours


@pytest.mark.parametrize("text,expected", [
    ("two hundred and thirteen", 213.0),
    ("three hundred and twenty-one", 321.0),
    ("twelve hundred", 1200.0),
    ("one thousand and five", 1005.0),
    ("a hundred", 100.0),
    ("Three.", 3.0),
    (".62", 62.0),                 # the digits after the dot: no leading-dot decimals
    ("1,234", 1.0),                # no thousands separator
    ("3e5", 3.0),                  # no exponent
    ("-3", -3.0),
    ("about 3.5 m", 3.5),
    ("two, three", 5.0),           # words joined across the comma
    ("one apple, room 2", 1.0),    # the first number, words or digits
    ("no idea", None),
])
def test_vsibench_number_reader(text: str, expected: float | None) -> None:
    assert vsibench_number(text) == expected


def test_vsibench_number_score_is_mra_of_what_the_reference_reads() -> None:
    assert vsibench_number_score(".62", "0.62") == 0.0 and vsibench_number_score(".62", "62") == 1.0
    assert vsibench_number_score("8", "10") == 0.6   # the reference's thresholds, no tolerance
    assert vsibench_number_score("two hundred and thirteen", "213") == 1.0
    assert vsibench_number_score("none", "3") == 0.0
    # Ours reads 0.62 and 213 (core.parsing); the reference 62 and 213.
    assert score_completion("<answer>.62</answer>", "0.62", "number", None).score == 1.0


def test_reference_is_given_the_last_answer_block_stripped() -> None:
    assert reference_text("<answer>A</answer> then <answer>\n B \n</answer>") == "B"
    assert reference_text("<think>B.</think> B") == ""  # no answer block: an empty prediction
    assert reference_text(None) == ""


@pytest.mark.parametrize("text,gold,expected", [
    ("B", "B", 1.0),
    ("(B)", "B", 1.0),
    ("b", "B", 1.0),
    ("B. a cup", "B", 1.0),
    ("**B**", "B", 1.0),
    ("The answer is B", "B", 1.0),  # the first stand-alone a-e letter
    ("a cup", "A", 1.0),            # the article counts as option A
    ("a cup", "B", 0.0),
    ("E", "B", 0.0),
    ("", "B", None),                # left out of the denominator
])
def test_mvbench_letter_rule(text: str, gold: str, expected: float | None) -> None:
    assert mvbench_item_score(text, gold) == expected


def test_mvbench_answer_without_a_letter_is_the_processed_text() -> None:
    assert mvbench_answer("Took the cup!") == "took the cup"
    # A mark beside a space is deleted, any other becomes a space: "(" goes, ")" turns into a space.
    assert mvbench_answer("the (cup)") == "the cup" and mvbench_answer("x(cup)y") == "x cup y"
