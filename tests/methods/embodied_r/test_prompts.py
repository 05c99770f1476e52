"""Snapshot tests: the official prompt format is an interface (released weights expect it)."""

from __future__ import annotations

import pytest

from embodied_r.methods.embodied_r.prompts import (
    OFFICIAL_SYSTEM_PROMPT,
    build_reasoner_messages,
    frame_line,
    get_template,
    video_content,
)

FRAMES = [
    {"timestamp": 0.0, "action": None, "delta": "A white wall ahead; a brown table to the left.", "q_related": "",
     "raw": ""},
    {"timestamp": 3.0, "action": "rotate right", "delta": "A grey door ahead-right.",
     "q_related": "The chair is near the door.", "raw": ""},
    {"timestamp": 6.0, "action": "Move forward", "delta": "", "q_related": "", "raw": "unparsed text"},
]

EXPECTED_USER = (
    "Please assume the role of an agent. The video represents your egocentric observations from the past "
    "to the present.\n"
    "Video content: \n<\n"
    "The content of the video will be described in the form of text. The 0th frame is the initial frame, "
    "which includes the scene that agent observe at the initial position. The agent keeps moving, thus "
    "constantly obtaining new visual observations (frames). The last frame is the visual observation at "
    "the current position.\n"
    "Frame 0: Observe: A white wall ahead; a brown table to the left.\n"
    "Frame 1: After rotate right, Observe: A grey door ahead-right. The chair is near the door.\n"
    "Frame 2: After Move forward, Observe: unparsed text\n"
    ">\n"
    "Question: Where is the chair relative to the table?\n"
    "Choices:\nA. left\nB. right"
)


def test_official_user_message_snapshot() -> None:
    messages = build_reasoner_messages(FRAMES, "Where is the chair relative to the table?", ["A. left", "B. right"])
    assert messages[0] == {"role": "system", "content": OFFICIAL_SYSTEM_PROMPT}
    assert messages[1]["content"] == EXPECTED_USER


def test_official_system_prompt_keeps_the_interface() -> None:
    # The tags, the consistency sentence and the R1-Zero tail are what released weights were trained on.
    assert "<think> </think> and <answer> </answer>" in OFFICIAL_SYSTEM_PROMPT
    assert "consistent with and directly derived from your thinking process" in OFFICIAL_SYSTEM_PROMPT
    assert OFFICIAL_SYSTEM_PROMPT.endswith("User: . Assistant:")


def test_structured_variant_keeps_question_related_text_apart() -> None:
    line = frame_line(1, FRAMES[1], structured=True)
    assert line == ("Frame 1: After rotate right, Observe: New: A grey door ahead-right. "
                    "Related to the question: The chair is near the door.")
    assert "User: ." not in get_template("structured-v1").system


def test_number_question_has_no_choices_block() -> None:
    user = build_reasoner_messages(FRAMES[:1], "How many chairs are there?", None)[1]["content"]
    assert user.endswith("Question: How many chairs are there?")


def test_whitespace_in_descriptions_is_collapsed() -> None:
    assert video_content([{"delta": "a   b\n c"}]).endswith("Frame 0: Observe: a b c")


def test_unknown_version_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown prompt version 'v9'"):
        get_template("v9")


def test_compact_variant_keeps_the_frame_lines_and_question_without_the_preamble() -> None:
    question, options = "Where is the chair relative to the table?", ["A. left", "B. right"]
    official = build_reasoner_messages(FRAMES, question, options)
    compact = build_reasoner_messages(FRAMES, question, options, version="compact-v1")
    frame_lines = [line for line in EXPECTED_USER.split("\n") if line.startswith("Frame ")]
    assert compact[1]["content"] == "\n".join(["Video content:", *frame_lines, "Question: " + question,
                                               "Choices:", *options])
    assert "assume the role" not in compact[1]["content"] and "0th frame" not in compact[1]["content"]
    # The answer tags the format reward and the parser read are still asked for, in fewer words.
    system = compact[0]["content"]
    assert "<think> </think>" in system and "<answer> </answer>" in system
    assert len(system) + len(compact[1]["content"]) < len(official[0]["content"]) + len(official[1]["content"]) - 500


def test_compact_variant_frames_are_dropped_oldest_first_like_the_official_ones() -> None:
    from embodied_r.inference.context_policy import frame_line_numbers, without_oldest_frames

    compact = build_reasoner_messages(FRAMES, "How many chairs are there?", None, version="compact-v1")
    assert len(frame_line_numbers(compact[1]["content"])) == 3
    kept = without_oldest_frames(compact, 2)[1]["content"]
    assert kept == ("Video content:\nFrame 2: After Move forward, Observe: unparsed text\n"
                    "Question: How many chairs are there?")
