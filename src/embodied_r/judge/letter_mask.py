"""Letter-blind judging: hide option letters in a reasoning text before a judge reads it.

The logical-consistency reward asks whether a reasoning text, read on its own, leads to the policy's
answer. A judge that can read "so the answer is B" pays any think that merely names its letter, which
is not reasoning (and is exactly what a format warm-up writes). Masking the letters leaves only the
content: the option texts and the facts the reasoning cites.

Masked forms, for the letters of the question only: "option/choice/answer/letter [is] B", "(B)",
"[B]", "[[B]]", "B)", "B." / "B:" before a space or the end, "<answer>B</answer>", and any standalone
capital letter except "A" and "I", which are English words ("A chair is ..."); those two are masked
only in the letter forms above.

>>> mask_option_letters("The chair is on the right, so the answer is B.", "ABCD")
'The chair is on the right, so the answer is [masked].'
>>> mask_option_letters("A chair is left: option (A), i.e. A. left", "ABCD")
'A chair is left: option [masked], i.e. [masked]. left'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MASK = "[masked]"
# Letters that are also English words: masked only where they stand as an option letter.
_WORD_LETTERS = frozenset("AI")
_LEAD_WORDS = r"(?:options?|choices?|answers?|letters?)"


@lru_cache(maxsize=64)
def _patterns(letters: str) -> tuple[re.Pattern[str], ...]:
    letter_class = "[" + re.escape(letters) + "]"
    non_word = "".join(ch for ch in letters if ch not in _WORD_LETTERS)
    patterns = [
        # "option B", "answer is (B)", "the answer: [[B]]", "choice B."
        re.compile(
            rf"(\b{_LEAD_WORDS}\s*(?:is|was|would be|=|:)?\s*)"
            rf"(?:\[\[\s*{letter_class}\s*\]\]|\(\s*{letter_class}\s*\)|\[\s*{letter_class}\s*\]|{letter_class})(?![A-Za-z])",
            re.IGNORECASE,
        ),
        re.compile(rf"()\[\[\s*{letter_class}\s*\]\]"),
        re.compile(rf"()\(\s*{letter_class}\s*\)"),
        re.compile(rf"()\[\s*{letter_class}\s*\]"),
        re.compile(rf"(<answer>\s*){letter_class}(?=\s*</answer>)"),
        re.compile(rf"((?:^|(?<=[\s\"'(]))){letter_class}(?=[.:)](?:\s|$))"),
    ]
    if non_word:
        patterns.append(re.compile(rf"()\b[{re.escape(non_word)}]\b"))
    return tuple(patterns)


def mask_option_letters(text: str, letters: Iterable[str]) -> str:
    """``text`` with every mention of one of ``letters`` as an option letter replaced by ``[masked]``.

    Only upper-case letters are masked outside the "option X" forms: a lower-case "b" is a word part.
    """
    wanted = "".join(sorted({str(letter).upper() for letter in letters if str(letter).strip()}))
    if not wanted or not text:
        return text
    if "(" in wanted or "\\" in wanted:  # option letters are letters; anything else is a caller bug
        raise ValueError(f"option letters must be letters, got {wanted!r}")
    for pattern in _patterns(wanted):
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


__all__ = ["MASK", "mask_option_letters"]
