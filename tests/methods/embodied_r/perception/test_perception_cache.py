"""The request cache: what changes a key, atomic entries, force."""

from __future__ import annotations

import json

import pytest

from embodied_r.methods.embodied_r.perception.cache import PerceptionCache, request_key, video_content_hash

BASE = dict(video_hash="ab" * 32, image_timestamps=[0.0, 1.0], prompt_version="official-v1", prompt_text="p",
            entities=["chair"], backend="openai", model="qwen2.5-vl-72b", settings={"temperature": 0.0})


@pytest.mark.parametrize("field,value", [
    ("video_hash", "cd" * 32), ("image_timestamps", [0.0, 1.1]), ("image_timestamps", [1.0]),
    ("prompt_version", "json-v1"), ("prompt_text", "q"), ("entities", ["table"]), ("backend", "transformers"),
    ("model", "qwen2.5-vl-7b"), ("settings", {"temperature": 0.1}), ("settings", {"temperature": 0.0, "x": 1}),
])
def test_everything_that_changes_an_answer_changes_the_key(field, value):
    assert request_key(**{**BASE, field: value}) != request_key(**BASE)


def test_key_ignores_dict_order_and_float_noise():
    reordered = {**BASE, "settings": {"b": 1, "a": 2}}
    assert request_key(**reordered) == request_key(**{**BASE, "settings": {"a": 2, "b": 1}})
    assert request_key(**{**BASE, "image_timestamps": [0.0, 1.0000004]}) == request_key(**BASE)
    assert request_key(**BASE, extra={"qa_id": "1"}) != request_key(**BASE, extra={"qa_id": "2"})


def test_video_hash_follows_content_not_name(tmp_path):
    a, b = tmp_path / "a.mp4", tmp_path / "b.mp4"
    a.write_bytes(b"x" * 3_000_000)
    b.write_bytes(b"x" * 3_000_000)
    assert video_content_hash(a) == video_content_hash(b)
    b.write_bytes(b"x" * 2_999_999 + b"y")
    assert video_content_hash(a) != video_content_hash(b)


def test_put_get_force_and_corrupt_entries(tmp_path):
    cache = PerceptionCache(tmp_path)
    key = request_key(**BASE)
    cache.put(key, {"text": "1. Move forward"})
    path = cache.path_for(key)
    assert path.parent.name == key[:2] and json.loads(path.read_text())["key"] == key
    assert cache.get(key)["text"] == "1. Move forward" and len(cache) == 1
    assert not list(tmp_path.glob("**/*.tmp"))  # atomic writes leave no temporaries
    assert PerceptionCache(tmp_path, force=True).get(key) is None
    path.write_text("{ torn")
    assert cache.get(key) is None  # recomputed, with a warning, instead of crashing
    path.write_text(json.dumps({"key": "other", "text": "x"}))
    assert cache.get(key) is None
    with pytest.raises(ValueError, match="lowercase hex"):
        cache.path_for("../escape")
