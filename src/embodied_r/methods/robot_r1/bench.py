"""An open-ended Robot-R1-Bench-style set from the demonstrations, and 0-3 judge scoring.

Robot-R1 Bench (paper §3.4, App. B.3) asks open questions in four categories -- movement, spatial,
planning and high-level action -- about frames of expert demos, and a judge model scores each answer
0-3 against a reference (0 different meaning, 1 partial with significant differences, 2 mostly
matches, 3 equivalent or more detailed). Here the references are computed from the recorded
trajectory instead of written by hand: subtask labels come from the keypoints (gripper closes -> grasp,
opens -> release, otherwise a move named after the nearest object or the goal).

The judge is any function from a batch of chat messages to a batch of texts (``embodied-r robot-bench``
builds one from an OpenAI-compatible endpoint or a local model). A judge reply without a parsable score
is counted as a judge failure and left out of the mean, never scored 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.core.records import QARecord
from embodied_r.methods.robot_r1.demos import Episode
from embodied_r.methods.robot_r1.grading_probe import DEFAULT_ITEMS as DEFAULT_PROBE_ITEMS
from embodied_r.methods.robot_r1.grading_probe import (  # judge_messages, parse_judge_score: part of this module's API
    DEFAULT_MIN_AGREEMENT,
    judge_messages,
    parse_judge_score,
    run_grading_probe,
)
from embodied_r.methods.robot_r1.keypoints import next_keypoint
from embodied_r.methods.robot_r1.questions import SOURCE, frame_meta, movement_parts, movement_phrase
from embodied_r.sim.robot.tasks import TaskSpec

CATEGORIES = ("movement", "spatial", "planning", "high_level_action")
HOLD_DISTANCE_M = 0.08   # object this close to a closed gripper (hand body) counts as held
ABOVE_MARGIN_M = 0.04
_RELATION = {"up": "above", "down": "below", "left": "to the left of", "right": "to the right of",
             "front": "in front of", "back": "behind"}
Judge = Callable[[list[list[dict[str, str]]]], list[str]]


class WeakJudgeError(ValueError):
    """The judge failed the grading probe (and the run did not allow a weak judge)."""


# ---------------------------------------------------------------------------------------------------
# Reference answers from the trajectory
# ---------------------------------------------------------------------------------------------------


def subtask_labels(episode: Episode, keypoints: Sequence[int], spec: TaskSpec) -> dict[int, str]:
    """A short subtask name for the segment that ends at each keypoint."""
    obj = spec.object_names[0] if spec.object_names else "object"
    labels: dict[int, str] = {}
    for k in keypoints:
        closed_now, closed_before = bool(episode.gripper_closed[k]), bool(episode.gripper_closed[k - 1])
        ee, obj_pos = episode.ee_pos[k], episode.object_pos[k][0]
        held = closed_now and np.linalg.norm(obj_pos - ee) < HOLD_DISTANCE_M
        if closed_now and not closed_before:
            labels[k] = f"grasp the {obj}"
        elif closed_before and not closed_now:
            labels[k] = f"release the {obj}"
        elif held:
            near_goal = np.linalg.norm(obj_pos - episode.goal_pos) < HOLD_DISTANCE_M
            labels[k] = f"move the {obj} to the {spec.goal_name}" if near_goal else f"lift the {obj}"
        elif ee[2] - obj_pos[2] > ABOVE_MARGIN_M:
            labels[k] = f"move the gripper above the {obj}"
        else:
            labels[k] = f"move the gripper to the {obj}"
    return labels


def _remaining_plan(labels: dict[int, str], step: int) -> list[str]:
    plan: list[str] = []
    for k in sorted(labels):
        if k > step and (not plan or plan[-1] != labels[k]):
            plan.append(labels[k])
    return plan


def _relation_phrase(delta: np.ndarray, axis_words: dict[int, tuple[str, str]]) -> str:
    parts = movement_parts(delta, dead_zone=0.02)
    words = [("slightly " if m.slight else "") + _RELATION[axis_words[m.axis][1 if m.sign > 0 else 0]]
             for m in parts]
    if not words:
        return "at the same place as"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def bench_items(episode: Episode, keypoints: Sequence[int], steps: Sequence[int], images: dict[int, str],
                scene: dict[str, Any], spec: TaskSpec, rng: np.random.Generator) -> list[QARecord]:
    """Open questions with reference answers for the given frames (one per category per frame)."""
    axis_words = {int(k): (v[0], v[1]) for k, v in scene["axis_words"].items()}
    labels = subtask_labels(episode, keypoints, spec)
    obj = spec.object_names[0] if spec.object_names else "object"
    records = []
    for step in steps:
        target = next_keypoint(keypoints, step)
        if target is None:
            continue
        ee = episode.ee_pos[step]
        plan = _remaining_plan(labels, step)
        spatial_kind = ("direction", "distance")[int(rng.integers(2))]
        obj_pos = episode.object_pos[step][0]
        if spatial_kind == "direction":
            spatial = (f"Where is the {obj} relative to the gripper?",
                       f"The {obj} is {_relation_phrase(obj_pos - ee, axis_words)} the gripper.")
        else:
            spatial = (f"How far is the {obj} from the gripper?",
                       f"About {np.linalg.norm(obj_pos - ee):.2f} m.")
        items = {
            "movement": ("What movement should the gripper make next?",
                         movement_phrase(movement_parts(episode.ee_pos[target] - ee), axis_words).capitalize()),
            "spatial": spatial,
            "planning": (f"What are the remaining steps to {spec.description}?",
                         "\n".join(f"{i + 1}. {label.capitalize()}" for i, label in enumerate(plan))),
            "high_level_action": ("What is the robot's immediate next subtask?", labels[target].capitalize()),
        }
        uid = f"{episode.task}/ep{episode.index:03d}/s{step:04d}"
        for category, (question, reference) in items.items():
            records.append(QARecord(
                id=f"{uid}/bench_{category}", source=f"{SOURCE}_bench", task=category, video=images[step],
                question=question, options=None, answer=reference, answer_type="open",
                meta=frame_meta(episode, step, target, spec, scene, images[step])))
    return records


# ---------------------------------------------------------------------------------------------------
# Prompts: the evaluated model, and the judge
# ---------------------------------------------------------------------------------------------------

ANSWER_SYSTEM = (
    "You look at a robot arm working on a tabletop. Answer only what is asked, briefly, without saying "
    "why. Directions are as seen from the front camera: up is away from the table, front is toward the "
    "camera, left and right are the camera's left and right. For movement give the moves, e.g. "
    "'Move down and slightly right'; for planning give a numbered list; for the next subtask give one "
    "short action. Reason inside <think> </think> and put the answer inside <answer> </answer>."
)


def answer_messages(record: QARecord, path: str = "image") -> list[dict[str, Any]]:
    """Messages asking the evaluated model one bench question (image path or text path)."""
    from embodied_r.methods.robot_r1.prompts import scene_lines

    if path not in ("image", "text"):
        raise ValueError(f"bench prompt path must be 'image' or 'text', got {path!r}")

    lines = [f"Task: {record.meta['task_description']}"]
    if path == "text":
        lines += scene_lines(record.meta, with_offset=False)
        lines.append(f"- the gripper is at {record.meta['current_xyz']}")
    lines.append(f"Question ({record.task.replace('_', ' ')}): {record.question}")
    text = "\n".join(lines)
    content: Any = text if path == "text" else [{"type": "image", "image": record.meta["image"]},
                                                 {"type": "text", "text": text}]
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": content}]


def score_bench(records: Sequence[QARecord], completions: dict[str, str], judge: Judge) -> dict[str, Any]:
    """Mean 0-3 score per category. Only the ``<answer>`` content is judged (paper Table 10); a
    completion without one scores 0 and is counted as ``unparsed``; unparsable judge replies are
    counted as ``judge_failures`` and excluded."""
    from embodied_r.core.parsing import extract_answer_span

    missing = [r.id for r in records if r.id not in completions]
    if missing:
        raise KeyError(f"no completion for {len(missing)} bench questions, e.g. {missing[:3]}")
    scores: dict[str, list[int]] = defaultdict(list)
    unparsed: dict[str, int] = defaultdict(int)
    failures: dict[str, int] = defaultdict(int)
    to_judge: list[QARecord] = []
    answers: list[str] = []
    for record in records:
        span = extract_answer_span(completions[record.id])
        if span is None or not span.strip():
            scores[record.task].append(0)
            unparsed[record.task] += 1
        else:
            to_judge.append(record)
            answers.append(span.strip())
    replies = judge([judge_messages(r, a) for r, a in zip(to_judge, answers)]) if to_judge else []
    if len(replies) != len(to_judge):
        raise RuntimeError(f"judge returned {len(replies)} replies for {len(to_judge)} questions")
    for record, reply in zip(to_judge, replies):
        score = parse_judge_score(reply)
        if score is None:
            failures[record.task] += 1
        else:
            scores[record.task].append(score)
    from embodied_r.core.intervals import bootstrap_ci

    return {cat: {"mean": float(np.mean(scores[cat])) if scores[cat] else None, "n": len(scores[cat]),
                  "ci95": bootstrap_ci(scores[cat]) if len(scores[cat]) >= 3 else None,
                  "unparsed": unparsed[cat], "judge_failures": failures[cat]}
            for cat in CATEGORIES if cat in {r.task for r in records}}


# ---------------------------------------------------------------------------------------------------
# Running the set: answers (resumable) then judge scores
# ---------------------------------------------------------------------------------------------------


def run_bench(bench_file: str | Path, engine_factory: Callable[[], Any], judge: Judge, out_dir: str | Path,
              model_name: str, limit: int | None = None, batch_size: int = 8,
              max_new_tokens: int = 256, context: Any = None, path: str = "text",
              probe_items: int = DEFAULT_PROBE_ITEMS, min_probe_agreement: float = DEFAULT_MIN_AGREEMENT,
              allow_weak_judge: bool = False) -> dict[str, Any]:
    """Answer the bench questions and score the answers with ``judge``; writes ``answers.jsonl``
    (appended per batch, so a rerun resumes) and ``bench_metrics.json`` into ``out_dir``. ``path`` is
    ``text`` (a text reasoner reads the scene written from simulator state) or ``image`` (a
    vision-language engine sees the frame, ``meta["image"]``); answers of one path never resume a run of
    the other. The engine is built only when answers are missing.

    The judge is probed first (:mod:`embodied_r.methods.robot_r1.grading_probe`, written to
    ``judge_probe.json``): one that does not grade known-equivalent, partly right and wrong answers as
    expected stops the run with ``WeakJudgeError`` before any answer is generated, unless
    ``allow_weak_judge``; then the metrics say its scores are not trusted."""
    from embodied_r.core.io import JsonlAppender, atomic_write_json, read_jsonl

    if path not in ("image", "text"):
        raise ValueError(f"bench input must be 'image' or 'text', got {path!r}")
    every_record = [QARecord.from_dict(r) for r in read_jsonl(bench_file)]
    records = every_record[:limit]
    if not records:
        raise ValueError(f"{bench_file}: no bench questions")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # The probe draws on the whole file, so a --limit run checks the judge as well as a full one.
    probe = run_grading_probe(every_record, judge, n_items=probe_items, min_agreement=min_probe_agreement)
    atomic_write_json(out / "judge_probe.json", probe.to_dict())
    if not probe.passed and not allow_weak_judge:
        raise WeakJudgeError(
            f"the judge failed its grading probe, so its 0-3 scores would not measure the answers: "
            f"{'; '.join(probe.failures)} ({probe.summary()}; details in {out / 'judge_probe.json'}). Use a "
            f"stronger judge (an OpenAI-compatible endpoint serving a large instruct model), or "
            f"--allow-weak-judge to score anyway with the scores marked untrusted")
    appender = JsonlAppender(out / "answers.jsonl")
    done = {row["id"]: row for row in appender.existing()}
    others = {row.get("model") for row in done.values()} - {model_name}
    if others:
        raise ValueError(f"{out / 'answers.jsonl'} holds answers of {sorted(map(str, others))}, not {model_name}; "
                         "use another --out folder")
    # Answers from before the input was recorded were all text-path answers.
    other_inputs = {str(row.get("input", "text")) for row in done.values()} - {path}
    if other_inputs:
        raise ValueError(f"{out / 'answers.jsonl'} holds answers from the {min(other_inputs)} input, not "
                         f"{path}; use another --out folder (or --input {min(other_inputs)} to resume it)")
    todo = [r for r in records if r.id not in done]
    if todo:
        engine = engine_factory()
        conversations = [answer_messages(r, path=path) for r in todo]

        def persist(indices: list[int], texts: list[str]) -> None:
            rows = [{"id": todo[i].id, "task": todo[i].task, "model": model_name, "input": path, "completion": t}
                    for i, t in zip(indices, texts)]
            appender.extend(rows)
            done.update({row["id"]: row for row in rows})

        # A prompt the context policy cannot fit stops the run with why (a ContextError), before any answer.
        engine.generate_chats(conversations, max_new_tokens=max_new_tokens, batch_size=batch_size,
                              on_batch=persist, **({"context": context} if context is not None else {}))
    completions = {r.id: done[r.id]["completion"] for r in records}
    scores = score_bench(records, completions, judge)
    metrics = {"model": model_name, "data": str(bench_file), "input": path, "n_questions": len(records),
               "answered_this_run": len(todo), "categories": scores, "judge_probe": probe.to_dict(),
               "scores_trusted": probe.passed}
    atomic_write_json(out / "bench_metrics.json", metrics)
    return metrics
