"""Recipes: key validation, overrides, shipped recipes and the GPU-only settings, checked on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from embodied_r.cli.main import main
from embodied_r.core.io import DataFileError, write_jsonl
from embodied_r.judge.settings import JudgeSection
from embodied_r.methods.embodied_r.toy import toy_prompt_rows
from embodied_r.training import recipe_keys
from embodied_r.training.data import load_prompt_rows, rows_to_dataset
from embodied_r.training.recipe import (
    DEFAULT_REWARDS,
    OUR_KEYS,
    LoraSettings,
    RecipeError,
    check_batch_geometry,
    check_rollout_settings,
    dump_recipe,
    load_recipe,
    parse_overrides,
    recipe_from_dict,
    run_settings,
)
from embodied_r.training.recipe_keys import OUR_SECTIONS, SECTION_NAMES, TRL_DEFAULTS, TRL_SECTIONS
from embodied_r.training.recipe_sections import BatchGeometry
from embodied_r.training.schedule import RewardSchedule

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"


def test_unknown_key_lists_the_valid_ones() -> None:
    with pytest.raises(RecipeError) as info:
        recipe_from_dict({"train_data": "toy:2", "num_generation": 4})
    message = str(info.value)
    assert "'num_generation'" in message and "did you mean num_generations" in message
    assert all(key in message for key in OUR_KEYS) and "learning_rate" in message


def test_every_key_has_one_section_and_trls_defaults_are_trls() -> None:
    from dataclasses import MISSING, fields

    from trl import GRPOConfig

    ours = [key for section in SECTION_NAMES for key in OUR_SECTIONS[section]]
    assert sorted(ours) == sorted(OUR_KEYS), "each of our keys stands in exactly one section"
    trl_fields = {f.name: f for f in fields(GRPOConfig)}
    theirs = [key for section in SECTION_NAMES for key in TRL_SECTIONS[section]]
    assert len(theirs) == len(set(theirs)) and set(theirs) <= set(trl_fields) and not set(theirs) & set(ours)
    # TRL_DEFAULTS are written down so the batch geometry is checked before TRL is imported; they are TRL's.
    assert {key: trl_fields[key].default for key in TRL_DEFAULTS} == dict(TRL_DEFAULTS)
    assert all(trl_fields[key].default is not MISSING for key in TRL_DEFAULTS)


def test_the_trl_defaults_are_read_from_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    # The batch geometry, the typed section and --check read num_generations' default from TRL_DEFAULTS alone.
    monkeypatch.setattr(recipe_keys, "TRL_DEFAULTS", {**TRL_DEFAULTS, "num_generations": 3})
    with pytest.raises(RecipeError, match="8 completions .* not a multiple of num_generations 3"):
        check_batch_geometry({}, 1)
    with pytest.raises(RecipeError, match="num_generations 3"):
        load_recipe(None, ["train_data=toy:2"], num_processes=1)
    recipe = load_recipe(None, ["train_data=toy:2", "per_device_train_batch_size=6"], num_processes=1)
    assert recipe.sections.batch.num_generations == 3 and recipe.sections.batch.per_optimizer_step(1) == {
        "processes": 1, "completions_per_step": 6, "prompts_per_step": 2}


@pytest.mark.parametrize("typo, meant, section", [
    ("dtyp", "dtype", "model"), ("train_dat", "train_data", "data"),
    ("num_generation", "num_generations", "generation"), ("resample_round", "resample_rounds", "optimisation"),
    ("reward", "rewards", "rewards"), ("judg", "judge", "judge"), ("reward_schedul", "reward_schedule", "schedule"),
])
def test_an_unknown_key_names_its_likely_section_and_the_keys_of_each(typo: str, meant: str, section: str) -> None:
    with pytest.raises(RecipeError) as info:
        recipe_from_dict({"train_data": "toy:2", typo: 1})
    message = str(info.value)
    assert f"unknown key(s) '{typo}' (did you mean {meant} (section {section})" in message
    (listed,) = [line for line in message.splitlines() if line.startswith(f"  {section}: ")]
    assert set(OUR_SECTIONS[section]) <= set(listed.removeprefix(f"  {section}: ").split(", "))
    assert "and TRL GRPOConfig fields: " in message and "lr_scheduler_type" in message


@pytest.mark.parametrize("data, message", [
    ({"lora": {"rank": 8}}, r"lora: unknown key\(s\) \['rank'\]; valid: \['r', 'alpha', .*\] \(section model\)"),
    ({"format_warmup": {"step": 4}}, r"format_warmup: unknown key\(s\) \['step'\]; valid: \[.*'steps'.*\] "
                                     r"\(section optimisation\)"),
    ({"judge": {"reference": "policy"}}, r"judge: unknown key\(s\) \['reference'\]; valid: \['model', .*\] "
                                         r"\(section judge\)"),
])
def test_an_unknown_key_inside_a_nested_section_names_the_section_and_its_keys(data: dict, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        recipe_from_dict({"train_data": "toy:2", **data})


@pytest.mark.parametrize("key, value, message", [
    ("model", 5, "'model' must be a string, got 5 (section model)"),
    ("max_train_rows", "ten", "'max_train_rows' must be an integer or null, got 'ten' (section data)"),
    ("num_generations", "four", "num_generations must be int, got 'four' (section generation)"),
    ("learning_rate", "fast", "learning_rate must be float, got 'fast' (section optimisation)"),
    ("rewards", "format", "'rewards' must be a list of reward names or module:function paths, got 'format' "
                          "(section rewards)"),
    ("judge", {"allow_weak": 1}, "judge.allow_weak must be true or false, got 1 (section judge)"),
    ("max_train_minutes", "10m", "'max_train_minutes' must be a positive number of minutes or null, got '10m' "
                                 "(section schedule)"),
    ("max_grad_norm", "big", "max_grad_norm must be float, got 'big' (TRL GRPOConfig field)"),
    # A null where this layer would read TRL's default and TRL would be given the null.
    ("per_device_train_batch_size", None, "per_device_train_batch_size must be int, got None (leave it out for "
                                          "TRL's default 8) (section optimisation)"),
])
def test_a_wrong_type_names_the_key_its_section_and_the_type(key: str, value: object, message: str) -> None:
    with pytest.raises(RecipeError) as info:
        recipe_from_dict({"train_data": "toy:2", key: value}, "r.yaml")
    assert str(info.value) == f"r.yaml: {message}"


def test_without_rewards_a_recipe_trains_format_and_accuracy_and_consistency_only_by_name() -> None:
    from embodied_r.methods import EMBODIED_R
    from embodied_r.training.grpo import build_config

    bare = recipe_from_dict({"train_data": "toy:2"})
    assert bare.rewards == list(DEFAULT_REWARDS) == ["format", "accuracy"] and bare.reward_schedule is None
    assert build_config(bare, None, num_processes=1).reward_weights is None  # TRL's 1 each
    named = recipe_from_dict({"train_data": "toy:2", "rewards": ["format", "accuracy", "consistency"]})
    assert named.reward_names == ["format", "accuracy", "consistency"]
    # A recipe that names the method takes the method's paper terms, consistency included, and its schedule.
    method = recipe_from_dict({"train_data": "toy:2", "method": "embodied_r"})
    assert method.reward_names == list(EMBODIED_R.rewards) and method.reward_schedule == EMBODIED_R.reward_schedule


@pytest.mark.parametrize(
    "data, message",
    [
        ({}, "train_data"),
        ({"train_data": "x", "rewards": ["format", "nope"]}, "unknown reward 'nope'"),
        ({"train_data": "x", "rewards": ["format", "format"]}, "twice"),
        ({"train_data": "x", "reward_weights": [1, 1, 1], "reward_schedule": "paper"}, "not both"),
        ({"train_data": "x", "reward_schedule": "papers"}, "not a named schedule"),
        ({"train_data": "x", "rewards": ["format", "no_such_module_xyz:reward"]}, "cannot import no_such_module_xyz"),
        ({"train_data": "x", "rewards": ["format", "embodied_r.core.scoring:MRA_THRESHOLDS"]}, "not a reward function"),
        ({"train_data": "x", "rewards": [{"format": {"strict": True}}]}, "takes no options"),
        ({"train_data": "x", "model_init_kwargs": {}}, "set by embodied-r"),
        (
            {"train_data": "x", "rewards": ["format"], "reward_schedule": "paper", "eval_every_steps": -1},
            "non-negative",
        ),
        ({"train_data": "x", "use_vllm": True, "vllm_mode": "remote"}, "vllm_mode"),
        ({"train_data": "x", "use_vllm": True, "vllm_gpu_memory_utilization": 1.0}, r"\(0, 1\)"),
        ({"train_data": "x", "use_vllm": True, "vllm_server_host": "10.0.0.2"}, "set vllm_mode: server"),
        # LoRA is checked with the recipe, not when the trainer is built after the warm-up.
        ({"train_data": "x", "lora": {"rank": 8}}, r"lora: unknown key\(s\) \['rank'\]; valid: \['r', 'alpha'"),
        ({"train_data": "x", "lora": {"r": 0}}, "lora.r must be a positive integer"),
        ({"train_data": "x", "lora": {"dropout": 1.5}}, r"lora.dropout must be a number in \[0, 1\)"),
        ({"train_data": "x", "lora": {"bias": "some"}}, "lora.bias"),
        ({"train_data": "x", "lora": 8}, "'lora' must be a mapping"),
        ({"train_data": "x", "format_warmup": {"step": 4}}, r"format_warmup: unknown key\(s\) \['step'\]"),
        ({"train_data": "x", "judge": {"probe": {"case": 4}}}, r"judge.probe: unknown key\(s\) \['case'\]"),
        ({"train_data": "x", "judge": {"reference": "policy"}}, r"judge: unknown key\(s\) \['reference'\]; valid"),
        ({"train_data": "x", "judge": "policy"}, "'judge' must be a mapping"),
        ({"train_data": "x", "judge": {"sees_letters": "yes"}}, "judge.sees_letters must be true or false"),
        ({"train_data": "x", "judge": {"allow_weak": 1}}, "judge.allow_weak must be true or false"),
        ({"train_data": "x", "reward_schedule": [{"steps": 1, "weights": [1]}]}, "weights"),
        ({"train_data": "x", "max_train_minutes": 0}, "'max_train_minutes' must be a positive number"),
        ({"train_data": "x", "max_train_minutes": "10m"}, "'max_train_minutes' must be a positive number"),
    ],
)
def test_recipe_errors(data: dict, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        recipe_from_dict(data)


def test_the_sections_are_typed_once_from_the_recipe() -> None:
    recipe = recipe_from_dict({"train_data": "toy:2", "lora": {"r": 8, "target_modules": ["q_proj"]},
                               "format_warmup": {"steps": 4, "batch_size": 4}, "judge": {"probe": {"cases": 32}},
                               "max_prompt_tokens": 512, "reward_schedule": "paper"})
    sections = recipe.sections
    assert sections.lora == LoraSettings(r=8, target_modules=["q_proj"])
    config = sections.lora.peft_config()
    assert (config.r, config.lora_alpha, config.target_modules) == (8, 32, {"q_proj"})
    assert sections.warmup is not None and (sections.warmup.steps, sections.warmup.micro_batch_size) == (4, 4)
    assert sections.judge.probe["cases"] == 32 and sections.judge.probe["min_agreement"] == 0.8
    assert (sections.judge.model, sections.judge.rule, sections.judge.allow_weak) == ("policy", "judge", False)
    assert isinstance(sections.schedule, RewardSchedule) and len(sections.schedule.stages) == 3  # "paper"
    assert sections.context.max_prompt_tokens == 512
    assert recipe.sections is sections  # parsed once
    # The file form is unchanged: sections are not keys.
    assert "sections" not in recipe.to_flat_dict() and recipe.to_flat_dict()["lora"] == {"r": 8,
                                                                                         "target_modules": ["q_proj"]}
    bare = recipe_from_dict({"train_data": "toy:2"})  # no schedule named: constant weights, whatever the rewards
    assert bare.reward_names == ["format", "accuracy"]
    assert (bare.sections.lora, bare.sections.warmup, bare.sections.schedule) == (None, None, None)
    # TRL's keys this layer reads come typed, TRL's default where the recipe is silent.
    assert bare.sections.batch == BatchGeometry(num_generations=8, per_device_train_batch_size=8,
                                                gradient_accumulation_steps=1, steps_per_generation=None,
                                                generation_batch_size=None)
    assert (bare.sections.generation.max_completion_length, bare.sections.optimisation.loss_type) == (512, "dapo")
    assert bare.sections.rewards.static_weights() == [1.0, 1.0]


def test_overrides() -> None:
    assert parse_overrides(["save_strategy=no", "use_vllm=true", "lora.r=8", "lora.alpha=16"]) == {
        "save_strategy": "no",
        "use_vllm": True,
        "lora": {"r": 8, "alpha": 16},
    }
    recipe = load_recipe(
        RECIPES / "embodied_r" / "cpu_smollm2.yaml",
        ["max_steps=2", "reward_schedule=null", "reward_weights=[1, 1, 0]"],
    )
    assert recipe.trl["max_steps"] == 2 and recipe.reward_schedule is None
    with pytest.raises(RecipeError, match="key=value"):
        parse_overrides(["max_steps"])


@pytest.mark.parametrize("old, new", [
    ("reference_model", "judge.model"), ("judge_sees_letters", "judge.sees_letters"),
    ("judge_scoring", "judge.scoring"), ("consistency_rule", "judge.rule"), ("judge_probe", "judge.probe"),
    ("allow_weak_judge", "judge.allow_weak"),
])
def test_the_judge_keys_moved_into_one_section(old: str, new: str) -> None:
    with pytest.raises(RecipeError, match=rf"recipe: {old} moved to {new}: write judge: \{{") as raised:
        recipe_from_dict({"train_data": "toy:2", old: None})
    assert f"--set {new}=" in str(raised.value)
    with pytest.raises(RecipeError, match=f"{old} moved to {new}"):
        load_recipe(RECIPES / "embodied_r" / "cpu_smollm2.yaml", [f"{old}=policy"])


def test_the_judge_section_round_trips_through_set_and_the_resolved_recipe(tmp_path: Path) -> None:
    recipe = load_recipe(RECIPES / "embodied_r" / "cpu_smollm2.yaml",
                         ["judge.model=mentioned-last", "judge.probe.cases=32", "judge.rule=shuffled-options",
                          "judge.sees_letters=true", "judge.scoring=letter"])
    judge = recipe.sections.judge
    assert (judge.model, judge.rule, judge.sees_letters, judge.scoring) == ("mentioned-last", "shuffled-options",
                                                                            True, "letter")
    assert judge.probe["cases"] == 32 and judge.probe["min_agreement"] == 0.8 and judge.allow_weak is True  # file
    # The dumped recipe (resolved_recipe.yaml, --print) holds the whole section and reads back the same.
    resolved = yaml.safe_load(dump_recipe(recipe))
    assert resolved["judge"] == judge.to_config() and not {"reference_model", "judge_probe"} & set(resolved)
    path = tmp_path / "resolved.yaml"
    path.write_text(dump_recipe(recipe), encoding="utf-8")
    assert load_recipe(path).sections.judge == judge
    # The consistency reward reads the section's keys.
    settings = run_settings(recipe)
    assert (settings["judge.model"], settings["judge.rule"], settings["judge.scoring"]) == (
        "mentioned-last", "shuffled-options", "letter")
    assert JudgeSection.from_config(None) == recipe_from_dict({"train_data": "toy:2"}).sections.judge


def test_shipped_recipes_are_valid() -> None:
    cpu = load_recipe(RECIPES / "embodied_r" / "cpu_smollm2.yaml")
    assert cpu.model == "smollm2-135m-instruct" and cpu.reward_names == ["format", "accuracy", "consistency"]
    schedule = RewardSchedule.from_config(cpu.reward_schedule, cpu.reward_names)
    assert [schedule.weights_at(step=s) for s in (1, 5, 9)] == [
        [0.7, 0.3, 0.0],
        [0.3, 0.7, 0.0],
        [0.1, 0.7, 0.2],
    ]
    assert check_batch_geometry(cpu.trl, 1) == 4

    paper = load_recipe(RECIPES / "embodied_r" / "paper_qwen2.5-3b.yaml")
    trl = paper.trl
    assert (trl["num_generations"], trl["learning_rate"], trl["beta"], trl["max_completion_length"]) == (
        8,
        5e-7,
        0.001,
        2048,
    )
    assert (trl["temperature"], trl["top_p"], trl["top_k"], trl["num_train_epochs"]) == (1.0, 0.9, 50, 12)
    assert trl["lr_scheduler_type"] == "cosine" and trl["warmup_steps"] == 0.05
    assert paper.reward_schedule == "paper"


def test_gpu_settings_are_consistent_with_the_accelerate_configs() -> None:
    from accelerate.commands.config.config_args import ClusterConfig

    paper = load_recipe(RECIPES / "embodied_r" / "paper_qwen2.5-3b.yaml")
    zero3 = ClusterConfig.from_yaml_file(str(RECIPES / "accelerate" / "zero3_8gpu.yaml"))
    assert zero3.deepspeed_config["zero_stage"] == 3 and zero3.num_processes == 8
    assert check_batch_geometry(paper.trl, zero3.num_processes) == 32  # 4 prompts x 8, as the paper
    with pytest.raises(RecipeError, match="not a multiple of num_generations 8"):
        check_batch_geometry(paper.trl, 1)
    multinode = ClusterConfig.from_yaml_file(str(RECIPES / "accelerate" / "zero3_multinode.yaml"))
    assert multinode.num_machines == 2 and check_batch_geometry(paper.trl, multinode.num_processes) == 64
    server = ClusterConfig.from_yaml_file(str(RECIPES / "accelerate" / "zero3_7gpu_vllm_server.yaml"))
    server_trl = {**paper.trl, "vllm_mode": "server", "per_device_train_batch_size": 8}
    check_rollout_settings(server_trl)
    assert check_batch_geometry(server_trl, server.num_processes) == 56


def test_gpu_recipe_builds_a_trl_config(tmp_path: Path) -> None:
    """The paper recipe's GRPOConfig (vLLM colocate, bf16, cosine) is accepted by TRL; the global batch of
    8 GPUs is emulated on one process."""
    from embodied_r.training.grpo import build_config

    recipe = load_recipe(
        RECIPES / "embodied_r" / "paper_qwen2.5-3b.yaml",
        ["per_device_train_batch_size=32", f"output_dir={tmp_path}"],
    )
    config = build_config(recipe, RewardSchedule.from_config("paper", recipe.reward_names))
    assert config.use_vllm and config.vllm_mode == "colocate" and config.bf16
    assert config.reward_weights == [0.7, 0.3, 0.0] and config.loss_type == "bnpo"


def test_data_errors_are_clear(tmp_path: Path) -> None:
    rows = [r.to_dict() for r in toy_prompt_rows(2)]
    bad = dict(rows[0], answer="")
    write_jsonl(tmp_path / "bad.jsonl", [rows[1], bad])
    with pytest.raises(DataFileError, match=r"bad.jsonl:2 .*no answer"):
        load_prompt_rows(tmp_path / "bad.jsonl")
    write_jsonl(tmp_path / "letter.jsonl", [dict(rows[0], answer="F")])
    with pytest.raises(DataFileError, match="answer outside the options"):
        load_prompt_rows(tmp_path / "letter.jsonl")
    write_jsonl(tmp_path / "neg.jsonl", [dict(rows[1], answer=-2)])
    with pytest.raises(DataFileError, match="must be a positive number"):
        load_prompt_rows(tmp_path / "neg.jsonl")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DataFileError, match="no prompt rows"):
        load_prompt_rows(tmp_path / "empty.jsonl")


def test_dataset_columns_feed_the_rewards() -> None:
    dataset = rows_to_dataset(toy_prompt_rows(4))
    # prompt_version: which method's scorer the accuracy reward reads each row with (None: the default method).
    assert set(dataset.column_names) == {"prompt", "id", "task", "answer", "answer_type", "options", "prompt_version"}
    assert dataset[0]["prompt"][0]["role"] == "system" and dataset[1]["answer_type"] == "number"
    assert float(dataset[1]["answer"]) > 0 and dataset[1]["options"] is None
    assert {r.id for r in load_prompt_rows("toy:3:1")}.isdisjoint({r.id for r in load_prompt_rows("toy:3")})


def test_cli_errors_before_training(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("train_data: toy:2\nmax_step: 3\n", encoding="utf-8")
    assert main(["train", "--recipe", str(recipe)]) == 2
    assert "did you mean max_steps" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    recipe.write_text(
        f"train_data: {tmp_path / 'empty.jsonl'}\noutput_dir: {tmp_path / 'run'}\n", encoding="utf-8"
    )
    assert main(["train", "--recipe", str(recipe)]) == 2
    assert "no prompt rows" in capsys.readouterr().err
    assert main(["train", "--recipe", str(recipe), "--resume"]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert main(["train", "--recipe", str(RECIPES / "embodied_r" / "cpu_smollm2.yaml"), "--check"]) == 0
    assert "reward_schedule" in capsys.readouterr().out


@pytest.mark.parametrize("override, message", [
    ("max_steps=abc", "max_steps must be int"), ("learning_rate=-1", "learning_rate must be positive"),
    ("num_generations=1", "at least 2"), ("max_steps=0", "max_steps must be positive"),
    ("bf16=1", "bf16 must be bool"), ("top_p=1.5", "top_p must be in"), ("beta=-0.1", "beta must be non-negative"),
    ("judge.scoring=logits", "judge.scoring must be one of option-text, letter"),
    ("loss_type=bogus", "loss_type 'bogus' must be one of"), ("scale_rewards=bogus", "scale_rewards 'bogus'"),
    ("importance_sampling_level=word", "importance_sampling_level"), ("prompt_version=v9", "prompt_version"),
])
def test_values_are_checked_before_anything_runs(override: str, message: str) -> None:
    recipe = RECIPES / "embodied_r" / "cpu_smollm2.yaml"
    with pytest.raises(RecipeError, match=message):
        load_recipe(recipe, [override])
    assert main(["train", "--recipe", str(recipe), "--set", override, "--check"]) == 2


def test_check_rehearses_a_cluster_run(capsys: pytest.CaptureFixture) -> None:
    import yaml

    paper = str(RECIPES / "embodied_r" / "paper_qwen2.5-3b.yaml")
    from embodied_r.training import recipe as recipe_module

    # One process cannot hold the paper's groups of 8 with 4 completions per device: refused before the
    # full validation (which imports TRL) is even reached.
    def not_reached(*_: object) -> None:
        raise AssertionError("the batch geometry should have been refused first")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recipe_module, "recipe_from_dict", not_reached)
        assert main(["train", "--recipe", paper, "--check", "--num-processes", "1"]) == 2
    assert "not a multiple of num_generations 8" in capsys.readouterr().err
    assert main(["train", "--recipe", paper, "--check", "--num-processes", "8"]) == 0
    out = capsys.readouterr().out
    assert yaml.safe_load(out)["model"] == "Qwen/Qwen2.5-3B-Instruct"  # the printed recipe is valid YAML
    assert "32 completions (4 prompts) per optimizer step" in out and "the paper: 32" in out
    # TRL's own config is built: a value only TRL rejects is caught by --check too.
    assert main(["train", "--recipe", paper, "--check", "--num-processes", "8", "--set",
                 "lr_scheduler_type=bogus"]) == 2
    assert "TRL rejected the configuration" in capsys.readouterr().err


def test_the_process_group_gets_the_recipes_ddp_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # accelerate creates the process group on the first PartialState(); train() makes that first call
    # with the recipe's timeout (TRL's GRPOConfig, which carries ddp_timeout, exists only later), and
    # asks for gloo (cpu=True) without CUDA: otherwise launched ranks on a CPU never join one group.
    from datetime import timedelta

    import torch

    from embodied_r.training import grpo

    seen: list[dict] = []

    class Recorder:
        is_main_process = True

        def __init__(self, **kwargs: object) -> None:
            seen.append(kwargs)

    monkeypatch.setattr(grpo, "PartialState", Recorder)
    grpo.process_state(load_recipe(None, ["train_data=toy:2", "ddp_timeout=600"]))
    grpo.process_state(load_recipe(None, ["train_data=toy:2", "use_cpu=true"]))
    no_cuda = not torch.cuda.is_available()
    assert seen == [{"cpu": no_cuda, "timeout": timedelta(seconds=600)},
                    {"cpu": True, "timeout": timedelta(seconds=1800)}]


def test_attention_implementation_reaches_policy_and_judge_and_is_checked(tiny_lm_dir: Path) -> None:
    import importlib.util

    from embodied_r.judge.judges import build_judge
    from embodied_r.training.grpo import build_config

    recipe = load_recipe(None, ["train_data=toy:2", "attn_implementation=eager", "reward_schedule=null",
                                "rewards=[format]", "per_device_train_batch_size=8"])
    assert build_config(recipe, None, num_processes=1).model_init_kwargs["attn_implementation"] == "eager"
    judge = build_judge("policy", str(tiny_lm_dir), dtype="float32", attn_implementation="eager")
    assert judge.model.config._attn_implementation == "eager"
    with pytest.raises(RecipeError, match="must be one of sdpa, eager"):
        load_recipe(None, ["train_data=toy:2", "attn_implementation=fast"])
    if importlib.util.find_spec("flash_attn") is None:  # a kernel that is not installed: refused before loading
        with pytest.raises(RecipeError, match="needs the 'flash_attn' package"):
            load_recipe(None, ["train_data=toy:2", "attn_implementation=flash_attention_2"])
