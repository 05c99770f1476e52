from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodied_r.core import parsing
from embodied_r.core.parsing import (
    ANSWER_RE,
    THINK_RE,
    extract_answer_span,
    extract_think,
    option_letters,
    parse_answer,
)

OPTS = ["A. left", "B. right", "C. back"]
OPTS5 = ["A. chair", "B. table", "C. sofa", "D. door", "E. lamp"]

CHOICE_CASES = [
    # (completion, options, expected)
    ("<think>x</think><answer>B</answer>", OPTS, "B"),                       # bare letter
    ("<think>x</think><answer>B.</answer>", OPTS, "B"),                      # letter with period
    ("<think>x</think><answer>(B)</answer>", OPTS, "B"),                     # parenthesised
    ("<think>x</think><answer>[[C]]</answer>", OPTS, "C"),                   # Robot-R1 double brackets
    ("<think>x</think><answer>B) right</answer>", OPTS, "B"),                # letter + paren + text
    ("<think>x</think><answer>A. left</answer>", OPTS, "A"),                 # full option string
    ("<think>x</think><answer>right</answer>", OPTS, "B"),                   # the option's text only
    ("<think>x</think><answer> Right. </answer>", OPTS, "B"),                # option text, case/punct
    ("<think>x</think><answer>b</answer>", OPTS, "B"),                       # lower-case lone letter
    ("<think>x</think><answer>The answer is C</answer>", OPTS, "C"),         # keyword phrase
    ("<think>x</think><answer>**A**</answer>", OPTS, "A"),                   # markdown bold
    ("<think>Option C. is wrong</think><answer>B</answer>", OPTS, "B"),      # letters in think ignored
    ("<think>To answer carefully</think><answer>A</answer>", OPTS, "A"),     # official-parser trap
    ("<answer>A</answer> then <answer>C</answer>", OPTS, "C"),               # last answer tag wins
    ("<think>x</think><answer>D</answer>", OPTS, None),                      # not one of the options
    ("<think>x</think><answer>A or B</answer>", OPTS, None),                 # ambiguous
    ("<think>x</think><answer></answer>", OPTS, None),                       # empty answer
    ("<think>x</think>B", OPTS, None),                                       # no answer tags
    ("<think>x</think><answer>B", OPTS, None),                               # unclosed tag
    ("<answer>E</answer>", OPTS5, "E"),                                      # five options
    ("<answer>A chair, clearly</answer>", OPTS5, None),                      # article "A", not a letter
    ("<answer>G</answer>", None, "G"),                                       # options unknown: A-H
    ("", OPTS, None),                                                        # empty completion
]


@pytest.mark.parametrize("completion,options,expected", CHOICE_CASES)
def test_choice_parsing(completion: str, options: list[str] | None, expected: str | None) -> None:
    assert parse_answer(completion, options, "choice") == expected


NUMBER_CASES = [
    ("<answer>3.5</answer>", 3.5),                 # plain decimal
    ("<answer>about 3.5 meters</answer>", 3.5),    # words and units around it
    ("<answer>1,234 cm</answer>", 1234.0),         # thousands separator
    ("<answer>three</answer>", 3.0),               # number word
    ("<answer>twenty-one chairs</answer>", 21.0),  # compound number word
    ("<answer>-2</answer>", -2.0),                 # negative
    ("<answer>.5</answer>", 0.5),                  # leading dot
    ("<answer>.62</answer>", 0.62),                # leading dot (lmms-eval's reader says 62)
    ("<answer>two hundred and thirteen</answer>", 213.0),     # hundreds (a words-to-99 reader says 2)
    ("<answer>Three Hundred Twenty-One</answer>", 321.0),     # hundreds without "and", any case
    ("<answer>one thousand two hundred and five</answer>", 1205.0),  # thousands
    ("<answer>twelve hundred</answer>", 1200.0),   # hundreds of a teen
    ("<answer>a hundred</answer>", 100.0),         # a scale word alone
    ("<answer>one or two</answer>", 1.0),          # the first number, not a sum of two
    ("<answer>two, three</answer>", 2.0),          # a comma ends a number (lmms-eval's reader says 5)
    ("<answer>hundreds of chairs</answer>", None),  # "hundreds" is no number
    ("<answer>2e3</answer>", 2000.0),              # exponent
    ("<answer>none</answer>", None),               # no number
    ("3.5", None),                                 # no tags
]


@pytest.mark.parametrize("completion,expected", NUMBER_CASES)
def test_number_parsing(completion: str, expected: float | None) -> None:
    assert parse_answer(completion, None, "number") == expected


def test_open_answers_are_stripped_text_or_none() -> None:
    assert parse_answer("<answer>  go left  </answer>", None, "open") == "go left"
    assert parse_answer("<answer>   </answer>", None, "open") is None


