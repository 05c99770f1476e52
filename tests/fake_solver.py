"""A method with a fake exact solver, for the tests of the solver baseline (evaluation and the CLI).

The solver reads one line of the row's last user message and does what it says, so a test writes each row's
outcome into its prompt:

- ``SOLVE <answer>`` answers ``<answer>`` (a letter, or a number for numeric rows); ``SOLVE <answer> copy``
  marks it as stated outright in the text;
- ``NONE <reason>`` is not applicable, for that reason;
- ``RAISE`` raises (a bug in a solver); ``JUNK`` returns something that is not a ``Solved``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from embodied_r.core.records import PromptRow
from embodied_r.core.solving import Solved
from embodied_r.methods import Method, register_method, unregister_method

FAKE_VERSION = "fake_solver_v1"
FAKE_METHOD = Method(name="fake_solver", builds_rows="python -m fake_solver", row_builder="fake_solver:row",
                     prompt_versions=(FAKE_VERSION,), choice_form="{letter}", rewards=("format", "accuracy"),
                     paper_recipe="recipes/fake/paper.yaml", solver="fake_solver:solve")


def solve(row: PromptRow) -> Any:
    text = next(m["content"] for m in reversed(row.prompt) if m.get("role") == "user")
    word, _, rest = text.partition(" ")
    if word == "SOLVE":
        answer, _, copy = rest.partition(" ")
        value = float(answer) if row.answer_type == "number" else answer
        return Solved(answer=value, copy=copy == "copy")
    if word == "NONE":
        return Solved(reason=rest)
    if word == "RAISE":
        raise RuntimeError(f"fake solver bug on row {row.id}")
    return {"answer": "A"}  # JUNK: not a Solved


def row(qid: str, task: str, says: str, answer: Any, options: list[str] | None = None,
        detail: str | None = None, version: str = FAKE_VERSION) -> PromptRow:
    """A prompt row of the fake method whose user text is ``says`` (choice with ``options``, else number)."""
    meta: dict[str, Any] = {"prompt_version": version}
    if detail is not None:
        meta["detail"] = detail
    return PromptRow(id=qid, task=task, prompt=[{"role": "user", "content": says}], answer=answer,
                     answer_type="choice" if options else "number", options=options, meta=meta)


@contextmanager
def fake_method() -> Iterator[Method]:
    """The fake method registered for the duration of the block."""
    register_method(FAKE_METHOD)
    try:
        yield FAKE_METHOD
    finally:
        unregister_method(FAKE_METHOD.name)
