"""``eval --accuracy-rule official`` rescores stored completions (the model's and the blind baseline's)
without generating, and the default rule turns them back; a rule that does not exist is refused first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl, write_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.predict import score_completion

OPTIONS = ["A. chair", "B. bed", "C. sofa", "D. table"]
# (gold, the model's completion, the blind baseline's completion). The model scores 1, 0, 0, 1 under
# last-answer (option text alone; "a. chair"; "A or C"; a plain letter) and 0, 1, 1, 1 under official; the
# blind baseline 0, 1, 0, 1 and 1, 0, 0, 1 ("b." in the reasoning; "C." in the reasoning; wrong; right).
QUESTIONS = [
    ("B", "<think>the bed is closest</think><answer>bed</answer>",
     "<think>I pick b.</think><answer>the bed, not the sofa</answer>"),
    ("A", "<think>the chair is closest</think><answer>a. chair</answer>",
     "<think>Option C. is far</think><answer>A</answer>"),
    ("C", "<think>either one fits</think><answer>A or C</answer>",
     "<think>the table</think><answer>D</answer>"),
    ("D", "<think>the table</think><answer>D</answer>",
     "<think>the table</think><answer>D</answer>"),
]


def stored_run(tmp_path: Path) -> tuple[Path, Path]:
    """Prompt rows, and an eval folder holding every completion (so nothing is left to generate)."""
    rows = [PromptRow(id=f"q{i}", task="where", prompt=[{"role": "user", "content": f"Question {i}: what is near?"}],
                      answer=gold, options=OPTIONS) for i, (gold, _, _) in enumerate(QUESTIONS)]
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, [row.to_dict() for row in rows])
    out = tmp_path / "out"
    write_jsonl(out / "predictions.jsonl", [score_completion(row, q[1]).to_dict() for row, q in zip(rows, QUESTIONS)])
    write_jsonl(out / "baselines" / "blind.jsonl",
                [score_completion(row, q[2]).to_dict() for row, q in zip(rows, QUESTIONS)])
    return data, out


def run_eval_cli(data: Path, out: Path, *extra: str) -> dict:
    # The model name is no model at all: the run must find every completion stored and load nothing.
    assert main(["eval", "--data", str(data), "--model", "no-such-model", "--out", str(out),
                 "--baselines", "blind", "--no-report", *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def scores(path: Path) -> list[float]:
    return [record["score"] for record in read_jsonl(path)]


def test_the_official_rule_rescores_stored_completions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, out = stored_run(tmp_path)
    original = read_jsonl(out / "predictions.jsonl")

    ours = run_eval_cli(data, out)
    assert ours["accuracy_rule"] == "last-answer" and ours["generated_this_run"] == 0
    assert scores(out / "predictions.jsonl") == [1.0, 0.0, 0.0, 1.0]
    assert ours["overall"]["micro"] == 0.5
    assert ours["baselines"]["blind"]["overall"]["micro"] == 0.5
    assert scores(out / "baselines" / "blind.jsonl") == [0.0, 1.0, 0.0, 1.0]

    official = run_eval_cli(data, out, "--accuracy-rule", "official")
    assert official["accuracy_rule"] == "official" and official["generated_this_run"] == 0
    assert official["overall"]["micro"] == 0.75
    assert scores(out / "predictions.jsonl") == [0.0, 1.0, 1.0, 1.0]
    assert [r["parsed_answer"] for r in read_jsonl(out / "predictions.jsonl")] == [None, "A", "C", "D"]
    assert {r["meta"]["accuracy_rule"] for r in read_jsonl(out / "predictions.jsonl")} == {"official"}
    blind = official["baselines"]["blind"]
    assert blind["accuracy_rule"] == "official" and blind["overall"]["micro"] == 0.5
    assert scores(out / "baselines" / "blind.jsonl") == [1.0, 0.0, 0.0, 1.0]
    assert "accuracy rule official" in capsys.readouterr().out

    back = run_eval_cli(data, out)
    assert back["overall"]["micro"] == 0.5
    assert read_jsonl(out / "predictions.jsonl") == original  # the default rule restores the records exactly


def test_an_unknown_rule_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, out = stored_run(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["eval", "--data", str(data), "--model", "no-such-model", "--out", str(out), "--accuracy-rule", "paper"])
    assert info.value.code == 2
    assert "invalid choice: 'paper'" in capsys.readouterr().err
    assert not (out / "metrics.json").exists() and not (out / "run.json").exists()

    from embodied_r.evaluation.settings import EvalSettings

    with pytest.raises(ValueError, match="--accuracy-rule: accuracy_rule 'paper' does not exist"):
        EvalSettings(accuracy_rule="paper")  # refused when the settings are built, before run_eval loads anything
    assert not (out / "metrics.json").exists()
