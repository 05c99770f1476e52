"""The oracle backend's detail levels through the perception runner: settings (cache keys), meta.detail, and the
ground-truth labels (meta.seen / meta.needs) kept through the request cache. ``oracle_frames`` is replaced by a
stand-in, so these tests do not depend on the world code."""

from __future__ import annotations

import math

import pytest

from embodied_r.core.io import read_jsonl
from embodied_r.core.records import Perception
from embodied_r.methods.embodied_r.perception.cache import PerceptionCache
from embodied_r.methods.embodied_r.perception.runner import perceive
from embodied_r.sim.world.oracle_backend import OracleBackend

FIVE_KEYS = {"timestamp", "action", "delta", "q_related", "raw"}


@pytest.fixture
def fake_oracle(monkeypatch):
    """Replace ``oracle_frames``; returns the list of keyword arguments it was called with."""
    import embodied_r.sim.world.oracle as oracle

    calls: list[dict] = []

    def oracle_frames(dataset_dir, qa, timestamps, noise=None, seed=0, detail="words", detail_noise=0.0):
        calls.append({"qa": qa.id, "noise": noise, "seed": seed, "detail": detail, "detail_noise": detail_noise})
        seen = [["chair_0", "wall_1"], [], ["table_2"], ["chair_0"]]
        return [{"timestamp": t, "action": "Move forward", "delta": f"{detail} frame {i}", "q_related": "",
                 "raw": f"{detail} raw {i}", "seen": seen[i % len(seen)], "needs": ["chair_0", "table_2"]}
                for i, t in enumerate(timestamps)]

    monkeypatch.setattr(oracle, "oracle_frames", oracle_frames)
    return calls


def run_oracle(dataset, tmp_path, backend, name="perception.jsonl"):
    cache = PerceptionCache(tmp_path / "cache")
    out = tmp_path / name
    summary = perceive(dataset.questions, dataset.root, dataset.keyframes, backend, cache, out)
    return summary, [Perception.from_dict(r) for r in read_jsonl(out)]


def test_settings_stay_as_before_at_words_and_name_other_levels():
    assert OracleBackend(".").settings() == {"noise": None, "seed": 0}
    assert OracleBackend(".", seed=3, detail="words", detail_noise=0.0).settings() == {"noise": None, "seed": 3}
    assert OracleBackend(".", detail="relations", detail_noise=0.5).settings() == {
        "noise": None, "seed": 0, "detail": "relations", "detail_noise": 0.5}
    for bad in ({"detail": "pixels"}, {"detail": "map", "detail_noise": -1.0},
                {"detail": "map", "detail_noise": math.nan}):
        with pytest.raises(ValueError):
            OracleBackend(".", **bad)


def test_detail_reaches_the_oracle_and_the_records(dataset, tmp_path, fake_oracle):
    summary, records = run_oracle(dataset, tmp_path, OracleBackend(dataset.root, detail="map", detail_noise=0.2))
    assert summary.done == len(dataset.questions) and summary.failed == 0
    assert {(c["detail"], c["detail_noise"]) for c in fake_oracle} == {("map", 0.2)}
    for record in records:
        assert record.meta["detail"] == "map"
        assert record.meta["seen"] == [["chair_0", "wall_1"], [], ["table_2"], ["chair_0"]]
        assert record.meta["needs"] == ["chair_0", "table_2"]
        assert all(set(frame) == FIVE_KEYS for frame in record.frames)  # the prompt text is unchanged
        assert record.meta["settings"]["detail"] == "map"

    # A second run is served from the cache alone: the labels survive the cache's round trip.
    fake_oracle.clear()
    again, cached = run_oracle(dataset, tmp_path, OracleBackend(dataset.root, detail="map", detail_noise=0.2),
                               name="again.jsonl")
    assert again.requested == 0 and again.cached > 0 and fake_oracle == []
    assert [(r.meta["detail"], r.meta["seen"], r.meta["needs"], r.frames) for r in cached] == \
        [(r.meta["detail"], r.meta["seen"], r.meta["needs"], r.frames) for r in records]

    # Another level is another cache key: nothing is reused from the map run.
    words, records = run_oracle(dataset, tmp_path, OracleBackend(dataset.root), name="words.jsonl")
    assert words.cached == 0 and {c["detail"] for c in fake_oracle} == {"words"}
    assert all(r.meta["detail"] == "words" and "seen" in r.meta for r in records)


def test_cache_entries_without_labels_leave_seen_and_needs_out(dataset, tmp_path, monkeypatch):
    """Entries cached by the oracle before it reported labels (same key at words) give no seen/needs, so the
    span of their rows is unknown rather than wrong."""
    import embodied_r.sim.world.oracle as oracle

    def old_oracle_frames(dataset_dir, qa, timestamps, **kwargs):
        return [{"timestamp": t, "action": None, "delta": "d", "q_related": "", "raw": "r"} for t in timestamps]

    monkeypatch.setattr(oracle, "oracle_frames", old_oracle_frames)
    _, records = run_oracle(dataset, tmp_path, OracleBackend(dataset.root))
    assert all(r.meta["detail"] == "words" and "seen" not in r.meta and "needs" not in r.meta for r in records)


def test_a_vlm_backend_has_no_detail_level(dataset, tmp_path):
    from embodied_r.inference.requests import FrameResult

    class TextBackend:  # a VLM-like backend: text answers, no `detail` attribute, no labels
        name, model, needs_images, per_question = "text", "vlm", False, False

        def settings(self):
            return {}

        def run(self, requests, on_result):
            for request in requests:
                on_result(request, FrameResult(text="A sofa." if request.frame_index == 0 else
                                               "1. Move left\n2. A lamp.\n3. No door."))

    _, records = run_oracle(dataset, tmp_path, TextBackend())
    assert records and all(r.meta["detail"] is None and "seen" not in r.meta for r in records)
