"""Evaluation of Robot-R1 questions: `embodied-r eval` per question type, `[[X]]` answers, and the
open-ended set through `embodied-r robot-bench` (tiny local model as answerer and judge)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl
from embodied_r.core.parsing import parse_answer
from embodied_r.core.records import PromptRow
from embodied_r.core.scoring import score_answer


def test_robot_answers_in_double_brackets_parse_and_score(robot_dataset: Path) -> None:
    rows = [PromptRow.from_dict(r) for r in read_jsonl(robot_dataset / "prompts.jsonl")]
    assert {r.task for r in rows} == {"waypoint", "current_state", "movement"}
    for row in rows:
        wrong = next(letter for letter in "ABCD" if letter != row.answer)
        good = parse_answer(f"<think> compare the options </think> <answer> [[{row.answer}]] </answer>",
                            row.options, "choice")
        bad = parse_answer(f"<think> x </think><answer>[[{wrong}]]</answer>", row.options, "choice")
        assert good == row.answer and bad == wrong
        assert score_answer(good, row.answer, "choice") == 1.0
        assert score_answer(bad, row.answer, "choice") == 0.0


def _one_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    return threads


def test_eval_reports_accuracy_per_question_type(robot_dataset: Path, tiny_lm_dir: Path, tmp_path: Path,
                                                 capsys) -> None:
    import torch

    threads = _one_thread()
    try:
        # Interleaved types: the first rows of one frame are waypoint, current_state, movement.
        code = main(["eval", "--data", str(robot_dataset / "prompts.jsonl"), "--model", str(tiny_lm_dir),
                     "--out", str(tmp_path / "eval"), "--limit", "3", "--batch-size", "3",
                     "--max-new-tokens", "4", "--no-report"])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert set(metrics["tasks"]) == {"waypoint", "current_state", "movement"}
    assert all(t["n"] == 1 for t in metrics["tasks"].values())
    assert "current_state" in capsys.readouterr().out


def test_eval_refuses_image_rows(robot_dataset: Path, tiny_lm_dir: Path, tmp_path: Path, capsys) -> None:
    code = main(["eval", "--data", str(robot_dataset / "prompts_vl.jsonl"), "--model", str(tiny_lm_dir),
                 "--out", str(tmp_path / "eval"), "--limit", "2", "--no-report"])
    assert code == 2
    assert "prompts.jsonl" in capsys.readouterr().err


def test_robot_bench_cli_answers_judges_and_resumes(robot_dataset: Path, tiny_lm_dir: Path,
                                                    tmp_path: Path, capsys) -> None:
    import torch

    out = tmp_path / "bench"
    argv = ["robot-bench", "--data", str(robot_dataset / "bench_test_in.jsonl"), "--model", str(tiny_lm_dir),
            "--judge", str(tiny_lm_dir), "--out", str(out), "--limit", "4", "--max-new-tokens", "4",
            "--dtype", "float32"]
    threads = _one_thread()
    try:
        # A random tiny judge cannot grade: the probe stops the run before any answer is generated.
        assert main(argv) == 2
        assert "failed its grading probe" in capsys.readouterr().err
        assert json.loads((out / "judge_probe.json").read_text())["passed"] is False
        assert not (out / "answers.jsonl").exists() or not read_jsonl(out / "answers.jsonl")
        argv.append("--allow-weak-judge")
        assert main(argv) == 0
        first = json.loads((out / "bench_metrics.json").read_text())
        assert main(argv) == 0
    finally:
        torch.set_num_threads(threads)
    second = json.loads((out / "bench_metrics.json").read_text())
    assert first["answered_this_run"] == 4 and second["answered_this_run"] == 0
    assert first["scores_trusted"] is False and first["judge_probe"]["n_cases"] > 4  # probe uses the whole file
    answers = read_jsonl(out / "answers.jsonl")
    assert len(answers) == 4 and {a["model"] for a in answers} == {str(tiny_lm_dir)}
    cats = first["categories"]
    # Every question is either scored (n, unparsed ones as 0) or a judge failure.
    assert sum(c["n"] + c["judge_failures"] for c in cats.values()) == 4
    assert set(cats) <= {"movement", "spatial", "planning", "high_level_action"}


@pytest.mark.parametrize(("extra", "message"), [
    (["--judge", "http://localhost:1/v1"], "--judge-model"),
    (["--judge", "x", "--limit", "0"], "must be positive"),
    (["--judge", "x", "--probe-items", "0"], "--probe-items"),
])
def test_robot_bench_bad_arguments(robot_dataset: Path, tmp_path: Path, capsys, extra, message) -> None:
    code = main(["robot-bench", "--data", str(robot_dataset / "bench_test_in.jsonl"), "--out", str(tmp_path), *extra])
    assert code == 2 and message in capsys.readouterr().err
