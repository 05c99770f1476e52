"""Perception prompts: what the VLM is asked about each key frame (the official perception prompts).

Two versioned schemes; every Perception record stores the version that produced it.

- ``official-v1`` (default) follows the official Embodied-R scheme: the first key frame is sent alone
  with a request for an egocentric scene description; every later key frame is sent together with the
  previous one, and the VLM answers three numbered points — the action taken (one of a fixed list),
  the newly visible spatial information (ΔInformation), and the content related to the question. As
  in the official code, the question is inserted *with its answer choices*.
- ``json-v1`` asks for the same three fields as a JSON object and shows only the entity names found in
  the question (``entities.extract_entities``), never the choices, so the VLM cannot leak an answer
  it was never shown (a leak in the official pipeline).

The wording is ours; the structure (which images, which three fields, the action vocabulary) is the
interface the official data and weights were produced with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from embodied_r.methods.embodied_r.prompts import question_block

DEFAULT_PERCEPTION_PROMPT = "official-v1"
PERCEPTION_PROMPT_VERSIONS: tuple[str, ...] = ("official-v1", "json-v1")

# The official fixed action list, written as it appears in the data.
ACTIONS: tuple[str, ...] = (
    "Move forward", "Move backward", "Move left", "Move right", "Move upward", "Move downward",
    "Rotate left", "Rotate right", "Tilt downward", "Tilt upward",
)
_ACTION_LIST = ", ".join(a if i == 0 else a.lower() for i, a in enumerate(ACTIONS))


@dataclass(frozen=True)
class FramePrompt:
    """The text sent with one key frame. ``image_timestamps`` is ``(t,)`` for the first key frame and
    ``(t_previous, t)`` afterwards, in the order the images are attached. ``output`` names the answer
    format the parser expects (``"numbered"`` or ``"json"``)."""

    frame_index: int
    image_timestamps: tuple[float, ...]
    text: str
    version: str
    output: str


# ---------------------------------------------------------------------------------------------------
# official-v1: question with its choices; numbered answer
# ---------------------------------------------------------------------------------------------------

_OFFICIAL_FIRST = (
    "You see the first-person view of an intelligent agent. Describe the scene it observes now. "
    "Describe objects by their colour and shape. Focus on where things are relative to the agent: first "
    "picture the 3D space around the agent, then use egocentric directions such as \"on the left\", "
    "\"ahead and to the right\" or \"below\", not positions in the image. Most importantly, if any "
    "object mentioned in this question appears, describe it: \"{question}\". Do not answer the question "
    "and do not pick an option; only report whether and where those objects appear. Keep the answer "
    "short and clear."
)

_OFFICIAL_NEXT = (
    "The two images are the agent's first-person view before (first image) and after (second image) "
    "one action. Reply with three numbered points.\n"
    "1. Action: the action the agent took, judged from how the objects moved between the two views. "
    "Answer with exactly one of: {actions}.\n"
    "2. ΔInformation: the spatial information that is new in the second view (objects that were hidden "
    "or unclear before). Use colour and shape to tell similar objects apart, such as city buildings; "
    "picture the 3D scene and describe the agent's relation to its surroundings with egocentric "
    "directions such as \"on the left\", \"ahead-left\" or \"below\".\n"
    "3. q-related content: if any object mentioned in this question appears, describe it: "
    "\"{question}\". Do not answer the question or pick an option; only report what you observe.\n"
    "Keep the answer short and clear."
)


def official_question_text(question: str, options: Sequence[str] | None) -> str:
    """The question as the official pipeline inserts it: the stem followed by all the choices.

    >>> official_question_text("Where is the sofa?", ["A. left", "B. right"])
    'Where is the sofa?\\nChoices:\\nA. left\\nB. right'
    """
    return question_block(question, options).removeprefix("Question: ")


# ---------------------------------------------------------------------------------------------------
# json-v1: entity names only; JSON answer
# ---------------------------------------------------------------------------------------------------

_JSON_FIRST = (
    "You see the first-person view of an agent. Describe what it observes now, for someone who cannot "
    "see the image: objects with their colour and shape, and where each one is relative to the agent "
    "in egocentric terms (\"on the left\", \"ahead and to the right\", \"below\"), not image "
    "positions. Things to look for: {entities}.\n"
    "Reply with only a JSON object, no other text:\n"
    "{{\"delta\": \"<the scene and the agent's place in it>\", "
    "\"q_related\": \"<for each thing to look for: where it is, or that it is not visible>\"}}"
)

_JSON_NEXT = (
    "The two images are the agent's first-person view before (first image) and after (second image) "
    "one action. Things to look for: {entities}.\n"
    "Reply with only a JSON object, no other text:\n"
    "{{\"action\": \"<exactly one of: {actions}>\", "
    "\"delta\": \"<what is newly visible or clearer in the second view: objects with colour and shape, "
    "and where they are relative to the agent in egocentric terms>\", "
    "\"q_related\": \"<for each thing to look for that appears in the second view: where it is; say "
    "so if none appears>\"}}"
)


def _entity_text(entities: Sequence[str]) -> str:
    return ", ".join(entities) if entities else "none in particular; describe the main objects"


# ---------------------------------------------------------------------------------------------------
# Public builder
# ---------------------------------------------------------------------------------------------------


def build_frame_prompts(question: str, options: Sequence[str] | None, timestamps: Sequence[float],
                        version: str = DEFAULT_PERCEPTION_PROMPT,
                        entities: Sequence[str] = ()) -> list[FramePrompt]:
    """One prompt per key frame of a question's video.

    >>> prompts = build_frame_prompts("Where is the sofa?", ["A. left", "B. right"], [0.0, 2.0])
    >>> [p.image_timestamps for p in prompts]
    [(0.0,), (0.0, 2.0)]
    >>> "B. right" in prompts[1].text
    True
    >>> json_prompts = build_frame_prompts("Where is the sofa?", ["A. left", "B. right"], [0.0, 2.0],
    ...                                    version="json-v1", entities=["sofa"])
    >>> any("B. right" in p.text or "left" in p.text.split("look for:")[1][:8] for p in json_prompts)
    False
    """
    if version not in PERCEPTION_PROMPT_VERSIONS:
        raise ValueError(f"unknown perception prompt version {version!r}; choose one of "
                         f"{list(PERCEPTION_PROMPT_VERSIONS)}")
    if not timestamps:
        raise ValueError("no key-frame timestamps: a question's video needs at least one key frame")
    if version == "official-v1":
        quoted = official_question_text(question, options)
        first = _OFFICIAL_FIRST.format(question=quoted)
        later = _OFFICIAL_NEXT.format(question=quoted, actions=_ACTION_LIST)
        output = "numbered"
    else:
        names = _entity_text(entities)
        first = _JSON_FIRST.format(entities=names)
        later = _JSON_NEXT.format(entities=names, actions=_ACTION_LIST)
        output = "json"
    prompts = [FramePrompt(0, (float(timestamps[0]),), first, version, output)]
    for index in range(1, len(timestamps)):
        pair = (float(timestamps[index - 1]), float(timestamps[index]))
        prompts.append(FramePrompt(index, pair, later, version, output))
    return prompts
