"""The recipe's typed sections: what training reads, parsed and checked once when the recipe loads.

A plain key of ours is read as the recipe's attribute (``recipe.completion_prefix``); what needs parsing,
a nested mapping or a TRL default is read here (``recipe.sections.batch.num_generations``), never from the
raw ``trl`` mapping. Defaults live where the key is declared: our keys on ``Recipe``, nested sections on
their own classes (``LoraSettings``, ``WarmupSettings``, ``JudgeSection``), TRL's in
``recipe_keys.TRL_DEFAULTS``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from embodied_r.core.validity import section_keys
from embodied_r.judge.settings import JudgeSection
from embodied_r.training.recipe_keys import RecipeError, in_section, key_error, trl_value, where

if TYPE_CHECKING:  # the nested sections' types, imported where they are parsed (no import-time work)
    from embodied_r.inference.context_policy import ContextPolicy
    from embodied_r.training.schedule import RewardSchedule
    from embodied_r.training.warmup import WarmupSettings


@dataclass(frozen=True)
class LoraSettings:
    """Recipe key ``lora`` (section model; null = full fine-tuning): PEFT LoRA adapters on the policy."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: str | list[str] = "all-linear"
    bias: str = "none"
    use_rslora: bool = False

    @classmethod
    def from_config(cls, value: Any, source: str = "recipe") -> LoraSettings | None:
        if value is None:
            return None
        section_keys(value, "lora", [f.name for f in dataclasses.fields(cls)], "{r: 16, alpha: 32}", source,
                     RecipeError)
        settings = cls(**value)
        settings.check(source)
        return settings

    def check(self, source: str) -> None:
        for name in ("r", "alpha"):
            number = getattr(self, name)
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise RecipeError(f"{source}: lora.{name} must be a positive integer, got {number!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise RecipeError(f"{source}: lora.dropout must be a number in [0, 1), got {self.dropout!r}")
        modules = self.target_modules
        if not (isinstance(modules, str) or (isinstance(modules, list) and modules
                                             and all(isinstance(m, str) for m in modules))):
            raise RecipeError(f"{source}: lora.target_modules must be a name, a list of names or 'all-linear', "
                              f"got {modules!r}")
        if self.bias not in ("none", "all", "lora_only"):
            raise RecipeError(f"{source}: lora.bias must be none, all or lora_only, got {self.bias!r}")
        if not isinstance(self.use_rslora, bool):
            raise RecipeError(f"{source}: lora.use_rslora must be true or false, got {self.use_rslora!r}")

    def peft_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=float(self.dropout),
                          target_modules=self.target_modules, bias=self.bias, use_rslora=self.use_rslora,
                          task_type="CAUSAL_LM")


