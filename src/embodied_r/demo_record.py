"""The demo's measured run as a small record (``embodied-r demo --record PATH``): what README quotes.

Everything is read from what the stages wrote (``demo_summary.json``'s metrics, the predictions for the
paired tests, the train summary): nothing is measured twice. A docs test reads README's demo table back
from the checked-in record (``docs/records/demo.json``), so a stale number fails a test.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from pathlib import Path
from typing import Any

from embodied_r.core.intervals import prediction_difference
from embodied_r.core.io import read_jsonl
from embodied_r.training.reward_signal import steps_with_signal

# Record field -> the evaluation baseline it is read from (the GRPO model's evaluation).
BASELINE_FIELDS = {"blind": "blind", "text_rule": "text-rule", "random": "random", "letter_prior": "prior",
                   "answer_prior": "answer-prior"}


def machine() -> dict[str, Any]:
    """What the run was measured on: the CPU's model name, its cores and whether it has AVX-512 bf16
    (the flag that decides ``--dtype auto``'s precision and a CPU's speed class)."""
    flags, name = "", platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and name in ("", platform.machine()):
            name = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = value
    return {"cpu": name, "cores": os.cpu_count(), "avx512_bf16": "avx512_bf16" in flags.split()}


def _comparison(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    diff = prediction_difference(before, after)
    keys = ("n", "difference", "ci95", "p_value", "improved", "worsened", "verdict")
    return {key: diff.get(key) for key in keys}


def _overall(metrics: dict[str, Any]) -> float | None:
    return (metrics.get("overall") or {}).get("micro")


def demo_record(summary: dict[str, Any], out_dir: str | Path, size: Any) -> dict[str, Any]:
    """The record of one finished demo in ``out_dir`` (its ``summary`` as ``run_demo`` returns it, and the
    ``DemoSize`` it ran at). Raises ValueError when an evaluation the record needs is missing."""
    out_dir = Path(out_dir)
    sft, after = summary.get("eval_sft"), summary.get("eval_after")
    if not sft or not after:
        raise ValueError(f"{out_dir}: the demo has not finished both evaluations; no record to write")
    baselines = after.get("baselines") or {}
    solver = (baselines.get("solver") or {}).get("overall") or {}
    accuracy = {"sft": _overall(sft), "grpo": _overall(after),
                **{field: ((baselines.get(name) or {}).get("overall") or {}).get("micro")
                   for field, name in BASELINE_FIELDS.items()},
                "solver_ceiling": solver.get("ceiling"), "solver_applicable": solver.get("applicable")}
    sft_predictions = read_jsonl(out_dir / "eval_sft" / "predictions.jsonl")
    after_predictions = read_jsonl(out_dir / "eval_after" / "predictions.jsonl")
    comparisons = {"grpo_vs_sft": _comparison(sft_predictions, after_predictions)}
    blind = out_dir / "eval_after" / "baselines" / "blind.jsonl"
    if blind.is_file():
        comparisons["grpo_vs_blind"] = _comparison(read_jsonl(blind), after_predictions)
    train = summary.get("train") or {}
    return {
        "measured": _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
        "machine": machine(),
        "dtype": size.dtype,
        # The stages' own times add up to the whole demo's, also when a rerun skipped finished stages
        # (the invocation's wall time, ``wall_time_s``, then covers only what it ran).
        "stages_s": round(sum(info.get("seconds", 0.0) for info in (summary.get("stages") or {}).values()), 1),
        "wall_time_s": summary.get("wall_time_s"),
        "peak_rss_gib": summary.get("peak_rss_gib"),
        "tasks": list(size.tasks or []),
        "detail": size.detail,
        "span": size.span,
        "n": (after.get("overall") or {}).get("n"),
        "sft_steps": size.sft_steps,
        "grpo_steps": train.get("global_step"),
        "grpo_steps_with_signal": steps_with_signal(out_dir / "train" / "metrics.jsonl", train.get("global_step")),
        "accuracy": accuracy,
        "comparisons": comparisons,
    }


__all__ = ["demo_record", "machine"]
