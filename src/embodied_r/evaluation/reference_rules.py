"""The reference harness's per-question rules (lmms-eval 0.7.3), written here from its definitions.

Our parser (``core.parsing``) stays the headline score. These rules exist so that a number published
under one of lmms-eval's names is the number lmms-eval would compute from the same answers, and so that
the questions where the two disagree can be counted.

What the reference reads (:func:`reference_text`): the text inside the last ``<answer>…</answer>``
block with surrounding whitespace removed, or the empty string when there is none. lmms-eval's own
pipeline removes a response's ``<think>`` block and strips whitespace before scoring; given the answer
block's text, it scores exactly what the model wrote as its answer.

VSI-Bench (task ``vsibench``):

- choice questions: the text before the first space character (a space, not any whitespace), trailing
  periods removed, then surrounding whitespace; 1 when it equals the gold letter ignoring case. So
  ``"B"``, ``"B."``, ``"b"`` and ``"B. left"`` score 1, while ``"(B)"``, ``"**B**"``, ``"Option B"``,
  ``"B: left"`` and the option's text alone score 0.
  Reproduced as it is, surprises included: ``"The answer is B"`` and ``"Answer: B"`` score 0 (the
  token is the first word), ``"B, C"`` scores 0 but ``"B and C"`` scores 1 (the token is ``"B,"`` or
  ``"B"``), ``"B\\nleft"`` scores 0 (no space before the newline).
- numeric questions: the first number, digits (``-?\\d+(\\.\\d+)?``: ``".62"`` reads 62, ``"1,234"``
  reads 1) or a run of English number words up to the thousands (``"two hundred and thirteen"`` is
  213), whichever starts first; then mean relative accuracy (``core.scoring``, the same thresholds and
  comparison as the reference). No number scores 0.

MVBench (tasks ``mvbench_<task>``): a letter A–E followed by a period at the start ("B. text") is the
answer; otherwise newlines and tabs become spaces, punctuation is removed or replaced by spaces, quotes
and brackets are trimmed, the text is lower-cased and the first stand-alone letter a–e is the answer
(so the article "a" counts as option A), else the whole processed text; the gold letter goes through the
same steps and the two must be equal. An empty prediction is left out of the task's denominator.
"""

from __future__ import annotations

import re
from typing import Any

from embodied_r.core.parsing import NUMBER_WORDS, SCALE_WORDS, extract_answer_span
from embodied_r.core.scoring import mean_relative_accuracy


def reference_text(completion: Any) -> str:
    """What the reference harness is given for a completion: its last ``<answer>`` text, stripped.

    >>> reference_text("<think>B. no</think><answer> (B) </answer>"), reference_text("no tags")
    ('(B)', '')
    """
    span = extract_answer_span(completion) if isinstance(completion, str) else None
    return span.strip() if span is not None else ""


# ---------------------------------------------------------------------------------------------------
# VSI-Bench
# ---------------------------------------------------------------------------------------------------


def vsibench_choice_token(text: str) -> str:
    """The token the reference compares with the gold letter. Checked, with the numeric reader, against
    lmms-eval 0.7.3's own scores of 668 answers (``tests/data/lmms_eval_vsibench_answers.jsonl``).

    >>> vsibench_choice_token("B. left"), vsibench_choice_token("(B)"), vsibench_choice_token("B\\nleft")
    ('B', '(B)', 'B\\nleft')
    """
    # Split on the space character only, as the reference does: "B\nleft" stays one token. Surprising but
    # the reference's behaviour, kept on purpose: "The answer is B" reads "The" (0), "B, C" reads "B," (0)
    # while "B and C" reads "B" (1); a reference column exists to reproduce the reference, not to improve it.
    return text.split(" ")[0].rstrip(".").strip()


def vsibench_choice_score(text: str, gold: Any) -> float:
    """1.0 when the reference's token equals the gold letter (any case), else 0.0.

    >>> vsibench_choice_score("b.", "B"), vsibench_choice_score("**B**", "B"), vsibench_choice_score("Option B", "B")
    (1.0, 0.0, 0.0)
    """
    return 1.0 if vsibench_choice_token(text).lower() == str(gold).lower() else 0.0


_REFERENCE_DIGITS_RE = re.compile(r"-?\d+(?:\.\d+)?")
_LETTER_RUN_RE = re.compile(r"[a-z]+")
# lmms-eval's reader knows exactly the number words ours does (zero to ninety, hundred, thousand).
_REFERENCE_NUMBER_WORDS = {**NUMBER_WORDS, **SCALE_WORDS}


