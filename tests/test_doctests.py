"""Run the runnable examples in the docstrings of the parsers, metrics and prompt builders."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "embodied_r.core.chat",
    "embodied_r.inference.letter_mask",
    "embodied_r.inference.judges",
    "embodied_r.core.parsing",
    "embodied_r.methods.embodied_r.prompts",
    "embodied_r.core.scoring",
    "embodied_r.core.official_choice",
    "embodied_r.methods",
    "embodied_r.methods.robot_r1.pipeline",
    "embodied_r.evaluation.reference_names",
    "embodied_r.evaluation.reference_rules",
    "embodied_r.inference.generation",
    "embodied_r.evaluation.predict",
    "embodied_r.evaluation.benchmarks.embodied_r_json",
    "embodied_r.methods.embodied_r.perception.entities",
    "embodied_r.methods.embodied_r.perception.prompts",
    "embodied_r.methods.embodied_r.perception.parsing",
    "embodied_r.methods.embodied_r.perception.cache",
    "embodied_r.methods.embodied_r.perception.factory",
    "fake_vlm_server",
    "embodied_r.methods.rewards",
    "embodied_r.core.intervals",
    "embodied_r.core.columns",
    "embodied_r.methods.embodied_r.rewards",
    "embodied_r.methods.accuracy",
    "embodied_r.methods.embodied_r.consistency",
    "embodied_r.methods.embodied_r.schedule",
    "embodied_r.training.recipe",
    "embodied_r.training.data",
    "embodied_r.training.prefix_generation",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no runnable examples"
    assert result.failed == 0
