"""What one ``embodied-r eval`` run is asked to do, as one frozen object (``runner.run_eval`` takes it).

Grouped as the run uses them: how the reasoner generates (:class:`GenerationSettings`, recorded under
``generation`` in ``metrics.json``), which baselines run beside it (:class:`BaselineSettings`), and which
judge measures logical consistency (:class:`JudgeSettings`). The run-wide settings (which questions,
their perception, how choices are scored, the report) sit on :class:`EvalSettings` itself. Every value
is checked when the object is built, so a bad one fails before any model or data file is loaded.

>>> EvalSettings(generation=GenerationSettings(max_new_tokens=64)).generation.batch_size
32
>>> EvalSettings(shard=(2, 2))
Traceback (most recent call last):
...
embodied_r.evaluation.settings.EvalSettingsError: --shard 2/2: expected I/N with 0 <= I < N
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE, check_accuracy_rule
from embodied_r.inference.context_policy import ContextPolicy


class EvalSettingsError(ValueError):
    """A setting of an evaluation run that cannot be used; the message names it and what it accepts."""


def _positive(name: str, value: int) -> None:
    if value < 1:
        raise EvalSettingsError(f"{name} must be a positive integer, got {value}")


# ---------------------------------------------------------------------------------------------------
# Groups
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationSettings:
    """How the reasoner answers: greedy, in batches, within the context policy.

    ``completion_prefix`` prefills the assistant turn (use the training recipe's value, so a trained model
    is evaluated as it was trained); ``context`` is the rule for prompts that do not fit the model
    (default: drop the oldest frames). ``from_recipe`` is what ``eval --recipe`` took from a training
    recipe, recorded as it is under ``generation.from_recipe``."""

    batch_size: int = 32
    max_new_tokens: int = 256
    dtype: str = "auto"
    engine: str = "auto"
    prompt_version: str | None = None  # None: the loader's default, or what the rows record
    completion_prefix: str = ""
    context: ContextPolicy = field(default_factory=ContextPolicy)
    from_recipe: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _positive("batch_size", self.batch_size)
        _positive("max_new_tokens", self.max_new_tokens)


@dataclass(frozen=True)
class BaselineSettings:
    """The baselines scored beside the model (names from ``evaluation.analysis.BASELINES``).

    ``direct_max_new_tokens`` is the budget of the direct-answer baseline (the others that generate use
    the model's own); ``prior_data`` (a prompt-row file, e.g. the training split) is what the letter
    and answer-text priors are fit on, else leave-one-out on the evaluated questions."""

    names: tuple[str, ...] = ("random", "prior", "answer-prior")
    direct_max_new_tokens: int = 16
    prior_data: str | Path | None = None

    def __post_init__(self) -> None:
        _positive("direct_max_new_tokens", self.direct_max_new_tokens)


@dataclass(frozen=True)
class JudgeSettings:
    """The logical-consistency judge: ``spec`` is ``policy``, a model name/path or an endpoint URL (None:
    no rate is measured); ``model`` the model served at an endpoint. ``sees_letters``, ``scoring`` and
    ``probe_cases`` are the judge's options (``evaluation.analysis.run_consistency``). Pass a judge other
    than the training reward's, or the rate is flagged as circular."""

    spec: str | None = None
    model: str | None = None
    sees_letters: bool = False
    scoring: str | None = None
    probe_cases: int | None = None


# ---------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalSettings:
    """Everything ``run_eval`` needs besides the data, the model and the output folder.

    ``limit`` keeps the first N questions; ``shard=(i, n)`` every n-th from the i-th (into
    ``out/shard-i-of-n``). ``prompt_input`` (``auto`` | ``image`` | ``text``) says which rows are expected.
    ``perception`` (an ``evaluation.inputs.PerceptionSource``) serves loader specs and the ``vlm_only``
    baseline. ``accuracy_rule`` (``core.scoring.ACCURACY_RULES``) is how choices are read; ``report``
    builds ``report.html`` after ``metrics.json``."""

    limit: int | None = None
    shard: tuple[int, int] | None = None
    prompt_input: str = "auto"
    perception: Any = None
    accuracy_rule: str = DEFAULT_ACCURACY_RULE
    report: bool = True
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    baselines: BaselineSettings = field(default_factory=BaselineSettings)
    judge: JudgeSettings = field(default_factory=JudgeSettings)

    def __post_init__(self) -> None:
        try:
            check_accuracy_rule(self.accuracy_rule, "--accuracy-rule")
        except ValueError as exc:
            raise EvalSettingsError(str(exc)) from None
        if self.limit is not None:
            _positive("limit", self.limit)
        if self.shard is not None:
            index, count = self.shard
            if count < 1 or not 0 <= index < count:
                raise EvalSettingsError(f"--shard {index}/{count}: expected I/N with 0 <= I < N")
