"""Perception backends by name: the one place that knows every implementation.

Each is named by its ``"module:attr"`` path and imported only when asked for, so that listing them costs
nothing and the method never imports the simulator: the ``oracle`` backend reads a synthetic dataset's
ground truth and lives with the simulator (``embodied_r.sim.world.oracle_backend``).
"""

from __future__ import annotations

from typing import Any

from embodied_r.methods import import_path
from embodied_r.methods.embodied_r.perception.backends import PerceptionBackend

# name -> the backend class, as a "module:attr" path (methods.import_path).
BACKEND_PATHS: dict[str, str] = {
    "oracle": "embodied_r.sim.world.oracle_backend:OracleBackend",
    "openai": "embodied_r.inference.openai_client:OpenAIBackend",
    "transformers": "embodied_r.methods.embodied_r.perception.local_vlm:TransformersBackend",
}
BACKENDS: tuple[str, ...] = tuple(BACKEND_PATHS)


def make_backend(name: str, **options: Any) -> PerceptionBackend:
    """Build a backend by name; ``options`` are the backend's constructor arguments.

    >>> make_backend("oracle", dataset_dir=".").name
    'oracle'
    >>> make_backend("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown perception backend 'nope'; choose one of ('oracle', 'openai', 'transformers')
    """
    if name not in BACKEND_PATHS:
        raise ValueError(f"unknown perception backend {name!r}; choose one of {BACKENDS}")
    backend: PerceptionBackend = import_path(BACKEND_PATHS[name])(**options)
    return backend
