"""Where the read-only reference data lives (``../shared/data`` beside the repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def shared_data(relative: str) -> Path:
    """A file under ../shared/data, or a clean skip when this checkout has no shared folder."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"reference data {relative} not present (expected under ../shared/data)")
    return path
