"""Training refuses a consistency judge that fails its probe, before any GRPO step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from probe_rows import ConstantJudge, OracleJudge, probe_rows

from embodied_r.core.io import write_jsonl
from embodied_r.judge.judges import JudgeError
from embodied_r.judge.probe import build_probe_cases
from embodied_r.training.grpo import build_trainer
from embodied_r.training.recipe import RecipeError, load_recipe
from embodied_r.training.schedule import RewardSchedule


@pytest.fixture
def choice_recipe(tiny_recipe, tmp_path: Path):
    data = tmp_path / "choice.jsonl"
    write_jsonl(data, probe_rows(20))

    def make(**overrides):
        return load_recipe(
            tiny_recipe(train_data=str(data), rewards=["format", "accuracy", "consistency"], **overrides)
        )

    return make


def test_a_constant_judge_stops_the_run_with_its_numbers_and_the_ways_out(choice_recipe) -> None:
    recipe = choice_recipe()
    with pytest.raises(JudgeError) as raised:
        build_trainer(recipe, judge=ConstantJudge())
    message = str(raised.value)
    assert "constant-stub" in message and "content agreement 25.0%" in message and "A on 100.0%" in message
    assert "judge.model" in message and "base_url" in message and "judge.allow_weak: true" in message
    probe = json.loads((recipe.output_dir / "judge_probe.json").read_text())
    assert probe["passed"] is False and probe["allowed_weak"] is False
    assert not list(recipe.output_dir.glob("checkpoint-*"))


def test_allow_weak_judge_goes_on_and_records_it(choice_recipe) -> None:
    recipe = choice_recipe(judge={"allow_weak": True})
    trainer, context = build_trainer(recipe, judge=ConstantJudge())
    assert context["judge_probe"]["allowed_weak"] is True
    assert json.loads((recipe.output_dir / "judge_probe.json").read_text())["allowed_weak"] is True
    assert trainer.reward_funcs[-1].num_generations == 2  # groups of num_generations are dropped whole


def test_a_judge_that_passes_every_kind_passes_and_its_probe_is_reused(choice_recipe, monkeypatch) -> None:
    recipe = choice_recipe()
    oracle = OracleJudge(build_probe_cases(probe_rows(20)))  # the cases the gate builds (default settings)
    _, context = build_trainer(recipe, judge=oracle)
    assert context["judge_probe"]["passed"] is True and set(context["judge_probe"]["agreement"].values()) == {1.0}
    from embodied_r.judge import probe as judge_probe

    monkeypatch.setattr(
        judge_probe, "run_probe", lambda *a, **k: pytest.fail("an identical probe was run again")
    )
    _, again = build_trainer(recipe, judge=oracle)
    assert again["judge_probe"]["passed"] is True


def test_a_string_matching_judge_stops_the_run(choice_recipe) -> None:
    from embodied_r.judge.reference_judges import MentionedLastJudge

    with pytest.raises(JudgeError) as raised:
        build_trainer(choice_recipe(), judge=MentionedLastJudge())
    message = str(raised.value)
    assert "content agreement 100.0%" in message and "target-first agreement 0.0% is below 80%" in message
    assert "no_basis" in message and "refusal: true" in message


def test_no_probe_when_the_consistency_weight_is_always_zero(choice_recipe) -> None:
    stages = [{"start": 1, "weights": {"format": 1.0, "accuracy": 1.0, "consistency": 0.0}}]
    recipe = choice_recipe(reward_schedule=stages)
    _, context = build_trainer(recipe, judge=ConstantJudge())
    assert context["judge_probe"] is None and not (recipe.output_dir / "judge_probe.json").exists()


@pytest.mark.parametrize("bad", [{"cases": 8}, {"min_agreement": 2}, {"bogus": 1}, {"conflict": "yes"}, "x"])
def test_probe_settings_are_checked(tiny_recipe, bad) -> None:
    with pytest.raises(RecipeError, match="judge.probe"):
        load_recipe(tiny_recipe(judge={"probe": bad}))
    with pytest.raises(RecipeError, match="judge.allow_weak"):
        load_recipe(tiny_recipe(judge={"allow_weak": "maybe"}))


def test_the_schedule_says_which_stage_a_short_run_never_reaches() -> None:
    names = ["format", "accuracy", "consistency"]
    by_step = RewardSchedule(
        names,
        [
            {"start": 1, "weights": {"format": 1.0, "accuracy": 0.0, "consistency": 0.0}},
            {"start": 10, "weights": {"format": 0.1, "accuracy": 0.7, "consistency": 0.2}},
        ],
        unit="step",
    )
    (reason,) = by_step.unreached(max_steps=3, epochs=1)
    assert "stage 2" in reason and "consistency 0.2" in reason and "max_steps >= 10" in reason
    assert by_step.unreached(max_steps=10, epochs=1) == []
    paper = RewardSchedule.paper(names)
    assert [r.split(" (")[0] for r in paper.unreached(max_steps=8, epochs=2)] == ["stage 2", "stage 3"]
    assert paper.unreached(max_steps=100, epochs=5) == []


def test_a_short_run_warns_at_its_start(tiny_recipe, caplog) -> None:
    from embodied_r.training.grpo import train

    stages = [
        {"start": 1, "weights": {"format": 1.0, "accuracy": 0.0}},
        {"start": 50, "weights": {"format": 0.5, "accuracy": 0.5}},
    ]
    recipe = load_recipe(tiny_recipe(max_steps=1, reward_schedule={"unit": "step", "stages": stages}))
    with caplog.at_level("WARNING", logger="embodied_r.training.schedule"):
        summary = train(recipe)
    assert any("stage 2" in r.message and "max_steps >= 50" in r.message for r in caplog.records)
    assert summary["schedule_unreached"] and "stage 2" in summary["schedule_unreached"][0]


def test_a_judge_that_cannot_be_loaded_stops_the_run_before_the_warm_up(choice_recipe, tmp_path) -> None:
    recipe = choice_recipe(
        judge={"model": str(tmp_path / "no-such-judge")}, format_warmup={"steps": 1, "batch_size": 2}
    )
    with pytest.raises(JudgeError, match="cannot load the judge model"):
        build_trainer(recipe)
    assert not (recipe.output_dir / "warmup").exists()  # nothing was trained


def test_an_unknown_consistency_rule_or_rows_without_options_stop_before_any_model_loads(
    tiny_recipe, tmp_path: Path
) -> None:
    # The rule is the consistency reward's setting: checked with the reward, before any model loads.
    with pytest.raises(RecipeError, match="judge.rule 'shuffle' does not exist"):
        load_recipe(tiny_recipe(rewards=["format", "accuracy", "consistency"], judge={"rule": "shuffle"}))
    with pytest.raises(RecipeError, match=r"set the rule in the recipe section \(judge: \{rule: ...\}\)"):
        load_recipe(tiny_recipe(rewards=["format", {"consistency": {"consistency_rule": "shuffled-options"}}]))
    # Loading already refuses a multiple-choice row without options; rows with no options at all are
    # open questions, which give the rule nothing to shuffle.
    rows = [{**row, "answer": "3", "answer_type": "number", "options": None} for row in probe_rows(20)]
    data = tmp_path / "no_options.jsonl"
    write_jsonl(data, rows)
    recipe = load_recipe(tiny_recipe(train_data=str(data), rewards=["format", "accuracy", "consistency"],
                                     judge={"rule": "shuffled-options"}, model=str(tmp_path / "no-such-model")))
    with pytest.raises(RecipeError, match="shuffled-options re-reads each think .* no multiple-choice rows"):
        build_trainer(recipe)
    assert not recipe.output_dir.exists() or not any(recipe.output_dir.iterdir())
    judged = load_recipe(tiny_recipe(train_data=str(data), rewards=["format", "accuracy", "consistency"],
                                     model=str(tmp_path / "no-such-model")))
    with pytest.raises(Exception, match="no-such-model") as raised:  # the judge rule goes on to the model
        build_trainer(judged)
    assert "shuffled-options" not in str(raised.value)
