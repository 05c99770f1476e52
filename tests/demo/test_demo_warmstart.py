"""The demo trains and evaluates with the same warm start (prefilled "<think>", shaped format reward)."""

from __future__ import annotations

import shlex
from pathlib import Path

from embodied_r.demo import COMPLETION_PREFIX, DemoSize, plan, training_recipe
from embodied_r.training.recipe import recipe_from_dict


def test_demo_recipe_and_evaluations_share_the_completion_prefix(tmp_path: Path) -> None:
    size = DemoSize.for_minutes(15)
    recipe = recipe_from_dict(training_recipe(tmp_path, size, "smollm2-135m-instruct"))
    assert recipe.completion_prefix == COMPLETION_PREFIX == "<think>"
    assert recipe.reward_names == ["format_soft", "format", "accuracy", "consistency"]
    evals = [s for s in plan(tmp_path, size) if s.name.startswith("eval-")]
    assert len(evals) == 2
    for stage in evals:
        argv = stage.argv
        assert argv[argv.index("--completion-prefix") + 1] == recipe.completion_prefix
        # The printed command must survive a shell: "<think>" unquoted would be a redirection.
        assert shlex.split(stage.command)[1:] == argv
