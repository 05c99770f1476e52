"""Parsing VLM answers into frames, and answer-leak detection, on made-up and real VLM text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from embodied_r.methods.embodied_r.perception.parsing import detect_leaks, normalize_action, parse_frame_answer
from embodied_r.methods.embodied_r.perception.prompts import ACTIONS
from embodied_r.methods.embodied_r.prompts import frame_line

FRAME_LINE = re.compile(r"^Frame (\d+): (?:After (.*?), )?Observe: (.*)$")


def real_frames(item: dict) -> tuple[list[tuple[int, str | None, str]], list[str]]:
    """(index, action, view) per frame line, and the options, from one official processed prompt."""
    text = item["question"]
    frames = [(int(m.group(1)), m.group(2), m.group(3)) for m in map(FRAME_LINE.match, text.splitlines()) if m]
    tail = text.rsplit("Question:", 1)[1]
    options = [line.strip() for line in tail.splitlines() if re.match(r"\s*[A-H]\.\s", line)]
    return frames, options


def test_numbered_answer_with_markdown_and_labels():
    raw = ("### 1. **Action**: Move forward\n\n### 2. **ΔInformation**: A tall glass building 1.5 km ahead.\n"
           "### 3. **q-related content**: The red roof is below-left.")
    parsed = parse_frame_answer(raw, 2, 4.0)
    assert parsed.error is None
    assert parsed.frame == {"timestamp": 4.0, "action": "Move forward",
                            "delta": "A tall glass building 1.5 km ahead.",
                            "q_related": "The red roof is below-left.", "raw": raw}


def test_numbers_inside_sentences_do_not_split_points():
    # The official splitter keys on the substrings "1."/"2."/"3." and would cut "3.5 m" (§9 item 8).
    raw = "1. Rotate right\n2. A door 3.5 m away, then 2.0 m of wall.\n3. The sofa is 1.2 m to the left."
    parsed = parse_frame_answer(raw, 1, 1.0)
    assert parsed.frame["delta"] == "A door 3.5 m away, then 2.0 m of wall."
    assert parsed.frame["q_related"] == "The sofa is 1.2 m to the left."


def test_inline_numbered_points_fall_back():
    parsed = parse_frame_answer("1. Tilt upward 2. The sky. 3. Nothing related.", 1, 1.0)
    assert (parsed.frame["action"], parsed.frame["delta"], parsed.frame["q_related"]) == \
        ("Tilt upward", "The sky.", "Nothing related.")


def test_json_answers_tolerate_common_near_misses():
    fenced = '```json\n{"Action": "Turned right", "delta": ["a bed", "a lamp"], "q_related": null,}\n```'
    parsed = parse_frame_answer(fenced, 1, 1.0, "json")
    assert parsed.error is None and parsed.frame["action"] == "Rotate right"
    assert parsed.frame["delta"] == "a bed a lamp" and parsed.frame["q_related"] == ""
    single_quoted = parse_frame_answer("{'delta': 'a bed', 'q_related': 'no chair'}", 0, 0.0, "json")
    assert single_quoted.error is None and single_quoted.frame["action"] is None
    numbered_instead = parse_frame_answer("1. Move left\n2. A TV.\n3. None.", 1, 1.0, "json")
    assert numbered_instead.error is None and numbered_instead.frame["action"] == "Move left"
    assert numbered_instead.warnings == ["answer is not JSON; tried the numbered format"]


def test_malformed_answers_keep_raw_text_and_an_error():
    for raw, error in [("", "empty answer"), (None, "empty answer"),
                       ("I'm sorry, I can't help with that.", "no numbered points 1./2./3. found"),
                       ("1. \n2. a lamp\n3. nothing", "point 1 (action) is empty")]:
        parsed = parse_frame_answer(raw, 1, 1.0)
        assert parsed.error == error
        assert parsed.frame["raw"] == (raw or "")
    no_action = parse_frame_answer('{"delta": "a lamp"}', 2, 1.0, "json")
    assert no_action.error == "JSON answer has no action" and no_action.frame["delta"] == "a lamp"
    broken = parse_frame_answer('{"delta": "unterminated', 2, 1.0, "json")
    assert broken.error == "answer is neither JSON nor numbered points"
    assert frame_line(2, broken.frame) == 'Frame 2: Observe: {"delta": "unterminated'  # reasoner reads raw


@settings(max_examples=150, deadline=None)
@given(raw=st.text(max_size=300), index=st.integers(0, 5), output=st.sampled_from(["numbered", "json"]))
def test_parser_never_raises(raw, index, output):
    parsed = parse_frame_answer(raw, index, 1.0, output)
    assert parsed.frame["raw"] == raw
    assert set(parsed.frame) == {"timestamp", "action", "delta", "q_related", "raw"}
    assert index > 0 or parsed.frame["action"] is None


def test_action_vocabulary():
    assert [normalize_action(a) for a in ACTIONS] == list(ACTIONS)
    assert normalize_action("The drone ascends slightly") == "Move upward"
    assert normalize_action("flew forward then turned left") == "Move forward"
    assert normalize_action("hovering in place") == "hovering in place"


def test_real_official_actions_parse_to_the_vocabulary(urban_processed):
    actions = {a for item in urban_processed for _, a, _ in real_frames(item)[0] if a}
    assert actions, "no actions found in the reference prompts"
    normalized = {normalize_action(a) for a in actions}
    assert normalized <= set(ACTIONS) | {"None"}, normalized - set(ACTIONS)


def test_real_leaks_are_found_and_honest_lines_are_not(urban_processed):
    flagged, clean = 0, 0
    for item in urban_processed:
        frames, options = real_frames(item)
        assert len(options) >= 2
        for _, _, view in frames:
            leaks = detect_leaks(view, options)
            explicit = re.search(r"\b[Oo]ption [A-H]\b", view) is not None
            if explicit:
                assert any(leak["kind"] == "option_letter" for leak in leaks), view
            if leaks:
                flagged += 1
            else:
                clean += 1
                assert "Option" not in view
    assert flagged >= 10 and clean > flagged
    item = next(i for i in urban_processed if i["Question_id"] == 2104)
    frames, options = real_frames(item)
    assert detect_leaks(frames[10][2], options) == [{"kind": "option_letter", "match": "Option A"}]
    assert detect_leaks(frames[1][2], options) == []  # "...mentioned in the question/option are not present"


def test_short_options_are_not_matched_as_text():
    assert detect_leaks("The chair is on the left.", ["A. left", "B. right"]) == []
    assert detect_leaks("B", ["A. left", "B. right"]) == [{"kind": "option_letter", "match": "B"}]
    assert detect_leaks("Option Z is not an option here", ["A. x", "B. y"]) == []
    assert detect_leaks("anything", None) == []
