from __future__ import annotations

import math

import numpy as np
import pytest
from _world_reference import check_static_question, option_text, quadrant, vsi_angle

from embodied_r.cli.main import main
from embodied_r.core.io import read_json, read_jsonl
from embodied_r.core.records import QARecord
from embodied_r.sim.world.oracle import OracleNoise, action_between, oracle_frames

pytest.importorskip("mujoco")
av = pytest.importorskip("av")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("world")
    code = main(["synth", "world", "--out", str(out), "--scenes", "2", "--seed", "5", "--resolution", "160x120",
                 "--fps", "8", "--seconds", "12"])
    assert code == 0
    return out


def test_dataset_files_and_video(dataset) -> None:
    scenes = read_json(dataset / "scenes.json")
    assert len(scenes) == 2
    for name, entry in scenes.items():
        assert {"room_size", "room_center", "object_counts", "object_bbox"} <= entry.keys()
        poses = read_json(dataset / "poses" / f"{name}.json")
        with av.open(str(dataset / "videos" / f"{name}.mp4")) as container:
            frames = list(container.decode(video=0))
        assert len(frames) == len(poses["frames"])
        assert (frames[0].width, frames[0].height) == (160, 120)
        # the camera sees furniture at some point, and pixel counts fit in the frame
        assert any(f["visible"] for f in poses["frames"])
        assert all(sum(f["visible"].values()) <= 160 * 120 for f in poses["frames"])
        for a, b in zip(poses["frames"], poses["frames"][1:]):  # smooth path: small steps per frame
            assert math.dist(a["position"], b["position"]) < 0.2
            assert abs((b["yaw"] - a["yaw"] + 180) % 360 - 180) < 15


def test_video_questions_have_independently_checked_answers(dataset) -> None:
    scenes = read_json(dataset / "scenes.json")
    rows = read_jsonl(dataset / "questions.jsonl")
    tasks = {r["task"] for r in rows}
    assert {"egocentric_direction", "last_action", "object_counting", "route_planning"} <= tasks
    for row in rows:
        assert row["video"] == f"videos/{row['meta']['scene']}.mp4"
        poses = read_json(dataset / "poses" / f"{row['meta']['scene']}.json")
        if row["task"] == "egocentric_direction":
            last = poses["frames"][-1]
            yaw = math.radians(last["yaw"])
            box = scenes[row["meta"]["scene"]]["object_bbox"][row["meta"]["categories"][0]][0]
            theta = vsi_angle(np.array([math.cos(yaw), math.sin(yaw)]),
                              np.asarray(box["centroid"][:2]) - np.asarray(last["position"][:2]))
            assert option_text(row) == quadrant(theta)
        elif row["task"] == "last_action":
            # the final motion, recomputed from how the pose changed over the last second
            a, b = poses["frames"][-1 - int(poses["fps"])], poses["frames"][-1]
            dyaw = (b["yaw"] - a["yaw"] + 180) % 360 - 180
            step = np.subtract(b["position"], a["position"])[:2]
            if abs(dyaw) > 5:
                expected = "Rotate left" if dyaw > 0 else "Rotate right"
            else:
                heading = np.array([math.cos(math.radians(a["yaw"])), math.sin(math.radians(a["yaw"]))])
                expected = "Move forward" if step @ heading > 0 else "Move backward"
            assert option_text(row) == expected
        elif row["task"] == "obj_appearance_order":
            threshold = 0.005 * poses["width"] * poses["height"]
            first = {}
            for frame in poses["frames"]:
                for label, px in frame["visible"].items():
                    first.setdefault(label.rsplit("_", 1)[0], frame["t"]) if px >= threshold else None
            assert option_text(row) == ", ".join(sorted(row["meta"]["categories"], key=first.get))
        else:
            check_static_question(row, scenes[row["meta"]["scene"]])


def test_resume_skips_finished_scenes_and_is_deterministic(dataset, tmp_path) -> None:
    before = (dataset / "questions.jsonl").read_text()
    assert main(["synth", "world", "--out", str(dataset), "--scenes", "2", "--seed", "5", "--resolution",
                 "160x120", "--fps", "8", "--seconds", "12"]) == 0
    assert (dataset / "questions.jsonl").read_text() == before


def test_a_rerun_writes_the_same_video_bytes(dataset, tmp_path) -> None:
    # Key frames are chosen from the decoded pixels, so a video that changes between runs changes every
    # later stage; x264 with MB-tree did, with the frames themselves equal. The fixture rendered both scenes
    # in one process, this run in two workers (as the demo does).
    again = tmp_path / "again"
    assert main(["synth", "world", "--out", str(again), "--scenes", "2", "--seed", "5", "--resolution", "160x120",
                 "--fps", "8", "--seconds", "12", "--workers", "2"]) == 0
    videos = sorted((dataset / "videos").glob("*.mp4"))
    assert videos and [v.read_bytes() for v in videos] == [(again / "videos" / v.name).read_bytes() for v in videos]


def test_oracle_frames_text_and_noise(dataset) -> None:
    qa = next(QARecord.from_dict(r) for r in read_jsonl(dataset / "questions.jsonl")
              if r["task"] == "egocentric_direction")
    poses = read_json(dataset / "poses" / f"{qa.meta['scene']}.json")
    times = [0.0, 2.0, 4.0, 6.0, poses["frames"][-1]["t"]]
    frames = oracle_frames(dataset, qa, times)
    assert [f["timestamp"] for f in frames] == times
    assert frames[0]["action"] is None and all(f["action"] for f in frames[1:])
    assert all(f["raw"].startswith("1. ") and "\n2. " in f["raw"] and "\n3. " in f["raw"] for f in frames[1:])
    assert all(qa.meta["categories"][0] in f["q_related"] for f in frames)
    noisy = oracle_frames(dataset, qa, times, noise=OracleNoise(miss_prob=1.0))
    assert all("is not visible" in f["q_related"] or "names no" in f["q_related"] for f in noisy)
    again = oracle_frames(dataset, qa, times, noise=OracleNoise(wrong_label_prob=0.5, distance_sigma=0.3), seed=1)
    assert again == oracle_frames(dataset, qa, times, noise=OracleNoise(wrong_label_prob=0.5, distance_sigma=0.3),
                                  seed=1)
    with pytest.raises(ValueError, match="miss_prob"):
        OracleNoise(miss_prob=2.0)


def test_action_between_vocabulary() -> None:
    pose = {"position": [0, 0, 1.5], "yaw": 90.0, "pitch": -15.0}
    assert action_between(pose, {**pose, "yaw": 130.0}) == "Rotate left"
    assert action_between(pose, {**pose, "yaw": 40.0}) == "Rotate right"
    assert action_between(pose, {**pose, "position": [0, 1.0, 1.5]}) == "Move forward"
    assert action_between(pose, {**pose, "position": [0, -1.0, 1.5]}) == "Move backward"
    assert action_between(pose, {**pose, "position": [1.0, 0, 1.5]}) == "Move right"
    assert action_between(pose, {**pose, "pitch": -35.0}) == "Tilt downward"


def test_bad_cli_arguments(tmp_path) -> None:
    assert main(["synth", "world", "--out", str(tmp_path), "--scenes", "1", "--resolution", "161x120"]) == 2
    assert main(["synth", "world", "--out", str(tmp_path), "--scenes", "0"]) == 2
