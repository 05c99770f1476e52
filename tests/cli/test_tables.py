"""CLI tables at the width of a small terminal or a log file: no header word cut, no line too wide."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from embodied_r.cli.common import fitted_table, print_table

# The summary of `embodied-r perceive` (cli/perceive.py): ten columns.
PERCEIVE_COLUMNS = ["questions", "done", "already done", "requests cached", "requests sent", "failed", "leaked",
                    "runaway", "parse errors", "seconds"]


def rendered(title: str, columns: list[str], cells: list[list[str]], width: int) -> list[str]:
    out = Console(file=io.StringIO(), width=width, highlight=False)
    out.print(fitted_table(title, columns, cells, width), crop=False)  # a line too wide shows, not cut off
    return out.file.getvalue().splitlines()


def whole_words_of(lines: list[str]) -> set[str]:
    return {word for line in lines for word in line.split()}


def test_the_perceive_summary_keeps_every_header_word_at_80_columns(capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the width of a log file or a small terminal
    print_table("perception (oracle, oracle, default, detail map) -> runs/w/perception.jsonl", PERCEIVE_COLUMNS,
                [[120, 118, 0, 3, 115, 2, 0, 1, 0, 12.3]])
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    words = whole_words_of(lines)
    assert {word for name in PERCEIVE_COLUMNS for word in name.split()} <= words  # not "requ…" or "alr…"
    assert "…" not in "".join(lines) and "12.300" in words
    cells = [["120", "118", "0", "3", "115", "2", "0", "1", "0", "12.300"]]
    assert max(len(line) for line in rendered("perception", PERCEIVE_COLUMNS, cells, 80)) <= 80
    monkeypatch.setenv("COLUMNS", "200")  # room to spare: rich's boxed table, one header line
    print_table("perception", PERCEIVE_COLUMNS, [[120, 118, 0, 3, 115, 2, 0, 1, 0, 12.3]])
    wide = capsys.readouterr().out.splitlines()
    assert wide[1].startswith("┏") and "requests cached" in wide[2]


def test_a_long_first_column_keeps_its_names_and_wraps_the_headers() -> None:
    columns = ["task", "n", "score % [95 % interval] (accuracy or MRA)", "unparsed"]
    lines = rendered("scores", columns, [["object_rel_direction_medium", "1000", "45.3 [40.1, 50.2]", "3"]], 80)
    assert max(len(line) for line in lines) <= 80 and lines[1].startswith("┏")  # boxed: the words fit
    assert "object_rel_direction_medium" in whole_words_of(lines)
    assert {word for name in columns for word in name.split()} <= whole_words_of(lines)


@settings(max_examples=150, deadline=None)
@given(headers=st.lists(st.lists(st.text("abcdefgh", min_size=1, max_size=12), min_size=1, max_size=3),
                        min_size=1, max_size=12),
       value=st.integers(0, 10**6), width=st.integers(30, 160))
def test_tables_never_overflow_and_keep_header_words_where_they_fit(headers: list[list[str]], value: int,
                                                                     width: int) -> None:
    columns = [" ".join(words) for words in headers]
    row = [f"name_{value}", *([str(value)] * (len(columns) - 1))]
    lines = rendered("t", columns, [row], width)
    assert max(len(line) for line in lines) <= width
    needed = max(len(row[0]), len(columns[0])) + sum(max(len(str(value)), *map(len, words)) for words in headers[1:])
    if needed + len(columns) - 1 <= width:  # the compact table has room for every word
        assert "…" not in "".join(lines)
        assert {word for words in headers[1:] for word in words} <= whole_words_of(lines)
