"""Answer extraction from a reasoner completion, shared by evaluation and the accuracy reward.

Only the text inside the *last* ``<answer>…</answer>`` counts: the official training-time parser read
the whole completion and so picked letters out of the reasoning ("Option C. is wrong" -> C; see
the official reward code). Using one parser for both training and evaluation means the reward and
the reported accuracy can never disagree about what is correct.

>>> parse_answer("<think>...</think><answer>B</answer>", ["A. left", "B. right"], "choice")
'B'
>>> parse_answer("<think>...</think><answer>about 3.5 meters</answer>", None, "number")
3.5
>>> parse_answer("no tags at all", ["A. x", "B. y"], "choice") is None
True
"""

from __future__ import annotations

import math
import re
import string
from typing import Any

ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
# The tags alone, found in one left-to-right pass. ``ANSWER_RE``/``THINK_RE`` give the same spans, but an
# opening tag without a closing one makes them scan to the end from *every* later opening tag: quadratic
# in the number of tags (a model that repeats "<answer>" 100,000 times would stall the run).
_ANSWER_TAG_RE = re.compile(r"<(/?)answer>", re.IGNORECASE)
_THINK_OPEN_RE = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE_RE = re.compile(r"</think>", re.IGNORECASE)
OPTION_PREFIX_RE = re.compile(r"^\s*\(?([A-Za-z])\s*[.):]\s*(.*)$", re.DOTALL)
DEFAULT_LETTERS = tuple("ABCDEFGH")

# Whole-answer letter forms: "B", "B.", "(B)", "[[B]]", "B)", "B:", "**B**".
_BARE_LETTER_RE = re.compile(r"^[\s*\"'`]*(?:\[\[|\(|\[)?\s*([A-Za-z])\s*(?:\]\]|\)|\])?[\s.:)*\"'`]*$")
# "[[B]]" anywhere (Robot-R1's answer convention).
_DOUBLE_BRACKET_RE = re.compile(r"\[\[\s*([A-Z])\s*\]\]")
# A leading letter followed by a delimiter and more text: "B) left", "B. right", "(C) back".
_LEADING_LETTER_RE = re.compile(r"^\s*\(?([A-Z])\s*[.):]\s+\S")
# "option B", "answer: C", "the answer is (D)", "choice E".
_KEYWORD_LETTER_RE = re.compile(
    r"(?:option|answer|choice)\s*(?:is)?\s*[:=]?\s*\(?\[?\[?\s*([A-Z])(?![A-Za-z])", re.IGNORECASE
)
# Any standalone capital letter, e.g. "I would pick B here". Checked last and only when unambiguous.
_STANDALONE_LETTER_RE = re.compile(r"(?<![A-Za-z'])([A-H])(?![A-Za-z'])")

# Words after "A" that mark it as an option letter ("A or B", "A is right") rather than the article.
_LETTER_FOLLOWERS = {"or", "and", "nor", "is", "was", "vs", "as", "because", "since", "seems", "would",
                     "should", "must", "fits", "matches", "appears"}

_NUMBER_RE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")
NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}
SCALE_WORDS = {"hundred": 100, "thousand": 1000}
# The first number word of a span ("hundred" included: "a hundred" is 100) ...
_NUMBER_WORD_RE = re.compile(
    r"\b(" + "|".join(sorted([*NUMBER_WORDS, *SCALE_WORDS], key=len, reverse=True)) + r")\b", re.IGNORECASE
)
# ... and each word that may continue it: after a space or a hyphen, optionally after "and"
# ("two hundred and thirteen", "twenty-one").
_NEXT_NUMBER_WORD_RE = re.compile(r"(?:\s+|\s*-\s*)(?:and\s+)?([a-z]+)\b", re.IGNORECASE)

# A judge's answer for reasoning that leads to no option (judge.judges, the consistency reward).
NO_OPTION = "none"


def extract_answer_span(completion: str) -> str | None:
    """The text inside the last ``<answer>…</answer>``, or None when there is none.

    The spans are those of ``ANSWER_RE.findall`` (tags in any case): each opening tag pairs with the
    first closing tag after it, so an ``<answer>`` inside a span is part of its text; the next span
    starts after that closing tag; an opening tag that is never closed gives nothing. Linear in the
    length of the completion: one pass over the tags.

    >>> extract_answer_span("<answer>A</answer> then <ANSWER> C </answer>")
    ' C '
    >>> extract_answer_span("<answer>a<answer>b</answer>")
    'a<answer>b'
    >>> extract_answer_span("<answer>A</answer><answer>B") , extract_answer_span("<answer>B") is None
    ('A', True)
    """
    if not isinstance(completion, str):
        return None
    last: tuple[int, int] | None = None
    content_start: int | None = None  # where the text of an open span begins; None: looking for <answer>
    for tag in _ANSWER_TAG_RE.finditer(completion):
        if tag.group(1):  # </answer>: closes the open span; outside one it is plain text
            if content_start is not None:
                last, content_start = (content_start, tag.start()), None
        elif content_start is None:  # <answer>: opens a span; inside one it is part of the text
            content_start = tag.end()
    return completion[last[0]:last[1]] if last else None


