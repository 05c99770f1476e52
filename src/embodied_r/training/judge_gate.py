"""Before GRPO spends hours on a consistency reward, check its judge (``inference.judge_probe``).

The probe runs on every process (each holds its own replica of the judge) with cases built from the
training rows; the pass/fail decision is gathered so all processes stop, or go on, together. Its
result is written to ``output_dir/judge_probe.json`` and reused by a resumed run whose judge and
settings are unchanged. A judge that fails stops the run unless ``allow_weak_judge: true``, which the
file then records.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from embodied_r.core.io import atomic_write_json
from embodied_r.core.validity import section_keys
from embodied_r.inference.judge_probe import (
    DEFAULT_CASES,
    DEFAULT_MAX_LETTER_SHARE,
    DEFAULT_MIN_AGREEMENT,
    ProbeError,
    probe_fingerprint,
    probe_record,
    weak_judge_message,
)
from embodied_r.inference.judges import JudgeError
from embodied_r.methods.embodied_r.consistency import ConsistencyReward, gather_flags

logger = logging.getLogger(__name__)

PROBE_KEYS = {"cases": int, "min_agreement": float, "max_letter_share": float, "seed": int, "conflict": bool}


def probe_settings(spec: Any, source: str = "recipe") -> dict[str, Any]:
    """The recipe's ``judge_probe`` mapping with defaults, checked (a RecipeError-compatible ValueError)."""
    settings: dict[str, Any] = {
        "cases": DEFAULT_CASES,
        "min_agreement": DEFAULT_MIN_AGREEMENT,
        "max_letter_share": DEFAULT_MAX_LETTER_SHARE,
        "seed": 0,
        "conflict": True,
    }
    if spec is None:
        return settings
    section_keys(spec, "judge_probe", sorted(PROBE_KEYS), "{cases: 64, min_agreement: 0.8}", source)
    for key, value in spec.items():
        kind = PROBE_KEYS[key]
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{source}: judge_probe.{key} must be true or false, got {value!r}")
            settings[key] = value
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and value != int(value))
        ):
            raise ValueError(f"{source}: judge_probe.{key} must be a number, got {value!r}")
        settings[key] = kind(value)
    if settings["cases"] < 16:
        raise ValueError(f"{source}: judge_probe.cases must be at least 16, got {settings['cases']}")
    for key in ("min_agreement", "max_letter_share"):
        if not 0 < settings[key] <= 1:
            raise ValueError(f"{source}: judge_probe.{key} must be in (0, 1], got {settings[key]}")
    return settings


def consistency_in_use(rewards: list[Any], weights_by_stage: list[list[float]]) -> ConsistencyReward | None:
    """The consistency reward when some stage (or the static weights) gives it a non-zero weight."""
    for index, func in enumerate(rewards):
        if isinstance(func, ConsistencyReward) and any(w[index] for w in weights_by_stage):
            return func
    return None


def gate_judge(reward: ConsistencyReward, rows: list[Any], output_dir: Path, settings: dict[str, Any],
               allow_weak: bool, is_main: bool) -> dict[str, Any]:
    """Probe ``reward.judge`` (or reuse an identical earlier probe); raise JudgeError if it fails and
    weak judges are not allowed. Returns what ``judge_probe.json`` holds."""
    judge = reward.judge
    fingerprint = probe_fingerprint(judge, rows, **settings)
    path = output_dir / "judge_probe.json"
    try:
        # Every process probes its own replica; only the main process writes the file (below).
        record = probe_record(
            judge,
            rows,
            path,
            fingerprint,
            n_cases=settings["cases"],
            seed=settings["seed"],
            conflict=settings["conflict"],
            min_agreement=settings["min_agreement"],
            max_letter_share=settings["max_letter_share"],
            write=False,
        )
    except ProbeError as exc:
        if not allow_weak:
            raise JudgeError(
                f"cannot probe the consistency judge on the training rows: {exc}; add "
                "multiple-choice rows, or set allow_weak_judge: true to go on unprobed"
            ) from exc
        record = {
            "judge": fingerprint["judge"],
            "sees_letters": fingerprint["sees_letters"],
            "cases": 0,
            "questions": 0,
            "passed": False,
            "not_run": str(exc),
            "message": f"probe not run: {exc}",
            "fingerprint": fingerprint,
        }
    passed_everywhere = all(flag for flags in gather_flags([bool(record["passed"])]) for flag in flags)
    record["allowed_weak"] = bool(allow_weak and not passed_everywhere)
    if is_main:
        atomic_write_json(path, record)
    if passed_everywhere:
        logger.info("judge probe: %s", record["message"])
    elif not allow_weak:
        raise JudgeError(weak_judge_message(record["message"]) + f" The probe is in {path}.")
    else:
        logger.warning(
            "judge probe failed, going on because allow_weak_judge is true: the consistency reward "
            "of this run is not a measure of consistency. %s",
            record["message"],
        )
    return record
