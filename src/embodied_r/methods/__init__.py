"""The two methods as task objects: what their prompt rows are and how an answer to them is written.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Method:
    """One method's row conventions: its prompt versions and the written form of a chosen option."""

    name: str
    prompt_versions: tuple[str, ...]
    choice_form: str  # ``{letter}`` is replaced by the option letter

    def answer_text(self, letter: str) -> str:
        """How this method's prompts ask a chosen option to be written inside ``<answer>``."""
        return self.choice_form.format(letter=letter)


EMBODIED_R = Method("embodied_r", ("official", "official-v1", "structured-v1"), "{letter}")
ROBOT_R1 = Method("robot_r1", ("robot_r1_mw_v1",), "[[{letter}]]")
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
