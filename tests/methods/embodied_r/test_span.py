"""Question spans (how many key frames a question's objects spread over) and the detail level of prompt rows."""

from __future__ import annotations

import pytest

from embodied_r.core.io import DataFileError
from embodied_r.core.records import Perception, QARecord
from embodied_r.methods.embodied_r.perception.prompt_rows import (
    MAX_SPAN_TRIES,
    SPAN_UNKNOWN,
    build_rows,
    common_detail,
    perception_span,
    question_span,
)
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

# ---------------------------------------------------------------------------------------------------
# question_span
# ---------------------------------------------------------------------------------------------------


def test_no_needed_label_is_span_one():
    assert question_span([["chair_0"], ["wall_1"]], []) == 1
    assert question_span([], []) == 1


def test_one_frame_showing_every_needed_label_is_span_one():
    seen = [["chair_0"], ["chair_0", "table_1", "wall_2"], ["table_1"]]
    assert question_span(seen, ["chair_0", "table_1"]) == 1


def test_two_needed_labels_in_different_frames_are_span_two():
    assert question_span([["chair_0", "wall_0"], ["wall_0"], ["table_1"]], ["chair_0", "table_1"]) == 2


def test_three_needed_labels_over_two_frames():
    seen = [["a"], ["b"], ["c"], ["b", "c"], ["sofa_9"]]
    assert question_span(seen, ["a", "b", "c"]) == 2
    assert question_span([["a"], ["b"], ["c"]], ["a", "b", "c"]) == 3


def test_greedy_trap_finds_the_true_minimum():
    # Greedy takes the frame with the most needed labels ({1,2,4,5}) and then needs two more frames for 3 and
    # 6; the smallest cover is the two other frames.
    seen = [["l1", "l2", "l4", "l5"], ["l1", "l2", "l3"], ["l4", "l5", "l6"]]
    assert question_span(seen, ["l1", "l2", "l3", "l4", "l5", "l6"]) == 2


def test_a_needed_label_in_no_frame_gives_none():
    assert question_span([["chair_0"], ["table_1"]], ["chair_0", "door_3"]) is None
    assert question_span([], ["chair_0"]) is None


def test_the_search_is_capped(monkeypatch):
    import embodied_r.methods.embodied_r.perception.prompt_rows as prompt_rows

    monkeypatch.setattr(prompt_rows, "MAX_SPAN_TRIES", 3)
    with pytest.raises(ValueError, match="combinations"):
        prompt_rows.question_span([["a"], ["b"], ["c"], ["d"]], ["a", "b", "c", "d"])
    assert MAX_SPAN_TRIES >= 100_000  # the real cap is far above 12 frames x 6 needed labels


# ---------------------------------------------------------------------------------------------------
# Rows: detail and span in meta, one detail level per build
# ---------------------------------------------------------------------------------------------------


def _qa(qid: str) -> QARecord:
    return QARecord(id=qid, source="synthetic-world", task="object_rel_direction", video=f"videos/{qid}.mp4",
                    question="Where is the table?", options=["A. left", "B. right"], answer="A")


def _perception(qid: str, detail: str | None = "words", seen=None, needs=None) -> Perception:
    frames = [{"timestamp": float(i), "action": None if i == 0 else "Move forward", "delta": f"A room {i}.",
               "q_related": "The table is ahead.", "raw": f"raw {i}"} for i in range(3)]
    meta = {"leaked": False}
    if detail is not None:
        meta["detail"] = detail
    if seen is not None:
        meta["seen"], meta["needs"] = seen, needs
    return Perception(qa_id=qid, video=f"videos/{qid}.mp4", backend="oracle", model="simulator",
                      prompt_version="official-v1", frames=frames, meta=meta)


def test_perception_span_reads_seen_and_needs_or_says_unknown():
    assert perception_span(_perception("q", seen=[["a"], [], ["b"]], needs=["a", "b"])) == 2
    assert perception_span(_perception("q", seen=[[], [], []], needs=["a"])) is None
    assert perception_span(_perception("q")) == SPAN_UNKNOWN  # a VLM's, or made before labels were recorded
    assert perception_span(_perception("q", seen=[["a"]], needs=["a"])) == SPAN_UNKNOWN  # not one list a frame


def test_rows_carry_detail_and_span_and_the_same_prompt():
    questions = [_qa("q0"), _qa("q1"), _qa("q2")]
    perceptions = {"q0": _perception("q0", "map", [["a"], ["a"], []], ["a"]),
                   "q1": _perception("q1", "map", [["a"], [], ["b"]], ["a", "b"]),
                   "q2": _perception("q2", "map", [["a"], [], []], ["a", "b"])}
    rows, missing = build_rows(questions, perceptions, "official-v1")
    assert missing == []
    assert [(r.meta["detail"], r.meta["span"]) for r in rows] == [("map", 1), ("map", 2), ("map", None)]
    for row, qa in zip(rows, questions, strict=True):
        assert row.prompt == build_reasoner_messages(perceptions[qa.id].frames, qa.question, qa.options,
                                                     version="official-v1")
        assert row.meta["perception"] == {"backend": "oracle", "model": "simulator",
                                          "prompt_version": "official-v1", "leaked": False, "runaway": []}

    vlm = _perception("q0", detail=None)
    rows, _ = build_rows([_qa("q0")], {"q0": vlm}, "official-v1")
    assert rows[0].meta["detail"] is None and rows[0].meta["span"] == SPAN_UNKNOWN


def test_rows_from_several_detail_levels_are_refused_naming_them():
    questions = [_qa("q0"), _qa("q1"), _qa("q2")]
    perceptions = {"q0": _perception("q0", "words"), "q1": _perception("q1", "map"),
                   "q2": _perception("q2", "words")}
    with pytest.raises(DataFileError, match="mixes detail levels") as caught:
        build_rows(questions, perceptions, "official-v1")
    assert "'map'" in str(caught.value) and "'words'" in str(caught.value)
    assert "one level" in str(caught.value)
    # Only the perceptions the rows use count; one level, or levels beside an unknown one, are fine.
    rows, _ = build_rows([_qa("q0"), _qa("q2")], perceptions, "official-v1")
    assert len(rows) == 2
    assert common_detail([_perception("a", None), _perception("b", "bearings")]) == "bearings"
    assert common_detail([_perception("a", None)]) is None
