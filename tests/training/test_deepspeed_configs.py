"""The ZeRO-3 accelerate configs, parsed by DeepSpeed's own config classes (where DeepSpeed is installed).

A run launched with ``recipes/accelerate/zero3_*.yaml`` gets its DeepSpeed config in three hands: accelerate's
``DeepSpeedPlugin`` builds it from the file's ``deepspeed_config`` keys and ``mixed_precision``, transformers'
``HfTrainerDeepSpeedConfig`` fills its "auto" entries from the ``GRPOConfig`` the recipe builds, and
DeepSpeed parses the result (``DeepSpeedConfig``, whose sections are pydantic models that reject unknown keys).
The same chain runs here, without a GPU or a process group (DeepSpeed then counts one process).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

deepspeed = pytest.importorskip(
    "deepspeed",
    reason="DeepSpeed is not installed (`make test` installs it; by hand on a CPU machine: "
    "`DS_BUILD_OPS=0 pip install -e '.[deepspeed]'`), so DeepSpeed cannot parse the ZeRO-3 configs here",
)

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
PAPER = RECIPES / "embodied_r" / "paper_qwen2.5-3b.yaml"
# Each accelerate config with the recipe overrides its header comment launches it with.
ZERO3 = {
    "zero3_8gpu.yaml": [],
    "zero3_multinode.yaml": [],
    "zero3_7gpu_vllm_server.yaml": ["vllm_mode=server", "per_device_train_batch_size=8"],
}
LAUNCHER_ONLY = {"deepspeed_multinode_launcher"}  # read by `accelerate launch`, not by the plugin


@pytest.fixture(autouse=True)
def _clean_state(monkeypatch: pytest.MonkeyPatch):
    # The plugin falls back to ACCELERATE_* variables for what it is not given; transformers keeps the
    # last DeepSpeed config in a module-level reference that would make later tests load models for ZeRO-3.
    for name in [n for n in os.environ if n.startswith("ACCELERATE_")]:
        monkeypatch.delenv(name)
    yield
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    unset_hf_deepspeed_config()


def deepspeed_config_for(accelerate_file: Path, overrides: list[str], tmp_path: Path) -> tuple[dict[str, Any], Any]:
    """The DeepSpeed config dict a run of the paper recipe gets under ``accelerate_file``, and its GRPOConfig."""
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DeepSpeedPlugin
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    from embodied_r.training.grpo import build_config
    from embodied_r.training.recipe import load_recipe
    from embodied_r.training.schedule import RewardSchedule

    cluster = ClusterConfig.from_yaml_file(str(accelerate_file))
    keys = dict(cluster.deepspeed_config)
    plugin_fields = {f.name for f in dataclasses.fields(DeepSpeedPlugin)}
    assert set(keys) - plugin_fields <= LAUNCHER_ONLY, f"keys accelerate would not use: {set(keys) - plugin_fields}"
    plugin = DeepSpeedPlugin(**{k: v for k, v in keys.items() if k in plugin_fields})
    plugin.set_mixed_precision(cluster.mixed_precision)  # what Accelerator does with the file's precision
    recipe = load_recipe(PAPER, [*overrides, f"output_dir={tmp_path}"])
    args = build_config(recipe, RewardSchedule.from_config(recipe.reward_schedule, recipe.reward_names),
                        num_processes=cluster.num_processes)
    filled = HfTrainerDeepSpeedConfig(plugin.deepspeed_config)
    filled.trainer_config_process(args)  # the Trainer's step: "auto" entries from the training arguments
    return filled.config, args


@pytest.mark.parametrize("name", sorted(ZERO3))
def test_deepspeed_parses_the_zero3_config_a_run_gets(name: str, tmp_path: Path) -> None:
    from accelerate.commands.config.config_args import ClusterConfig
    from deepspeed.runtime.config import DeepSpeedConfig

    path = RECIPES / "accelerate" / name
    config, args = deepspeed_config_for(path, ZERO3[name], tmp_path)
    cluster = ClusterConfig.from_yaml_file(str(path))
    parsed = DeepSpeedConfig(config)
    zero = parsed.zero_config
    assert parsed.zero_enabled and parsed.zero_optimization_stage == 3
    assert zero.offload_param.device == cluster.deepspeed_config["offload_param_device"]
    assert zero.offload_optimizer.device == cluster.deepspeed_config["offload_optimizer_device"]
    assert zero.gather_16bit_weights_on_model_save is cluster.deepspeed_config["zero3_save_16bit_model"]
    assert parsed.bfloat16_config.enabled is (cluster.mixed_precision == "bf16") is args.bf16
    assert parsed.train_micro_batch_size_per_gpu == args.per_device_train_batch_size
    assert parsed.gradient_clipping == args.max_grad_norm


def test_deepspeed_rejects_an_unknown_zero_setting(tmp_path: Path) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig
    from pydantic import ValidationError

    config, _ = deepspeed_config_for(RECIPES / "accelerate" / "zero3_8gpu.yaml", [], tmp_path)
    misspelt = copy.deepcopy(config)
    misspelt["zero_optimization"]["stage3_gather_16bit_weight_on_model_save"] = True  # "weight", not "weights"
    with pytest.raises(ValidationError, match="stage3_gather_16bit_weight_on_model_save"):
        DeepSpeedConfig(misspelt)


def test_a_judge_loaded_while_zero3_is_on_is_whole_on_every_rank(tiny_lm_dir: Path) -> None:
    # The format warm-up's SFTConfig switches transformers' ZeRO-3 loading on before the judge of the
    # warmed-up policy is loaded; a sharded judge would deadlock ranks that judge different numbers of rows.
    from transformers.integrations.deepspeed import (
        HfDeepSpeedConfig,
        is_deepspeed_zero3_enabled,
        set_hf_deepspeed_config,
    )

    from embodied_r.judge.judges import ReferenceJudge

    config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    set_hf_deepspeed_config(config)
    assert is_deepspeed_zero3_enabled()
    judge = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu")
    assert is_deepspeed_zero3_enabled()  # put back for the policy, which ZeRO-3 does shard
    params = list(judge.model.parameters())
    assert params and all(p.numel() > 0 and not hasattr(p, "ds_id") for p in params)  # no ZeRO-3 partitions
