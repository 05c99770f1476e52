"""Perception backends behind one ``typing.Protocol``, and the simulator oracle.

A backend receives an iterable of :class:`FrameRequest` (one per key frame to describe) and calls
``on_result(request, FrameResult)`` as each one finishes, in any order, possibly from another thread.
Pulling requests lazily lets the runner decode a video's frames only when a slot is about to need
them; reporting each result at once lets the runner cache it immediately (a killed run keeps it).

- ``openai`` (:mod:`embodied_r.perception.openai_client`): any OpenAI-compatible chat server.
- ``transformers`` (:mod:`embodied_r.perception.local_vlm`): a local Qwen2.5-VL-family model, batched.
- ``oracle`` (here): the synthetic world's ground truth, so the pipeline runs with no VLM at all.

``embodied_r.perception.factory.make_backend`` builds one by name.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from embodied_r.io import DataFileError

logger = logging.getLogger(__name__)

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


@runtime_checkable
class PerceptionBackend(Protocol):
    """What the runner needs from a backend.

    ``name``/``model`` go into records and cache keys; ``settings()`` returns every option that changes
    the answers (generation and image settings; never secrets); ``per_question`` says whether answers
    depend on the question beyond the prompt text (true for the oracle), ``needs_images`` whether the
    runner must decode frames."""

    name: str
    model: str
    needs_images: bool
    per_question: bool

    def settings(self) -> dict[str, Any]: ...

    def run(self, requests: Iterable[FrameRequest], on_result: OnResult) -> None: ...


# ---------------------------------------------------------------------------------------------------
# Oracle
# ---------------------------------------------------------------------------------------------------


class OracleBackend:
    """Ground-truth perception from the synthetic world generator (``embodied_r.sim.world.oracle``).

    ``dataset_dir`` is the folder holding ``questions.jsonl``, ``scenes.json`` and ``poses/``;
    ``noise`` (an ``OracleNoise``) and ``seed`` are passed through to ``oracle_frames``. A question the
    oracle cannot describe (no poses for its scene) becomes a failed result naming the problem."""

    name = "oracle"
    model = "simulator"
    needs_images = False
    per_question = True

    def __init__(self, dataset_dir: str | Path, noise: Any = None, seed: int = 0) -> None:
        self.dataset_dir = Path(dataset_dir)
        self.noise = noise
        self.seed = seed

    def settings(self) -> dict[str, Any]:
        noise = dataclasses.asdict(self.noise) if dataclasses.is_dataclass(self.noise) else self.noise
        return {"noise": noise, "seed": self.seed}

    def run(self, requests: Iterable[FrameRequest], on_result: OnResult) -> None:
        from embodied_r.sim.world.oracle import oracle_frames

        memo: dict[str, list[dict[str, Any]]] = {}
        for request in requests:
            qa = request.context["qa"]
            timestamps = request.context["timestamps"]
            if request.qa_id not in memo:
                try:
                    memo[request.qa_id] = oracle_frames(self.dataset_dir, qa, list(timestamps),
                                                        noise=self.noise, seed=self.seed)
                except (DataFileError, ValueError) as exc:
                    on_result(request, FrameResult(error=f"oracle: {exc}"))
                    continue
                if len(memo[request.qa_id]) != len(timestamps):
                    raise RuntimeError(f"oracle_frames returned {len(memo[request.qa_id])} frames for "
                                       f"{len(timestamps)} timestamps (question {request.qa_id})")
            frame = dict(memo[request.qa_id][request.frame_index])
            if request.frame_index == 0:
                frame["action"] = None
            on_result(request, FrameResult(text=str(frame.get("raw", "")), frame=frame))
