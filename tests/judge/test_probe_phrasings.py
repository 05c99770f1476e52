"""The probe's paraphrase table: options said without their words, or not at all."""

from __future__ import annotations

import random

import pytest

from embodied_r.judge.probe_phrasings import BUILTIN_QUESTIONS, free_of, option_words, paraphrases_for


@pytest.mark.parametrize(
    "texts",
    [
        ["left", "right", "back"],
        ["front-left", "back-right", "front-right", "back-left"],
        ["Move forward", "Rotate left", "Move backward", "Rotate right"],
        ["Turn Back, Turn Left", "Turn Left, Turn Back", "Turn Right, Turn Left", "Turn Right, Turn Right"],
        ["toilet, table, refrigerator, chair", "refrigerator, toilet, table, chair"],
        ["1.5 meters", "3.0 meters", "4.25 meters", "12 meters"],
        ["chair", "stool", "bed", "nightstand"],
    ],
)
def test_every_option_is_said_without_any_option_word_and_distinctly(texts) -> None:
    said = paraphrases_for(texts, random.Random(0))
    assert said is not None and len(set(said)) == len(texts)
    assert all(free_of(s, option_words(texts)) for s in said), said


def test_options_it_cannot_say_give_no_paraphrase() -> None:
    assert paraphrases_for(["the red car", "left"], random.Random(0)) is None  # not in the table
    assert paraphrases_for(["3.0 meters", "3.0 feet"], random.Random(0)) is None  # would read alike
    assert paraphrases_for(["back", "behind"], random.Random(0)) is None  # same place, two names
    assert free_of("the doorway", {"door"}) is False and free_of("indoors", {"door"}) is True


def test_the_builtin_questions_are_all_paraphrasable() -> None:
    for _, options in BUILTIN_QUESTIONS:
        texts = [o.split(". ", 1)[1] for o in options]
        assert paraphrases_for(texts, random.Random(0)) is not None