def test_unknown_answer_type_is_none() -> None:
    assert parse_answer("<answer>A</answer>", OPTS, "ranking") is None


def test_extract_think_and_option_letters() -> None:
    assert extract_think("<think> a b </think><answer>A</answer>") == "a b"
    assert extract_think("<answer>A</answer>") is None
    assert option_letters(["A. x", "B. y"]) == ("A", "B")
    assert option_letters(["x", "y", "z"]) == ("A", "B", "C")  # unprefixed options get positional letters


@settings(max_examples=300, deadline=None)
@given(text=st.text(), options=st.one_of(st.none(), st.lists(st.text(max_size=12), max_size=6)),
       answer_type=st.sampled_from(["choice", "number", "open", "weird"]))
def test_parse_answer_never_raises(text: str, options: list[str] | None, answer_type: str) -> None:
    result = parse_answer(text, options, answer_type)
    assert result is None or isinstance(result, (str, float))


@settings(max_examples=200, deadline=None)
@given(letter=st.sampled_from("ABC"), think=st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=60))
def test_letter_in_answer_always_recovered(letter: str, think: str) -> None:
    completion = f"<think>{think}</think>\n<answer>{letter}</answer>"
    assert parse_answer(completion, OPTS, "choice") == letter


@settings(max_examples=200, deadline=None)
@given(value=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(lambda v: round(v, 3)))
def test_numbers_round_trip(value: float) -> None:
    assert parse_answer(f"<answer>{value} m</answer>", None, "number") == pytest.approx(value)


# --- The last <answer> span: same spans as the regex, in one pass ---------------------------------------

_TAG_PIECES = ["<answer>", "</answer>", "<ANSWER>", "</Answer>", "<anſwer>", "<think>", "</think>", "</THINK>",
               "<", "/", ">", "answer", "think", "A", " ", "\n", "é"]


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(st.sampled_from(_TAG_PIECES), max_size=30))
def test_answer_and_think_spans_match_the_regex_definition(pieces: list[str]) -> None:
    # ANSWER_RE.findall's last span and THINK_RE.search's first span are the definition: nested,
    # unclosed and stray tags, any case (the long s "ſ" folds to "s" under re.IGNORECASE too).
    text = "".join(pieces)
    spans = ANSWER_RE.findall(text)
    assert extract_answer_span(text) == (spans[-1] if spans else None)
    match = THINK_RE.search(text)
    assert extract_think(text) == (match.group(1).strip() if match else None)


class _CountingPattern:
    """A compiled pattern that records each call: its pattern and the characters it may scan (pos to end)."""

    def __init__(self, pattern: re.Pattern[str], calls: list[tuple[str, int]]) -> None:
        self.pattern, self.calls = pattern, calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.pattern, name)

        def counted(text: str, pos: int = 0, *args: Any) -> Any:
            self.calls.append((self.pattern.pattern, len(text) - pos))
            return method(text, pos, *args)
        return counted


@pytest.mark.parametrize("unit,answer", [
    ("<answer>", "<answer>" * 100_000 + "last"),  # never closed: swallowed by the first span
    ("<answer>x</answer>", "last"),
    ("<think>", "last"),
])
def test_reading_100000_tags_is_a_bounded_number_of_literal_scans(
        unit: str, answer: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Not a timing test: count the work. The old findall of r"<answer>(.*?)</answer>" over "<answer>" * n
    # ran its lazy ".*?" from every opening tag to the end of the text: n * n / 2 characters, 0.5 s at
    # 2,000 tags and no end at 100,000. Now: at most three regex calls, each a search for a fixed tag (no
    # "*" or "+", so each character is looked at a bounded number of times), from its start to the end.
    calls: list[tuple[str, int]] = []
    for name in ("_ANSWER_TAG_RE", "_THINK_OPEN_RE", "_THINK_CLOSE_RE", "ANSWER_RE", "THINK_RE"):
        monkeypatch.setattr(parsing, name, _CountingPattern(getattr(parsing, name), calls))
    text = unit * 100_000 + "<answer>last</answer>"
    assert extract_answer_span(text) == answer
    assert extract_think(text) is None
    assert 1 <= len(calls) <= 3
    assert not [pattern for pattern, _ in calls if re.search(r"[*+]|\{\d*,\d*\}", pattern)]
    assert sum(scanned for _, scanned in calls) <= 3 * len(text)


def test_many_unclosed_tags_keep_the_regex_semantics() -> None:
    # An unclosed <answer> swallows every later <answer> into its span, up to the first </answer>.
    assert extract_answer_span("<answer>" * 100_000 + "x</answer>") == "<answer>" * 99_999 + "x"
    assert extract_answer_span("<answer>A</answer>" + "<answer>" * 100_000) == "A"
    assert extract_think("<think>" * 100_000) is None
