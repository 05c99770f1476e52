"""What a GRPO run writes about itself beside its model: the resolved recipe, TRL's full configuration
with the library versions (``resolved_recipe.yaml``, ``grpo_config.json``, written before training) and
the summary of how it went (``summary.json``, after)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from embodied_r.core.io import atomic_write_json, atomic_write_text
from embodied_r.training.recipe import Recipe, dump_recipe

logger = logging.getLogger(__name__)


def save_resolved(recipe: Recipe, trainer: Any, context: dict[str, Any]) -> None:
    """Write the resolved recipe, TRL's full config and library versions beside the run; a different
    recipe from an earlier start of the same run is kept as ``resolved_recipe.previous.yaml``."""
    import torch
    import transformers
    import trl

    out = recipe.output_dir
    path = out / "resolved_recipe.yaml"
    text = dump_recipe(recipe)
    if path.exists() and path.read_text(encoding="utf-8") != text:
        logger.warning(
            "%s differs from this run's recipe; the previous one is kept as %s",
            path,
            path.with_suffix(".previous.yaml").name,
        )
        atomic_write_text(path.with_suffix(".previous.yaml"), path.read_text(encoding="utf-8"))
    atomic_write_text(path, text)
    schedule = context.get("schedule")
    atomic_write_json(
        out / "grpo_config.json",
        {
            "grpo_config": trainer.args.to_dict(),
            "reward_functions": list(trainer.reward_func_names),
            "reward_schedule": schedule.describe() if schedule else None,
            "model_path": context["model_path"],
            "versions": {
                "trl": trl.__version__,
                "transformers": transformers.__version__,
                "torch": torch.__version__,
            },
        },
    )


def run_summary(recipe: Recipe, trainer: Any, context: dict[str, Any], train_loss: float,
                final_dir: Path) -> dict[str, Any]:
    """``summary.json``: steps, the last logged metrics, held-out scores, step times, the judge probe, the
    stages the schedule never reached, the curriculum's difficulty counts, where a time budget stopped
    the run and the shared-prefix paths' record (training/path_choice.py)."""
    history = [
        h for h in trainer.state.log_history if "loss" in h or any(k.startswith("rewards/") for k in h)
    ]
    evaluator, budget = context["evaluator"], context["time_budget"]
    return {
        "output_dir": str(recipe.output_dir),
        "global_step": int(trainer.state.global_step),
        "epoch": trainer.state.epoch,
        "train_rows": context["rows"],
        "prompt_context": context["prompt_context"],
        "train_loss": train_loss,
        "last_log": history[-1] if history else {},
        "eval": evaluator.results if evaluator else [],
        "step_times": context["timer"].steps,
        "judge_probe": _probe_summary(context["judge_probe"]),
        "curriculum": context.get("curriculum"),  # pool rows with none, some, all completions right
        "schedule_unreached": schedule_warnings(trainer),
        "time_budget": budget.describe(int(trainer.state.max_steps)) if budget else None,
        "fast_paths": getattr(trainer, "fast_paths", None),  # the shared-prefix paths' check, timings, choice
        "final_model": str(final_dir),
    }


def _probe_summary(probe: dict[str, Any] | None) -> dict[str, Any] | None:
    if probe is None:
        return None
    keys = ("judge", "passed", "allowed_weak", "agreement", "top_letter", "top_letter_share", "message")
    return {key: probe.get(key) for key in keys}


def schedule_warnings(trainer: Any) -> list[str]:
    """What the schedule callback warned about at the start (stages the run never reached)."""
    return [reason for cb in trainer.callback_handler.callbacks for reason in getattr(cb, "unreached", [])]


__all__ = ["run_summary", "save_resolved", "schedule_warnings"]
