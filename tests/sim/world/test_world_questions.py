from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from _world_reference import check_static_question, real_meta_dir

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl
from embodied_r.core.records import QARecord
from embodied_r.sim.world.categories import UnknownCategoryError
from embodied_r.sim.world.dataset import meta_questions
from embodied_r.sim.world.layout import LayoutConfig, sample_scene
from embodied_r.sim.world.scenes import SceneError, scene_from_meta, validate_meta_entry

NUMERIC = {"object_counting", "object_abs_distance", "object_size_estimation", "room_size_estimation"}


def _load(meta_dir, *names: str) -> dict:
    out = {}
    for name in names:
        out.update(json.loads((meta_dir / f"{name}_meta_info_val.json").read_text()))
    return out


def test_real_meta_questions_have_independently_checked_answers() -> None:
    meta = _load(real_meta_dir(), "scannet")
    names = sorted(meta)[:12]
    questions, skipped = meta_questions({n: meta[n] for n in names}, seed=3)
    assert not skipped
    assert {q.task for q in questions} >= NUMERIC | {"object_rel_direction_hard", "route_planning"}
    for q in questions:
        row = q.to_dict()
        assert QARecord.from_dict(row).answer == q.answer
        assert (q.answer_type == "number") == (q.task in NUMERIC)
        check_static_question(row, meta[q.meta["scene"]])


def test_procedural_scene_questions_checked_and_objects_do_not_interpenetrate() -> None:
    from embodied_r.core.geometry import boxes_overlap, points_in_polygon

    meta = {}
    for i in range(3):
        scene = sample_scene(f"p{i}", np.random.default_rng(i))
        for j, a in enumerate(scene.objects):
            assert points_in_polygon(a.box.corners()[:, :2], scene.polygon).all()
            for b in scene.objects[j + 1:]:
                assert not boxes_overlap(a.box, b.box), (a.label, b.label)
        meta[scene.name] = scene.to_meta_info()
        rebuilt = scene_from_meta(scene.name, meta[scene.name])
        assert rebuilt.counts() == scene.counts()
    questions, _ = meta_questions(meta, seed=1)
    assert len(questions) > 15
    for q in questions:
        check_static_question(q.to_dict(), meta[q.meta["scene"]])


def test_answer_letters_are_uniform_over_200_scenes() -> None:
    meta = _load(real_meta_dir(), "arkitscenes", "scannetpp")  # 150 + 50 scenes
    assert len(meta) == 200
    questions, _ = meta_questions(meta, seed=0)
    by_task: dict[str, Counter] = {}
    for q in questions:
        if q.answer_type == "choice":
            by_task.setdefault(q.task, Counter())[q.answer] += 1
    assert len(by_task) == 5
    for task, counts in by_task.items():
        total = sum(counts.values())
        n_options = len(next(q.options for q in questions if q.task == task))
        for letter in "ABCD"[:n_options]:
            assert abs(counts[letter] / total - 1 / n_options) <= 0.05, (task, counts)


def test_bad_meta_and_layout_input_give_clear_errors() -> None:
    with pytest.raises(SceneError, match="missing field"):
        validate_meta_entry("s", {"room_size": 10, "object_counts": {}})
    with pytest.raises(SceneError, match="axesLengths"):
        validate_meta_entry("s", {"room_size": 10, "object_counts": {"chair": 1},
                                  "object_bbox": {"chair": [{"centroid": [0, 0, 0], "axesLengths": [1, 1],
                                                             "normalizedAxes": [1, 0, 0, 0, 1, 0, 0, 0, 1]}]}})
    with pytest.raises(SceneError, match="room_size"):
        validate_meta_entry("s", {"room_size": -1, "object_counts": {}, "object_bbox": {}})
    with pytest.raises(UnknownCategoryError, match="unicorn"):
        LayoutConfig(categories=("chair", "unicorn", "table", "sofa", "bed")).validate()
    with pytest.raises(SceneError, match="too small"):
        LayoutConfig(min_area=2, max_area=3).validate()
    # A malformed scene is skipped with its reason; the others still produce questions.
    good = sample_scene("good", np.random.default_rng(0)).to_meta_info()
    questions, skipped = meta_questions({"good": good, "bad": {"room_size": 3}})
    assert "bad" in skipped and "missing field" in skipped["bad"]
    assert questions and all(q.meta["scene"] == "good" for q in questions)


def test_inconsistent_real_counts_are_never_asked(tmp_path) -> None:
    meta = _load(real_meta_dir(), "scannet")
    entry = meta["scene0565_00"]  # object_counts says 2 printers, object_bbox holds 4
    questions, _ = meta_questions({"scene0565_00": entry}, seed=0)
    assert all("printer" not in q.meta["categories"] for q in questions)


def test_synth_questions_cli(tmp_path) -> None:
    meta = {f"p{i}": sample_scene(f"p{i}", np.random.default_rng(10 + i)).to_meta_info() for i in range(1)}
    meta_path = tmp_path / "meta.json"
    meta_path.write_text(json.dumps(meta))
    out = tmp_path / "q.jsonl"
    assert main(["synth", "questions", "--meta", str(meta_path), "--out", str(out)]) == 0
    rows = read_jsonl(out)
    assert rows and {r["meta"]["scene"] for r in rows} == {"p0"}
    for row in rows:
        check_static_question(row, meta[row["meta"]["scene"]])
    assert main(["synth", "questions", "--meta", str(tmp_path / "missing.json"), "--out", str(out)]) == 2


def test_wall_stubs_too_short_for_any_object_are_skipped_not_crashed() -> None:
    # The 0.4 m wall (the notch of an L-room) cannot hold a bed; drawing it used to raise inside numpy
    # (uniform with high < low) and abort a whole dataset. These seeds drew such walls.
    from embodied_r.sim.world.categories import CATEGORIES
    from embodied_r.sim.world.layout import _candidate

    notch = [(0.0, 0.0), (4.0, 0.0), (4.0, 2.0), (3.6, 2.0), (3.6, 3.0), (0.0, 3.0)]
    results = [_candidate(np.random.default_rng(seed), CATEGORIES["bed"], notch, 2.8) for seed in range(300)]
    assert any(r is None for r in results) and any(r is not None for r in results)
    for index in (61, 70, 132, 165, 196):
        scene = sample_scene("s", np.random.default_rng([0, index, 0, 0]))
        assert scene.objects
