"""``eval`` on a file with one enormous prompt among normal ones: under an address-space cap every row
is predicted or recorded, and the affected row says what the context policy did."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from probe_rows import quick_eval_argv

from embodied_r.core.io import read_jsonl, write_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

# Enough for torch plus the tiny model; an unfitted 200,000-character prompt needs tens of GB of attention.
ADDRESS_SPACE_CAP = 6 * 1024**3


def _row(i: int, frames: list[str]) -> PromptRow:
    frame_dicts = [{"action": "move forward" if k else None, "delta": text} for k, text in enumerate(frames)]
    options = ["A. left", "B. right", "C. behind"]
    return PromptRow(id=f"q{i}", task="direction", prompt=build_reasoner_messages(frame_dicts, "Where is the door?",
                                                                                    options),
                     answer="B", answer_type="choice", options=options)


def _rows() -> list[PromptRow]:
    repeated = "The agent sees a red sofa near the window. " * 4700  # ~200,000 characters, one frame
    rows = [_row(i, ["A chair on the left.", "A door on the right."]) for i in range(3)]
    rows.insert(1, _row(9, ["A table ahead.", repeated, "A door on the right."]))
    assert len(rows[1].prompt[1]["content"]) > 200_000
    return rows


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def _eval(data: Path, model: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "embodied_r.cli.main", *quick_eval_argv(data, model, out, *extra)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, preexec_fn=_capped, check=False)


@pytest.mark.parametrize("rule", ["drop-frames", "truncate-left", "truncate-left-tokens", "skip"])
def test_a_200k_character_row_is_fitted_or_recorded_under_a_memory_cap(rule: str, tmp_path: Path,
                                                                       tiny_lm_dir: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, [r.to_dict() for r in _rows()])
    out = tmp_path / "eval"
    result = _eval(data, tiny_lm_dir, out, "--context-rule", rule)
    assert result.returncode == 0, result.stderr[-3000:]
    predictions = {p["id"]: p for p in read_jsonl(out / "predictions.jsonl")}
    assert sorted(predictions) == ["q0", "q1", "q2", "q9"]  # every row predicted or recorded, once
    record = predictions["q9"]["meta"]["context"]
    expected = {"drop-frames": "dropped-frames", "truncate-left": "truncated-left",
                "truncate-left-tokens": "truncated-left-tokens", "skip": "skipped"}[rule]
    assert record["action"] == expected and record["prompt_tokens"] > record["limit"]
    assert record["kept_tokens"] <= record["limit"]
    assert all("context" not in predictions[i]["meta"] for i in ("q0", "q1", "q2"))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["context"]["affected"] == 1 and metrics["context"]["actions"] == {expected: 1}
    assert metrics["context"]["rows"][0]["id"] == "q9" and metrics["overall"]["n"] == 4
    if rule == "skip":
        answered_empty = sum(1 for i in ("q0", "q1", "q2") if not predictions[i]["completion"].strip())
        assert predictions["q9"]["completion"] == "" and predictions["q9"]["score"] == 0.0
        assert metrics["overall"]["empty_completions"] == answered_empty  # a skip is not an empty answer
    if rule == "drop-frames":
        assert record["frames_dropped"] == 2  # the table and the repeated frame; the door frame is kept
    assert f"context policy {rule}: 1 prompt(s) did not fit" in result.stdout
    assert ("count as unanswered" in result.stdout) == (rule == "skip")
    assert "Prompts over the context" in (out / "report.html").read_text()


def test_a_changed_rule_is_refused_in_the_same_folder(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, [r.to_dict() for r in _rows()[:1]])
    out = tmp_path / "eval"
    assert _eval(data, tiny_lm_dir, out, "--context-rule", "skip").returncode == 0
    again = _eval(data, tiny_lm_dir, out, "--context-rule", "truncate-left")
    assert again.returncode != 0 and "holds a run of" in again.stderr


def test_bad_context_values_are_one_line_errors(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, [r.to_dict() for r in _rows()[:1]])
    result = _eval(data, tiny_lm_dir, tmp_path / "eval", "--max-prompt-tokens", "0")
    assert result.returncode == 2 and "max_prompt_tokens must be a positive integer" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "eval").exists()
