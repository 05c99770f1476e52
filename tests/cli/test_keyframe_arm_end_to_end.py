"""Both arms of Embodied-R's comparison end to end on a CPU, as a user runs them, with a tiny random
Qwen2.5-VL built from a config: `synth world` -> `keyframes` -> `perceive` (oracle) -> `build-prompts` (text
rows and `--input keyframes` rows) -> `train` (the CPU VL recipe, 2 GRPO steps) -> `eval` of the checkpoint on
the key-frame rows and of a text reasoner on the text rows -> `report` with the two arms side by side.

Measured on the 2-core development machine (shared with a running experiment): the pipeline 6-9 s, the
whole pytest process 11-19 s, peak resident memory 0.77 GiB (both printed by the test with ``-s``)."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import torch
import yaml
from keyframe_world import build_keyframe_world

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "embodied_r" / "cpu_vlm_tiny.yaml"


def test_both_arms_from_a_synthetic_world_to_the_report(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    from tiny_vl import save_tiny_qwen25_vl

    started = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        paths = build_keyframe_world(tmp_path)
        model = save_tiny_qwen25_vl(tmp_path / "tiny_qwen2.5-vl")
        run = tmp_path / "train"
        overrides = {"model": model, "train_data": paths["frames"], "output_dir": run, "max_train_rows": 4}
        assert main(["train", "--recipe", str(RECIPE),
                     *[arg for k, v in overrides.items() for arg in ("--set", f"{k}={v}")]]) == 0
        history = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        steps = [h for h in history if "loss" in h and "rewards/format/mean" in h]
        assert len(steps) == 2 and all(h["loss"] == h["loss"] and abs(h["loss"]) < 1e6 for h in steps)
        assert {"rewards/accuracy/mean", "rewards/consistency/mean"} <= set(steps[0])
        assert (run / "checkpoint-2" / "trainer_state.json").is_file() and (run / "final" / "config.json").is_file()
        resolved = yaml.safe_load((run / "resolved_recipe.yaml").read_text())
        assert resolved["reward_schedule"] == "paper" and resolved["rewards"] == ["format", "accuracy",
                                                                                   "consistency"]

        generation = ["--limit", "6", "--max-new-tokens", "4", "--dtype", "float32", "--batch-size", "4",
                      "--no-report", "--baselines", "random,prior,text-rule,blind"]
        vlm, cascade = tmp_path / "eval_vlm", tmp_path / "eval_cascade"
        assert main(["eval", "--data", str(paths["frames"]), "--model", str(run / "final"), "--out", str(vlm),
                     *generation]) == 0
        assert main(["eval", "--data", str(paths["text"]), "--model", str(tiny_lm_dir), "--out", str(cascade),
                     *generation]) == 0
        report = tmp_path / "report"
        assert main(["report", str(cascade), str(vlm), str(run), "--out", str(report)]) == 0
    finally:
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - started
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    metrics = json.loads((vlm / "metrics.json").read_text())
    assert metrics["input"] == "image" and metrics["n_questions"] == 6
    assert metrics["baselines"]["random"]["status"] == "ok" and metrics["baselines"]["prior"]["status"] == "ok"
    # Blind: the same VLM without the key frames (frame lines and images removed), same questions and budget.
    blind = metrics["baselines"]["blind"]
    assert blind["status"] == "ok" and "key frames" in blind["note"] and blind["n_no_video_text"] == 0
    assert len(read_jsonl(vlm / "baselines" / "blind.jsonl")) == 6
    assert json.loads((cascade / "metrics.json").read_text())["input"] == "text"
    predictions = read_jsonl(vlm / "predictions.jsonl")
    assert sorted(p["id"] for p in predictions) == sorted(p["id"] for p in read_jsonl(cascade / "predictions.jsonl"))

    arms = json.loads((report / "metrics.json").read_text())["arms"]
    assert (arms["cascade"], arms["vlm"]) == ("eval_cascade", "eval_vlm")
    assert arms["overall"]["n_shared"] == 6
    assert sum(t["n_shared"] for t in arms["tasks"].values()) == 6
    html = (report / "report.html").read_text()
    assert "Both arms of the paper&#x27;s comparison" in html or "Both arms of the paper's comparison" in html
    with capsys.disabled():
        print(f"\n[keyframe arm end to end] {seconds:.1f} s, peak resident memory {peak_gib:.2f} GiB")
    assert peak_gib < 8
