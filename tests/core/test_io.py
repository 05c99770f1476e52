"""JSON Lines reading: a bad file is one clear error naming the file and the line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.core.io import DataFileError, JsonlAppender, iter_jsonl, read_json, read_jsonl

GOOD = b'{"id": "a"}\n{"id": "b"}\n'


@pytest.mark.parametrize("content,message", [
    (GOOD + b'{"id": "caf\xe9"}\n', r"rows\.jsonl:3: not UTF-8 text \(byte 0xe9 at character 12\); save it as UTF-8"),
    (GOOD + b"\x89PNG\r\n\x1a\n\x00\x00", r"rows\.jsonl:3: not UTF-8 text \(byte 0x89 at character 1\)"),
    (GOOD + b"\x00" * 64 + b"\n", r"rows\.jsonl:3: a NUL byte at character 1: a binary file"),
    (b"\x00" * 64, r"rows\.jsonl:1: a NUL byte"),  # unterminated: binary, not a torn write
    (b"\xde\xad\xbe\xef" * 16, r"rows\.jsonl:1: not UTF-8 text \(byte 0xbe at character 2\)"),  # DE AD: "\u07ad"
    (GOOD + b"hello\n", r"rows\.jsonl:3: not valid JSON \(Expecting value at column 1\); expected one JSON object"),
    (b"not json at all", r"rows\.jsonl:1: not valid JSON"),  # unterminated, but no object started
    (GOOD + b"[1, 2]\n", r"rows\.jsonl:3: expected a JSON object per line"),
], ids=["latin-1", "png", "nul-line", "nul-unterminated", "random-bytes", "not-json", "not-json-unterminated",
        "not-an-object"])
def test_bad_lines_name_the_file_and_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(content)
    with pytest.raises(DataFileError, match=message) as caught:
        read_jsonl(path)
    assert "\n" not in str(caught.value)


def test_a_torn_last_line_is_still_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    # A kill mid-write: an object cut short, here inside the two bytes of "é".
    path.write_bytes(GOOD + b'{"id": "c", "text": "caf' + "é".encode()[:1])
    assert [row["id"] for row in iter_jsonl(path)] == ["a", "b"]
    with pytest.raises(DataFileError, match=r"rows\.jsonl:3: not UTF-8 text"):
        list(iter_jsonl(path, tolerate_torn_tail=False))
    appender = JsonlAppender(path)  # cuts the torn line before appending
    appender.append({"id": "c"})
    assert sorted(appender.done_keys()) == ["a", "b", "c"]


def test_a_byte_order_mark_and_windows_line_ends_are_read(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.replace(b"\n", b"\r\n"))
    assert [row["id"] for row in read_jsonl(path)] == ["a", "b"]


def test_read_json_of_a_binary_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b'{\n"a": "\xff"}\n')
    with pytest.raises(DataFileError, match=r"data\.json:2: not UTF-8 text \(byte 0xff\)"):
        read_json(path)
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": 1}).encode())
    assert read_json(path) == {"a": 1}
