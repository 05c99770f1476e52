"""Shared fixture: one small Robot-R1 dataset generated through the CLI, reused by the tests here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco

TASKS = ("pick-place-v3", "disassemble-v3")
HELD_OUT = "box-close-v3"


@pytest.fixture(scope="session")
def robot_tasks() -> tuple[str, ...]:
    return TASKS


@pytest.fixture(scope="session")
def robot_held_out() -> str:
    return HELD_OUT


@pytest.fixture(scope="session")
def robot_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from embodied_r.cli.main import main

    out = tmp_path_factory.mktemp("robot_r1")
    code = main(["synth", "robot", "--out", str(out), "--tasks", *TASKS, "--episodes", "2",
                 "--test-episodes", "1", "--held-out-tasks", HELD_OUT,
                 "--resolution", "96x80", "--seed", "3"])
    assert code == 0
    return out
