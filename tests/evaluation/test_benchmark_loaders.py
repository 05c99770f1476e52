from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from shared_paths import shared_data

from embodied_r.core.io import DataFileError
from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.egoschema import load_egoschema
from embodied_r.evaluation.benchmarks.mvbench import load_mvbench
from embodied_r.evaluation.benchmarks.registry import load_qa, parse_spec
from embodied_r.evaluation.benchmarks.synthetic import load_synthetic
from embodied_r.evaluation.benchmarks.urbanvideo import load_urbanvideo, scene_of_video, split_question
from embodied_r.evaluation.benchmarks.vsibench import load_vsibench
from embodied_r.evaluation.reference_names import mvbench, vsibench

# ---------------------------------------------------------------------------------------------------
# UrbanVideo-Bench (real file)
# ---------------------------------------------------------------------------------------------------


def test_all_real_urbanvideo_questions_load() -> None:
    path = shared_data("urbanvideo_bench/MCQ.parquet")
    records, report = load_urbanvideo(path)
    assert len(records) + len(report.skipped) == 5355
    # Every row's options are recovered, including the ones pasted with quote fences and an
    # "Answer:" word glued to option A (e.g. rows 846, 1419), which naive parsers drop.
    assert len(records) == 5355 and report.skipped == []
    by_id = {r.id: r for r in records}
    assert by_id["846"].options[0].startswith("A. There is a large park") and len(by_id["846"].options) == 5
    assert all('"""' not in o and "```" not in o for r in records for o in r.options)
    assert all(r.answer in {o[0] for o in r.options} for r in records)
    assert {len(r.options) for r in records} <= set(range(2, 9))
    assert sum(1 for r in records if len(r.options) == 7) == 382  # Action Generation's 7-option questions
    assert len({r.task for r in records}) == 16
    assert len({r.video for r in records}) == 1393
    assert not any(r.question.lower().startswith("question:") for r in records)


def test_urbanvideo_bad_rows_are_reported(tmp_path: Path) -> None:
    rows = [
        (1, "a.mp4", "Counterfactual", "Question: Go?\nChoices:\nA. yes\nB. no", "B"),
        (1, "a.mp4", "Counterfactual", "Question: Go?\nChoices:\nA. yes\nB. no", "A"),  # duplicated id
        (2, "b.mp4", "Counterfactual", "Question: no options at all", "A"),
        (3, "c.mp4", "Counterfactual", "Question: Go?\nchoose:\nA. yes\nB. no", "E"),  # answer outside options
    ]
    frame = pd.DataFrame(rows, columns=["Question_id", "video_id", "question_category", "question", "answer"])
    frame.to_parquet(tmp_path / "MCQ.parquet")
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "a.mp4").write_bytes(b"")
    records, report = load_urbanvideo(tmp_path)
    assert [r.id for r in records] == ["1"]
    assert records[0].video == str(tmp_path / "videos" / "a.mp4") and records[0].meta["video_found"]
    reasons = {s["id"]: s["reason"] for s in report.skipped}
    assert reasons["1"].startswith("duplicated id")
    assert reasons["2"].startswith("no options")
    assert reasons["3"].startswith("answer outside the options")
    assert set(report.reason_counts()) == {"duplicated id", "no options", "answer outside the options"}


def test_urbanvideo_wrong_file_is_a_clear_error(tmp_path: Path) -> None:
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "MCQ.parquet")
    with pytest.raises(DataFileError, match="missing column"):
        load_urbanvideo(tmp_path / "MCQ.parquet")
    with pytest.raises(DataFileError, match="file not found"):
        load_urbanvideo(tmp_path / "nope")


def test_question_splitting_and_scenes() -> None:
    stem, options = split_question("Question: Where?  \nChoice: A. up  \n           B. down  ")
    assert stem == "Where?" and options == ["A. up", "B. down"]
    assert scene_of_video("AerialVLN_1_ABC.mp4") == scene_of_video("AerialVLN_1_ABC_3.mp4") == "AerialVLN_1_ABC"


# ---------------------------------------------------------------------------------------------------
# VSI-Bench (file written in the test, with real scene names from the released meta info)
# ---------------------------------------------------------------------------------------------------


