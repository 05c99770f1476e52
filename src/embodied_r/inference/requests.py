"""One model request and its result, as the HTTP client and the local VLM backend exchange them.

A caller hands a backend an iterable of :class:`FrameRequest` and gets ``on_result(request, FrameResult)``
back for each as it finishes, in any order and possibly from another thread. Perception sends one per
key frame; the judges and image-row evaluation reuse the same shape for their chat requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class FrameRequest:
    """One VLM call: the prompt for key frame ``frame_index`` of question ``qa_id``.

    ``images`` (BGR arrays, in prompt order) are attached by the runner just before the backend needs
    them, and only for backends with ``needs_images``. ``context`` carries what the oracle needs (the
    QARecord and all the question's key-frame timestamps)."""

    key: str
    qa_id: str
    frame_index: int
    video: Path
    image_timestamps: tuple[float, ...]
    prompt: str
    output: str
    images: list[np.ndarray] | None = None
    context: dict[str, Any] = field(default_factory=dict)


@dataclass
class FrameResult:
    """The answer (``text``) or why there is none (``error``). ``frame`` is a ready parsed frame for
    backends that produce structure directly (the oracle); ``info`` holds extras such as
    ``finish_reason``."""

    text: str | None = None
    error: str | None = None
    attempts: int = 1
    seconds: float = 0.0
    frame: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


OnResult = Callable[[FrameRequest, FrameResult], None]
