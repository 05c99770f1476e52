"""The ``oracle`` perception backend: frame descriptions from a synthetic dataset's ground truth.

It lives beside the world it reads, not with the perception code: the simulator is a data generator, and
the Embodied-R method must run on any video without importing it. The perception factory names this class
by its ``"module:attr"`` path (``methods.embodied_r.perception.factory``) and imports it only when the
``oracle`` backend is asked for. It implements ``methods.embodied_r.perception.backends.PerceptionBackend``
structurally (a ``typing.Protocol``), so nothing here imports the method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError
from embodied_r.inference.requests import FrameRequest, FrameResult, OnResult


class OracleBackend:
    """Ground-truth perception from the synthetic world generator (``embodied_r.sim.world.oracle``).

    ``dataset_dir`` is the folder holding ``questions.jsonl``, ``scenes.json`` and ``poses/``;
    ``noise`` (an ``OracleNoise``) and ``seed`` are passed through to ``oracle_frames``. A question the
    oracle cannot describe (no poses for its scene) becomes a failed result naming the problem.

    >>> backend = OracleBackend(".")
    >>> backend.name, backend.model, backend.needs_images, backend.per_question, backend.settings()
    ('oracle', 'simulator', False, True, {'noise': None, 'seed': 0})
    """

    name = "oracle"
    model = "simulator"
    needs_images = False
    per_question = True  # the answer depends on the question's scene, not only on the prompt text

    def __init__(self, dataset_dir: str | Path, noise: Any = None, seed: int = 0) -> None:
        self.dataset_dir = Path(dataset_dir)
        self.noise = noise
        self.seed = seed

    def settings(self) -> dict[str, Any]:
        noise = dataclasses.asdict(self.noise) if dataclasses.is_dataclass(self.noise) else self.noise
        return {"noise": noise, "seed": self.seed}

    def run(self, requests: Iterable[FrameRequest], on_result: OnResult) -> None:
        # Deferred: oracle.py pulls in the world geometry and numpy, needed only once a request arrives.
        from embodied_r.sim.world.oracle import oracle_frames

        memo: dict[str, list[dict[str, Any]]] = {}  # one oracle pass per question serves all its frames
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
