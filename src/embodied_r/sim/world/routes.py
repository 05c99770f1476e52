"""Route-plan questions (VSI-Bench ``route_planning``), generated programmatically.

VSI-Bench's routes were written by annotators: start at object S facing object F, then "go forward
until" a chain of unique objects, with the turns between them hidden as "[please fill in]". Here the
chain is drawn from unique objects and each hidden turn is classified by the signed angle between the
current heading and the next leg: left in (45°, 135°), right in (-135°, -45°), back beyond ±135°.
Legs that go straight on (|angle| < 45°, not an option) and angles within 15° of a boundary are
rejected as ambiguous.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

import numpy as np

from embodied_r.core.records import QARecord
from embodied_r.core.spatial_rules import TURNS, classify_turn
from embodied_r.sim.world.options import LetterBalancer, letter_options

MIN_LEG = 0.5  # metres; shorter legs make "go forward until" meaningless


def route_question(start: str, facing: str, stops: list[str]) -> str:
    steps = [f"1. Go forward until the {facing}"]
    for i, stop in enumerate(stops):
        steps.append(f"{2 * i + 2}. [please fill in]")
        steps.append(f"{2 * i + 3}. Go forward until the {stop}")
    return (f"You are a robot beginning at the {start} facing the {facing}. You want to navigate to the "
            f"{stops[-1]}. You will perform the following actions (Note: for each [please fill in], choose either "
            f"'turn back,' 'turn left,' or 'turn right.'): {' '.join(steps)}. You have reached the final destination.")


class QuestionMaker(Protocol):
    """What route questions need from ``questions.StaticQuestionMaker`` (which calls this module, so
    routes.py names only this shape of it and the two modules import one way)."""

    f: Any  # the scene's SceneFacts
    rng: np.random.Generator
    balancer: LetterBalancer
    per_task: int

    def record(self, task: str, index: int, question: str, answer: str | float, options: list[str] | None,
               categories: list[str], **detail: Any) -> QARecord: ...


def make_route_questions(maker: QuestionMaker, max_tries: int = 200) -> list[QARecord]:
    facts, rng = maker.f, maker.rng
    unique = facts.unique()
    out: list[QARecord] = []
    if len(unique) < 4:
        return out
    center = {c: facts.boxes[c][0].centroid[:2] for c in unique}
    for _ in range(max_tries):
        n_turns = 3 if len(unique) >= 5 and rng.random() < 0.4 else 2
        chain = [unique[i] for i in rng.choice(len(unique), size=n_turns + 2, replace=False)]
        points = [center[c] for c in chain]
        legs = [b - a for a, b in zip(points, points[1:])]
        if min(float(np.linalg.norm(leg)) for leg in legs) < MIN_LEG:
            continue
        turns = [classify_turn(h, leg) for h, leg in zip(legs, legs[1:])]
        if any(t is None for t in turns):
            continue
        correct = ", ".join(turns)  # type: ignore[arg-type]
        pool = [", ".join(seq) for seq in itertools.product(TURNS, repeat=n_turns) if ", ".join(seq) != correct]
        distractors = [pool[i] for i in rng.choice(len(pool), size=3, replace=False)]
        options, answer = letter_options("route_planning", correct, distractors, maker.balancer)
        question = route_question(chain[0], chain[1], chain[2:])
        out.append(maker.record("route_planning", len(out), question, answer, options, chain, turns=turns))
        if len(out) >= maker.per_task:
            break
    return out
