"""Perception backends behind one ``typing.Protocol``, and the simulator oracle.

A backend receives an iterable of :class:`FrameRequest` (one per key frame to describe) and calls
``on_result(request, FrameResult)`` as each one finishes, in any order, possibly from another thread.
Pulling requests lazily lets the runner decode a video's frames only when a slot is about to need
them; reporting each result at once lets the runner cache it immediately (a killed run keeps it).

- ``openai`` (:mod:`embodied_r.inference.openai_client`): any OpenAI-compatible chat server.
- ``transformers`` (:mod:`embodied_r.methods.embodied_r.perception.local_vlm`): a local
  Qwen2.5-VL-family model, batched.
- ``oracle`` (here): the synthetic world's ground truth, so the pipeline runs with no VLM at all.

``embodied_r.methods.embodied_r.perception.factory.make_backend`` builds one by name.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from embodied_r.core.io import DataFileError
from embodied_r.inference.requests import FrameRequest, FrameResult, OnResult

logger = logging.getLogger(__name__)

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
