"""The exact solver: answers an Embodied-R prompt from its text alone, or says the text does not determine it.

It reads the frames' text into a floor plan (``reading.py``: dead reckoning at the ``bearings`` level, the
stated map at ``map`` and ``relations``) and applies the benchmark's rule for the task type (``tasks.py``);
at ``facts`` it reads the last frame's facts sentence instead (``facts.py``).
It never reads poses or scene files, and never guesses: text at the ``words`` level, an object the
question needs that no frame names, or a question it cannot read gives a ``Solved`` with no answer and a
reason. Evaluation reaches it through the row's method (``Method.solver``), as the ``solver`` baseline,
whose per-type ``applicable`` share and ``ceiling`` say what the text determines.
"""

from __future__ import annotations

from embodied_r.core.records import PromptRow
from embodied_r.core.solving import Solved
from embodied_r.methods.embodied_r.frame_text import user_text, video_frames
from embodied_r.methods.embodied_r.solver.facts import solve_facts
from embodied_r.methods.embodied_r.solver.reading import NotReadable, detail_level, read_plan
from embodied_r.methods.embodied_r.solver.tasks import SOLVERS


def solve_row(row: PromptRow) -> Solved:
    """The answer ``row``'s text determines (an option letter or a number), or why it determines none."""
    solver = SOLVERS.get(row.task)
    if solver is None:
        return Solved(reason=f"no solver for task type {row.task!r}")
    frames = video_frames(user_text(row))
    if not frames:
        return Solved(reason="the prompt has no 'Frame k:' lines")
    if detail_level(frames) == "facts":
        return solve_facts(row, frames)
    try:
        plan = read_plan(frames)
    except NotReadable as exc:
        return Solved(reason=str(exc))
    return solver(row, plan)


__all__ = ["solve_row"]