def extract_think(completion: str) -> str | None:
    """The text inside the first ``<think>…</think>``, stripped, or None (``THINK_RE.search``'s span).

    Linear: when the first ``<think>`` is never closed, no later one can be (``THINK_RE`` would try them
    all, each to the end of the text).

    >>> extract_think("<think> a <think> b </THINK><answer>A</answer>"), extract_think("<think>a") is None
    ('a <think> b', True)
    """
    if not isinstance(completion, str):
        return None
    opening = _THINK_OPEN_RE.search(completion)
    closing = _THINK_CLOSE_RE.search(completion, opening.end()) if opening else None
    return completion[opening.end():closing.start()].strip() if opening and closing else None


def option_letters(options: list[str] | None) -> tuple[str, ...]:
    """Letters of VSI-style options ``["A. left", "B. right"]``; A–H when options are unknown."""
    if not options:
        return DEFAULT_LETTERS
    letters = []
    for index, option in enumerate(options):
        match = OPTION_PREFIX_RE.match(str(option))
        letters.append(match.group(1).upper() if match else string.ascii_uppercase[index])
    return tuple(letters)


def option_texts(options: list[str] | None) -> dict[str, str]:
    """Map letter -> option text without its ``"A. "`` prefix."""
    out: dict[str, str] = {}
    for letter, option in zip(option_letters(options), options or []):
        match = OPTION_PREFIX_RE.match(str(option))
        out[letter] = (match.group(2) if match else str(option)).strip()
    return out


def _normalise_text(text: str) -> str:
    text = text.lower().strip()
    text = text.translate(str.maketrans("", "", string.punctuation))
    return " ".join(text.split())


def parse_choice(span: str, options: list[str] | None) -> str | None:
    """Letter of the chosen option from an answer span, or None when unclear or not an option."""
    valid = option_letters(options)
    texts = option_texts(options)

    def accept(letter: str | None) -> str | None:
        return letter if letter is not None and letter in valid else None

    span = span.strip()
    if not span:
        return None
    # 1. Robot-R1's [[X]] anywhere.
    brackets = {m.upper() for m in _DOUBLE_BRACKET_RE.findall(span)}
    if len(brackets) == 1:
        return accept(brackets.pop())
    # 2. The whole answer is one letter in some wrapping (lower case accepted only here).
    match = _BARE_LETTER_RE.match(span)
    if match:
        return accept(match.group(1).upper())
    # 3. "B) left" / "B. right": a leading letter with a delimiter.
    match = _LEADING_LETTER_RE.match(span)
    if match:
        return accept(match.group(1))
    # 4. The option's text itself ("left"), or "A. left" with different spacing/case.
    normalised = _normalise_text(span)
    by_text = [letter for letter, text in texts.items() if _normalise_text(text) == normalised]
    if len(by_text) == 1:
        return by_text[0]
    # 5. "the answer is C" / "option B".
    keyword_hits = {m.upper() for m in _KEYWORD_LETTER_RE.findall(span)}
    if len(keyword_hits) == 1:
        return accept(keyword_hits.pop())
    # 6. One unambiguous standalone capital letter, ignoring the article "A"/pronoun "I" before a word.
    candidates = set()
    for found in _STANDALONE_LETTER_RE.finditer(span):
        letter = found.group(1)
        next_word = re.match(r"\s+([a-z]+)", span[found.end():])
        if letter == "A" and next_word and next_word.group(1) not in _LETTER_FOLLOWERS:
            continue
        candidates.add(letter)
    candidates &= set(valid)
    if len(candidates) == 1:
        return candidates.pop()
    return None


def parse_number(span: str) -> float | None:
    """First number in the span: digits (optional sign, thousands commas, decimals, exponent; ".62" is
    0.62) or English number words up to the thousands, whichever comes first.

    >>> parse_number("about 3.5 meters"), parse_number(".62"), parse_number("1,234 cm")
    (3.5, 0.62, 1234.0)
    >>> parse_number("two hundred and thirteen"), parse_number("twenty-one chairs")
    (213.0, 21.0)
    >>> parse_number("one thousand two hundred"), parse_number("one or two"), parse_number("none")
    (1200.0, 1.0, None)
    """
    digit_match = _NUMBER_RE.search(span)
    word_match = _NUMBER_WORD_RE.search(span)
    if digit_match and (not word_match or digit_match.start() <= word_match.start()):
        try:
            value = float(digit_match.group(0).replace(",", ""))
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    if word_match:
        return float(_number_words_value(span, word_match))
    return None


