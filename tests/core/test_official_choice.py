"""The two accuracy rules on every class of completion where they disagree (docs/training.md, "Two accuracy
rules"), and on the classes where they must agree."""

from __future__ import annotations

import pytest

from embodied_r.core.official_choice import official_choice_letter, official_choice_score
from embodied_r.core.scoring import ACCURACY_RULES, check_accuracy_rule, score_completion
from embodied_r.methods.accuracy import accuracy_reward, make_accuracy_reward

OPTIONS = ["A. chair", "B. bed", "C. sofa", "D. table"]

# (class, completion, gold, last-answer score, official score, letter the official rule reads)
DISAGREE = [
    ("option text alone", "<think>the bed is closest</think><answer>bed</answer>", "B", 1.0, 0.0, None),
    ("option text, article a in the reasoning", "<think>I see a bed</think><answer>bed</answer>", "B", 1.0, 0.0, "A"),
    ("lower-case letter with text", "<think>the chair is closest</think><answer>a. chair</answer>", "A", 0.0, 1.0,
     "A"),
    ("lower-case letter in a sentence", "<think>the bed is closest</think><answer>i pick b</answer>", "B", 0.0, 1.0,
     "B"),
    ("two letters", "<think>either one fits</think><answer>A or C</answer>", "C", 0.0, 1.0, "C"),
    ("two answer blocks", "<think>first guess</think><answer>C. sofa</answer>\n<answer>B</answer>", "C", 0.0, 1.0,
     "C"),
    ("letter and full stop in the reasoning", "<think>Option C. is too far.</think><answer>B</answer>", "B", 1.0,
     0.0, "C"),
    ("'answer' then a letter in the reasoning", "<think>To answer carefully, look left.</think><answer>B</answer>",
     "B", 1.0, 0.0, "C"),
    ("abbreviation in the reasoning", "<think>furniture, e.g. beds</think><answer>B</answer>", "B", 1.0, 0.0, "E"),
    ("boxed letter in the reasoning", "<think>so $\\boxed{A}$ first</think><answer>B</answer>", "B", 1.0, 0.0, "A"),
    ("no closed answer block", "<think>The bed is near. The answer is D.", "D", 0.0, 1.0, "D"),
    ("no answer block, a lone letter in the prose", "<think>A certain frame shows the bed</think>", "A", 0.0, 1.0,
     "A"),
]

AGREE = [
    ("bare letter", "<think>the bed</think><answer>B</answer>", "B", 1.0),
    ("letter with option text", "<think>the bed</think><answer>B. bed</answer>", "B", 1.0),
    ("lower-case bare letter", "<think>the bed</think><answer>b</answer>", "B", 1.0),
    ("Robot-R1 brackets", "<think>the bed</think><answer>[[B]]</answer>", "B", 1.0),
    ("lower-case keyword", "<think>.</think><answer>the answer is c</answer>", "C", 1.0),
    ("wrong letter", "<think>the sofa</think><answer>C</answer>", "B", 0.0),
    ("empty completion", "", "B", 0.0),
]


@pytest.mark.parametrize("name, completion, gold, ours, official, letter", DISAGREE, ids=[c[0] for c in DISAGREE])
def test_the_rules_disagree_on_each_class(name, completion, gold, ours, official, letter) -> None:
    assert score_completion(completion, gold, "choice", OPTIONS).score == ours
    scored = score_completion(completion, gold, "choice", OPTIONS, rule="official")
    assert scored == (letter, official)
    assert ours != official


@pytest.mark.parametrize("name, completion, gold, score", AGREE, ids=[c[0] for c in AGREE])
def test_the_rules_agree_on_plain_answers(name, completion, gold, score) -> None:
    assert score_completion(completion, gold, "choice", OPTIONS).score == score
    assert score_completion(completion, gold, "choice", OPTIONS, rule="official").score == score


def test_the_reward_follows_its_rule_on_every_class() -> None:
    cases = DISAGREE + [(name, c, gold, s, s, None) for name, c, gold, s in AGREE]
    completions = [c[1] for c in cases]
    columns = {"answer": [c[2] for c in cases], "answer_type": ["choice"] * len(cases),
               "options": [OPTIONS] * len(cases)}
    assert accuracy_reward(completions, **columns) == [c[3] for c in cases]
    assert make_accuracy_reward("last-answer")(completions, **columns) == [c[3] for c in cases]
    assert make_accuracy_reward("official")(completions, **columns) == [c[4] for c in cases]


def test_the_official_cascade_order() -> None:
    # boxed beats "answer X", which is the first one, and beats "X." (the last one), which beats a lone letter.
    assert official_choice_letter("C. then $\\boxed{b}$ and $\\boxed{d}$") == "D"
    assert official_choice_letter("answer a, answer B, then C.") == "A"
    assert official_choice_letter("B. or C. then D") == "C"
    # Matches do not overlap: the space after A belongs to A's match, so B is not seen.
    assert official_choice_letter("A B") == "A"
    assert official_choice_letter("  nothing here  ") is None


def test_the_gold_answer_is_read_by_the_same_rule() -> None:
    assert official_choice_score("<answer>B</answer>", "B. bed") == 1.0
    assert official_choice_score("<answer>B</answer>", " b ") == 1.0
    assert official_choice_score("no letter", "no letter") == 0.0  # a letterless answer never matches


def test_other_answer_types_have_one_rule() -> None:
    for completion, gold, answer_type in [("<think>A.</think><answer>9.6</answer>", 10, "number"),
                                          ("<answer>[0.1, 0.6, 0.2]</answer>", "[0.1, 0.6, 0.2]", "position")]:
        ours = score_completion(completion, gold, answer_type, None)
        assert score_completion(completion, gold, answer_type, None, rule="official") == ours
        assert ours.score == 1.0


def test_an_unknown_rule_is_a_clear_error() -> None:
    assert ACCURACY_RULES == ("last-answer", "official")
    with pytest.raises(ValueError, match="accuracy_rule 'paper' does not exist; use one of last-answer, official"):
        check_accuracy_rule("paper")
    with pytest.raises(ValueError, match="accuracy reward: accuracy_rule 'ours' does not exist"):
        make_accuracy_reward("ours")
    with pytest.raises(ValueError, match="does not exist"):
        score_completion("<answer>B</answer>", "B", "choice", OPTIONS, rule="strict")
