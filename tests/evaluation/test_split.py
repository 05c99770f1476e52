from __future__ import annotations

import pytest
from shared_paths import shared_data

from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.urbanvideo import load_urbanvideo
from embodied_r.evaluation.split import (
    embodied_r_selection,
    kfold_by_scene,
    scene_key,
    split_by_scene,
)


def _records() -> list[QARecord]:
    out = []
    for i in range(60):
        source = "vsibench" if i % 2 else "urbanvideo_bench"
        task = ("object_rel_direction_hard" if i % 4 == 1 else "object_counting") if source == "vsibench" \
            else ("Counterfactual" if i % 4 == 0 else "Scene Recall")
        out.append(QARecord(id=str(i), source=source, task=task, video="", question="q", options=["A. x"],
                            answer="A", meta={"scene": f"sc{i % 12}"}))
    return out


def test_selection_keeps_the_eight_tasks_and_merges_direction_levels() -> None:
    selected = embodied_r_selection(_records())
    assert {r.task for r in selected} == {"Counterfactual", "object_rel_direction"}
    assert len(selected) == 30


def test_real_urbanvideo_selection_counts() -> None:
    records, _ = load_urbanvideo(shared_data("urbanvideo_bench/MCQ.parquet"))
    selected = embodied_r_selection(records)
    counts = {t: sum(1 for r in selected if r.task == t) for t in {r.task for r in selected}}
    # The Embodied-R paper's selection: 1,183 + 876 + 781 + 134 = 2,974 questions.
    assert counts == {"Action Generation": 1183, "Landmark Position": 876, "Progress Evaluation": 781,
                      "Counterfactual": 134}
    parts = split_by_scene(selected, seed=0)
    scenes = {name: {scene_key(r) for r in rs} for name, rs in parts.items()}
    assert not (scenes["train"] & scenes["test"]) and not (scenes["train"] & scenes["val"])
    assert sum(len(rs) for rs in parts.values()) == 2974
    total_scenes = sum(len(s) for s in scenes.values())
    assert abs(len(scenes["test"]) / total_scenes - 0.20) < 0.02


def test_split_is_seeded_and_independent_of_row_order() -> None:
    records = _records()
    first = split_by_scene(records, seed=3)
    again = split_by_scene(list(reversed(records)), seed=3)
    assert ({k: sorted(r.id for r in v) for k, v in first.items()}
            == {k: sorted(r.id for r in v) for k, v in again.items()})
    other = split_by_scene(records, seed=4)
    assert {r.id for r in other["test"]} != {r.id for r in first["test"]}
    with pytest.raises(ValueError, match="sum"):
        split_by_scene(records, (0.5, 0.5, 0.5))


def test_kfold_partitions_scenes() -> None:
    records = _records()
    folds = kfold_by_scene(records, folds=3, seed=0)
    tests = [{r.id for r in f["test"]} for f in folds]
    assert set().union(*tests) == {r.id for r in records}
    assert sum(len(t) for t in tests) == len(records)  # each question tested exactly once
    for fold in folds:
        assert not ({scene_key(r) for r in fold["train"]} & {scene_key(r) for r in fold["test"]})
    with pytest.raises(ValueError, match="scene"):
        kfold_by_scene(records, folds=13)
