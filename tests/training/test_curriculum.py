"""The easy-first curriculum (``curriculum: easy-first``): a difficulty pass scores a pool of training rows
with the starting model, and GRPO takes them with the groups that teach first, easiest first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trl.trainer.utils import RepeatSampler

from embodied_r.core.io import write_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.methods.accuracy import make_accuracy_reward
from embodied_r.training import curriculum
from embodied_r.training.curriculum import (
    CurriculumSampler,
    completions_right,
    curriculum_order,
    pool_indices,
    prompts_consumed,
)
from embodied_r.training.grpo import train
from embodied_r.training.recipe import RecipeError, load_recipe

COUNTS = {0: 0, 1: 4, 2: 1, 3: 3, 4: 2, 5: 3, 6: 0, 7: 4, 8: 1, 9: 2}  # row index -> right of 4


def test_rows_that_teach_come_first_easiest_first_then_the_rest() -> None:
    order = curriculum_order(COUNTS, group_size=4, seed=0)
    assert sorted(order) == sorted(COUNTS)  # every pool row once
    teaching, rest = order[:6], order[6:]
    assert set(teaching) == {2, 3, 4, 5, 8, 9} and set(rest) == {0, 1, 6, 7}
    assert [COUNTS[i] for i in teaching] == [3, 3, 2, 2, 1, 1]  # more right first
    assert curriculum_order(COUNTS, 4, seed=0) == order  # the same seed, the same order (every process)
    # Ties and the rest are drawn with the seed: some other seed orders them differently, never the counts.
    others = [curriculum_order(COUNTS, 4, seed=s) for s in range(1, 12)]
    assert any(o[:6] != teaching for o in others) and any(o[6:] != rest for o in others)
    assert all([COUNTS[i] for i in o[:6]] == [3, 3, 2, 2, 1, 1] and set(o[6:]) == set(rest) for o in others)
    # A group of 2: only one right teaches.
    assert curriculum_order({5: 2, 6: 1, 7: 0}, group_size=2, seed=3)[0] == 6
    with pytest.raises(ValueError, match="between 0 and 4"):
        curriculum_order({0: 5}, 4, 0)


def test_the_pool_is_twice_the_prompts_the_run_consumes_drawn_with_the_seed() -> None:
    trl = {"max_steps": 3, "per_device_train_batch_size": 8, "num_generations": 4}
    assert prompts_consumed(trl, 1) == 6  # 2 prompts a step
    assert prompts_consumed({**trl, "gradient_accumulation_steps": 2}, 1) == 12  # 4 prompts a step
    assert prompts_consumed({**trl, "num_iterations": 3}, 1) == 2  # one generation serves three steps
    assert prompts_consumed({**trl, "generation_batch_size": 16}, 1) == 8  # 4 prompts, every second step
    assert prompts_consumed({**trl, "max_steps": -1}, 1) is None
    pool = pool_indices(100, 6, 2.0, seed=0)
    assert len(pool) == 12 and pool == sorted(set(pool)) and all(0 <= i < 100 for i in pool)
    assert pool_indices(100, 6, 2.0, seed=0) == pool != pool_indices(100, 6, 2.0, seed=1)
    assert len(pool_indices(100, 6, 1.5, seed=0)) == 9
    assert pool_indices(10, 6, 2.0, seed=0) == list(range(10)) == pool_indices(10, None, 2.0, seed=0)


def test_the_sampler_repeats_like_trl_in_the_curriculum_order_and_cycles() -> None:
    order = [5, 3, 8, 1, 0, 7]
    sampler = CurriculumSampler(order, batch_size=2, mini_repeat_count=3, repeat_count=2)
    stream = list(sampler)
    assert len(stream) == len(sampler) == 6 * 3 * 2
    assert stream[:12] == [5, 5, 5, 3, 3, 3] * 2  # each prompt 3 times in a row, the batch twice
    # TRL's layout exactly, with the order in place of the shuffle.
    trl = RepeatSampler(order, mini_repeat_count=3, batch_size=2, repeat_count=2, shuffle=False)
    assert stream == [order[i] for i in trl]
    # An order that does not fill its last batch wraps to its start; the next epoch goes on from there.
    odd = CurriculumSampler([5, 3, 8, 1, 0], batch_size=2, mini_repeat_count=1)
    assert list(odd) == [5, 3, 8, 1, 0, 5]
    odd.set_epoch(1)
    assert list(odd) == [3, 8, 1, 0, 5, 3]
    odd.set_epoch(0)
    assert list(odd) == [5, 3, 8, 1, 0, 5]  # an epoch's stream follows from the epoch alone (resume)
    with pytest.raises(ValueError, match="no rows"):
        CurriculumSampler([], 2, 2)


def test_completions_are_counted_right_by_the_accuracy_reward() -> None:
    accuracy = make_accuracy_reward()
    choice = PromptRow(id="c", task="t", answer="B", options=["A. left", "B. right"],
                       prompt=[{"role": "user", "content": "?"}])
    completions = ["<think>.</think><answer>B</answer>", "<think>.</think><answer>A</answer>",
                   "<answer>right</answer>", "no answer"]
    assert completions_right(accuracy, choice, completions) == 2  # the letter, and the option's text
    number = PromptRow(id="n", task="count", answer=10.0, answer_type="number",
                       prompt=[{"role": "user", "content": "?"}])
    numbers = ["<answer>10</answer>", "<answer>9</answer>", "<answer>x</answer>"]
    assert completions_right(accuracy, number, numbers) == 1  # 9 for 10 scores under 1 (MRA)
    official = make_accuracy_reward("official")  # the run's rule is the one used
    assert completions_right(official, choice, ["<think>A. is far</think><answer>B</answer>"]) == 0


class RecordingEngine:
    """Answers each conversation with its number, and keeps the generation arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[list, dict]] = []

    def generate_chats(self, conversations, max_new_tokens, **kwargs):
        self.calls.append((list(conversations), {"max_new_tokens": max_new_tokens, **kwargs}))
        return [kwargs["completion_prefix"] + str(i) for i in range(len(conversations))]