def _number_words_value(span: str, first: re.Match[str]) -> int:
    """The value of the run of number words that starts with ``first``; the run ends at the first word
    that cannot continue the number, so "one two" is 1 (two numbers), not 3."""
    reader = _NumberWords()
    reader.add(first.group(1).lower())
    position = first.end()
    while (following := _NEXT_NUMBER_WORD_RE.match(span, position)) and reader.add(following.group(1).lower()):
        position = following.end()
    return reader.value()


class _NumberWords:
    """English number words read left to right: ``[units|teens|tens [units]] [hundred] [tens] [units]``
    groups, a group before "thousand" multiplied by 1000 ("twelve hundred" is 1200 too)."""

    def __init__(self) -> None:
        self.thousands = 0  # what the words before "thousand" make, already times 1000
        self.hundreds = 0   # what the current group's words before "hundred" make, already times 100
        self.below_hundred: list[int] = []  # the values of the current group's words after its "hundred"
        self.has_thousand = self.has_hundred = False

    def add(self, word: str) -> bool:
        """Take the next word; False (and nothing taken) when it cannot continue this number."""
        if word in SCALE_WORDS:
            return self._scale(word)
        value = NUMBER_WORDS.get(word)
        if value is None or not self._fits(value):
            return False
        self.below_hundred.append(value)
        return True

    def _fits(self, value: int) -> bool:
        # Below a hundred a number is one word ("seven", "thirteen", "forty") or tens then a unit
        # ("forty two"); "zero" only stands alone.
        words = self.below_hundred
        if value == 0:
            return not (words or self.has_hundred or self.has_thousand)
        if not words:
            return True
        return len(words) == 1 and words[0] >= 20 and words[0] % 10 == 0 and value < 10

    def _scale(self, word: str) -> bool:
        group = sum(self.below_hundred)
        if word == "hundred":
            if self.has_hundred or 0 in self.below_hundred:  # "two hundred hundred", "zero hundred"
                return False
            self.hundreds, self.below_hundred, self.has_hundred = max(group, 1) * 100, [], True
            return True
        if self.has_thousand or 0 in self.below_hundred:
            return False
        self.thousands = max(self.hundreds + group, 1) * 1000
        self.hundreds, self.below_hundred, self.has_hundred, self.has_thousand = 0, [], False, True
        return True

    def value(self) -> int:
        return self.thousands + self.hundreds + sum(self.below_hundred)


_XYZ_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def parse_xyz(text: Any) -> list[float] | None:
    """The first three finite numbers of a text (or a list of three numbers), or None when it has fewer.

    >>> parse_xyz("[0.1, -0.25, 0.3]")
    [0.1, -0.25, 0.3]
    >>> parse_xyz("somewhere up") is None
    True
    """
    if isinstance(text, (list, tuple)):
        text = " ".join(map(str, text))
    values = [float(v) for v in _XYZ_NUMBER_RE.findall(str(text or ""))[:3]]
    if len(values) < 3 or not all(math.isfinite(v) for v in values):
        return None
    return values


def parse_answer(completion: str, options: list[str] | None, answer_type: str) -> str | float | list[float] | None:
    """Read the final answer of a completion; never raises.

    Returns the option letter for ``"choice"``, a float for ``"number"``, ``[x, y, z]`` for
    ``"position"``, the stripped text for ``"open"``, and None when there is no well-formed
    ``<answer>…</answer>`` or its content cannot be read as that type (a letter that is not one of
    the options counts as unreadable).

    >>> parse_answer("<answer>(C)</answer>", ["A. a", "B. b", "C. c"], "choice")
    'C'
    >>> parse_answer("<answer>[[D]]</answer>", None, "choice")
    'D'
    >>> parse_answer("<answer>twenty-one chairs</answer>", None, "number")
    21.0
    """
    try:
        span = extract_answer_span(completion)
        if span is None:
            return None
        if answer_type == "choice":
            return parse_choice(span, options)
        if answer_type == "number":
            return parse_number(span)
        if answer_type == "position":
            return parse_xyz(span)
        if answer_type == "open":
            text = span.strip()
            return text or None
        return None
    except Exception:  # noqa: BLE001 - the contract is "never raises"; a parser bug must not kill a run
        import logging

        logging.getLogger(__name__).exception(
            "parse_answer failed on %r", completion[:200] if isinstance(completion, str) else completion
        )
        return None
