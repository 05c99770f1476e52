"""The Embodied-R task selection and seeded scene-level splits (train/val/test or k folds).

Selection (as the Embodied-R paper describes it): UrbanVideo-Bench's Landmark Position, Counterfactual,
Progress Evaluation and Action Generation, and VSI-Bench's multiple-choice tasks with the three
relative-direction levels merged into ``object_rel_direction``.

Splits are by scene, so no clip of a scene is on both sides (§7.2). The official code shuffled scenes
with an unseeded ``np.random.shuffle`` (not reproducible); here the shuffle is seeded and done per
source, so each benchmark is represented in every split in proportion. The paper's 5-fold protocol
("five equal parts, 5-fold cross-validation") is ``kfold_by_scene``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.core.io import atomic_write_json, write_jsonl
from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.registry import summarize_records

URBANVIDEO_TASKS = ("Landmark Position", "Counterfactual", "Progress Evaluation", "Action Generation")
VSIBENCH_TASKS = ("object_rel_direction", "object_rel_distance", "obj_appearance_order", "route_planning")
DEFAULT_RATIOS = (0.75, 0.05, 0.20)
SPLIT_NAMES = ("train", "val", "test")


def embodied_r_selection(records: Sequence[QARecord]) -> list[QARecord]:
    """The eight Embodied-R tasks out of UrbanVideo-Bench and VSI-Bench records (other sources dropped)."""
    selected: list[QARecord] = []
    for record in records:
        if record.source == "urbanvideo_bench" and record.task in URBANVIDEO_TASKS:
            selected.append(record)
        elif record.source == "vsibench":
            task = "object_rel_direction" if record.task.startswith("object_rel_direction") else record.task
            if task in VSIBENCH_TASKS:
                record.task = task
                selected.append(record)
    return selected


def scene_key(record: QARecord) -> str:
    """``source:scene``; questions without a scene are their own scene."""
    return f"{record.source}:{record.meta.get('scene') or record.video or record.id}"


def check_scene_disjoint(parts: Mapping[str, Sequence[QARecord | Mapping[str, Any]]]) -> None:
    """Raise ValueError when a scene has questions in two parts of a split (records or their dicts): a
    held-out score over rooms the model trained in measures memory of those rooms, not reading.

    >>> r = lambda i, scene: QARecord(i, "s", "t", "", "q", None, "1", meta={"scene": scene})
    >>> check_scene_disjoint({"train": [r("a", "x")], "test": [r("b", "y")]})
    >>> check_scene_disjoint({"train": [r("a", "x")], "test": [r("b", "x")]})
    Traceback (most recent call last):
    ...
    ValueError: scene s:x is in more than one part of the split (train, test); split by scene
    """
    owner: dict[str, str] = {}
    for name, records in parts.items():
        for record in records:
            if not isinstance(record, QARecord):
                record = QARecord.from_dict(dict(record))
            key = scene_key(record)
            if owner.setdefault(key, name) != name:
                raise ValueError(f"scene {key} is in more than one part of the split ({owner[key]}, {name}); "
                                 "split by scene")


def _scenes_by_source(records: Sequence[QARecord], seed: int) -> dict[str, list[str]]:
    """Each source's scenes in a seeded random order (sorted first, so the order of input rows does not matter)."""
    scenes: dict[str, set[str]] = defaultdict(set)
    for record in records:
        scenes[record.source].add(scene_key(record))
    rng = np.random.default_rng(seed)
    return {source: [names[i] for i in rng.permutation(len(names))]
            for source, names in ((s, sorted(scenes[s])) for s in sorted(scenes))}


def split_by_scene(records: Sequence[QARecord], ratios: Sequence[float] = DEFAULT_RATIOS,
                   seed: int = 0) -> dict[str, list[QARecord]]:
    """``{"train", "val", "test"}`` record lists, cut by scene count per source.

    >>> rs = [QARecord(str(i), "s", "t", "", "q", ["A. x"], "A", meta={"scene": str(i % 10)}) for i in range(40)]
    >>> parts = split_by_scene(rs, (0.6, 0.2, 0.2), seed=1)
    >>> [len(parts[k]) for k in ("train", "val", "test")]
    [24, 8, 8]
    """
    if len(ratios) != 3 or any(r < 0 for r in ratios) or abs(sum(ratios) - 1.0) > 1e-6:
        raise ValueError(f"split ratios must be three non-negative numbers summing to 1, got {list(ratios)}")
    assignment: dict[str, str] = {}
    for scenes in _scenes_by_source(records, seed).values():
        n = len(scenes)
        n_train = int(round(ratios[0] * n))
        n_val = int(round((ratios[0] + ratios[1]) * n)) - n_train
        for index, scene in enumerate(scenes):
            assignment[scene] = "train" if index < n_train else "val" if index < n_train + n_val else "test"
    parts: dict[str, list[QARecord]] = {name: [] for name in SPLIT_NAMES}
    for record in records:
        parts[assignment[scene_key(record)]].append(record)
    return parts


def kfold_by_scene(records: Sequence[QARecord], folds: int = 5, seed: int = 0) -> list[dict[str, list[QARecord]]]:
    """``folds`` ``{"train", "test"}`` pairs; each source's scenes are dealt round-robin into folds."""
    if folds < 2:
        raise ValueError(f"k-fold needs at least 2 folds, got {folds}")
    fold_of: dict[str, int] = {}
    for scenes in _scenes_by_source(records, seed).values():
        if len(scenes) < folds:
            raise ValueError(f"only {len(scenes)} scene(s) in a source: cannot make {folds} scene-level folds")
        for index, scene in enumerate(scenes):
            fold_of[scene] = index % folds
    out = []
    for fold in range(folds):
        test = [r for r in records if fold_of[scene_key(r)] == fold]
        train = [r for r in records if fold_of[scene_key(r)] != fold]
        out.append({"train": train, "test": test})
    return out


def _part_summary(records: Sequence[QARecord]) -> dict[str, Any]:
    return {"n": len(records), "scenes": len({scene_key(r) for r in records}), "tasks": summarize_records(records)}


def write_split(parts: dict[str, list[QARecord]], out: str | Path, info: dict[str, Any]) -> dict[str, Any]:
    """Write ``<name>.jsonl`` per part and ``split.json`` (settings, counts, scene lists)."""
    check_scene_disjoint(parts)
    out = Path(out)
    for name, records in parts.items():
        write_jsonl(out / f"{name}.jsonl", [r.to_dict() for r in records])
    summary = {**info, "parts": {name: _part_summary(rs) for name, rs in parts.items()},
               "scenes": {name: sorted({scene_key(r) for r in rs}) for name, rs in parts.items()}}
    atomic_write_json(out / "split.json", summary)
    return summary