def test_each_row_is_sampled_group_size_times_with_the_runs_settings() -> None:
    rows = [PromptRow(id=f"q{i}", task="t", answer="A", options=["A. x", "B. y"],
                      prompt=[{"role": "user", "content": f"q{i}"}]) for i in range(2)]
    sampling = curriculum.Sampling.from_trl({"num_generations": 3, "per_device_train_batch_size": 6,
                                             "temperature": 0.7, "top_p": 0.9, "max_completion_length": 5}, 1)
    assert (sampling.max_new_tokens, sampling.temperature, sampling.top_p, sampling.top_k,
            sampling.rows_per_batch) == (5, 0.7, 0.9, 0, 2)  # top_k: TRL's default 0 (off)
    engine = RecordingEngine()
    groups = curriculum.sample_completions(engine, rows, 3, sampling, "<think>", None)
    assert groups == [["<think>0", "<think>1", "<think>2"], ["<think>3", "<think>4", "<think>5"]]
    (conversations, kwargs), = engine.calls
    assert conversations == [rows[0].prompt] * 3 + [rows[1].prompt] * 3
    assert {k: kwargs[k] for k in ("max_new_tokens", "do_sample", "temperature", "top_p", "top_k")} == {
        "max_new_tokens": 5, "do_sample": True, "temperature": 0.7, "top_p": 0.9, "top_k": 0}


def test_generate_batch_hands_top_k_to_sampling_only() -> None:
    import torch

    from embodied_r.inference.generation import generate_batch

    class Tokenizer:
        pad_token_id = 0

        def batch_decode(self, ids, skip_special_tokens=True):
            return ["x"] * len(ids)

    class Model:
        device = torch.device("cpu")

        def __init__(self) -> None:
            self.kwargs: dict = {}

        def generate(self, input_ids, attention_mask, **kwargs):
            self.kwargs = kwargs
            return torch.cat([input_ids, torch.ones_like(input_ids[:, :1])], dim=1)

    model = Model()
    generate_batch(model, Tokenizer(), None, 4, do_sample=True, top_k=0, token_lists=[[1, 2]])
    assert model.kwargs["top_k"] == 0 and model.kwargs["do_sample"] is True
    generate_batch(model, Tokenizer(), None, 4, do_sample=True, token_lists=[[1, 2]])
    assert "top_k" not in model.kwargs  # None: the model's own generation config decides, as before
    generate_batch(model, Tokenizer(), None, 4, top_k=5, token_lists=[[1, 2]])
    assert model.kwargs["top_k"] is None  # greedy ignores it


def test_recipe_values_are_checked(tiny_recipe) -> None:
    assert load_recipe(tiny_recipe()).curriculum == "none"
    assert load_recipe(tiny_recipe(curriculum="easy-first", curriculum_pool_factor=3)).curriculum_pool_factor == 3
    with pytest.raises(RecipeError, match="'curriculum' must be one of none, easy-first; got 'hard-first'"):
        load_recipe(tiny_recipe(curriculum="hard-first"))
    with pytest.raises(RecipeError, match="curriculum easy-first and balanced_steps letters both choose the order"):
        load_recipe(tiny_recipe(curriculum="easy-first", balanced_steps="letters"))
    with pytest.raises(RecipeError, match="ranks rows by the accuracy reward"):
        load_recipe(tiny_recipe(curriculum="easy-first", rewards=["format"]))
    for factor in (0, -1.0, True, "2"):
        with pytest.raises(RecipeError, match="'curriculum_pool_factor' must be a positive number"):
            load_recipe(tiny_recipe(curriculum="easy-first", curriculum_pool_factor=factor))
    # --set on the command line (the ladder's --set too) reaches the recipe.
    recipe = load_recipe(tiny_recipe(), overrides=["curriculum=easy-first", "curriculum_pool_factor=1.5"])
    assert (recipe.curriculum, recipe.curriculum_pool_factor) == ("easy-first", 1.5)


