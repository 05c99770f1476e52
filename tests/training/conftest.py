"""Helpers for training tests: a recipe for the tiny local model and a reward that always varies."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from embodied_r.core.io import write_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.methods.rewards import REWARDS, register_reward


def length_reward(completions, **_):
    """Varies between completions, so every group has a learning signal even for a random model."""
    from embodied_r.core.chat import completion_text

    return [len(completion_text(c)) / 100.0 for c in completions]


@pytest.fixture
def varying_reward():
    register_reward("test_length", length_reward, replace=True)
    yield "test_length"
    REWARDS.pop("test_length", None)


@pytest.fixture
def id_recorder():
    """A reward ("test_record_ids") that records the row ids of each generation batch GRPO scores, in order."""
    seen: list[list[str]] = []

    def record(completions, id, **_):  # noqa: A002 - TRL passes the data set's "id" column by name
        seen.append(list(id))
        return [0.0] * len(completions)

    register_reward("test_record_ids", record, replace=True)
    yield seen
    REWARDS.pop("test_record_ids", None)


def short_rows(n: int, prefix: str) -> list[dict]:
    """Prompt rows with short prompts (the tiny model's byte-level tokenizer makes long ones slow)."""
    rows = []
    for i in range(n):
        if i % 2 == 0:
            rows.append(
                PromptRow(
                    id=f"{prefix}{i}",
                    task="direction",
                    answer="B",
                    options=["A. left", "B. right"],
                    prompt=[
                        {
                            "role": "user",
                            "content": f"Frame 0: chair {i} right. Question: "
                            "where? Choices: A. left B. right",
                        }
                    ],
                )
            )
        else:
            rows.append(
                PromptRow(
                    id=f"{prefix}{i}",
                    task="count",
                    answer=float(i),
                    answer_type="number",
                    prompt=[{"role": "user", "content": f"Question: how many? {i}"}],
                )
            )
    return [r.to_dict() for r in rows]


@pytest.fixture
def toy_rows():
    """``short_rows`` for tests in other files (a helper module would not import in two_process_grpo.py)."""
    return short_rows


@pytest.fixture(autouse=True)
def _one_thread():
    # This shared 2-core machine runs several jobs; one torch thread per test avoids oversubscription
    # (a tiny-model forward is ~7x slower with 2 contended threads).
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_recipe(tiny_lm_dir: Path, tmp_path: Path):
    """Write a recipe file for the tiny model and short prompt files; keyword arguments override keys."""
    write_jsonl(tmp_path / "train.jsonl", short_rows(4, "t"))
    write_jsonl(tmp_path / "heldout.jsonl", short_rows(2, "h"))

    def make(**overrides) -> Path:
        data = {
            "model": str(tiny_lm_dir),
            "dtype": "float32",
            "train_data": str(tmp_path / "train.jsonl"),
            "output_dir": str(tmp_path / "run"),
            "max_steps": 2,
            "num_generations": 2,
            "per_device_train_batch_size": 4,
            "max_completion_length": 12,
            "learning_rate": 1e-3,
            "save_steps": 2,
            "logging_steps": 1,
            "seed": 0,
            "sample_completions": 2,
            "rewards": ["format", "accuracy"],
            "reward_schedule": None,
            "report_to": "none",
        }
        data.update(overrides)
        path = tmp_path / "recipe.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    return make
