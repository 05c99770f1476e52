"""The protocol every perception backend implements.

A backend receives an iterable of :class:`FrameRequest` (one per key frame to describe) and calls
``on_result(request, FrameResult)`` as each one finishes, in any order, possibly from another thread.
Pulling requests lazily lets the runner decode a video's frames only when a slot is about to need
them; reporting each result at once lets the runner cache it immediately (a killed run keeps it).

- ``openai`` (:mod:`embodied_r.inference.openai_client`): any OpenAI-compatible chat server.
- ``transformers`` (:mod:`embodied_r.methods.embodied_r.perception.local_vlm`): a local
  Qwen2.5-VL-family model, batched.
- ``oracle`` (:mod:`embodied_r.sim.world.oracle_backend`): the synthetic world's ground truth, so the
  pipeline runs with no VLM at all. It lives with the simulator, which this method never imports.

``embodied_r.methods.embodied_r.perception.factory.make_backend`` builds one by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from embodied_r.inference.requests import FrameRequest, OnResult


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
