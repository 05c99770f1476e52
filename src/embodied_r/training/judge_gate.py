"""Before GRPO spends hours on a reward that a judge pays (the consistency reward), check the judge
(``judge.probe``). Such a reward carries its judge as ``reward.judge``.

The probe runs on every process (each holds its own replica of the judge) with cases built from the
training rows; the pass/fail decision is gathered so all processes stop, or go on, together. Its
result is written to ``output_dir/judge_probe.json`` and reused by a resumed run whose judge and
settings are unchanged. A judge that fails stops the run unless ``judge.allow_weak: true``, which the
file then records. The probe's settings are the recipe section's (``judge.settings``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from embodied_r.core.io import atomic_write_json
from embodied_r.judge.judges import JudgeError
from embodied_r.judge.probe import ProbeError, probe_fingerprint, probe_record, weak_judge_message
from embodied_r.methods.ranks import gather_flags

logger = logging.getLogger(__name__)


def judged_reward_in_use(rewards: list[Any], weights_by_stage: list[list[float]]) -> Any | None:
    """The first reward that carries a judge (``reward.judge``) and that some stage (or the constant
    weights) gives a non-zero weight; None when there is none."""
    for index, func in enumerate(rewards):
        if getattr(func, "judge", None) is not None and any(w[index] for w in weights_by_stage):
            return func
    return None


def gate_judge(reward: Any, rows: list[Any], output_dir: Path, settings: dict[str, Any],
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
                "multiple-choice rows, or set judge.allow_weak: true to go on unprobed"
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
            "judge probe failed, going on because judge.allow_weak is true: the consistency reward "
            "of this run is not a measure of consistency. %s",
            record["message"],
        )
    return record