# ---------------------------------------------------------------------------------------------------------
# GRPO with the tiny model
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def easy_first(tiny_recipe, tmp_path, id_recorder, toy_rows):
    """A recipe of 12 rows, 2 prompts x 2 completions a step for 2 steps (a pool of 8 rows), and its rows."""
    rows = toy_rows(12, "r")
    write_jsonl(tmp_path / "twelve.jsonl", rows)
    recipe = load_recipe(tiny_recipe(train_data=str(tmp_path / "twelve.jsonl"), curriculum="easy-first",
                                     rewards=["format", "accuracy", "test_record_ids"],
                                     per_device_train_batch_size=4, num_generations=2, max_steps=2,
                                     max_completion_length=6, save_strategy="no"))
    pool = [rows[i]["id"] for i in pool_indices(12, prompts_consumed(recipe.trl, 1), 2.0, seed=0)]
    assert len(pool) == 8
    return recipe, [r["id"] for r in rows], pool


def consumed_prompts(recorded: list[list[str]]) -> list[str]:
    """The prompts of each generation batch (each id repeated once per completion, in a row)."""
    for batch in recorded:
        assert batch[0::2] == batch[1::2], batch
    return [prompt for batch in recorded for prompt in batch[0::2]]


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def expected_order(lines: list[dict], ids: list[str]) -> list[str]:
    counts = {ids.index(line["id"]): line["right"] for line in lines}
    return [ids[i] for i in curriculum_order(counts, group_size=2, seed=0)]


def test_grpo_takes_the_pool_in_the_curriculum_order(easy_first, id_recorder, monkeypatch) -> None:
    recipe, ids, pool = easy_first
    sampled: list[str] = []
    original = curriculum.sample_completions

    def spy(engine, rows, group_size, sampling, *args):
        sampled.extend(row.id for row in rows)
        assert (group_size, sampling.max_new_tokens, sampling.temperature, sampling.top_k) == (2, 6, 1.0, 0)
        return original(engine, rows, group_size, sampling, *args)

    monkeypatch.setattr(curriculum, "sample_completions", spy)
    summary = train(recipe)
    assert summary["global_step"] == 2
    lines = read_lines(recipe.output_dir / "curriculum.jsonl")
    assert [line["id"] for line in lines] == pool == sampled  # one line per pool row, each sampled once
    assert all(line["of"] == 2 and 0 <= line["right"] <= 2 for line in lines)
    order = expected_order(lines, ids)
    assert consumed_prompts(id_recorder) == order[:4]  # 2 steps x 2 prompts, in the curriculum's order
    counts = summary["curriculum"]
    assert counts["pool_rows"] == 8 and counts["none_right"] + counts["some_right"] + counts["all_right"] == 8
    assert json.loads((recipe.output_dir / "summary.json").read_text())["curriculum"] == counts


def test_a_rerun_scores_only_the_rows_not_yet_in_the_file(easy_first, id_recorder, monkeypatch) -> None:
    recipe, ids, pool = easy_first
    # Half the pool scored by an earlier start: two rows whose groups teach (one right of two), two that do not.
    earlier = [{"id": pool[0], "right": 2, "of": 2}, {"id": pool[3], "right": 1, "of": 2},
               {"id": pool[5], "right": 0, "of": 2}, {"id": pool[6], "right": 1, "of": 2}]
    write_jsonl(recipe.output_dir / "curriculum.jsonl", earlier)
    sampled: list[str] = []
    original = curriculum.sample_completions

    def spy(engine, rows, *args):
        sampled.extend(row.id for row in rows)
        return original(engine, rows, *args)

    monkeypatch.setattr(curriculum, "sample_completions", spy)
    train(recipe)
    assert sampled == [i for i in pool if i not in {pool[0], pool[3], pool[5], pool[6]}]
    lines = read_lines(recipe.output_dir / "curriculum.jsonl")
    assert lines[:4] == earlier and sorted(line["id"] for line in lines) == sorted(pool)
    consumed = consumed_prompts(id_recorder)
    assert consumed == expected_order(lines, ids)[:4]
    teaching = {line["id"] for line in lines if line["right"] == 1}
    assert {pool[3], pool[6]} <= teaching and set(consumed[:2]) <= teaching  # the first step's groups teach
