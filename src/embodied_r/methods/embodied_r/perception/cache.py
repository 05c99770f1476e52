"""On-disk cache of VLM answers, one file per request, keyed by everything that changes the answer.

Why one file per request: every finished request is written with an atomic rename the moment it
finishes, so a run killed at any instant keeps all finished requests and never holds half an entry;
concurrent writers (threads, or two runs sharing the folder) cannot interleave bytes; lookups are a
single ``stat``. Files live under ``<dir>/<key[:2]>/<key>.json`` to keep folders small.

The key is a SHA-256 over a canonical JSON of: the video's content hash (not its path, so renaming or
moving a video keeps its cache and re-encoding it invalidates it), the timestamps of the images sent,
the prompt version and full prompt text (which contains the question or its entities), the entities,
the backend, the model and the backend's generation/image settings. API keys are never part of it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, atomic_write_json, read_json

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1
_HASH_CHUNK = 1 << 20


# ---------------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------------

_video_hashes: dict[tuple[str, int, int], str] = {}
_video_hash_lock = threading.Lock()


def video_content_hash(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a video file's bytes, memoised per (path, size, mtime) within the process."""
    path = Path(path)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise DataFileError(f"{path}: video file not found") from None
    memo = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _video_hash_lock:
        if memo in _video_hashes:
            return _video_hashes[memo]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    with _video_hash_lock:
        _video_hashes[memo] = value
    return value


def request_key(*, video_hash: str, image_timestamps: Sequence[float], prompt_version: str, prompt_text: str,
                entities: Sequence[str], backend: str, model: str, settings: Mapping[str, Any],
                extra: Mapping[str, Any] | None = None) -> str:
    """The cache key of one perception request (hex SHA-256).

    >>> k = request_key(video_hash="ab", image_timestamps=[0.0, 1.5], prompt_version="official-v1",
    ...                 prompt_text="p", entities=[], backend="openai", model="m", settings={"t": 0})
    >>> k == request_key(video_hash="ab", image_timestamps=[0.0, 1.5000001], prompt_version="official-v1",
    ...                  prompt_text="p", entities=[], backend="openai", model="m", settings={"t": 0})
    True
    >>> k == request_key(video_hash="ab", image_timestamps=[0.0, 1.5], prompt_version="official-v1",
    ...                  prompt_text="p", entities=[], backend="openai", model="m", settings={"t": 0.7})
    False
    """
    fields = {
        "format": CACHE_FORMAT,
        "video_sha256": video_hash,
        # Millisecond rounding: timestamps come from float arithmetic in the key-frame stage.
        "image_timestamps": [round(float(t), 3) for t in image_timestamps],
        "prompt_version": prompt_version,
        "prompt_text": prompt_text,
        "entities": list(entities),
        "backend": backend,
        "model": model,
        "settings": dict(settings),
        "extra": dict(extra or {}),
    }
    canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------------
# Store
# ---------------------------------------------------------------------------------------------------


class PerceptionCache:
    """Folder of finished requests. ``force=True`` ignores what is stored (entries are overwritten as
    requests finish again), which is how ``--force`` recomputes.

    >>> import tempfile
    >>> cache = PerceptionCache(tempfile.mkdtemp())
    >>> cache.get("00ff") is None
    True
    >>> cache.put("00ff", {"text": "1. Move forward 2. a 3. b"})
    >>> cache.get("00ff")["text"]
    '1. Move forward 2. a 3. b'
    """

    def __init__(self, directory: str | os.PathLike[str], force: bool = False) -> None:
        self.directory = Path(directory)
        self.force = force
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_for(self, key: str) -> Path:
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"cache key must be lowercase hex, got {key!r}")
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if self.force:
            return None
        path = self.path_for(key)
        if not path.is_file():
            return None
        try:
            entry = read_json(path)
        except DataFileError as exc:
            # Only something outside this code can leave a bad file (writes are atomic); recompute it.
            logger.warning("ignoring unreadable cache entry (%s); it will be recomputed", exc)
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or "text" not in entry:
            logger.warning("ignoring cache entry %s: wrong key or no text; it will be recomputed", path)
            return None
        return entry

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        payload = dict(entry)
        payload["key"] = key
        payload["cache_format"] = CACHE_FORMAT
        # No pretty-printing: entries are machine-read and written on the hot path.
        atomic_write_json(self.path_for(key), payload, indent=None)

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/*.json"))
