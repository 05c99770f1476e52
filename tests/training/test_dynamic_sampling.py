"""``zero_variance_groups: resample`` (training/dynamic_sampling.py): a step's groups whose rewards did not
vary are replaced by varying groups of fresh training prompts, with at most ``resample_rounds`` more
generation calls, and what stays uniform is dropped as under ``drop``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.core.io import write_jsonl
from embodied_r.methods.rewards import REWARDS, register_reward
from embodied_r.training import dynamic_sampling
from embodied_r.training.grpo import train
from embodied_r.training.recipe import RecipeError, load_recipe


def test_the_recipe_checks_resample(tiny_recipe) -> None:
    recipe = load_recipe(tiny_recipe(), overrides=["zero_variance_groups=resample", "resample_rounds=2"])
    assert (recipe.zero_variance_groups, recipe.resample_rounds) == ("resample", 2)
    for rounds in ("0", "1.5", "true"):
        with pytest.raises(RecipeError, match="'resample_rounds' must be a positive integer"):
            load_recipe(tiny_recipe(), overrides=["zero_variance_groups=resample", f"resample_rounds={rounds}"])
    with pytest.raises(RecipeError, match="resample is not defined for loss_type 'grpo'"):
        load_recipe(tiny_recipe(), overrides=["zero_variance_groups=resample", "loss_type=grpo"])
    with pytest.raises(RecipeError, match="resample needs per-group advantages"):
        load_recipe(tiny_recipe(), overrides=["zero_variance_groups=resample", "scale_rewards=batch"])
    with pytest.raises(RecipeError, match="would undo curriculum easy-first"):
        load_recipe(tiny_recipe(), overrides=["zero_variance_groups=resample", "curriculum=easy-first"])


@pytest.fixture
def signal_reward():
    """A reward ("test_signal") that varies between completions for the rows whose id is in ``varying``
    (their groups teach) and is 0 for every other row (uniform groups), and records each scored call's ids."""
    calls: list[list[str]] = []
    varying: set[str] = set()

    def signal(completions, id, **_):  # noqa: A002 - TRL passes the data set's "id" column by name
        from embodied_r.core.chat import completion_text

        calls.append(list(id))
        return [len(completion_text(c)) / 100.0 + k if row in varying else 0.0
                for k, (c, row) in enumerate(zip(completions, id))]

    register_reward("test_signal", signal, replace=True)
    yield calls, varying
    REWARDS.pop("test_signal", None)


def resample_run(tiny_recipe, tmp_path: Path, toy_rows, rounds: int = 3) -> tuple[object, list[str]]:
    rows = toy_rows(12, "r")
    write_jsonl(tmp_path / "twelve.jsonl", rows)
    recipe = load_recipe(tiny_recipe(train_data=str(tmp_path / "twelve.jsonl"), zero_variance_groups="resample",
                                     resample_rounds=rounds, rewards=["format", "test_signal"],
                                     reward_weights=[0.5, 0.5], per_device_train_batch_size=4, num_generations=2,
                                     max_steps=3, max_completion_length=6, save_strategy="no", logging_steps=1))
    return recipe, [r["id"] for r in rows]


def steps_of(calls: list[list[str]], varying: set[str], rounds: int, steps: int) -> list[dict]:
    """The recorded generation calls split into steps by the rule under test: a step's call, then while
    groups are missing and rounds are left, a call for as many fresh prompts as are missing."""
    out, position = [], 0
    for _ in range(steps):
        prompts = calls[position][0::2]
        position += 1
        missing = sum(p not in varying for p in prompts)
        step = {"prompts": prompts, "fresh": [], "missing_after": missing}
        for _ in range(rounds):
            if not missing:
                break
            fresh = calls[position][0::2]
            position += 1
            assert len(fresh) == missing, (prompts, fresh)
            step["fresh"].append(fresh)
            missing -= min(missing, sum(p in varying for p in fresh))
        step["missing_after"] = missing
        out.append(step)
    assert position == len(calls)  # no generation call unaccounted for
    return out


def test_uniform_groups_are_replaced_by_varying_groups_of_fresh_prompts(tiny_recipe, tmp_path, toy_rows,
                                                                       signal_reward, monkeypatch) -> None:
    calls, varying = signal_reward
    recipe, ids = resample_run(tiny_recipe, tmp_path, toy_rows)
    varying.update(ids[1::2])  # half the rows teach
    joined: list[dict] = []
    original = dynamic_sampling.join_groups

    def spy(parts, generations, pad_token_id):
        out = original(parts, generations, pad_token_id)
        joined.append(out)
        return out

    monkeypatch.setattr(dynamic_sampling, "join_groups", spy)
    summary = train(recipe)
    assert summary["global_step"] == 3
    for batch in calls:
        assert batch[0::2] == batch[1::2], batch  # each prompt once per completion, in a row
    steps = steps_of(calls, varying, rounds=3, steps=3)
    for step in steps:
        drawn = [p for fresh in step["fresh"] for p in fresh]
        assert not set(drawn) & set(step["prompts"]) and len(set(drawn)) == len(drawn)  # fresh, never twice
    assert any(step["fresh"] for step in steps)  # with half the rows uniform, some step resampled
    # Each step that resampled and found a varying group hands the update one joined batch of the step's shape.
    assert len(joined) == sum(1 for s in steps if any(p in varying for f in s["fresh"] for p in f))
    assert all(batch["prompt_ids"].shape[0] == 4 for batch in joined)
    logged = [json.loads(line) for line in (recipe.output_dir / "metrics.jsonl").read_text().splitlines()]
    logged = [line for line in logged if "resample/prompts_drawn" in line]
    assert [line["resample/prompts_drawn"] for line in logged] == [sum(map(len, s["fresh"])) for s in steps]
    assert [line["resample/uniform_groups_left"] for line in logged] == [s["missing_after"] / 2 for s in steps]


def test_a_step_whose_fresh_groups_stay_uniform_stops_after_its_rounds(tiny_recipe, tmp_path, toy_rows,
                                                                      signal_reward) -> None:
    calls, _ = signal_reward  # no row varies: every group is uniform
    recipe, _ = resample_run(tiny_recipe, tmp_path, toy_rows, rounds=2)
    summary = train(recipe)
    assert summary["global_step"] == 3
    assert len(calls) == 3 * (1 + 2)  # each step: its own call and two rounds of 2 fresh prompts
    logged = [json.loads(line) for line in (recipe.output_dir / "metrics.jsonl").read_text().splitlines()]
    logged = [line for line in logged if "resample/rounds" in line]
    assert [line["resample/rounds"] for line in logged] == [2.0, 2.0, 2.0]
    assert all(line["resample/uniform_groups_left"] == 1.0 for line in logged)


def test_image_batches_and_batch_scaled_advantages_are_refused() -> None:
    assert "pixel_values" in dynamic_sampling.unsupported_reason({"pixel_values": object()}, "group")
    assert dynamic_sampling.unsupported_reason({"prompt_ids": object(), "old_per_token_logps": None}, "none") is None
    assert "scale_rewards 'batch'" in dynamic_sampling.unsupported_reason({}, "batch")
