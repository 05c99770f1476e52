"""Run the runnable examples in the docstrings of the parsers, metrics and prompt builders."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "embodied_r.core.chat",
    "embodied_r.inference.letter_mask",
    "embodied_r.inference.judges",
    "embodied_r.reasoning.parsing",
    "embodied_r.reasoning.prompts",
    "embodied_r.core.scoring",
    "embodied_r.methods",
    "embodied_r.sim.robot.pipeline",
    "embodied_r.evaluation.reference_names",
    "embodied_r.evaluation.generation",
    "embodied_r.evaluation.predict",
    "embodied_r.evaluation.benchmarks.embodied_r_json",
    "embodied_r.perception.entities",
    "embodied_r.perception.prompts",
    "embodied_r.perception.parsing",
    "embodied_r.perception.cache",
    "embodied_r.perception.factory",
    "fake_vlm_server",
    "embodied_r.rewards",
    "embodied_r.core.intervals",
    "embodied_r.rewards.text",
    "embodied_r.rewards.format",
    "embodied_r.rewards.accuracy",
    "embodied_r.rewards.consistency",
    "embodied_r.rewards.schedule",
    "embodied_r.training.recipe",
    "embodied_r.training.data",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no runnable examples"
    assert result.failed == 0
