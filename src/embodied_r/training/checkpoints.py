"""Checkpoint folders of a GRPO run: which exist, which are complete, and where a run resumes.

TRL writes ``checkpoint-N/`` folders; a kill during a save leaves one half-written. A new run refuses an
output folder that already has checkpoints (it would mix two runs), and ``--resume`` removes half-written
ones and continues from the last complete one.
"""

from __future__ import annotations

import logging
from pathlib import Path

from embodied_r.training.recipe import RecipeError

logger = logging.getLogger(__name__)


def existing_checkpoints(output_dir: Path) -> list[Path]:
    """TRL checkpoint folders in ``output_dir``, oldest first (complete or not)."""
    found = [p for p in output_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def is_complete_checkpoint(folder: Path) -> bool:
    """The Trainer writes ``trainer_state.json`` last (after weights, optimizer and RNG state), so a
    checkpoint is complete when that file exists and parses; a kill during a save leaves it without."""
    import json

    state = folder / "trainer_state.json"
    try:
        return state.is_file() and isinstance(json.loads(state.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def drop_partial_checkpoints(output_dir: Path) -> list[str]:
    """Remove checkpoint folders a kill left half-written; returns their names (logged by the caller)."""
    import shutil

    partial = [p for p in existing_checkpoints(output_dir) if not is_complete_checkpoint(p)]
    for folder in partial:
        shutil.rmtree(folder, ignore_errors=True)
    return [p.name for p in partial]


def resume_checkpoint(output_dir: Path, resume: bool, is_main_process: bool) -> Path | None:
    """The checkpoint a run continues from (None: a fresh start), after the checks: ``--resume`` needs a
    checkpoint folder, a run without it needs a folder with none. On resume the main process removes
    half-written checkpoints first."""
    checkpoints = existing_checkpoints(output_dir)
    complete = [p for p in checkpoints if is_complete_checkpoint(p)]
    if resume and not checkpoints:
        raise RecipeError(f"--resume: no checkpoint-* folder in {output_dir}; run without --resume to start")
    if not resume and checkpoints:
        partial = [p.name for p in checkpoints if p not in complete]
        note = (f" ({', '.join(partial)} {'is' if len(partial) == 1 else 'are'} incomplete: a save was interrupted; "
                "--resume removes it and continues from the last complete checkpoint"
                + (f", {complete[-1].name})" if complete else ", or starts over when there is none)")
                ) if partial else ""
        raise RecipeError(
            f"{output_dir} already has {checkpoints[-1].name}{note}; pass --resume to continue that run, or set "
            "output_dir to a new folder"
        )
    if not resume:
        return None
    dropped = drop_partial_checkpoints(output_dir) if is_main_process else []
    if dropped:
        logger.warning(
            "--resume: removed incomplete checkpoint(s) %s (a save was interrupted); %s", ", ".join(dropped),
            f"continuing from {complete[-1].name}" if complete else "no complete checkpoint: starting over",
        )
    return complete[-1] if complete else None


__all__ = ["drop_partial_checkpoints", "existing_checkpoints", "is_complete_checkpoint", "resume_checkpoint"]
