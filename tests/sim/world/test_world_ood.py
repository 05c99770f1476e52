"""The out-of-distribution world preset (``synth world --ood``) and the guarantee that ID worlds do not change."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from _world_reference import check_static_question

from embodied_r.cli.main import main
from embodied_r.core.io import read_json, read_jsonl
from embodied_r.sim.world.categories import (
    CATEGORIES,
    OOD_CATEGORIES,
    UnknownCategoryError,
    color_for,
    get_category,
    is_ood,
)
from embodied_r.sim.world.dataset import (
    SUGGESTED_MAX_KEYFRAMES,
    WorldConfig,
    build_and_plan,
    build_scene,
    meta_questions,
    scene_names,
    write_manifest,
)
from embodied_r.sim.world.layout import OOD_LAYOUT, LayoutConfig, _draw_weights, _sample_counts, sample_scene
from embodied_r.sim.world.scenes import SceneError


def _fingerprint(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _names_ood(text: str) -> set[str]:
    return {c for c in OOD_CATEGORIES if re.search(rf"\b{re.escape(c)}\b", text)}


# ---------------------------------------------------------------------------------------------------
# (a) ID worlds are unchanged
# ---------------------------------------------------------------------------------------------------

# Recorded with the code as it was before the OOD preset existed (commit 2420942 plus the working tree's
# geometry move), by sample_scene(f"scene_{s}", default_rng(s)).to_meta_info() and, for the dataset's own
# seed keys, build_and_plan(WorldConfig(seed=s), 1, f"scene_{s}_0001", None) -> meta + poses at 5 fps.
ID_LAYOUT_FINGERPRINTS = {0: "98558e5c8b2d5b39", 1: "82b1ae3114bba535", 2: "2a46134b7fd57ab0",
                          3: "de7c3eb58e8feada", 4: "3fc6ec09126f6f4d"}
ID_PLAN_FINGERPRINTS = {0: "6aea306634cc2992", 1: "c5f53a4f71c6c821", 2: "73dc226ef0cd67fd"}


def test_id_layout_draws_are_exactly_those_made_before_the_ood_preset() -> None:
    got = {s: _fingerprint(sample_scene(f"scene_{s}", np.random.default_rng(s)).to_meta_info()) for s in range(5)}
    assert got == ID_LAYOUT_FINGERPRINTS


def test_id_dataset_scenes_and_walks_are_unchanged(tmp_path) -> None:
    got = {}
    for s in ID_PLAN_FINGERPRINTS:
        config = WorldConfig(out=tmp_path, seed=s)
        assert config.max_seconds == 20.0 and config.layout == LayoutConfig() and not config.ood
        scene, path = build_and_plan(config, 1, f"scene_{s}_0001", None)
        got[s] = _fingerprint({"meta": scene.to_meta_info(), "poses": path.poses(5.0), "final": path.final_action})
    assert got == ID_PLAN_FINGERPRINTS


# ---------------------------------------------------------------------------------------------------
# (b) the ID sampler never draws OOD categories; the tables are disjoint
# ---------------------------------------------------------------------------------------------------


def test_ood_table_is_separate_and_names_share_no_word_with_id_names() -> None:
    assert 6 <= len(OOD_CATEGORIES) <= 8 and not set(OOD_CATEGORIES) & set(CATEGORIES)
    assert sum(1 for c in OOD_CATEGORIES.values() if c.max_count >= 2) >= 2
    for name, cat in OOD_CATEGORIES.items():
        assert all(name not in other and other not in name for other in CATEGORIES), name
        assert cat.shape in {"box", "table", "chair", "bed"} and cat.placement in {"floor", "wall", "mounted"}
        assert 0.05 < cat.width <= cat.length < 2.5 and 0.1 < cat.height < 2.5
        assert get_category(name) is cat and color_for(name) == (cat.color_name, cat.rgba) and is_ood(name)
    assert not any(is_ood(n) for n in CATEGORIES)
    with pytest.raises(UnknownCategoryError, match="desk"):  # the error lists OOD names among the known ones
        get_category("unicorn")


def test_id_sampler_never_draws_an_ood_category() -> None:
    names, p = _draw_weights(LayoutConfig())
    assert names == list(CATEGORIES) and p.sum() == pytest.approx(1.0)
    for seed in range(200):  # the category draw is the only place categories enter a layout
        assert not set(_sample_counts(np.random.default_rng(seed), LayoutConfig())) & set(OOD_CATEGORIES)
    for seed in range(5):
        assert not set(sample_scene("s", np.random.default_rng(seed)).counts()) & set(OOD_CATEGORIES)


def test_layout_config_rejects_inconsistent_ood_settings() -> None:
    with pytest.raises(SceneError, match="ood_share"):
        LayoutConfig(categories=("chair", "desk", "table", "sofa", "bed")).validate()
    with pytest.raises(SceneError, match="OOD categories"):
        LayoutConfig(categories=("chair", "table", "sofa", "bed", "door"), ood_share=0.5).validate()
    with pytest.raises(SceneError, match="ood_share"):
        LayoutConfig(ood_share=1.5).validate()
    with pytest.raises(SceneError, match="min_categories"):
        LayoutConfig(ood_share=1.0, min_categories=9, max_categories=10).validate()
    # OOD only: every drawn category is an OOD one
    only = LayoutConfig(ood_share=1.0, min_categories=4, max_categories=6)
    assert set(sample_scene("o", np.random.default_rng(0), only).counts()) <= set(OOD_CATEGORIES)


# ---------------------------------------------------------------------------------------------------
# (c) OOD scenes: OOD categories, larger rooms, own names and random streams
# ---------------------------------------------------------------------------------------------------


def test_ood_scenes_hold_several_ood_categories_in_larger_rooms(tmp_path) -> None:
    config = WorldConfig(out=tmp_path, scenes=12, seed=7, ood=True)
    assert config.layout == OOD_LAYOUT and config.max_seconds == 30.0
    names = scene_names(config)
    assert names[0] == "ood_7_0000" and not set(names) & set(scene_names(WorldConfig(out=tmp_path, scenes=12, seed=7)))
    scenes = [build_scene(config, i, name, None) for i, name in enumerate(names)]
    id_scenes = [build_scene(WorldConfig(out=tmp_path, seed=7), i, f"scene_7_{i:04d}", None) for i in range(6)]
    ood_counts = [sum(1 for c in s.counts() if c in OOD_CATEGORIES) for s in scenes]
    assert min(ood_counts) >= 1 and np.median(ood_counts) >= 3
    assert all(29.9 <= s.area <= 70.1 for s in scenes)  # the drawn area, up to polygon rounding
    assert np.median([s.area for s in scenes]) > np.median([s.area for s in id_scenes]) + 10
    # counting questions can use OOD categories: some room holds two or more of one
    assert any(n >= 2 for s in scenes for c, n in s.counts().items() if c in OOD_CATEGORIES)
    # the OOD world's draws are not the ID world's with other parameters: own seed stream
    assert config.seed_key(3, 0, 0) != WorldConfig(out=tmp_path, seed=7).seed_key(3, 0, 0)


def test_ood_walks_are_longer_and_the_planner_copes_with_large_rooms(tmp_path) -> None:
    ood, plain = WorldConfig(out=tmp_path, seed=2, ood=True), WorldConfig(out=tmp_path, seed=2)
    ood_durations = [build_and_plan(ood, i, f"ood_2_{i:04d}", None)[1].duration for i in range(4)]
    id_durations = [build_and_plan(plain, i, f"scene_2_{i:04d}", None)[1].duration for i in range(4)]
    assert all(d <= 30.0 + 3.0 for d in ood_durations)  # budget + the final action
    assert np.mean(ood_durations) > np.mean(id_durations)


# ---------------------------------------------------------------------------------------------------
# (d) a combined ID-train / OOD-test setup: OOD questions name OOD categories, ID questions never do
# ---------------------------------------------------------------------------------------------------


def test_id_train_ood_test_split_keeps_ood_categories_out_of_id_questions(tmp_path) -> None:
    id_config, ood_config = WorldConfig(out=tmp_path, seed=4), WorldConfig(out=tmp_path, seed=4, ood=True)
    id_meta = {n: build_scene(id_config, i, n, None).to_meta_info()
               for i, n in enumerate(scene_names(WorldConfig(out=tmp_path, scenes=5, seed=4)))}
    ood_meta = {n: build_scene(ood_config, i, n, None).to_meta_info()
                for i, n in enumerate(scene_names(WorldConfig(out=tmp_path, scenes=5, seed=4, ood=True)))}
    train, skipped_train = meta_questions(id_meta, seed=4, source="synthetic_world")
    test, skipped_test = meta_questions(ood_meta, seed=4, source="synthetic_world")
    assert not skipped_train and not skipped_test and train and test
    assert not {q.meta["scene"] for q in train} & {q.meta["scene"] for q in test}
    for q in train:
        assert not set(q.meta.get("categories", [])) & set(OOD_CATEGORIES)
        assert not _names_ood(" ".join([q.question, *(q.options or [])])), q.question
    named = [q for q in test if set(q.meta.get("categories", [])) & set(OOD_CATEGORIES)]
    assert len(named) >= len(test) // 3
    assert all(_names_ood(q.question + " ".join(q.options or [])) for q in named)
    assert {q.task for q in named} >= {"object_abs_distance", "object_size_estimation", "object_rel_direction_hard"}
    # The answers about OOD objects are as checkable as any (the reference's distance checks sample box
    # surfaces densely and take seconds each; test_world_questions covers them, category-agnostic code).
    for q in named:
        if q.task not in {"object_rel_distance", "object_abs_distance"}:
            check_static_question(q.to_dict(), ood_meta[q.meta["scene"]])


# ---------------------------------------------------------------------------------------------------
# (e) the manifest, (f) bad combinations
# ---------------------------------------------------------------------------------------------------


def test_manifest_lists_used_and_ood_categories(tmp_path) -> None:
    scenes = {"a": {"object_counts": {"desk": 2, "chair": 1}}, "b": {"object_counts": {"sink": 1, "tv": 1}}}
    manifest = write_manifest(tmp_path, WorldConfig(out=tmp_path, seed=3, ood=True), scenes)
    assert read_json(tmp_path / "world.json") == manifest == {
        "preset": "ood", "scenes": 2, "categories": ["chair", "desk", "sink", "tv"],
        "ood_categories": ["desk", "sink"], "suggested_max_keyframes": 10, "seed": 3, "seconds": 30.0}
    plain = WorldConfig(out=tmp_path, max_seconds=12.0)
    manifest = write_manifest(tmp_path, plain, {"a": {"object_counts": {"tv": 1}}})
    assert manifest["preset"] == "id" and manifest["ood_categories"] == [] and manifest["seconds"] == 12.0
    assert manifest["suggested_max_keyframes"] == SUGGESTED_MAX_KEYFRAMES["id"] == 6


def test_ood_with_from_meta_is_refused(tmp_path, capsys) -> None:
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"s": {"room_size": 10, "object_counts": {}, "object_bbox": {}}}))
    assert main(["synth", "world", "--ood", "--from-meta", str(meta), "--out", str(tmp_path / "w")]) == 2
    assert "--from-meta" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()
    with pytest.raises(ValueError, match="--ood"):
        WorldConfig(out=tmp_path, ood=True, from_meta=meta).validate()


def test_tiny_ood_render_end_to_end(tmp_path, capsys) -> None:
    pytest.importorskip("mujoco")
    out = tmp_path / "ood"
    assert main(["synth", "world", "--ood", "--out", str(out), "--scenes", "2", "--seed", "3", "--resolution",
                 "64x48", "--fps", "5", "--seconds", "6"]) == 0
    assert "--max-frames 10" in capsys.readouterr().out
    scenes = read_json(out / "scenes.json")
    assert sorted(scenes) == ["ood_3_0000", "ood_3_0001"]
    assert all(Path(out / "videos" / f"{n}.mp4").is_file() for n in scenes)
    manifest = read_json(out / "world.json")
    used = {c for entry in scenes.values() for c in entry["object_counts"]}
    assert manifest["preset"] == "ood" and manifest["categories"] == sorted(used) and manifest["seconds"] == 6.0
    assert manifest["ood_categories"] == sorted(used & set(OOD_CATEGORIES)) != []
    rows = read_jsonl(out / "questions.jsonl")
    assert rows and any(set(r["meta"].get("categories", [])) & set(OOD_CATEGORIES) for r in rows)
