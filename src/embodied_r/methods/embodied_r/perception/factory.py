"""Perception backends by name: the one place that knows every implementation (backends.py holds the
protocol and the oracle; the others import it, so the factory sits above them all)."""

from __future__ import annotations

from typing import Any

from embodied_r.methods.embodied_r.perception.backends import OracleBackend, PerceptionBackend

BACKENDS: tuple[str, ...] = ("oracle", "openai", "transformers")


def make_backend(name: str, **options: Any) -> PerceptionBackend:
    """Build a backend by name; ``options`` are the backend's constructor arguments.

    >>> make_backend("oracle", dataset_dir=".").name
    'oracle'
    >>> make_backend("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown perception backend 'nope'; choose one of ('oracle', 'openai', 'transformers')
    """
    if name == "oracle":
        return OracleBackend(**options)
    if name == "openai":
        from embodied_r.inference.openai_client import OpenAIBackend

        return OpenAIBackend(**options)
    if name == "transformers":
        from embodied_r.methods.embodied_r.perception.local_vlm import TransformersBackend

        return TransformersBackend(**options)
    raise ValueError(f"unknown perception backend {name!r}; choose one of {BACKENDS}")
