"""`embodied-r synth robot` end to end, with every answer rechecked against the recorded trajectory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl
from embodied_r.core.records import PromptRow, QARecord
from embodied_r.methods.robot_r1.demos import Episode
from embodied_r.methods.robot_r1.keypoints import discover_keypoints, next_keypoint
from embodied_r.methods.robot_r1.questions import format_xyz, movement_parts, movement_phrase


def _option_text(record: QARecord, letter: str) -> str:
    return next(o.split(". ", 1)[1] for o in record.options if o.startswith(f"{letter}. "))


def test_every_answer_matches_the_trajectory(robot_dataset: Path) -> None:
    records = [QARecord.from_dict(r) for r in read_jsonl(robot_dataset / "questions.jsonl")]
    assert {r.task for r in records} == {"waypoint", "current_state", "movement"}
    episodes: dict[str, Episode] = {}
    for record in records:
        meta = record.meta
        path = robot_dataset / meta["episode_file"]
        episode = episodes.setdefault(str(path), Episode.load(path))
        assert episode.success
        # Recompute keypoints from the raw arrays (ARM rule + expert phase changes).
        kps = discover_keypoints(episode.gripper_closed, episode.joint_vel,
                                 expert_targets=episode.expert_target)
        assert kps == meta["keypoints"]
        step = meta["step"]
        target = next_keypoint(kps, step)
        assert target == meta["target_step"] and target > step
        assert len(record.options) == 4 and record.answer in "ABCD"
        chosen = _option_text(record, record.answer)
        if record.task in ("waypoint", "current_state"):
            truth = episode.ee_pos[target] if record.task == "waypoint" else episode.ee_pos[step]
            assert np.allclose(json.loads(chosen), truth, atol=5e-4)
            for letter in "ABCD":           # no other option is the truth
                if letter != record.answer:
                    assert not np.allclose(json.loads(_option_text(record, letter)), truth, atol=0.01)
        else:
            words = {int(k): tuple(v) for k, v in meta["scene"]["axis_words"].items()}
            expected = movement_phrase(movement_parts(episode.ee_pos[target] - episode.ee_pos[step]), words)
            assert chosen == expected
        image = robot_dataset / meta["image"]
        assert Image.open(image).size == (96, 80)


def test_prompt_files_line_up_with_questions(robot_dataset: Path) -> None:
    questions = read_jsonl(robot_dataset / "questions.jsonl")
    text = [PromptRow.from_dict(r) for r in read_jsonl(robot_dataset / "prompts.jsonl")]
    vl = [PromptRow.from_dict(r) for r in read_jsonl(robot_dataset / "prompts_vl.jsonl")]
    assert [r.id for r in text] == [q["id"] for q in questions] == [r.id for r in vl]
    for row, q in zip(text, questions):
        system, user = row.prompt
        assert "<think>" in system["content"] and "[[X]]" in system["content"]
        assert row.answer == q["answer"] and row.options == q["options"]
        for option in q["options"]:
            letter, _, body = option.partition(". ")
            assert f"[[{letter}]] {body}" in user["content"]
        if q["task"] == "current_state":     # the text path must not leak the answer
            assert format_xyz(q["meta"]["current_xyz"]) not in user["content"].split("## Question")[0]
    image_entry = vl[0].prompt[1]["content"][0]
    assert image_entry["type"] == "image" and (robot_dataset / image_entry["image"]).is_file()
    opened = read_jsonl(robot_dataset / "prompts_open.jsonl")
    assert len(opened) == sum(q["task"] == "waypoint" for q in questions)
    assert all(r["answer_type"] == "position" and r["answer"].startswith("[") for r in opened)


def test_summary_and_resume(robot_dataset: Path, robot_tasks: tuple[str, ...], robot_held_out: str) -> None:
    summary = json.loads((robot_dataset / "summary.json").read_text())
    # 2 training + 1 held-out episode per training task, 1 episode of the held-out task
    assert summary["episodes_attempted"] == 3 * len(robot_tasks) + 1
    assert summary["episodes_kept"] + summary["episodes_discarded"] == summary["episodes_attempted"]
    before = (robot_dataset / "episodes.jsonl").read_text()
    assert main(["synth", "robot", "--out", str(robot_dataset), "--tasks", *robot_tasks, "--episodes", "2",
                 "--test-episodes", "1", "--held-out-tasks", robot_held_out,
                 "--resolution", "96x80", "--seed", "3"]) == 0
    assert (robot_dataset / "episodes.jsonl").read_text() == before      # nothing rerun or duplicated
    assert json.loads((robot_dataset / "summary.json").read_text()) == summary


def test_failed_experts_are_discarded_and_counted(tmp_path: Path) -> None:
    code = main(["synth", "robot", "--out", str(tmp_path), "--tasks", "pick-place-v3", "--episodes", "1",
                 "--test-episodes", "0", "--held-out-tasks", "--max-steps", "5"])
    assert code == 2                              # nothing kept: a clear error, not an empty success
    rows = read_jsonl(tmp_path / "episodes.jsonl")
    assert rows[0]["status"] == "failed" and "5 steps" in rows[0]["reason"]
    assert json.loads((tmp_path / "summary.json").read_text())["episodes_discarded"] == 1


@pytest.mark.parametrize("argv, message", [
    (["--tasks", "no-such-task-v3"], "unknown Meta-World task"),
    (["--camera", "nowhere"], "not in this scene"),
    (["--resolution", "big"], "expected WxH"),
    (["--tasks", "pick-place-v3", "--held-out-tasks", "pick-place-v3"], "also training tasks"),
    (["--held-out-tasks", "no-such-task-v3"], "unknown Meta-World task"),
    (["--held-out-tasks", "assembly-v3", "--test-episodes", "0"], "test_episodes >= 1"),
])
def test_bad_input_is_a_clear_error(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    code = main(["synth", "robot", "--out", str(tmp_path), "--episodes", "1", *argv])
    assert code == 2
    assert message in capsys.readouterr().err


def _rows(folder: Path, name: str) -> list[dict]:
    return read_jsonl(folder / name)


def test_splits_hold_out_episodes_and_tasks(robot_dataset: Path, robot_tasks: tuple[str, ...],
                                            robot_held_out: str) -> None:
    episodes = {r["key"]: r for r in read_jsonl(robot_dataset / "episodes.jsonl")}
    seen: dict[str, set[tuple[str, int]]] = {}
    for split, suffix in (("train", ""), ("test_in", "_test_in"), ("test_out", "_test_out")):
        questions = [QARecord.from_dict(r) for r in _rows(robot_dataset, f"questions{suffix}.jsonl")]
        assert questions, split
        assert {q.meta["split"] for q in questions} == {split}
        for name in ("prompts", "prompts_vl", "prompts_open"):
            rows = _rows(robot_dataset, f"{name}{suffix}.jsonl")
            assert rows and {r["meta"]["split"] for r in rows} == {split}
        assert {q.meta["mw_task"] for q in questions} == ({robot_held_out} if split == "test_out" else set(robot_tasks))
        seen[split] = {(q.meta["mw_task"], q.meta["episode"]) for q in questions}
    # no episode (so no object placement) is in two splits, and held-out episodes have their own seeds
    assert not (seen["train"] & seen["test_in"]) and not (seen["train"] & seen["test_out"])
    train_seeds = {r["seed"] for r in episodes.values() if r["split"] == "train"}
    assert not train_seeds & {r["seed"] for r in episodes.values() if r["split"] != "train"}
    # the open-ended sets come from held-out episodes only, one file per split, none for training
    assert not (robot_dataset / "bench.jsonl").exists()
    for suffix, split in (("_test_in", "test_in"), ("_test_out", "test_out")):
        bench = [QARecord.from_dict(r) for r in _rows(robot_dataset, f"bench{suffix}.jsonl")]
        assert bench and {b.meta["split"] for b in bench} == {split}
        assert {(b.meta["mw_task"], b.meta["episode"]) for b in bench} <= seen[split]
    summary = json.loads((robot_dataset / "summary.json").read_text())
    assert summary["held_out_tasks"] == [robot_held_out]
    assert summary["splits"]["test_out"]["questions"] == len(_rows(robot_dataset, "questions_test_out.jsonl"))


def test_relabelling_splits_needs_no_new_episode(robot_dataset: Path, robot_tasks: tuple[str, ...],
                                                 tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(robot_dataset, copy)
    before = (copy / "episodes.jsonl").read_text()
    # the same episodes without the test splits: training files only, stale test files removed
    assert main(["synth", "robot", "--out", str(copy), "--tasks", *robot_tasks, "--episodes", "2",
                 "--test-episodes", "0", "--held-out-tasks", "--resolution", "96x80", "--seed", "3"]) == 0
    assert (copy / "episodes.jsonl").read_text() == before
    assert (copy / "prompts.jsonl").read_text() == (robot_dataset / "prompts.jsonl").read_text()
    assert not list(copy.glob("*_test_*.jsonl"))


def test_rows_from_the_task_objects_builder_are_recognised_and_scored_as_robot_r1(robot_dataset: Path) -> None:
    from embodied_r.methods import ROBOT_R1, method_for_row

    record = QARecord.from_dict(read_jsonl(robot_dataset / "questions.jsonl")[0])
    row = ROBOT_R1.row_builder_function()(record)
    assert method_for_row(row.meta) is ROBOT_R1
    assert ROBOT_R1.score(row, f"<think>.</think><answer>{ROBOT_R1.answer_text(record.answer)}</answer>").score == 1.0
    wrong = next(letter for letter in "ABCD" if letter != record.answer)
    assert ROBOT_R1.score(row, f"<answer>{ROBOT_R1.answer_text(wrong)}</answer>").score == 0.0
