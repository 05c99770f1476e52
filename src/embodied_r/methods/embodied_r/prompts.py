"""Reasoner prompt templates (system + user) in the official Embodied-R format.

The official format is an interface: released Embodied-R weights and the official processed data
expect this text. Four variants:

- ``official``: the official text byte for byte, as the official processed files hold it and the
  official batch inference sends it: the system prompt with its " \n" before ``<answer>`` and the R1-Zero
  "User: . Assistant:" tail; the user text with the runs of spaces its line continuations leave (13
  after the role sentence, 5 between the header's sentences, 12 before ``Question:``); frame
  descriptions as written; and the source's own question text (UrbanVideo's "choose:" block) when the
  question record carries it. ``parse_official_prompt`` reads such a prompt back into its parts.
- ``official-v1`` (the default): the same words with whitespace normalised and VSI-style
  ``Choices:`` lines — what this project's synthetic data and measurements use.
- ``structured-v1``: keeps the question-related observation apart from the new spatial information
  and drops the artefacts.
- ``compact-v1``: the same frame lines and question block under a two-sentence instruction, without
  the R1-Zero system prompt, the role sentence and the video header (about 150 tokens fewer per prompt,
  for CPU training). Not the official format: a model trained on it is evaluated with it.

Every prompt row records the template version that built it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Also written as ``EMBODIED_R.default_prompt_version`` (methods/__init__.py), where evaluation reads it without
# importing this module; tests/methods/test_method_evaluation_parts.py keeps the two equal.
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
# The official batch inference's bytes: a space before the newline that precedes <answer>. (The training
# scripts pass the same text through a shell's double quotes, so there the newline is a literal "\n".)
OFFICIAL_EXACT_SYSTEM_PROMPT = OFFICIAL_SYSTEM_PROMPT.replace("</think>\n<answer>", "</think> \n<answer>")
STRUCTURED_SYSTEM_PROMPT = (
    _R1_TEMPLATE
    + _CONSISTENCY_SENTENCE
    + " For a multiple-choice question, put only the option letter inside <answer> </answer>; for a "
    "numeric question, put only the number."
)
COMPACT_SYSTEM_PROMPT = (
    "You answer questions about an egocentric video that is described frame by frame, oldest first. "
    "Think briefly inside <think> </think>, then put only the option letter (multiple choice) or only the "
    "number (numeric question) inside <answer> </answer>."
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


# The official user text's whitespace, left by backslash line continuations inside a string literal.
OFFICIAL_ROLE_GAP = " " * 13
OFFICIAL_HEADER_GAP = " " * 5
OFFICIAL_QUESTION_GAP = " " * 12
OFFICIAL_VIDEO_HEADER = VIDEO_HEADER.replace(". ", "." + OFFICIAL_HEADER_GAP)


@dataclass(frozen=True)
class PromptTemplate:
    version: str
    system: str
    structured_frames: bool
    exact: bool = False  # the official bytes: no whitespace normalised, the source's question text
    preamble: bool = True  # the role sentence and the video header before the frame lines


TEMPLATES: dict[str, PromptTemplate] = {
    "official": PromptTemplate("official", OFFICIAL_EXACT_SYSTEM_PROMPT, structured_frames=False, exact=True),
    "official-v1": PromptTemplate("official-v1", OFFICIAL_SYSTEM_PROMPT, structured_frames=False),
    "structured-v1": PromptTemplate("structured-v1", STRUCTURED_SYSTEM_PROMPT, structured_frames=True),
    "compact-v1": PromptTemplate("compact-v1", COMPACT_SYSTEM_PROMPT, structured_frames=False, preamble=False),
}


def get_template(version: str = DEFAULT_PROMPT_VERSION) -> PromptTemplate:
    try:
        return TEMPLATES[version]
    except KeyError:
        raise ValueError(f"unknown prompt version {version!r}; choose one of {sorted(TEMPLATES)}") from None


def system_prompt(version: str) -> str:
    """The system message of ``version``'s prompts (``Method.system_prompt``: evaluation adds it to the official
    processed files, whose items hold only the user text).

    >>> system_prompt("official") == OFFICIAL_EXACT_SYSTEM_PROMPT
    True
    """
    return get_template(version).system


def _clean(text: Any) -> str:
    return " ".join(str(text or "").split())


def frame_line(index: int, frame: Mapping[str, Any], structured: bool = False, exact: bool = False) -> str:
    """One ``Frame k: ...`` line from a perception frame dict (action, delta, q_related, raw).

    >>> frame_line(0, {"action": None, "delta": "A red sofa ahead.", "q_related": "", "raw": ""})
    'Frame 0: Observe: A red sofa ahead.'
    >>> frame_line(1, {"action": "rotate left", "delta": "A door.", "q_related": "No chair.", "raw": ""})
    'Frame 1: After rotate left, Observe: A door. No chair.'
    """
    if exact:  # the descriptions as the VLM wrote them
        view = (" ".join(str(p) for p in (frame.get("delta"), frame.get("q_related")) if p)
                or str(frame.get("raw") or ""))
        action = frame.get("action")
        return (f"Frame {index}: Observe: {view}" if index == 0 or not action
                else f"Frame {index}: After {action}, Observe: {view}")
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


def video_content(frames: Sequence[Mapping[str, Any]], structured: bool = False, exact: bool = False,
                  header: bool = True) -> str:
    """The header (unless ``header`` is false) plus one line per key frame, in the official format."""
    lines = [OFFICIAL_VIDEO_HEADER if exact else VIDEO_HEADER] if header else []
    lines += [frame_line(i, f, structured, exact) for i, f in enumerate(frames)]
    return "\n".join(lines)


def question_block(question: str, options: Sequence[str] | None) -> str:
    """``Question: …`` plus VSI-style choices, as the official converter formats VSI-Bench items."""
    text = f"Question: {question.strip()}"
    if options:
        text += "\nChoices:\n" + "\n".join(str(o).strip() for o in options)
    return text


def official_question_text(question: str, options: Sequence[str] | None, source_question: str | None = None) -> str:
    r"""What the official converter puts after ``Question:``: the source's question text after its own
    ``Question:`` (UrbanVideo-Bench's, with its "choose:" block), stripped; without one, the question and
    its options as the official VSI-Bench input lays them out (``infer/data_demo.json``).

    >>> official_question_text("Where?", ["A. left", "B. right"])
    'Where?\n\nChoices: \nA. left\nB. right'
    >>> official_question_text("x", None, "Question: Where?  \nchoose:  \nA. up  \nB. down  ")
    'Where?  \nchoose:  \nA. up  \nB. down'
    """
    if source_question:
        return source_question.split("Question:", 1)[-1].strip()
    text = question
    if options:
        text += "\n\nChoices: \n" + "\n".join(str(o) for o in options)
    return text.strip()


def build_user_text(frames: Sequence[Mapping[str, Any]], question: str, options: Sequence[str] | None,
                    version: str = DEFAULT_PROMPT_VERSION, source_question: str | None = None) -> str:
    """The user turn. ``source_question`` (the benchmark's own question text, when the question record
    kept it) is used by the ``official`` variant only."""
    template = get_template(version)
    content = video_content(frames, structured=template.structured_frames, exact=template.exact,
                            header=template.preamble)
    if not template.preamble:
        return f"Video content:\n{content}\n{question_block(question, options)}"
    if template.exact:
        return (f"{ROLE_SENTENCE}{OFFICIAL_ROLE_GAP}Video content: \n<\n{content}\n>\n{OFFICIAL_QUESTION_GAP}"
                f"Question: {official_question_text(question, options, source_question)}")
    return f"{ROLE_SENTENCE}\nVideo content: \n<\n{content}\n>\n{question_block(question, options)}"


@dataclass(frozen=True)
class OfficialPrompt:
    """An official user text read back: its frames (``action`` None for frame 0, ``raw`` the view as
    written) and the text after ``Question:`` (question and choices)."""

    frames: list[dict[str, Any]]
    question_text: str


_OFFICIAL_PROMPT_RE = re.compile(
    re.escape(ROLE_SENTENCE) + r"\s*Video content: \n<\n(?P<content>.*)\n>\n\s*Question: (?P<question>.*)\Z", re.DOTALL
)
_FRAME_START_RE = re.compile(r"^Frame (\d+): ", re.MULTILINE)
_FRAME_RE = re.compile(r"Frame (?P<index>\d+): (?:After (?P<action>.*?), )?Observe: (?P<view>.*)\Z", re.DOTALL)


def latest_frame_action(user_text: str) -> str | None:
    r"""How the last ``Frame k:`` line of a reasoner prompt opens: ``"After <action>"``, or ``"Observe"`` for a
    frame reached without an action; None when the text has no frame lines.

    >>> latest_frame_action("Frame 0: Observe: a sofa.\nFrame 1: After Rotate left, Observe: a door.\nQuestion: x")
    'After Rotate left'
    >>> latest_frame_action("Frame 0: Observe: a sofa.") is None, latest_frame_action("no frames") is None
    (False, True)
    """
    starts = list(_FRAME_START_RE.finditer(user_text))
    if not starts:
        return None
    match = re.match(r"(After [^\n]*?), Observe:", user_text[starts[-1].end():])
    return match.group(1) if match else "Observe"


def parse_official_prompt(text: str) -> OfficialPrompt:
    """Split an official reasoner user text into frames and question text (``ValueError`` if it is not
    one). ``build_user_text(frames, "", None, "official", "Question: " + question_text)`` gives the text
    back."""
    match = _OFFICIAL_PROMPT_RE.match(text)
    if match is None:
        raise ValueError("not an official Embodied-R reasoner prompt (role sentence, 'Video content:' block, "
                         "'Question:')")
    content = match.group("content")
    starts = [m.start() for m in _FRAME_START_RE.finditer(content)]
    frames = []
    for begin, end in zip(starts, [*starts[1:], len(content) + 1]):
        line = _FRAME_RE.match(content[begin:end - 1])
        if line is None:
            raise ValueError(f"unreadable frame line: {content[begin:begin + 80]!r}")
        frames.append({"action": line.group("action"), "raw": line.group("view")})
    return OfficialPrompt(frames=frames, question_text=match.group("question"))


def build_reasoner_messages(frames: Sequence[Mapping[str, Any]], question: str,
                            options: Sequence[str] | None,
                            version: str = DEFAULT_PROMPT_VERSION,
                            source_question: str | None = None) -> list[dict[str, str]]:
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
        {"role": "user", "content": build_user_text(frames, question, options, version, source_question)},
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
