"""A Robot-R1 record followed from ``synth robot`` to a scored prediction imports no Embodied-R module: the
method seam (``embodied_r.methods``) names each method's parts by path, so one method's path never loads
another's. Run in a fresh interpreter, where ``sys.modules`` shows exactly what the path imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# synth robot (through its command module), then the reward and evaluation's generation and scoring.
SCRIPT = r'''
import argparse, json, sys

out, model_dir = sys.argv[1], sys.argv[2]
from embodied_r.cli import synth

parser = argparse.ArgumentParser()
synth.add_arguments(parser)
args = parser.parse_args(["robot", "--out", out, "--tasks", "pick-place-v3", "--episodes", "1",
                          "--test-episodes", "1", "--held-out-tasks", "box-close-v3", "--resolution", "32x32",
                          "--seed", "3"])
assert synth.run(args) == 0

from embodied_r.core.io import read_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.predict import evaluate_rows, score_completion
from embodied_r.inference.models import load_reasoner
from embodied_r.methods import ROBOT_R1, method_for_row
from embodied_r.methods.rewards import get_reward

rows = [PromptRow.from_dict(r) for r in read_jsonl(out + "/prompts.jsonl")[:2]]
model, tokenizer = load_reasoner(model_dir, dtype="float32")
predictions = evaluate_rows(model, tokenizer, rows, batch_size=2, max_new_tokens=4)
right = "<think>.</think><answer>" + ROBOT_R1.answer_text(rows[0].answer) + "</answer>"
reward = get_reward("accuracy")([right], answer=[rows[0].answer], answer_type=[rows[0].answer_type],
                                options=[rows[0].options], prompt_version=[rows[0].meta["prompt_version"]])
print(json.dumps({
    "method": method_for_row(rows[0].meta).name,
    "predictions": len(predictions),
    "scored": score_completion(rows[0], right).correct and reward == [1.0],
    "embodied_r_modules": sorted(m for m in sys.modules if m.startswith("embodied_r.methods.embodied_r")),
}))
'''


def test_the_robot_r1_path_imports_no_embodied_r_module(tiny_lm_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "robot"), str(tiny_lm_dir)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["method"] == "robot_r1" and result["predictions"] == 2 and result["scored"]
    assert result["embodied_r_modules"] == []
