"""Letter-blind judging: option letters disappear from a think, its content stays."""

from __future__ import annotations

import re

import pytest

from embodied_r.judge.letter_mask import MASK, mask_option_letters


@pytest.mark.parametrize(
    "text",
    [
        "so the answer is B",
        "Answer: C",
        "I choose option D because",
        "(B) is right",
        "it must be [[C]]",
        "<answer>B</answer>",
        "B. right",
        "letter D wins",
        "choice (A)",
        "The answer is A.",
        "so it is D",
    ],
)
def test_letter_forms_are_masked(text: str) -> None:
    masked = mask_option_letters(text, "ABCD")
    assert MASK in masked
    # No option letter is left standing on its own ("A" only as the article of a sentence start).
    assert re.search(r"(?<![A-Za-z])[BCD](?![A-Za-z])", masked) is None
    assert re.search(r"(?<![A-Za-z])A(?![A-Za-z])", masked) is None


def test_words_and_content_survive() -> None:
    text = "A chair is to the right of the table. I saw a TV and a door. The bed is behind me."
    assert mask_option_letters(text, "ABCD") == text  # "A" and "I" as words, "TV" is not a letter
    assert mask_option_letters("a b c d", "ABCD") == "a b c d"  # lower case is not an option letter
    # Only the question's letters: with options A-C, "D" is a word-like token that stays.
    assert mask_option_letters("D is far", "ABC") == "D is far"
    assert mask_option_letters("", "ABCD") == ""