def _vsi_rows() -> list[dict]:
    meta = json.loads(shared_data("vsibench/meta_info/scannet_meta_info_val.json").read_text())
    scene = sorted(meta)[0]
    return [
        {"id": 1, "dataset": "scannet", "scene_name": scene, "question_type": "object_rel_direction_easy",
         "question": "Is the door left or right?", "options": ["A. left", "B. right"], "ground_truth": "B"},
        {"id": 2, "dataset": "scannet", "scene_name": scene, "question_type": "object_counting",
         "question": "How many chairs?", "options": None, "ground_truth": "3"},
        {"id": 3, "dataset": "arkitscenes", "scene_name": "41069025", "question_type": "route_planning",
         "question": "Route?", "options": ["A. Turn Left", "B. Turn Right"], "ground_truth": "C"},
        {"id": 4, "dataset": "scannet", "scene_name": scene, "question_type": "room_size_estimation",
         "question": "Room size?", "options": None, "ground_truth": "0"},
        {"id": 5, "dataset": "scannet", "scene_name": scene, "question_type": "made_up", "question": "?",
         "options": None, "ground_truth": "1"},
    ]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_vsibench_parquet_and_jsonl(tmp_path: Path, fmt: str) -> None:
    rows = _vsi_rows()
    if fmt == "parquet":
        pd.DataFrame(rows).to_parquet(tmp_path / "test-00000-of-00001.parquet")
    else:
        (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scene = rows[0]["scene_name"]
    (tmp_path / "scannet").mkdir()
    (tmp_path / "scannet" / f"{scene}.mp4").write_bytes(b"")  # lmms-eval layout
    records, report = load_vsibench(tmp_path)
    assert [r.id for r in records] == ["1", "2"]
    direction, count = records
    assert direction.options == ["A. left", "B. right"] and direction.answer == "B"
    assert count.answer_type == "number" and float(count.answer) == 3.0 and count.options is None
    assert direction.video == str(tmp_path / "scannet" / f"{scene}.mp4")
    reasons = {s["id"]: s["reason"] for s in report.skipped}
    assert reasons["3"].startswith("answer outside the options")
    assert "positive" in reasons["4"]
    assert "unknown question_type" in reasons["5"]


def test_vsibench_flat_video_folder_and_merge(tmp_path: Path) -> None:
    rows = _vsi_rows()[:2]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / f"{rows[0]['scene_name']}.mp4").write_bytes(b"")  # Embodied-R's flattened layout
    records, report = load_vsibench(tmp_path / "q.jsonl", videos_dir=videos, merge_rel_direction=True)
    assert records[0].task == "object_rel_direction" and records[0].meta["video_found"]
    assert not report.warnings


def test_vsibench_missing_videos_are_warned_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "q.jsonl").write_text(json.dumps(_vsi_rows()[0]) + "\n")
    (tmp_path / "videos").mkdir()
    records, report = load_vsibench(tmp_path / "q.jsonl", videos_dir=tmp_path / "videos")
    assert len(records) == 1 and records[0].meta["video_found"] is False
    assert report.warnings[0]["reason"].startswith("video not found")


def _answers(items: list[tuple[str, str, str]], our_score: float = 1.0) -> list[dict[str, object]]:
    """Prediction dicts (task, answer text, gold) with ``our_score`` as the project's own score."""
    return [{"id": f"q{i}", "task": task, "answer": gold, "completion": f"<think>.</think><answer>{text}</answer>",
             "score": our_score} for i, (task, text, gold) in enumerate(items)]


