"""Training recipes: one YAML file of flat keys in seven sections, checked at once before anything heavy starts.

A key is either one of ours (``OUR_KEYS``, the fields of :class:`Recipe`, each default written there) or a
field of TRL's ``GRPOConfig`` under its own name (``output_dir``, ``max_steps``, ``num_generations``,
``learning_rate``, ...), so TRL's documentation applies as is. Every key belongs to a section: model, data,
generation, optimisation, rewards, judge or schedule (``recipe_keys``). Anything else is an error that names
the key, its close matches and every valid key by section; a value of the wrong type or range names the key,
its section and what it must be. ``--set key=value`` overrides use YAML syntax for the value and dots for
nested keys (``--set lora.r=8``, ``--set judge.model=NAME``).

Modules: ``recipe_keys`` (sections, TRL's defaults, the errors), ``recipe_io`` (the file and ``--set``),
``recipe_sections`` (the typed sections training reads), ``recipe_values`` (each plain key's value),
``recipe_trl`` (TRL's values), ``recipe_checks`` (the rewards and the combinations), and this one (the recipe,
loading it, and the one validation pass).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from embodied_r.judge.settings import MOVED_KEYS, JudgeSection, moved_key_message
from embodied_r.methods import DEFAULT_METHOD, Method
from embodied_r.training.recipe_checks import (
    check_checkpointing,
    check_curriculum,
    check_reward_entries,
    check_rule_rows,
    check_schedule_or_weights,
    check_zero_variance_groups,
    reward_spec,
)
from embodied_r.training.recipe_io import merge_overrides, parse_overrides, read_recipe_data
from embodied_r.training.recipe_keys import DEFAULT_OUTPUT_DIR, RecipeError, in_section, key_error, unknown_keys_error
from embodied_r.training.recipe_sections import (
    BatchGeometry,
    GenerationSettings,
    LoraSettings,
    OptimisationSettings,
    RecipeSections,
    check_batch_geometry,
    context_section,
    format_warmup,
    global_batch,
    judge_section,
    lora_settings,
    reward_schedule,
    reward_settings,
)
from embodied_r.training.recipe_trl import check_rollout_settings, check_trl_choices, check_trl_values
from embodied_r.training.recipe_values import check_values

# The rewards of a recipe that names neither rewards nor a method.
DEFAULT_REWARDS: tuple[str, ...] = ("format", "accuracy")


@dataclass
class Recipe:
    """Our own recipe keys; TRL ``GRPOConfig`` fields live in ``trl``."""

    train_data: str = ""  # PromptRow .jsonl, or "toy:N" for the built-in toy set
    model: str = "smollm2-135m-instruct"  # built-in name, local folder or hub id
    dtype: str = "auto"  # model weights: auto | float32 | bfloat16 | float16
    # Attention kernel of the policy and a local judge: sdpa | eager | flash_attention_2 | flash_attention_3 |
    # flex_attention; null = transformers' default. Checked before anything loads (the package must exist).
    attn_implementation: str | None = None
    eval_data: str | None = None  # held-out PromptRow .jsonl (or "toy:N") for the eval callback
    max_train_rows: int | None = None
    # The method the rows belong to: a known method's name or a "module:attr" path to a Method in your own
    # package (imported and registered when the recipe is read, before its rewards and rows are checked, so
    # its rewards and prompt versions are known); its paper rewards and reward_schedule are the defaults of
    # rewards and reward_schedule. null: no method named (rows follow their recorded prompt version).
    method: str | None = None
    # Reward names of the reward table (methods.rewards) or "module:function" paths, each optionally with options;
    # default: the paper terms of the recipe's method, else DEFAULT_REWARDS (format and accuracy: consistency
    # needs a judge that passes its probe, so a recipe asks for it by name).
    rewards: list[Any] = field(default_factory=lambda: list(DEFAULT_REWARDS))
    # null: constant weights (TRL's reward_weights, 1 each unless set); a named schedule ("paper": Embodied-R's
    # three stages, training/schedule.py); or a list of stages. Default: the schedule of the recipe's method
    # (Method.reward_schedule) when the recipe names a method and sets no reward_weights, else null.
    reward_schedule: Any = None
    # How the accuracy reward reads a choice: last-answer (ours: only the last <answer>, as evaluation reads it)
    # or official (Embodied-R's released reward: a letter from the whole completion, reasoning included).
    accuracy_rule: str = "last-answer"
    # The consistency judge: {model, sees_letters, scoring, rule, probe, allow_weak} (judge/settings.py);
    # a recipe gives the keys it changes, and a loaded recipe holds every key (defaults filled in).
    judge: dict[str, Any] | None = field(default_factory=dict)
    lora: dict[str, Any] | None = None  # {r, alpha, dropout, target_modules}; null = full fine-tuning
    eval_every_steps: int = 0  # 0 = only before and after training (when eval_data is set)
    eval_max_rows: int = 64
    eval_batch_size: int = 8
    eval_max_new_tokens: int = 256
    sample_completions: int = 4  # completions per generation batch written to samples.jsonl
    # Text that opens the assistant turn before the model writes (e.g. "<think>"); the model continues it,
    # rewards and held-out evaluation see prefix + completion. "" = the paper's plain generation prompt.
    completion_prefix: str = ""
    # What to do with a prompt longer than the model's context minus max_completion_length, or than
    # max_prompt_tokens: drop-frames (oldest frame descriptions first) | truncate-left | skip. Every affected
    # row is listed in OUTPUT/context.json; held-out evaluation follows the same rule.
    context_rule: str = "drop-frames"
    max_prompt_tokens: int | None = None
    # The reasoner prompt template the training rows must have been built with (their meta.prompt_version,
    # e.g. "official" for the official bytes); null = not checked. ``eval --recipe`` builds prompts with it.
    prompt_version: str | None = None
    # Supervised steps that teach the <think>/<answer> structure (random answers, never the gold one) before
    # GRPO, e.g. {steps: 16, batch_size: 2, learning_rate: 1e-4}; null = none. See training/warmup.py.
    format_warmup: dict[str, Any] | None = None
    # Encode each group's shared prompt once in the GRPO log-probability passes (training/shared_prefix.py):
    # same loss and gradients as TRL's per-row encoding, less compute. auto = checked against TRL's path on
    # the first step and timed against it there, the faster kept; true = the shared path (still checked: a
    # failed check falls back); false = TRL's own path. See training/path_choice.py; recorded in fast_paths.json.
    shared_prefix_update: bool | str = "auto"
    # Sample each group's completions from one encoding of its prompt (training/prefix_generation.py): the
    # same sampling distribution as TRL's transformers path, without re-encoding the prompt per completion;
    # auto | true | false as shared_prefix_update. vLLM rollouts cache prefixes themselves and are unaffected.
    shared_prefix_generation: bool | str = "auto"
    # Tokens one backward pass of the GRPO update may hold (training/token_budget.py): a micro-batch over it
    # is differentiated in slices of whole prompt groups, with the same gradient; null = TRL's whole
    # micro-batch. Bounds memory by tokens where per_device_train_batch_size counts rows.
    max_train_batch_tokens: int | None = None
    # Rows whose advantage is 0 (a group whose rewards all agree): update (TRL: every row) | skip (left out
    # of the update, same gradient, less compute) | drop (DAPO's dynamic sampling without resampling: such
    # groups also leave the loss's normaliser) | resample (drop, after replacing such groups by varying groups of
    # fresh training prompts: DAPO's dynamic sampling, up to resample_rounds more generation calls a step).
    # See training/zero_advantage.py and training/dynamic_sampling.py.
    zero_variance_groups: str = "skip"
    resample_rounds: int = 3
    # Steps whose gold answers are balanced (training/option_rotations.py), built from option rotations (the
    # options shifted so a question's answer stands at each letter once): letters = each question's n
    # rotations in one step; answers = a step holds n questions with n different gold answers at n different
    # letters; none = the rows as they are. Needs text choice rows with one number of options n and prompts
    # per step (generation batch / num_generations) a multiple of n.
    balanced_steps: str = "none"
    # The order GRPO takes its prompts in (training/curriculum.py): none = TRL's shuffle; easy-first = before
    # training, num_generations completions of each row of a seeded pool (curriculum_pool_factor x the prompts
    # the run consumes; every row for a run sized by epochs) are sampled from the starting model and scored by
    # the accuracy reward (OUTPUT/curriculum.jsonl, resumable); rows with some but not all right come first,
    # more right first, then the rest; rows outside the pool are not used. Needs the accuracy reward and
    # balanced_steps: none (both choose the order).
    curriculum: str = "none"
    curriculum_pool_factor: float = 2.0
    # A backward pass over more tokens than this (a micro-batch, or its largest slice) recomputes the
    # decoder layers' activations instead of keeping them (activation checkpointing): a fraction of the
    # memory for some more update time, so short micro-batches keep the fast path. Needs TRL's
    # gradient_checkpointing: false (its GRPOConfig default, true, checkpoints every batch); null = off.
    checkpoint_over_tokens: int | None = None
    # Wall-clock minutes for the whole train command (warm-up and judge probe included): GRPO stops after
    # the first optimizer step that ends past them and saves its final model as usual (at least one step);
    # summary.json says where it stopped. For a fixed budget on machines of unknown speed (the demo);
    # null = max_steps / num_train_epochs alone decide.
    max_train_minutes: float | None = None
    description: str = ""
    trl: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def sections(self) -> RecipeSections:
        """The typed sections (parsed on first use; a recipe from ``recipe_from_dict`` has them checked
        already)."""
        return parse_sections(self)

    @property
    def reward_names(self) -> list[str]:
        return [reward_spec(r)[0] for r in self.rewards]

    @property
    def output_dir(self) -> Path:
        return Path(self.trl.get("output_dir") or DEFAULT_OUTPUT_DIR)

    def to_flat_dict(self) -> dict[str, Any]:
        """The recipe as one flat mapping (what a recipe file holds)."""
        ours = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "trl"}
        return {**ours, **self.trl}


OUR_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Recipe) if f.name != "trl")
# GRPOConfig fields this layer sets itself (from our keys), so a recipe must not set them directly.
MANAGED_TRL_KEYS = {"model_init_kwargs": "use 'dtype', 'attn_implementation' (and 'model')"}
PAPER_GLOBAL_BATCH = 32  # completions per optimizer step in the Embodied-R paper: 4 prompts x 8, on 8 GPUs


def grpo_config_fields() -> list[str]:
    from trl import GRPOConfig

    return sorted(f.name for f in dataclasses.fields(GRPOConfig) if f.init and not f.name.startswith("_"))


# ---------------------------------------------------------------------------------------------------
# Loading: read, split into our keys and TRL's, fill the method's defaults, validate once
# ---------------------------------------------------------------------------------------------------


def load_recipe(path: str | Path | None, overrides: list[str] | None = None,
                num_processes: int | None = None) -> Recipe:
    """Read a recipe file (or none: defaults only) and apply ``--set`` overrides. With ``num_processes``
    the batch geometry is checked first, before anything heavy is imported (a cluster's commonest
    mistake fails in a second)."""
    data = read_recipe_data(path, overrides)
    if num_processes is not None:
        try:
            check_batch_geometry({k: v for k, v in data.items() if k not in OUR_KEYS}, num_processes)
        except RecipeError:
            raise
        except (TypeError, ValueError, ZeroDivisionError):
            pass  # a value of the wrong type or range: recipe_from_dict below says which, in its own words
    return recipe_from_dict(data, "recipe" if path is None else str(path))


def recipe_from_dict(data: dict[str, Any], source: str = "recipe") -> Recipe:
    """Split ``data`` into our keys and GRPOConfig keys; unknown keys raise with the valid list. The
    ``judge`` section is kept resolved (every key), so a dumped recipe shows what the run used."""
    check_known_keys(data, source)
    ours = {k: v for k, v in data.items() if k in OUR_KEYS}
    method = recipe_method(data.get("method"), source)
    if method is not None:  # the method's paper terms and weights, where the recipe names none
        ours.setdefault("rewards", list(method.rewards))
        if "reward_schedule" not in data and "reward_weights" not in data:
            ours["reward_schedule"] = method_schedule(method, ours["rewards"], source)
    recipe = Recipe(**ours, trl={k: v for k, v in data.items() if k not in OUR_KEYS})
    validate(recipe, source)
    recipe.judge = recipe.sections.judge.to_config()
    return recipe


def check_known_keys(data: dict[str, Any], source: str = "recipe") -> None:
    """No key that moved into a section, none unknown, none this layer sets itself."""
    moved = [key for key in MOVED_KEYS if key in data]
    if moved:
        raise RecipeError("; ".join(moved_key_message(key, source) for key in moved))
    trl_fields = grpo_config_fields()
    unknown = sorted(k for k in data if k not in OUR_KEYS and k not in trl_fields)
    if unknown:
        raise unknown_keys_error(source, unknown, OUR_KEYS, trl_fields)
    for key, hint in MANAGED_TRL_KEYS.items():
        if key in data:
            raise RecipeError(f"{source}: {key!r} is set by embodied-r; {hint}")


def recipe_method(value: Any, source: str = "recipe") -> Method | None:
    """The method a recipe's ``method`` key names, imported and registered (``methods.load_method``); None for
    none. A value that is not a string, or names no method, is a RecipeError naming the key."""
    from embodied_r.methods import MethodSpecError, load_method

    if value is None:
        return None
    if not isinstance(value, str):
        raise key_error(source, "method", "'method' must be a method's name or a 'module:attr' path to a Method "
                                          f"(e.g. my_pkg.method:METHOD), got {value!r}")
    try:
        return load_method(value)
    except MethodSpecError as exc:
        raise key_error(source, "method", f"method: {exc}") from None


def method_schedule(method: Method, rewards: Any, source: str = "recipe") -> Any:
    """``method``'s ``reward_schedule`` (a copy), the default of a recipe that names the method and no schedule;
    a RecipeError naming both keys when it cannot weight the recipe's rewards (a list of stages names exact
    rewards)."""
    from embodied_r.training.schedule import RewardSchedule, ScheduleError

    schedule = copy.deepcopy(method.reward_schedule)
    try:
        names = [reward_spec(entry)[0] for entry in rewards]
    except (RecipeError, TypeError):
        return schedule  # malformed rewards: validate() says which
    try:
        RewardSchedule.from_config(schedule, names)
    except ScheduleError as exc:
        raise in_section(f"{source}: method {method.name}'s reward_schedule (the default of a recipe that names "
                         f"none) does not fit the rewards {names}: {exc}; set reward_schedule (null: constant "
                         "weights)", "reward_schedule") from None
    return schedule


def validate(recipe: Recipe, source: str = "recipe") -> None:
    """The one pass of checks that need no model or data, in order: each key's value, TRL's values, the
    rewards, every section (:func:`parse_sections`, whose result the recipe keeps), the combinations."""
    check_values({key: getattr(recipe, key) for key in OUR_KEYS}, source)
    check_trl_values(recipe.trl, source)
    check_trl_choices(recipe.trl, source)
    check_rollout_settings(recipe.trl, source)
    check_reward_entries(recipe.rewards, run_settings(recipe), recipe.accuracy_rule, source)
    sections = parse_sections(recipe, source)
    recipe.__dict__["sections"] = sections  # the cached property's value: parsed once, with this source
    check_schedule_or_weights(sections.schedule is not None, sections.rewards.weights is not None, source)
    check_zero_variance_groups(recipe.zero_variance_groups, sections.batch, sections.optimisation,
                               {"balanced_steps": recipe.balanced_steps, "curriculum": recipe.curriculum}, source)
    check_curriculum(recipe.curriculum, recipe.balanced_steps, recipe.reward_names, source)
    check_checkpointing(recipe.checkpoint_over_tokens, sections.optimisation, source)


def parse_sections(recipe: Recipe, source: str = "recipe") -> RecipeSections:
    """The sections as typed settings, each checked (a nested section's unknown keys listed with the valid
    ones)."""
    trl = recipe.trl
    return RecipeSections(
        schedule=reward_schedule(recipe.reward_schedule, recipe.reward_names, source),
        warmup=format_warmup(recipe.format_warmup, source),
        judge=judge_section(recipe.judge, source),
        context=context_section(recipe.context_rule, recipe.max_prompt_tokens, source),
        lora=lora_settings(recipe.lora, source),
        batch=BatchGeometry.from_trl(trl),
        generation=GenerationSettings.from_trl(trl),
        optimisation=OptimisationSettings.from_trl(trl),
        rewards=reward_settings(recipe.reward_names, trl.get("reward_weights"), source),
    )


def run_settings(recipe: Recipe) -> dict[str, Any]:
    """The settings a reward built from options reads (``methods.rewards.RewardFactory``): the recipe's keys,
    the ``judge`` section's as ``judge.KEY`` (defaults filled in; not checked here)."""
    flat = recipe.to_flat_dict()
    section = flat.pop("judge", None)
    written = section if isinstance(section, dict) else {}  # a malformed section is refused by parse_sections
    return {**flat, **{f"judge.{key}": value for key, value in {**JudgeSection().to_config(), **written}.items()}}