def vsibench_number(text: str) -> float | None:
    """The number the reference reads from an answer, or None.

    >>> vsibench_number("two hundred and thirteen"), vsibench_number(".62"), vsibench_number("1,234 cm")
    (213.0, 62.0, 1.0)
    >>> vsibench_number("two, three chairs"), vsibench_number("about 3.5 m"), vsibench_number("none") is None
    (5.0, 3.5, True)
    """
    text = text.strip().lower()
    digits = _REFERENCE_DIGITS_RE.search(text)
    start, words = _number_word_run(text)
    if digits is not None and (start is None or digits.start() < start):
        return float(digits.group(0))
    if start is None:
        return None
    return float(_number_words_total(words))


def _number_word_run(text: str) -> tuple[int | None, list[str]]:
    """Where the first number word starts and the run of number words from there. The reference looks at
    runs of letters only, so whatever lies between two words (a comma, a hyphen, a digit) joins them:
    "two, three" is one run; "and" inside a run is skipped; any other word ends it."""
    start: int | None = None
    words: list[str] = []
    for match in _LETTER_RUN_RE.finditer(text):
        word = match.group(0)
        if word in _REFERENCE_NUMBER_WORDS:
            start = match.start() if start is None else start
            words.append(word)
        elif start is not None and word != "and":
            break
    return start, words


def _number_words_total(words: list[str]) -> int:
    """A run's value: "hundred" multiplies what came before it in its group (at least 1), "thousand"
    closes the group into the total, every other word adds."""
    total = group = 0
    for word in words:
        value = _REFERENCE_NUMBER_WORDS[word]
        if value == 100:
            group = max(group, 1) * 100
        elif value == 1000:
            total, group = total + max(group, 1) * 1000, 0
        else:
            group += value
    return total + group


def vsibench_number_score(text: str, gold: Any) -> float:
    """Mean relative accuracy of the reference's number against the gold one; 0.0 without a number.

    >>> vsibench_number_score("two hundred and thirteen", "213"), vsibench_number_score(".62", "0.62")
    (1.0, 0.0)
    """
    value = vsibench_number(text)
    return 0.0 if value is None else mean_relative_accuracy(value, float(gold))


def vsibench_item_score(text: str, gold: Any, numeric: bool) -> float:
    """The reference's score of one VSI-Bench answer text: MRA for numeric question types, else accuracy."""
    return vsibench_number_score(text, gold) if numeric else vsibench_choice_score(text, gold)


# ---------------------------------------------------------------------------------------------------
# MVBench
# ---------------------------------------------------------------------------------------------------

_MVBENCH_OPTION_RE = re.compile(r"^([A-E])\.\s*(.+)$", re.IGNORECASE)
_MVBENCH_PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`",
                        ",", "?", "!")
_DIGIT_COMMA_DIGIT_RE = re.compile(r"\d,\d")
_PERIOD_NOT_BEFORE_DIGIT_RE = re.compile(r"\.(?!\d)")
_MVBENCH_LETTER_RE = re.compile(r"\b([a-e])\b")
# The reference passes a flag where its period substitution takes a count, so at most 32 periods go.
_MVBENCH_PERIODS_REMOVED = 32


def _mvbench_punctuation(text: str) -> str:
    # A mark next to a space (or any mark when the text has a digit-comma-digit) is deleted, else it
    # becomes a space; the test reads the original text, the edits apply one after another.
    delete_all = _DIGIT_COMMA_DIGIT_RE.search(text) is not None
    out = text
    for mark in _MVBENCH_PUNCTUATION:
        delete = delete_all or f"{mark} " in text or f" {mark}" in text
        out = out.replace(mark, "" if delete else " ")
    return _PERIOD_NOT_BEFORE_DIGIT_RE.sub("", out, count=_MVBENCH_PERIODS_REMOVED)


def mvbench_answer(text: str) -> str:
    """What the reference compares: an option letter when it finds one, else the processed text.

    >>> mvbench_answer("B. a cup"), mvbench_answer("(C)"), mvbench_answer("a cup"), mvbench_answer("the cup")
    ('B', 'C', 'A', 'the cup')
    """
    match = _MVBENCH_OPTION_RE.match(text.strip())
    if match:
        return match.group(1).upper()
    text = _mvbench_punctuation(text.replace("\n", " ").replace("\t", " ").strip())
    for quote_or_bracket in ("'", '"', ")", "("):
        text = text.strip(quote_or_bracket)
    text = text.strip().lower()
    letter = _MVBENCH_LETTER_RE.search(text)
    return letter.group(1).upper() if letter else text


def mvbench_item_score(text: str, gold: Any) -> float | None:
    """The reference's score of one MVBench answer text, or None for an empty one (left out).

    >>> mvbench_item_score("(B)", "B"), mvbench_item_score("a cup", "B"), mvbench_item_score("", "B") is None
    (1.0, 0.0, True)
    """
    if text == "":
        return None
    return 1.0 if mvbench_answer(text) == mvbench_answer(str(gold)) else 0.0
