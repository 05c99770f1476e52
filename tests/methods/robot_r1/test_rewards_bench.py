"""The open-ended L1 reward and the open-ended bench set with its 0-3 judge scoring."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.core.io import read_jsonl
from embodied_r.core.records import QARecord
from embodied_r.methods.robot_r1.bench import CATEGORIES, judge_messages, parse_judge_score, score_bench
from embodied_r.methods.robot_r1.rewards import open_l1


def test_l1_reward_values_and_contract() -> None:
    completions = [
        "<think>a</think><answer>[0.1, 0.6, 0.2]</answer>",                 # exact
        [{"role": "assistant", "content": "<think>a</think><answer>0.3, 0.6, 0.2</answer>"}],  # 0.2 off
        "<think>a</think><answer>far away</answer>",                        # no numbers
        "<think>a</think><answer>[5, 5, 5]</answer>",                       # clipped at 0
        "[[B]]",
    ]
    answers = ["[0.1, 0.6, 0.2]"] * 4 + ["B"]
    kinds = ["position"] * 4 + ["choice"]
    out = open_l1(completions, answer=answers, answer_type=kinds, prompt=None)
    assert out[0] == 1.0 and out[1] == pytest.approx(0.8) and out[2] == 0.0 and out[3] == 0.0
    assert out[4] is None
    with pytest.raises(ValueError, match="not an \\[x, y, z\\]"):
        open_l1(["<answer>[1,2,3]</answer>"], answer=["B"], answer_type=["position"])


def test_bench_set_has_all_categories_with_references(robot_dataset: Path) -> None:
    items = [QARecord.from_dict(r) for r in read_jsonl(robot_dataset / "bench_test_in.jsonl")]
    assert {i.task for i in items} == set(CATEGORIES)
    for item in items:
        assert item.answer_type == "open" and item.answer.strip()
        assert (robot_dataset / item.meta["image"]).is_file()
    planning = [i for i in items if i.task == "planning" and i.meta["step"] == 0]
    assert planning and all(i.answer.startswith("1. ") for i in planning)
    messages = judge_messages(items[0], "Move down")
    assert "Reference answer: " + items[0].answer in messages[1]["content"]
    assert "Score: N" in messages[0]["content"]


def test_score_bench_counts_unparsed_and_judge_failures(robot_dataset: Path) -> None:
    items = [QARecord.from_dict(r) for r in read_jsonl(robot_dataset / "bench_test_in.jsonl")][:8]
    completions = {i.id: f"<think>x</think><answer>{i.answer}</answer>" for i in items}
    completions[items[0].id] = "no tags"                                # unparsed -> 0
    replies = iter(["Score: 3\nReason: same"] * 6 + ["I refuse"])        # last reply has no score

    def judge(batch):
        return [next(replies) for _ in batch]

    result = score_bench(items, completions, judge)
    total_n = sum(v["n"] for v in result.values())
    assert total_n == 7                               # 8 items minus one judge failure
    assert sum(v["unparsed"] for v in result.values()) == 1
    assert sum(v["judge_failures"] for v in result.values()) == 1
    first = result[items[0].task]
    assert first["mean"] < 3.0                        # the unparsed answer pulled its category down
    assert parse_judge_score("score = [2]") == 2 and parse_judge_score("Score: 7") is None
    with pytest.raises(KeyError):
        score_bench(items, {}, judge)


def test_recipes_name_existing_data_files_and_rewards() -> None:
    import yaml

    recipes = Path(__file__).resolve().parents[3] / "recipes" / "robot_r1"
    files = sorted(recipes.glob("*.yaml"))
    assert len(files) >= 3
    for path in files:
        recipe = yaml.safe_load(path.read_text())
        assert recipe["train_data"].rsplit("/", 1)[1] in {"prompts.jsonl", "prompts_vl.jsonl", "prompts_open.jsonl"}
        assert set(recipe["rewards"]) <= {"format", "accuracy", "consistency", "open_l1"}
        if "open_l1" in recipe["rewards"]:
            assert recipe["train_data"].endswith("prompts_open.jsonl")