def dump_recipe(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.to_flat_dict(), sort_keys=False, allow_unicode=True)


# ---------------------------------------------------------------------------------------------------
# Checks that need the rows or the launcher (run by training/grpo.py before any model loads)
# ---------------------------------------------------------------------------------------------------


def check_prompt_version(recipe: Recipe, rows: list[Any], source: str) -> None:
    """Rows built with another template than the recipe's ``prompt_version`` are refused (a model trained
    on one text and evaluated on another is not the recipe's); rows that do not say are accepted."""
    if recipe.prompt_version is None:
        return
    other = sorted({str(r.meta["prompt_version"]) for r in rows
                    if r.meta.get("prompt_version") not in (None, recipe.prompt_version)})
    if other:
        raise RecipeError(f"{source}: rows were built with prompt version(s) {other}, the recipe asks for "
                          f"{recipe.prompt_version!r}; rebuild them with {rebuild_command(recipe)} or change "
                          "prompt_version")


def rebuild_command(recipe: Recipe) -> str:
    """The command that writes rows of the recipe's ``prompt_version``: its method's ``builds_rows``."""
    from embodied_r.methods import BUILD_PROMPTS, method_for_version

    method = method_for_version(recipe.prompt_version)
    if method.builds_rows != BUILD_PROMPTS:
        return f"`{method.builds_rows}` (it writes prompt version {recipe.prompt_version})"
    named = "" if method is DEFAULT_METHOD else f" --method {recipe.method or method.name}"
    return f"`{BUILD_PROMPTS}{named} --prompt-version {recipe.prompt_version}`"


def launcher_processes() -> int:
    """The world size a launcher (accelerate, torchrun) announces in the environment; 1 without one.
    Read from the environment so that nothing (no process group) is created."""
    import os

    return int(os.environ.get("WORLD_SIZE") or os.environ.get("ACCELERATE_NUM_PROCESSES") or 1)


__all__ = ["DEFAULT_REWARDS", "OUR_KEYS", "PAPER_GLOBAL_BATCH", "LoraSettings", "Recipe", "RecipeError",
           "RecipeSections", "check_batch_geometry", "check_prompt_version", "check_rollout_settings",
           "check_rule_rows", "dump_recipe", "global_batch", "launcher_processes", "load_recipe", "merge_overrides",
           "parse_overrides", "parse_sections", "recipe_from_dict", "reward_spec", "run_settings", "validate"]
