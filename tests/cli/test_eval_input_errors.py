"""`eval` on bad inputs: one clear line, nothing written that a correct rerun would trip over."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from probe_rows import probe_rows, quick_eval_argv

from embodied_r.cli.main import main
from embodied_r.core.io import atomic_write_text, write_jsonl


def test_a_model_typo_leaves_the_output_folder_free(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(2))
    out = tmp_path / "eval"
    assert main(quick_eval_argv(data, tmp_path / "no-such-model", out)) == 2
    err = capsys.readouterr().err
    assert "could not load model" in err and "Traceback" not in err
    assert not out.exists()  # no run.json claiming the folder, no empty folder
    assert main(quick_eval_argv(data, tiny_lm_dir, out)) == 0
    assert json.loads((out / "run.json").read_text())["model"] == str(tiny_lm_dir)


def test_bad_paths_and_empty_files_say_what_is_wrong(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(2))
    a_file = tmp_path / "taken.txt"
    a_file.write_text("x")
    assert main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(a_file)]) == 2
    assert "is a file; give a folder" in capsys.readouterr().err
    folder = tmp_path / "rows_folder.jsonl"
    folder.mkdir()
    assert (
        main(["eval", "--data", str(folder), "--model", str(tiny_lm_dir), "--out", str(tmp_path / "o")]) == 2
    )
    assert "is a folder" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert (
        main(["eval", "--data", str(empty), "--model", str(tiny_lm_dir), "--out", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err
    assert "holds no questions" in err and "0 skipped" not in err


def test_atomic_writes_follow_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
        os.umask(0o077)
        atomic_write_text(tmp_path / "b.txt", "x")
        assert stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o600
    finally:
        os.umask(previous)


def test_a_binary_or_non_utf8_data_file_is_one_error_line(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    good = json.dumps(probe_rows(1)[0]).encode() + b"\n"
    for name, content, message in [
        ("latin1.jsonl", good + b'{"id": "caf\xe9"}\n', "latin1.jsonl:2: not UTF-8 text (byte 0xe9 at character 12)"),
        ("random.jsonl", good * 2 + bytes(range(128, 256)), "random.jsonl:3: not UTF-8 text (byte 0x80"),
        ("nul.jsonl", b"\x00" * 100, "nul.jsonl:1: a NUL byte at character 1: a binary file"),
        ("text.jsonl", good + b"question: left or right?\n", "text.jsonl:2: not valid JSON"),
    ]:
        data = tmp_path / name
        data.write_bytes(content)
        assert main(quick_eval_argv(data, tiny_lm_dir, tmp_path / "out")) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
        assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1
        assert not (tmp_path / "out").exists()
