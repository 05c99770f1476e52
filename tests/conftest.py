"""Shared fixtures: paths to the real reference data and a tiny local language model."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lets tests import tiny_models, shared_paths

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point EMBODIED_R_CACHE at an empty folder (for model-conversion tests)."""
    monkeypatch.setenv("EMBODIED_R_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def keyframe_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny rendered world with text and key-frame prompt rows (tests/keyframe_world.py); read-only:
    a test that damages a frame works on a copy."""
    from keyframe_world import build_keyframe_world

    return build_keyframe_world(tmp_path_factory.mktemp("keyframe_world"))


@pytest.fixture(scope="session")
def tiny_vl_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_vl import save_tiny_qwen25_vl

    return save_tiny_qwen25_vl(tmp_path_factory.mktemp("tiny_qwen25_vl"))
