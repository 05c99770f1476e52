"""The ``oracle`` perception backend: frame descriptions from a synthetic dataset's ground truth.

It lives beside the world it reads, not with the perception code: the simulator is a data generator, and
the Embodied-R method must run on any video without importing it. The perception factory names this class
by its ``"module:attr"`` path (``methods.embodied_r.perception.factory``) and imports it only when the
``oracle`` backend is asked for. It implements ``methods.embodied_r.perception.backends.PerceptionBackend``
structurally (a ``typing.Protocol``), so nothing here imports the method.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError
from embodied_r.inference.requests import FrameRequest, FrameResult, OnResult
from embodied_r.sim.world.detail_levels import DETAIL_LEVELS


class OracleBackend:
    """Ground-truth perception from the synthetic world generator (``embodied_r.sim.world.oracle``).

    ``dataset_dir`` is the folder holding ``questions.jsonl``, ``scenes.json`` and ``poses/``;
    ``noise`` (an ``OracleNoise``), ``seed``, ``detail`` (one of ``detail_levels.DETAIL_LEVELS``) and
    ``detail_noise`` (a sigma for the numbers of the levels above ``words``) are passed through to
    ``oracle_frames``. A question the oracle cannot describe (no poses for its scene) becomes a failed
    result naming the problem.

    ``settings()`` is part of every cache key: at ``words`` with no detail noise it is exactly what it was
    before detail levels existed, so existing caches stay valid; other levels add ``detail`` and
    ``detail_noise``. ``detail`` is also an attribute the perception runner reads into ``meta["detail"]``.

    >>> backend = OracleBackend(".")
    >>> backend.name, backend.model, backend.needs_images, backend.per_question, backend.settings()
    ('oracle', 'simulator', False, True, {'noise': None, 'seed': 0})
    >>> OracleBackend(".", detail="map").settings()
    {'noise': None, 'seed': 0, 'detail': 'map', 'detail_noise': 0.0}
    """

    name = "oracle"
    model = "simulator"
    needs_images = False
    per_question = True  # the answer depends on the question's scene, not only on the prompt text

    def __init__(self, dataset_dir: str | Path, noise: Any = None, seed: int = 0, detail: str = "words",
                 detail_noise: float = 0.0) -> None:
        if detail not in DETAIL_LEVELS:
            raise ValueError(f"detail level {detail!r} is not one of {', '.join(DETAIL_LEVELS)}")
        detail_noise = float(detail_noise)
        if not math.isfinite(detail_noise) or detail_noise < 0:
            raise ValueError(f"detail noise must be a finite number >= 0, not {detail_noise}")
        self.dataset_dir = Path(dataset_dir)
        self.noise = noise
        self.seed = seed
        self.detail = detail
        self.detail_noise = detail_noise

    def settings(self) -> dict[str, Any]:
        noise = dataclasses.asdict(self.noise) if dataclasses.is_dataclass(self.noise) else self.noise
        settings: dict[str, Any] = {"noise": noise, "seed": self.seed}
        if self.detail != "words" or self.detail_noise:  # the words level keeps the keys caches were made with
            settings.update(detail=self.detail, detail_noise=self.detail_noise)
        return settings

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
                                                        noise=self.noise, seed=self.seed, detail=self.detail,
                                                        detail_noise=self.detail_noise)
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
