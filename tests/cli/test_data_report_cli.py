from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from shared_paths import shared_data

from embodied_r.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))
from test_report import make_eval_run, make_training_run  # noqa: E402


def test_data_split_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mcq = shared_data("urbanvideo_bench/MCQ.parquet")
    assert main(["data", "split", "--urbanvideo", str(mcq), "--out", str(tmp_path / "split"), "--seed", "7"]) == 0
    assert "Action Generation" in capsys.readouterr().out
    summary = json.loads((tmp_path / "split" / "split.json").read_text())
    assert sum(p["n"] for p in summary["parts"].values()) == 2974 and summary["seed"] == 7
    lines = (tmp_path / "split" / "test.jsonl").read_text().splitlines()
    assert len(lines) == summary["parts"]["test"]["n"] and json.loads(lines[0])["options"]
    assert main(["data", "split", "--urbanvideo", str(mcq), "--out", str(tmp_path / "kf"), "--folds", "3"]) == 0
    assert sorted(p.name for p in (tmp_path / "kf").iterdir()) == ["fold_0", "fold_1", "fold_2"]


def test_data_split_keeps_only_the_task_types_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mcq = shared_data("urbanvideo_bench/MCQ.parquet")
    out = tmp_path / "split"
    assert main(["data", "split", "--urbanvideo", str(mcq), "--tasks", "Counterfactual", "--out", str(out)]) == 0
    tasks = {json.loads(line)["task"] for part in ("train", "val", "test")
             for line in (out / f"{part}.jsonl").read_text().splitlines()}
    assert tasks == {"Counterfactual"}
    assert json.loads((out / "split.json").read_text())["tasks"] == "Counterfactual"
    assert main(["data", "split", "--urbanvideo", str(mcq), "--tasks", "counting", "--out", str(out)]) == 2
    assert "no questions of ['counting']" in capsys.readouterr().err


def test_data_split_and_check_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "split", "--out", str(tmp_path)]) == 2
    assert "give at least one of" in capsys.readouterr().err
    assert main(["data", "check", f"urbanvideo:{tmp_path / 'nope.parquet'}"]) == 2
    assert "file not found" in capsys.readouterr().err


def test_report_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = make_eval_run(tmp_path / "before", [True, False])
    after = make_eval_run(tmp_path / "after", [True, True])
    train = make_training_run(tmp_path / "train")
    assert main(["report", str(before), str(after), str(train), "--out", str(tmp_path / "r")]) == 0
    assert "2 eval run(s) and 1 training run(s)" in capsys.readouterr().out
    assert (tmp_path / "r" / "compare.png").is_file() and (tmp_path / "r" / "training.png").is_file()
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "r2")]) == 2


def test_eval_with_a_loader_spec_and_perception(tmp_path: Path, tiny_lm_dir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from test_eval_specs import _write_perception, _write_qa

    qa = _write_qa(tmp_path, n=2)
    perception = _write_perception(tmp_path, ["q0", "q1"])
    out = tmp_path / "out"
    code = main(["eval", "--data", f"qa:{qa}", "--perception", str(perception), "--model", str(tiny_lm_dir),
                 "--out", str(out), "--max-new-tokens", "4", "--dtype", "float32", "--baselines", "random,vlm_only"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "baselines" in printed and "not run" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"]["n"] == 2 and metrics["baselines"]["random"]["status"] == "ok"
    assert (out / "report.html").is_file()
    assert main(["eval", "--data", f"qa:{qa}", "--out", str(tmp_path / "o2")]) == 2
    assert "--perception FILE" in capsys.readouterr().err
    assert main(["eval", "--data", f"qa:{qa}", "--out", str(tmp_path / "o3"), "--baselines", "magic"]) == 2
