"""EvalSettings: the defaults ``run_eval`` always had, and a clear error for a value it cannot use, raised
when the settings are built (before any data or model is loaded)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE
from embodied_r.evaluation.settings import (
    BaselineSettings,
    EvalSettings,
    EvalSettingsError,
    GenerationSettings,
    JudgeSettings,
)
from embodied_r.inference.context_policy import ContextPolicy


def test_the_defaults_are_run_evals_old_ones() -> None:
    settings = EvalSettings()
    assert (settings.limit, settings.shard, settings.prompt_input, settings.perception, settings.report) == (
        None, None, "auto", None, True)
    assert settings.accuracy_rule == DEFAULT_ACCURACY_RULE
    assert settings.generation == GenerationSettings(batch_size=32, max_new_tokens=256, dtype="auto", engine="auto",
                                                     prompt_version=None, completion_prefix="",
                                                     context=ContextPolicy(), from_recipe=None)
    assert settings.baselines == BaselineSettings(names=("random", "prior", "answer-prior"), direct_max_new_tokens=16,
                                                  prior_data=None)
    assert settings.judge == JudgeSettings(spec=None, model=None, sees_letters=False, scoring=None,
                                           probe_cases=None)


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        EvalSettings().limit = 3  # type: ignore[misc]


@pytest.mark.parametrize(("build", "message"), [
    (lambda: EvalSettings(accuracy_rule="paper"), "--accuracy-rule: accuracy_rule 'paper' does not exist; use one of"),
    (lambda: EvalSettings(shard=(2, 2)), r"--shard 2/2: expected I/N with 0 <= I < N"),
    (lambda: EvalSettings(shard=(0, 0)), r"--shard 0/0: expected I/N"),
    (lambda: EvalSettings(limit=0), "limit must be a positive integer, got 0"),
    (lambda: GenerationSettings(batch_size=-1), "batch_size must be a positive integer, got -1"),
    (lambda: GenerationSettings(max_new_tokens=0), "max_new_tokens must be a positive integer, got 0"),
    (lambda: BaselineSettings(direct_max_new_tokens=0), "direct_max_new_tokens must be a positive integer"),
])
def test_a_bad_value_is_refused_with_its_name(build, message: str) -> None:
    with pytest.raises(EvalSettingsError, match=message):
        build()


def test_the_eval_flags_become_settings(tmp_path: Path) -> None:
    from embodied_r.cli.common import CLIError
    from embodied_r.cli.eval import apply_recipe, eval_settings
    from embodied_r.cli.main import build_parser

    def settings_of(*flags: str) -> EvalSettings:
        args = build_parser().parse_args(["eval", "--data", "rows.jsonl", "--out", str(tmp_path), *flags])
        return eval_settings(args, ("random",), apply_recipe(args))

    settings = settings_of("--batch-size", "3", "--shard", "1/2", "--judge", "policy", "--judge-sees-letters",
                           "--completion-prefix", "<think>", "--no-report", "--prior-from", "train.jsonl")
    assert settings.generation.batch_size == 3 and settings.generation.max_new_tokens == 256
    assert settings.generation.completion_prefix == "<think>" and settings.generation.from_recipe is None
    assert settings.shard == (1, 2) and settings.report is False
    assert settings.baselines == BaselineSettings(names=("random",), prior_data="train.jsonl")
    assert settings.judge == JudgeSettings(spec="policy", sees_letters=True)
    with pytest.raises(CLIError, match="limit must be a positive integer"):  # a refused value is a usage error
        settings_of("--limit", "0")