@dataclass(frozen=True)
class BatchGeometry:
    """How many completions a step samples and updates (sections generation and optimisation).

    TRL 1.16's ``per_device_train_batch_size`` counts completions, not prompts, so the same recipe can
    hold whole groups on 8 GPUs and not on one; ``with_processes`` says so in those terms.
    """

    num_generations: int
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    steps_per_generation: int | None
    generation_batch_size: int | None

    @classmethod
    def from_trl(cls, trl: Mapping[str, Any]) -> BatchGeometry:
        """From the recipe's TRL keys; TypeError or ValueError for a value that is no number (the recipe's
        own check then says which)."""
        optional = {key: None if trl.get(key) is None else int(trl[key])
                    for key in ("steps_per_generation", "generation_batch_size")}
        return cls(num_generations=int(trl_value(trl, "num_generations")),
                   per_device_train_batch_size=int(trl_value(trl, "per_device_train_batch_size")),
                   gradient_accumulation_steps=int(trl_value(trl, "gradient_accumulation_steps")), **optional)

    @property
    def steps(self) -> int:
        """Micro-batches per generation batch (TRL: steps_per_generation, else gradient_accumulation_steps)."""
        return self.steps_per_generation or self.gradient_accumulation_steps

    def completions_per_generation(self, num_processes: int) -> int:
        return self.generation_batch_size or self.per_device_train_batch_size * num_processes * self.steps

    def with_processes(self, num_processes: int) -> int:
        """Completions per generation batch with ``num_processes`` processes; a RecipeError unless it holds
        whole groups."""
        batch = self.completions_per_generation(num_processes)
        if batch % self.num_generations:
            raise RecipeError(
                f"with {num_processes} process(es) a generation batch holds {batch} completions "
                f"(per_device_train_batch_size {self.per_device_train_batch_size} x processes x steps {self.steps}), "
                f"which is not a multiple of num_generations {self.num_generations}; raise "
                "per_device_train_batch_size or gradient_accumulation_steps"
            )
        return batch

    def per_optimizer_step(self, num_processes: int) -> dict[str, int]:
        """Completions and prompts per optimizer step with ``num_processes`` processes."""
        completions = self.per_device_train_batch_size * num_processes * self.gradient_accumulation_steps
        return {"processes": num_processes, "completions_per_step": completions,
                "prompts_per_step": completions // self.num_generations}


def check_batch_geometry(trl: Mapping[str, Any], num_processes: int) -> int:
    """Completions per generation batch with ``num_processes`` processes; it must hold whole groups
    (``recipe_sections.BatchGeometry``)."""
    return BatchGeometry.from_trl(trl).with_processes(num_processes)


def global_batch(trl: Mapping[str, Any], num_processes: int) -> dict[str, int]:
    """Completions and prompts per optimizer step with ``num_processes`` processes."""
    return BatchGeometry.from_trl(trl).per_optimizer_step(num_processes)


@dataclass(frozen=True)
class GenerationSettings:
    """Section generation's TRL keys this layer reads (TRL's defaults where the recipe is silent)."""

    max_completion_length: int
    use_vllm: bool

    @classmethod
    def from_trl(cls, trl: Mapping[str, Any]) -> GenerationSettings:
        return cls(max_completion_length=int(trl_value(trl, "max_completion_length")),
                   use_vllm=bool(trl_value(trl, "use_vllm")))


@dataclass(frozen=True)
class OptimisationSettings:
    """Section optimisation's TRL keys this layer reads (TRL's defaults where the recipe is silent)."""

    loss_type: str
    scale_rewards: str | bool
    gradient_checkpointing: bool
    bf16: bool | None  # None: training/precision.py decides
    deepspeed: bool  # a DeepSpeed config is set
    use_cpu: bool
    ddp_timeout: int  # seconds

    @classmethod
    def from_trl(cls, trl: Mapping[str, Any]) -> OptimisationSettings:
        bf16 = trl_value(trl, "bf16")
        return cls(loss_type=trl_value(trl, "loss_type"), scale_rewards=trl_value(trl, "scale_rewards"),
                   gradient_checkpointing=bool(trl_value(trl, "gradient_checkpointing")),
                   bf16=None if bf16 is None else bool(bf16), deepspeed=bool(trl_value(trl, "deepspeed")),
                   use_cpu=bool(trl_value(trl, "use_cpu")), ddp_timeout=int(trl_value(trl, "ddp_timeout")))


@dataclass(frozen=True)
class RewardSettings:
    """Section rewards: the reward names in recipe order and TRL's static ``reward_weights`` (None: 1 each)."""

    names: tuple[str, ...]
    weights: tuple[float, ...] | None

    def static_weights(self) -> list[float]:
        """The constant weights (used when no reward_schedule is set)."""
        return list(self.weights) if self.weights is not None else [1.0] * len(self.names)


@dataclass(frozen=True)
class RecipeSections:
    """The recipe's sections, parsed and checked once (``training.recipe.parse_sections``); training reads
    these, never the raw mappings."""

    schedule: RewardSchedule | None  # section schedule; null: constant reward weights
    warmup: WarmupSettings | None  # section optimisation; null: no format warm-up
    lora: LoraSettings | None  # section model; null: full fine-tuning
    judge: JudgeSection  # section judge: the consistency judge and its probe, with defaults filled in
    context: ContextPolicy  # section data: context_rule and max_prompt_tokens
    batch: BatchGeometry  # sections generation and optimisation
    generation: GenerationSettings
    optimisation: OptimisationSettings
    rewards: RewardSettings


# Each nested section from its recipe value; an error names the key's section.


def reward_schedule(spec: Any, reward_names: Sequence[str], source: str) -> RewardSchedule | None:
    from embodied_r.training.schedule import RewardSchedule, ScheduleError

    try:
        return RewardSchedule.from_config(spec, reward_names)
    except ScheduleError as exc:
        raise in_section(f"{source}: {exc}", "reward_schedule") from exc


def format_warmup(value: Any, source: str) -> WarmupSettings | None:
    from embodied_r.training.warmup import WarmupError, WarmupSettings

    try:
        return WarmupSettings.from_config(value, source)
    except (WarmupError, TypeError) as exc:
        raise in_section(str(exc), "format_warmup") from exc


def lora_settings(value: Any, source: str) -> LoraSettings | None:
    try:
        return LoraSettings.from_config(value, source)
    except (RecipeError, TypeError) as exc:
        raise in_section(str(exc), "lora") from exc


def judge_section(value: Any, source: str) -> JudgeSection:
    try:
        return JudgeSection.from_config(value, source)
    except (ValueError, TypeError) as exc:
        raise in_section(str(exc), "judge") from exc


def context_section(rule: Any, max_prompt_tokens: Any, source: str) -> ContextPolicy:
    try:
        return context_policy(rule, max_prompt_tokens)
    except ValueError as exc:
        raise RecipeError(f"{source}: {exc} (keys context_rule, max_prompt_tokens; {where('context_rule')})") from exc


def context_policy(rule: str, max_prompt_tokens: int | None) -> ContextPolicy:
    """The recipe's ContextPolicy (for training prompts and held-out evaluation)."""
    from embodied_r.inference.context_policy import ContextPolicy

    cap = max_prompt_tokens
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)):
        raise ValueError(f"max_prompt_tokens must be a positive integer or null, got {cap!r}")
    return ContextPolicy(rule=rule, max_prompt_tokens=cap)


def reward_settings(reward_names: Sequence[str], weights: Any, source: str) -> RewardSettings:
    """Section rewards; TRL's ``reward_weights`` must be null or a list of numbers (TRL matches them to the
    rewards)."""
    if weights is None:
        return RewardSettings(tuple(reward_names), None)
    if not isinstance(weights, list) or any(isinstance(w, bool) or not isinstance(w, int | float) for w in weights):
        raise key_error(source, "reward_weights", f"reward_weights must be a list of numbers or null, got {weights!r}")
    return RewardSettings(tuple(reward_names), tuple(float(w) for w in weights))
