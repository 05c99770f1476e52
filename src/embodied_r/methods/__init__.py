"""The two methods as task objects: how each one's prompt rows are built, prompted, rewarded and scored.

A prompt row records the prompt version it was built with (``meta["prompt_version"]``); the method is
looked up from that, so training and evaluation never read prompt text to guess it.

- Embodied-R (Zhao et al., 2025): the reasoner reads frame descriptions and answers with the option's
  bare letter inside ``<answer>``.
- Robot-R1 (Kim et al., 2025): the reasoner reads a robot scene (as text, or the camera image) and
  answers with the option written ``[[X]]``.

>>> method_for_version("robot_r1_mw_v1").answer_text("B")
'[[B]]'
>>> method_for_version("official-v1").answer_text("B")
'B'
>>> ROBOT_R1.rewards, ROBOT_R1.builds_rows
(('format', 'accuracy'), 'embodied-r synth robot')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from embodied_r.core.records import PromptRow
from embodied_r.core.scoring import Scored, score_completion


@dataclass(frozen=True)
class Method:
    """One method: where its rows come from, the prompt versions they record, the written form of a
    chosen option, the paper's reward terms and recipe, and the one scorer."""

    name: str
    builds_rows: str  # the command that writes this method's prompt rows
    # "module:function" that builds this method's prompt rows, imported when asked for. Its arguments are the
    # method's own: Embodied-R joins questions with perception records, Robot-R1 turns one question into a row.
    row_builder: str
    prompt_versions: tuple[str, ...]
    choice_form: str  # ``{letter}`` is replaced by the option letter
    rewards: tuple[str, ...]  # the paper's reward terms, by their names in the reward registry
    paper_recipe: str  # the recipe that follows the paper, relative to the repository root

    def answer_text(self, letter: str) -> str:
        """How this method's prompts ask a chosen option to be written inside ``<answer>``."""
        return self.choice_form.format(letter=letter)

    def row_builder_function(self) -> Callable[..., Any]:
        """The function ``row_builder`` names (imported now, so that importing this package stays cheap)."""
        module, name = self.row_builder.split(":")
        return getattr(importlib.import_module(module), name)

    def score(self, row: PromptRow, completion: str) -> Scored:
        """The parsed answer and score of a completion for ``row``, as evaluation reports it: the
        ``core.scoring.score_completion`` the accuracy reward and the consistency gate call, for every
        answer type (both methods' answer forms are read by ``core.parsing``)."""
        return score_completion(completion, row.answer, row.answer_type, row.options)


EMBODIED_R = Method(
    "embodied_r", "embodied-r build-prompts", "embodied_r.methods.embodied_r.perception.prompt_rows:build_rows",
    ("official", "official-v1", "structured-v1", "compact-v1"), "{letter}",
    ("format", "accuracy", "consistency"), "recipes/embodied_r/paper_qwen2.5-3b.yaml",
)
ROBOT_R1 = Method(
    "robot_r1", "embodied-r synth robot", "embodied_r.methods.robot_r1.prompts:text_prompt_row",
    ("robot_r1_mw_v1",), "[[{letter}]]", ("format", "accuracy"), "recipes/robot_r1/paper_qwen2.5-vl-7b.yaml",
)
METHODS: tuple[Method, ...] = (EMBODIED_R, ROBOT_R1)


def method_for_version(version: str | None) -> Method:
    """The method whose prompt builders write ``version``; rows without a recorded version (a user's own
    prompt file) follow Embodied-R's conventions, the default of every command."""
    for method in METHODS:
        if version in method.prompt_versions:
            return method
    return EMBODIED_R


def method_for_row(meta: Mapping[str, Any] | None) -> Method:
    """The method of a prompt row, from its ``meta``."""
    return method_for_version((meta or {}).get("prompt_version"))


__all__ = ["EMBODIED_R", "METHODS", "Method", "ROBOT_R1", "method_for_row", "method_for_version"]
