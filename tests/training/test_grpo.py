"""A few real GRPO steps of a tiny local model: parameters change, stages switch by epoch, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from embodied_r.cli.main import main
from embodied_r.training.grpo import train
from embodied_r.training.recipe import load_recipe

STAGES = [  # epoch-based, one stage per epoch so 5 steps at 2 steps/epoch cross two boundaries
    {"start": 1, "weights": {"format": 1.0, "accuracy": 0.0, "test_length": 1.0, "consistency": 0.0}},
    {"start": 2, "weights": {"format": 0.5, "accuracy": 0.5, "test_length": 1.0, "consistency": 0.0}},
    {"start": 3, "weights": {"format": 0.1, "accuracy": 0.7, "test_length": 1.0, "consistency": 0.2}},
]


class AgreeingJudge:
    def __init__(self) -> None:
        self.calls = 0

    def judge(self, questions, thinks, options):
        self.calls += 1
        return ["A"] * len(questions)


def tiny_recipe_dir(make) -> Path:
    return Path(load_recipe(make()).train_data).parent


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def train_logs(run: Path) -> list[dict]:
    return [r for r in read_jsonl(run / "metrics.jsonl") if "reward_stage" in r]


def test_training_changes_parameters_and_switches_stages(tiny_recipe, tiny_lm_dir, varying_reward) -> None:
    recipe = load_recipe(
        tiny_recipe(
            max_steps=5,
            rewards=["format", "accuracy", varying_reward, "consistency"],
            reward_schedule=STAGES,
            eval_data=str(tiny_recipe_dir(tiny_recipe) / "heldout.jsonl"),
            eval_max_new_tokens=8,
            save_steps=100,
            report_to="tensorboard",
            judge={"allow_weak": True},  # a constant judge on 4 toy rows: the probe cannot vouch for it
        )
    )
    judge = AgreeingJudge()
    summary = train(recipe, judge=judge)
    run = recipe.output_dir
    assert summary["global_step"] == 5

    before = load_file(str(tiny_lm_dir / "model.safetensors"))
    after = load_file(str(run / "final" / "model.safetensors"))
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert len(changed) >= len(before) // 2, f"only {changed} changed"

    logs = train_logs(run)
    assert [r["step"] for r in logs] == [1, 2, 3, 4, 5]
    assert [r["reward_stage"] for r in logs] == [1, 1, 2, 2, 3]  # 4 prompts / 2 per step = 2 steps per epoch
    assert [r["reward_weight/format"] for r in logs] == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.1])
    # Consistency is skipped (None -> logged as None) while its weight is 0, and judged in stage 3.
    assert [r["rewards/consistency/mean"] is None for r in logs] == [True, True, True, True, False]
    # TRL's weighted total equals the weights times the per-function means at every step.
    for r in logs:
        parts = [
            r[f"reward_weight/{n}"] * (r[f"rewards/{n}/mean"] or 0.0)
            for n in ("format", "accuracy", "test_length")
        ]
        assert r["reward"] == pytest.approx(
            sum(parts) + r["reward_weight/consistency"] * (r["rewards/consistency/mean"] or 0.0), abs=1e-5
        )
        assert 0.0 <= r["zero_variance_groups/format"] <= 1.0 and "time/generation_s" in r

    # TensorBoard gets the consistency curve from the step it is judged, and no None before that.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events_file,) = run.rglob("events.out.tfevents.*")
    events = EventAccumulator(str(events_file))
    events.Reload()
    assert [e.step for e in events.Scalars("train/rewards/format/mean")] == [1, 2, 3, 4, 5]
    assert [e.step for e in events.Scalars("train/rewards/consistency/mean")] == [5]

    samples = read_jsonl(run / "samples.jsonl")
    assert len(samples) == 10 and set(samples[0]["rewards"]) == {
        "format",
        "accuracy",
        "test_length",
        "consistency",
    }
    evals = read_jsonl(run / "eval.jsonl")
    assert [e["step"] for e in evals] == [0, 5] and all(e["n"] == 2 for e in evals)
    assert all(len(e["ci95"]) == 2 and sum(e["task_n"].values()) == 2 for e in evals)
    resolved = (run / "resolved_recipe.yaml").read_text(encoding="utf-8")
    assert "reward_schedule" in resolved and "max_steps: 5" in resolved
    assert json.loads((run / "grpo_config.json").read_text())["reward_functions"][-1] == "consistency"
    probe = json.loads((run / "judge_probe.json").read_text())
    assert probe["passed"] is False and probe["allowed_weak"] is True and "probe not run" in probe["message"]
    assert summary["judge_probe"]["allowed_weak"] is True and summary["schedule_unreached"] == []


def test_cli_train_then_resume_keeps_the_stage(tiny_recipe, capsys) -> None:
    # Default reference model ("policy"): a real frozen copy of the tiny model judges consistency.
    stages = [
        {"start": 1, "weights": {"format": 1.0, "accuracy": 0.0, "consistency": 0.0}},
        {"start": 2, "weights": {"format": 0.2, "accuracy": 0.6, "consistency": 0.2}},
    ]
    recipe = tiny_recipe(rewards=["format", "accuracy", "consistency"], reward_schedule=stages,
                         judge={"allow_weak": True})
    run = Path(load_recipe(recipe).output_dir)

    assert main(["train", "--recipe", str(recipe)]) == 0
    assert (run / "checkpoint-2").is_dir()
    assert main(["train", "--recipe", str(recipe)]) == 2  # refuses to overwrite a run
    assert "--resume" in capsys.readouterr().err

    assert main(["train", "--recipe", str(recipe), "--set", "max_steps=4", "--resume"]) == 0
    logs = train_logs(run)
    assert [r["step"] for r in logs] == [1, 2, 3, 4]
    assert [r["reward_stage"] for r in logs] == [1, 1, 2, 2]  # epoch 2 starts at step 3, after the resume
    assert logs[-1]["consistency/active"] == 1.0
    assert json.loads((run / "summary.json").read_text())["global_step"] == 4


def test_lora_option_trains_an_adapter(tiny_recipe, varying_reward) -> None:
    recipe = load_recipe(
        tiny_recipe(
            max_steps=1,
            rewards=[varying_reward],
            save_steps=100,
            lora={"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
        )
    )
    train(recipe)
    adapter = load_file(str(recipe.output_dir / "final" / "adapter_model.safetensors"))
    lora_b = [t for name, t in adapter.items() if "lora_B" in name]
    assert lora_b and any(t.abs().sum() > 0 for t in lora_b)  # B starts at zero; a step moved it


class RecordingWriter:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))

    def add_text(self, tag: str, value: str, step: int) -> None:
        pass

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("quiet", [False, True])
def test_tensorboard_skips_unset_metrics_without_warnings(quiet: bool) -> None:
    import logging
    from types import SimpleNamespace

    from transformers.integrations import TensorBoardCallback

    from embodied_r.training.callbacks import SetMetricsTensorBoard

    writer = RecordingWriter()
    callback = (SetMetricsTensorBoard if quiet else TensorBoardCallback)(tb_writer=writer)
    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage())

    # transformers' loggers do not propagate to the root logger, so listen on its own.
    hf_logger = logging.getLogger("transformers.integrations.integration_utils")
    handler = Collect(level=logging.WARNING)
    hf_logger.addHandler(handler)
    try:
        state = SimpleNamespace(is_world_process_zero=True, global_step=3)
        logs = {"rewards/format/mean": 0.5, "rewards/consistency/mean": None, "loss": 0.1}
        callback.on_log(None, state, None, logs=logs)
    finally:
        hf_logger.removeHandler(handler)
    assert ("train/rewards/format/mean", 0.5, 3) in writer.scalars
    assert not any("consistency" in tag for tag, _, _ in writer.scalars)
    # The stock callback warns about the None (the reason for ours); ours says nothing.
    assert bool(warnings) is not quiet, warnings


def test_a_checkpoint_cut_short_by_a_kill_is_skipped_on_resume(tiny_recipe, capsys, caplog) -> None:
    recipe = tiny_recipe()  # 2 steps, a checkpoint every 2
    run = Path(load_recipe(recipe).output_dir)
    assert main(["train", "--recipe", str(recipe)]) == 0
    # What a kill -9 during the next save leaves: config files and a temporary weights file, no state.
    partial = run / "checkpoint-3"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    (partial / "tmpabc.safetensors.tmp").write_bytes(b"\0" * 1024)
    assert main(["train", "--recipe", str(recipe), "--set", "max_steps=4"]) == 2
    err = capsys.readouterr().err
    assert "checkpoint-3 is incomplete" in err and "--resume" in err and "checkpoint-2" in err
    with caplog.at_level("WARNING", logger="embodied_r.training.checkpoints"):
        assert main(["train", "--recipe", str(recipe), "--set", "max_steps=4", "--resume"]) == 0
    assert any("removed incomplete checkpoint(s) checkpoint-3" in r.message and "checkpoint-2" in r.message
               for r in caplog.records)
    steps = [r["step"] for r in read_jsonl(run / "metrics.jsonl") if "loss" in r]
    assert steps == [1, 2, 3, 4]  # continued after step 2
    assert not partial.exists() and (run / "checkpoint-4" / "trainer_state.json").is_file()


def test_samples_come_from_every_process(tmp_path, monkeypatch) -> None:
    # Two processes of 2 completions each: TRL's gathered rewards hold rank 0's rows, then rank 1's. The
    # main process writes samples of both ranks, each with its own rewards.
    from types import SimpleNamespace

    import accelerate.utils
    import torch

    from embodied_r.core.io import read_jsonl
    from embodied_r.training.trainer import ReasonerGRPOTrainer

    other_rank = [(1, {"id": "r1-a", "task": "t", "answer": "B", "completion": "x"}),
                  (1, {"id": "r1-b", "task": "t", "answer": "B", "completion": "y"})]
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda local: list(local) + other_rank)
    fake = SimpleNamespace(
        accelerator=SimpleNamespace(num_processes=2, process_index=0, is_main_process=True),
        state=SimpleNamespace(global_step=4), samples_path=tmp_path / "samples.jsonl", samples_per_batch=3,
        reward_func_names=["accuracy"], reward_weights=torch.tensor([1.0]),
    )
    inputs = [{"id": "r0-a", "task": "t", "answer": "A"}, {"id": "r0-b", "task": "t", "answer": "A"}]
    rewards = torch.tensor([[0.0], [1.0], [0.25], [0.75]])  # gathered: r0-a, r0-b, r1-a, r1-b
    ReasonerGRPOTrainer._record_samples(fake, inputs, ["<answer>A</answer>", "z"], rewards)
    rows = read_jsonl(tmp_path / "samples.jsonl")
    assert [(r["id"], r["rewards"]["accuracy"]) for r in rows] == [("r0-a", 0.0), ("r1-a", 0.25), ("r0-b", 1.0)]
    assert all(r["step"] == 5 for r in rows)


def test_max_train_minutes_stops_after_the_step_that_crosses_it(tiny_recipe, varying_reward) -> None:
    # A budget already spent when training starts: one step runs, the final model is saved, and the
    # summary says where the run stopped; a budget that is not reached leaves max_steps in charge.
    spent = load_recipe(tiny_recipe(max_steps=4, rewards=[varying_reward], save_steps=100,
                                    max_train_minutes=1e-6))
    summary = train(spent)
    assert summary["global_step"] == 1
    assert summary["time_budget"] == {"minutes": 1e-6, "stopped_at_step": 1, "max_steps": 4}
    assert (spent.output_dir / "final" / "model.safetensors").is_file()
    roomy = load_recipe(tiny_recipe(max_steps=2, rewards=[varying_reward], save_steps=100, max_train_minutes=60,
                                    output_dir=str(spent.output_dir.parent / "roomy")))
    summary = train(roomy)
    assert summary["global_step"] == 2 and summary["time_budget"]["stopped_at_step"] is None
