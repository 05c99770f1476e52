"""`embodied-r robot-bench --input image`: a tiny Qwen2.5-VL answers the open-ended questions looking at
the frame, a tiny text judge scores them, and the input is recorded and guarded on resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl


@pytest.fixture()
def bench_file(tmp_path: Path) -> Path:
    """bench.jsonl with two questions on two frames, the PNGs under images/ beside it (as synth writes)."""
    from PIL import Image

    folder = tmp_path / "robot"
    (folder / "images").mkdir(parents=True)
    records = []
    for i, (category, question) in enumerate([("movement", "What movement should the gripper make next?"),
                                              ("high_level_action", "What is the robot's immediate next subtask?")]):
        image = f"images/ep000_s{i:04d}.png"
        Image.new("RGB", (96, 80), (40 + 100 * i, 90, 160)).save(folder / image)
        records.append({"id": f"pick/ep000/s{i:04d}/bench_{category}", "source": "robot_r1_bench", "task": category,
                        "video": image, "question": question, "options": None, "answer": "Move down",
                        "answer_type": "open", "meta": {"task_description": "pick up the puck", "image": image}})
    path = folder / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_robot_bench_image_input(bench_file: Path, tiny_lm_dir: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    from tiny_vl import save_tiny_qwen25_vl

    from embodied_r.evaluation.vl_generation import VisionLanguageEngine

    model = save_tiny_qwen25_vl(tmp_path / "vl")
    pixels: list[int] = []
    real_inputs = VisionLanguageEngine._inputs

    def spy(self, conversations, prefixes):
        inputs = real_inputs(self, conversations, prefixes)
        pixels.append(int(inputs["pixel_values"].shape[0]))
        return inputs

    monkeypatch.setattr(VisionLanguageEngine, "_inputs", spy)
    out = tmp_path / "bench"
    argv = ["robot-bench", "--data", str(bench_file), "--model", str(model), "--judge", str(tiny_lm_dir),
            "--out", str(out), "--max-new-tokens", "3", "--dtype", "float32", "--allow-weak-judge"]
    assert main([*argv, "--input", "image"]) == 0
    metrics = json.loads((out / "bench_metrics.json").read_text())
    assert metrics["input"] == "image" and metrics["answered_this_run"] == 2
    answers = read_jsonl(out / "answers.jsonl")
    assert len(answers) == 2 and {a["input"] for a in answers} == {"image"}
    assert pixels and all(p > 0 for p in pixels)  # the frames went through the model
    assert sum(c["n"] + c["judge_failures"] for c in metrics["categories"].values()) == 2
    # Resuming with the other input would mix text-path answers into an image-path run.
    assert main([*argv, "--input", "text"]) == 2
    assert "image input" in capsys.readouterr().err
    assert main([*argv, "--input", "image"]) == 0
    assert json.loads((out / "bench_metrics.json").read_text())["answered_this_run"] == 0


def test_robot_bench_image_input_needs_a_vision_language_model(bench_file: Path, tiny_lm_dir: Path,
                                                               tmp_path: Path, capsys) -> None:
    code = main(["robot-bench", "--data", str(bench_file), "--model", str(tiny_lm_dir), "--judge", str(tiny_lm_dir),
                 "--out", str(tmp_path / "bench"), "--input", "image"])
    assert code == 2 and "text-only model" in capsys.readouterr().err
    assert not (tmp_path / "bench" / "answers.jsonl").exists()
