"""Which judge is this? Flags for a consistency rate that would be circular.

A consistency rate is informative only when the judge is not what training optimised against: a
policy trained with the consistency reward learns to satisfy *that* judge, so the same judge then
reports success whatever the reasoning is worth. This module finds the judge a training run's reward
used (from the run folder beside a saved model: ``final/``, ``checkpoint-N/`` or ``warmup/model``) and
compares it with the evaluation judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from embodied_r.core.io import read_json


def _run_folder(model: str) -> Path | None:
    """The training run folder a saved model belongs to (it holds resolved_recipe.yaml), or None."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return None
    for candidate in (path, path.parent, path.parent.parent):
        if (candidate / "resolved_recipe.yaml").is_file():
            return candidate
    return None


def canonical_model(spec: Any) -> str:
    """A comparable name: the resolved folder of a local model, else the spec as text."""
    text = str(spec)
    if text.startswith(("http://", "https://")) or isinstance(spec, dict):
        return text
    try:
        from embodied_r.inference.models import BUILTIN_MODELS, converted_model_dir

        if text in BUILTIN_MODELS:
            return str(converted_model_dir(text).resolve())
    except ImportError:  # pragma: no cover - part of the package
        pass
    path = Path(text).expanduser()
    return str(path.resolve()) if path.exists() else text


def _reward_name(entry: Any) -> str:
    """A recorded ``rewards:`` entry's name: ``"format"``, ``{"name": ..., ...}`` or ``{name: {options}}``."""
    if isinstance(entry, dict):
        return str(entry.get("name") or next(iter(entry), ""))
    return str(entry)


def training_judge(model: str) -> dict[str, Any] | None:
    """The judge the consistency reward used when ``model`` was trained, or None (not a training
    output, or no consistency reward)."""
    run = _run_folder(model)
    if run is None:
        return None
    recipe = yaml.safe_load((run / "resolved_recipe.yaml").read_text(encoding="utf-8")) or {}
    if "consistency" not in [_reward_name(entry) for entry in recipe.get("rewards") or []]:
        return None
    section = recipe.get("judge")
    # A run recorded before the recipe section ``judge`` existed names its judge ``reference_model``.
    spec = section.get("model", "policy") if isinstance(section, dict) else recipe.get("reference_model", "policy")
    if spec in (None, "policy"):
        config = run / "grpo_config.json"
        start = read_json(config).get("model_path") if config.is_file() else recipe.get("model")
        return {"run": str(run), "spec": "policy", "model": canonical_model(start)}
    if isinstance(spec, dict) and "base_url" in spec:
        return {"run": str(run), "spec": spec, "model": f"{spec.get('model')}@{spec['base_url']}"}
    name = spec.get("model") if isinstance(spec, dict) else spec
    return {"run": str(run), "spec": spec, "model": canonical_model(name)}


def judge_flags(judge_spec: str, judge_name: str, evaluated_model: str) -> list[str]:
    """Warnings about an evaluation judge: it is the evaluated model, or the training reward's judge."""
    flags = []
    judge_model = canonical_model(evaluated_model if judge_spec == "policy" else judge_name)
    if judge_spec == "policy" or judge_model == canonical_model(evaluated_model):
        flags.append("self-judged: the judge is the evaluated model itself")
    used = training_judge(evaluated_model)
    if used is not None and used["model"] == judge_model:
        flags.append(
            f"circular: the judge is the one the training reward used (run {used['run']}); the rate "
            "measures what training optimised, not consistency"
        )
    return flags