def test_vsibench_reference_scores_each_answer_by_the_reference_rule_and_averages_levels() -> None:
    scores = vsibench(_answers([("object_rel_direction_easy", "B", "B"), ("object_rel_direction_easy", "A", "B"),
                                ("object_rel_direction_medium", "(C)", "C"),  # 0 under the reference rule
                                ("object_rel_direction_hard", "D. back-right", "D"),
                                ("object_counting", "two hundred and thirteen", "213"),
                                ("object_counting", ".62", "62"),  # the reference reads 62
                                ("last_action", "A", "A")]))
    # Levels: easy 1/2, medium 0, hard 1 -> (0.5 + 0 + 1) / 3; counting 1.0; overall their mean, in percent.
    assert scores["object_rel_direction_accuracy"] == pytest.approx(50.0)
    assert scores["object_counting_mra"] == 100.0
    assert scores["vsibench_overall"] == pytest.approx(75.0)
    assert scores["n_items"] == 6 and scores["item_disagreements"] == 2  # "A" for B and "(C)": ours said 1.0
    assert not scores["complete"] and "route_planning_accuracy" in scores["missing"] and len(scores["missing"]) == 6
    assert vsibench(_answers([("last_action", "A", "A")])) is None


def test_vsibench_reference_averages_merged_rows_by_their_level() -> None:
    # Two easy questions right, one hard wrong: by level (1 + 0) / 2 = 50, not the question-weighted 2/3.
    items = [("object_rel_direction", "A", "A"), ("object_rel_direction", "B", "B"), ("object_rel_direction", "A", "C")]
    levels = {"q0": "object_rel_direction_easy", "q1": "object_rel_direction_easy", "q2": "object_rel_direction_hard"}
    table = vsibench(_answers(items), levels)
    assert table["object_rel_direction_accuracy"] == 50.0
    assert table["missing"][-1] == "object_rel_direction_medium" and not table["complete"]
    # Without their levels the reference's number cannot be computed: it is left out, never the weighted mean.
    unknown = vsibench(_answers(items))
    assert "object_rel_direction_accuracy" not in unknown and unknown["levels_unknown"] == 3
    assert unknown["vsibench_overall"] is None and not unknown["complete"]


def test_vsibench_reference_is_complete_only_with_every_type_and_level() -> None:
    types = ("obj_appearance_order", "object_rel_distance", "route_planning", "object_rel_direction_easy",
             "object_rel_direction_medium", "object_rel_direction_hard")
    items = [(t, "A", "A") for t in types] + [(t, "2", "4") for t in ("object_abs_distance", "object_counting",
                                                                      "object_size_estimation", "room_size_estimation")]
    full = vsibench(_answers(items))
    # Choice types 1.0, numeric 0.1 (50 % off passes only the 0.50 threshold): (4 * 1 + 4 * 0.1) / 8.
    assert full["complete"] and full["missing"] == [] and full["vsibench_overall"] == pytest.approx(55.0)
    assert len([k for k in full if k.endswith(("_accuracy", "_mra"))]) == 8
    without_hard = vsibench(_answers([i for i in items if i[0] != "object_rel_direction_hard"]))
    assert not without_hard["complete"] and without_hard["missing"] == ["object_rel_direction_hard"]
    assert without_hard["levels_averaged"] == ["object_rel_direction_easy", "object_rel_direction_medium"]


def test_mvbench_reference_uses_its_letter_rule_and_leaves_empty_answers_out() -> None:
    predictions = [{"task": "action_sequence", "answer": "A", "score": 1.0, "completion": "<answer>A</answer>"},
                   {"task": "action_sequence", "answer": "A", "score": 0.0, "completion": "<answer>  </answer>"},
                   {"task": "action_sequence", "answer": "B", "score": 0.0, "completion": "no answer block"},
                   {"task": "moving_count", "answer": "B", "score": 0.0, "completion": "<answer>a cup</answer>"},
                   {"task": "moving_count", "answer": "C", "score": 1.0, "completion": "<answer>(C)</answer>"}]
    table = mvbench(predictions)
    # "a cup" reads as option A under the reference rule (wrong here); "(C)" as C.
    assert table["mvbench_action_sequence"] == 100.0 and table["mvbench_moving_count"] == 50.0
    assert table["mvbench_average"] == 75.0 and table["empty_predictions_excluded"] == 2
    assert table["item_disagreements"] == 0
    assert mvbench([{"task": "route_planning", "answer": "A", "score": 1.0, "completion": "A"}]) is None


# ---------------------------------------------------------------------------------------------------
# EgoSchema and MVBench (files written in the test)
# ---------------------------------------------------------------------------------------------------


