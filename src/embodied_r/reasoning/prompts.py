"""Reasoner prompt templates (system + user) in the official Embodied-R format.

The official format is an interface: released Embodied-R weights and the official processed data
expect exactly this text (the official data converter's format), so ``official-v1`` reproduces it,
artefacts included (the R1-Zero "User: . Assistant:" tail). ``structured-v1`` is an opt-in variant
that keeps the question-related observation apart from the new spatial information and drops the
artefacts. Every prompt row records the template version that built it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_PROMPT_VERSION = "official-v1"

# DeepSeek-R1-Zero template plus Embodied-R's consistency sentence (the official system prompt).
_R1_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with "
    "the answer. The reasoning process and answer are enclosed within <think> </think> and <answer> "
    "</answer> tags, respectively, i.e., <think> reasoning process here </think>\n<answer> answer here "
    "</answer>."
)
_CONSISTENCY_SENTENCE = (
    " Ensure that your answer is consistent with and directly derived from your thinking process, "
    "maintaining logical coherence between the two sections."
)
OFFICIAL_SYSTEM_PROMPT = _R1_TEMPLATE + _CONSISTENCY_SENTENCE + " User: . Assistant:"
STRUCTURED_SYSTEM_PROMPT = (
    _R1_TEMPLATE
    + _CONSISTENCY_SENTENCE
    + " For a multiple-choice question, put only the option letter inside <answer> </answer>; for a "
    "numeric question, put only the number."
)

ROLE_SENTENCE = (
    "Please assume the role of an agent. The video represents your egocentric observations from the "
    "past to the present."
)
VIDEO_HEADER = (
    "The content of the video will be described in the form of text. The 0th frame is the initial "
    "frame, which includes the scene that agent observe at the initial position. The agent keeps "
    "moving, thus constantly obtaining new visual observations (frames). The last frame is the visual "
    "observation at the current position."
)


@dataclass(frozen=True)
class PromptTemplate:
    version: str
    system: str
    structured_frames: bool


TEMPLATES: dict[str, PromptTemplate] = {
    "official-v1": PromptTemplate("official-v1", OFFICIAL_SYSTEM_PROMPT, structured_frames=False),
    "structured-v1": PromptTemplate("structured-v1", STRUCTURED_SYSTEM_PROMPT, structured_frames=True),
}


def get_template(version: str = DEFAULT_PROMPT_VERSION) -> PromptTemplate:
    try:
        return TEMPLATES[version]
    except KeyError:
        raise ValueError(f"unknown prompt version {version!r}; choose one of {sorted(TEMPLATES)}") from None


def _clean(text: Any) -> str:
    return " ".join(str(text or "").split())


def frame_line(index: int, frame: Mapping[str, Any], structured: bool = False) -> str:
    """One ``Frame k: ...`` line from a perception frame dict (action, delta, q_related, raw).

    >>> frame_line(0, {"action": None, "delta": "A red sofa ahead.", "q_related": "", "raw": ""})
    'Frame 0: Observe: A red sofa ahead.'
    >>> frame_line(1, {"action": "rotate left", "delta": "A door.", "q_related": "No chair.", "raw": ""})
    'Frame 1: After rotate left, Observe: A door. No chair.'
    """
    delta, related = _clean(frame.get("delta")), _clean(frame.get("q_related"))
    if structured:
        parts = [f"New: {delta}" if delta else "", f"Related to the question: {related}" if related else ""]
        view = " ".join(p for p in parts if p)
    else:
        # Official pipeline: view = ΔInformation + ' ' + q-related content (as the official data pipeline joins them).
        view = " ".join(p for p in (delta, related) if p)
    if not view:
        view = _clean(frame.get("raw"))
    action = frame.get("action")
    if index == 0 or not action:
        return f"Frame {index}: Observe: {view}"
    return f"Frame {index}: After {_clean(action)}, Observe: {view}"


def video_content(frames: Sequence[Mapping[str, Any]], structured: bool = False) -> str:
    """The header plus one line per key frame, in the official format."""
    lines = [VIDEO_HEADER] + [frame_line(i, f, structured) for i, f in enumerate(frames)]
    return "\n".join(lines)


def question_block(question: str, options: Sequence[str] | None) -> str:
    """``Question: …`` plus VSI-style choices, as the official converter formats VSI-Bench items."""
    text = f"Question: {question.strip()}"
    if options:
        text += "\nChoices:\n" + "\n".join(str(o).strip() for o in options)
    return text


def build_user_text(frames: Sequence[Mapping[str, Any]], question: str, options: Sequence[str] | None,
                    version: str = DEFAULT_PROMPT_VERSION) -> str:
    template = get_template(version)
    content = video_content(frames, structured=template.structured_frames)
    return f"{ROLE_SENTENCE}\nVideo content: \n<\n{content}\n>\n{question_block(question, options)}"


def build_reasoner_messages(frames: Sequence[Mapping[str, Any]], question: str,
                            options: Sequence[str] | None,
                            version: str = DEFAULT_PROMPT_VERSION) -> list[dict[str, str]]:
    """Chat messages (system + user) for the reasoner from perception frames and a question.

    >>> msgs = build_reasoner_messages([{"delta": "A chair on the left."}], "Where is the chair?",
    ...                                ["A. left", "B. right"])
    >>> [m["role"] for m in msgs]
    ['system', 'user']
    >>> msgs[1]["content"].endswith("Choices:\\nA. left\\nB. right")
    True
    """
    template = get_template(version)
    return [
        {"role": "system", "content": template.system},
        {"role": "user", "content": build_user_text(frames, question, options, version)},
    ]


def direct_answer_messages(user_text: str, options: Sequence[str] | None) -> list[dict[str, str]]:
    """A no-thinking baseline prompt: the same user text, asking for the answer alone in tags."""
    instruction = (
        "Answer with the option's letter only, inside <answer> </answer>."
        if options
        else "Answer with a single number only, inside <answer> </answer>."
    )
    return [
        {"role": "system", "content": "You answer questions directly, without explanation."},
        {"role": "user", "content": f"{user_text}\n{instruction}"},
    ]
