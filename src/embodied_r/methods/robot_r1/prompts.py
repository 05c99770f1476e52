"""Chat prompts for Robot-R1 questions: the image path (VLM) and the text path (scene from simulator state).

The prompt carries what the paper's prompt carries (Fig. 4-6): task description, the visual input, the
coordinate conventions, a fixed reference point, the gripper size, the current position (waypoint and
movement questions) and the options as ``[[A]] ...``; the answer is ``[[X]]`` inside
``<answer></answer>`` after reasoning in ``<think></think>``. All metadata is rewritten for Meta-World:
axis words come from the camera geometry, the table centre and gripper size from the MuJoCo model.

The *text path* replaces the image with a description read from simulator state (object and goal
positions, gripper open/closed), so a small text-only reasoner can be trained on a CPU. For
current-state questions it gives the gripper's offset from the first object instead of its position,
so the question still needs a computation rather than a look-up.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from embodied_r.core.records import PromptRow, QARecord

PROMPT_VERSION = "robot_r1_mw_v1"
SYSTEM_CHOICE = (
    "You control a robot arm on a tabletop. Think the problem through step by step inside "
    "<think> </think>, then write only the chosen option inside <answer> </answer> as [[X]], where X "
    "is the option letter. Example: <think> ... </think> <answer> [[B]] </answer>"
)
SYSTEM_OPEN = (
    "You control a robot arm on a tabletop. Think the problem through step by step inside "
    "<think> </think>, then write only the position inside <answer> </answer> as [x, y, z] in metres "
    "with 3 decimals. Example: <think> ... </think> <answer> [0.012, 0.654, 0.130] </answer>"
)
OPEN_STEM = ("Based on the observation and the current robot state, what is the next waypoint position "
             "[x, y, z] of the gripper?")
_AXIS_NAMES = ("X", "Y", "Z")


def _axis_words(scene: dict[str, Any]) -> dict[int, tuple[str, str]]:
    return {int(k): (v[0], v[1]) for k, v in scene["axis_words"].items()}


def _header(meta: dict[str, Any], vision: list[str]) -> list[str]:
    scene = meta["scene"]
    words = _axis_words(scene)
    size = scene["gripper_size"]
    lines = [f"# Robot task: {meta['task_description']}", "## Observation", *vision,
             "## Coordinate system (world frame, metres)"]
    for axis, name in enumerate(_AXIS_NAMES):
        neg, pos = words[axis]
        lines.append(f"- {name}-axis: {neg} (negative) to {pos} (positive), as seen from the front camera")
    lines += [
        f"- The centre of the table surface is at {_xyz(scene['table_centre'])}",
        "## Robot",
        f"- Sawyer arm; the gripper measures about {size[0]} m (x) x {size[1]} m (y) x {size[2]} m (z); "
        f"its fingers open up to {scene['max_finger_opening']} m apart",
    ]
    return lines


def _xyz(values: Any) -> str:
    return "[" + ", ".join(str(round(float(v), 3) + 0.0) for v in values) + "]"


def scene_lines(meta: dict[str, Any], with_offset: bool) -> list[str]:
    """The scene as text from simulator state (text path).

    ``with_offset`` describes the gripper by its offset from the first object instead of by position.
    """
    lines = ["The scene, read from the simulator:"]
    for name, pos in {**meta["objects"], **meta["goal"]}.items():
        lines.append(f"- {name} at {_xyz(pos)}")
    lines.append(f"- the gripper is {'closed' if meta['gripper_closed'] else 'open'}")
    if with_offset:
        name, pos = next(iter(meta["objects"].items()))
        offset = np.asarray(meta["current_xyz"]) - np.asarray(pos)
        words = _axis_words(meta["scene"])
        parts = [f"{abs(d):.3f} m {words[axis][1 if d > 0 else 0]}" for axis, d in enumerate(offset)
                 if abs(d) >= 0.0005]
        where = ", ".join(parts) if parts else "exactly at the position"
        lines.append(f"- the gripper is offset from the {name} by: {where}")
    return lines


def user_text(record: QARecord, path: str, open_ended: bool = False) -> str:
    """The user message of one question; ``path`` is ``"text"`` or ``"image"``."""
    meta = record.meta
    if path == "image":
        vision = ["- The attached image is a front view of the workspace."]
    elif path == "text":
        vision = scene_lines(meta, with_offset=record.task == "current_state")
    else:
        raise ValueError(f"prompt path must be 'text' or 'image', got {path!r}")
    lines = _header(meta, vision)
    if record.task in ("waypoint", "movement"):
        lines += ["## Current robot state", f"- Gripper position: {_xyz(meta['current_xyz'])}"]
    lines.append("## Question")
    if open_ended:
        lines.append(OPEN_STEM)
        return "\n".join(lines)
    lines.append(record.question)
    for option in record.options or []:
        letter, _, text = option.partition(". ")
        lines.append(f"- [[{letter}]] {text}")
    return "\n".join(lines)


def text_prompt_row(record: QARecord) -> PromptRow:
    """Text-path PromptRow (system + user, plain strings)."""
    messages = [{"role": "system", "content": SYSTEM_CHOICE},
                {"role": "user", "content": user_text(record, "text")}]
    return PromptRow(id=record.id, task=record.task, prompt=messages, answer=record.answer,
                     answer_type="choice", options=record.options,
                     meta={"prompt_version": PROMPT_VERSION, "path": "text", "image": record.meta["image"]})


def vl_prompt_row(record: QARecord) -> PromptRow:
    """Image-path PromptRow: the user content is ``[{"type": "image", "image": PATH}, {"type": "text"}]``
    with PATH relative to the dataset folder."""
    content = [{"type": "image", "image": record.meta["image"]},
               {"type": "text", "text": user_text(record, "image")}]
    messages = [{"role": "system", "content": SYSTEM_CHOICE}, {"role": "user", "content": content}]
    return PromptRow(id=record.id, task=record.task, prompt=messages, answer=record.answer,  # type: ignore[arg-type]
                     answer_type="choice", options=record.options,
                     meta={"prompt_version": PROMPT_VERSION, "path": "image", "image": record.meta["image"]})


def open_prompt_row(record: QARecord) -> PromptRow | None:
    """Open-ended waypoint row (text path) for the ``clip(1 - L1, 0, 1)`` reward; None for other types."""
    if record.task != "waypoint":
        return None
    messages = [{"role": "system", "content": SYSTEM_OPEN},
                {"role": "user", "content": user_text(record, "text", open_ended=True)}]
    return PromptRow(id=record.id.replace("/waypoint", "/waypoint_open"), task="waypoint_open",
                     prompt=messages, answer=_xyz(record.meta["target_xyz"]), answer_type="position",
                     options=None, meta={"prompt_version": PROMPT_VERSION, "path": "text",
                                         "image": record.meta["image"]})