def test_egoschema_subset(tmp_path: Path) -> None:
    def question(uid: str) -> dict:
        return {"q_uid": uid, "question": f"What does c do in {uid}?",
                **{f"option {i}": f"thing {i}" for i in range(5)}}

    (tmp_path / "questions.json").write_text(json.dumps([question("u1"), question("u2"), question("u3"),
                                                          {"q_uid": "u4", "question": "no options"}]))
    (tmp_path / "subset_answers.json").write_text(json.dumps({"u1": 3, "u2": 7, "u4": 0, "ghost": 1}))
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "u1.mp4").write_bytes(b"")
    records, report = load_egoschema(tmp_path)
    assert [(r.id, r.answer) for r in records] == [("u1", "D")]
    assert records[0].options[3] == "D. thing 3" and records[0].meta["video_found"]
    reasons = {s["id"]: s["reason"] for s in report.skipped}
    assert reasons["u2"].startswith("answer outside the options") and reasons["u4"].startswith("no options")
    warnings = " ".join(w["reason"] for w in report.warnings)
    assert "1 question(s) have no public answer" in warnings and "answer without a question" in warnings


def test_mvbench_tasks(tmp_path: Path) -> None:
    (tmp_path / "json").mkdir()
    items = [
        {"video": "v1.mp4", "question": "Where next?", "candidates": ["left", "right", "stop"], "answer": "right"},
        {"video": "v2.mp4", "question": "Where next?", "candidates": ["left", "right"], "answer": "up"},
        {"video": "v3.mp4", "question": "Where?", "candidates": ["a", "b"], "answer": "a", "start": 1.0, "end": 4.0},
    ]
    (tmp_path / "json" / "egocentric_navigation.json").write_text(json.dumps(items))
    (tmp_path / "json" / "action_count.json").write_text(json.dumps(items[:1]))
    (tmp_path / "video" / "vlnqa").mkdir(parents=True)
    (tmp_path / "video" / "vlnqa" / "v1.mp4").write_bytes(b"")
    records, report = load_mvbench(tmp_path, tasks=["egocentric_navigation"])
    assert [(r.id, r.answer) for r in records] == [("egocentric_navigation/0", "B"), ("egocentric_navigation/2", "A")]
    assert records[0].options == ["A. left", "B. right", "C. stop"] and records[0].meta["video_found"]
    assert records[1].meta["start"] == 1.0 and not records[1].meta["video_found"]
    assert report.skipped[0]["reason"].startswith("answer outside the options")
    everything, _ = load_qa(f"mvbench:{tmp_path}")
    assert {r.task for r in everything} == {"egocentric_navigation", "action_count"}
    with pytest.raises(DataFileError, match="no file for task"):
        load_mvbench(tmp_path, tasks=["nope"])


# ---------------------------------------------------------------------------------------------------
# Synthetic datasets and specs
# ---------------------------------------------------------------------------------------------------


def test_synthetic_folder(tmp_path: Path) -> None:
    good = QARecord(id="s-1", source="synthetic_world", task="object_counting", video="videos/s.mp4",
                    question="How many chairs?", options=None, answer=2.0, answer_type="number", meta={"scene": "s"})
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "s.mp4").write_bytes(b"")
    lines = [good.to_dict(), {**good.to_dict(), "answer": 3.0}, {"id": "broken"}]
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    records, report = load_qa(f"synthetic:{tmp_path}")
    assert [r.id for r in records] == ["s-1"] and records[0].video == str(tmp_path / "videos" / "s.mp4")
    assert {s["id"] for s in report.skipped} == {"s-1", "broken"}
    with pytest.raises(DataFileError, match="synth"):
        load_synthetic(tmp_path / "empty")


def test_spec_parsing() -> None:
    assert parse_spec("vsibench-merged:/x/test.jsonl").loader == "vsibench-merged"
    assert parse_spec("C:/data/x.json").loader is None  # a drive letter is not a loader name
    with pytest.raises(DataFileError, match="unknown data loader"):
        parse_spec("nobench:/x")
    with pytest.raises(DataFileError, match="no path"):
        parse_spec("urbanvideo:")
