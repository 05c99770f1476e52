"""Training recipes: one YAML file of flat keys, checked before anything heavy starts.

A key is either one of ours (``OUR_KEYS``: model, data, rewards, schedule, the consistency judge, LoRA,
evaluation) or a field of TRL's ``GRPOConfig`` under its own name (``output_dir``, ``max_steps``,
``num_generations``, ``learning_rate``, ...), so TRL's documentation applies as is. Anything else is an
error that lists the valid keys. ``--set key=value`` overrides use YAML syntax for the value and dots
for nested keys (``--set lora.r=8``, ``--set judge.model=NAME``).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from embodied_r.core.validity import section_keys
from embodied_r.judge.settings import MOVED_KEYS, JudgeSection, moved_key_message
from embodied_r.methods import DEFAULT_METHOD, Method

if TYPE_CHECKING:  # the sections' types; their modules import this one
    from embodied_r.inference.context_policy import ContextPolicy
    from embodied_r.training.schedule import RewardSchedule
    from embodied_r.training.warmup import WarmupSettings


class RecipeError(ValueError):
    """A recipe that cannot be used; the message says which key and what to do."""


@dataclass(frozen=True)
class LoraSettings:
    """Recipe section ``lora`` (null = full fine-tuning): PEFT LoRA adapters on the policy."""

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
        for name in ("r", "alpha"):
            number = getattr(settings, name)
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise RecipeError(f"{source}: lora.{name} must be a positive integer, got {number!r}")
        if isinstance(settings.dropout, bool) or not isinstance(settings.dropout, (int, float)) \
                or not 0 <= settings.dropout < 1:
            raise RecipeError(f"{source}: lora.dropout must be a number in [0, 1), got {settings.dropout!r}")
        modules = settings.target_modules
        if not (isinstance(modules, str) or (isinstance(modules, list) and modules
                                             and all(isinstance(m, str) for m in modules))):
            raise RecipeError(f"{source}: lora.target_modules must be a name, a list of names or 'all-linear', "
                              f"got {modules!r}")
        if settings.bias not in ("none", "all", "lora_only"):
            raise RecipeError(f"{source}: lora.bias must be none, all or lora_only, got {settings.bias!r}")
        if not isinstance(settings.use_rslora, bool):
            raise RecipeError(f"{source}: lora.use_rslora must be true or false, got {settings.use_rslora!r}")
        return settings

    def peft_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=float(self.dropout),
                          target_modules=self.target_modules, bias=self.bias, use_rslora=self.use_rslora,
                          task_type="CAUSAL_LM")


@dataclass(frozen=True)
class RecipeSections:
    """The recipe's nested sections, parsed and checked once (:func:`parse_sections`); training reads
    these, never the raw mappings."""

    schedule: RewardSchedule | None  # null: constant reward_weights
    warmup: WarmupSettings | None  # null: no format warm-up
    lora: LoraSettings | None  # null: full fine-tuning
    judge: JudgeSection  # the consistency judge and its probe, with defaults filled in
    context: ContextPolicy


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
    # default: the paper terms of the recipe's method, else of the default method (Embodied-R: format, accuracy,
    # consistency).
    rewards: list[Any] = field(default_factory=lambda: list(DEFAULT_METHOD.rewards))
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
        """The nested sections, typed (parsed on first use; a recipe from ``recipe_from_dict`` has them
        checked already)."""
        return parse_sections(self)

    @property
    def reward_names(self) -> list[str]:
        return [reward_spec(r)[0] for r in self.rewards]

    @property
    def output_dir(self) -> Path:
        return Path(self.trl.get("output_dir") or "runs/grpo")

    def to_flat_dict(self) -> dict[str, Any]:
        """The recipe as one flat mapping (what a recipe file holds)."""
        ours = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "trl"}
        return {**ours, **self.trl}


OUR_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Recipe) if f.name != "trl")
# GRPOConfig fields this layer sets itself (from our keys), so a recipe must not set them directly.
MANAGED_TRL_KEYS = {"model_init_kwargs": "use 'dtype', 'attn_implementation' (and 'model')"}
# Attention implementations and the package each needs beyond torch.
ATTENTION_PACKAGES: dict[str, str | None] = {"sdpa": None, "eager": None, "flex_attention": None,
                                             "flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_3"}


def grpo_config_fields() -> list[str]:
    from trl import GRPOConfig

    return sorted(f.name for f in dataclasses.fields(GRPOConfig) if f.init and not f.name.startswith("_"))


def reward_spec(entry: Any) -> tuple[str, dict[str, Any]]:
    """:func:`embodied_r.methods.rewards.reward_spec`, its error a ``RecipeError``."""
    from embodied_r.methods.rewards import RewardSpecError
    from embodied_r.methods.rewards import reward_spec as parse

    try:
        return parse(entry)
    except RewardSpecError as exc:
        raise RecipeError(str(exc)) from None


_YAML11_WORDS = {"yes", "no", "on", "off", "y", "n"}
# YAML 1.1 (PyYAML) reads "1e-6" as a string: a float needs a dot there. On a command line it is a number.
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=1e-6", "lora.r=8"]`` -> ``{"lr": 1e-06, "lora": {"r": 8}}`` (values parsed as YAML).

    >>> parse_overrides(["max_steps=3", "lora.r=8", "rewards=[format, accuracy]"])
    {'max_steps': 3, 'lora': {'r': 8}, 'rewards': ['format', 'accuracy']}
    >>> parse_overrides(["learning_rate=1e-6", "save_strategy=no"])
    {'learning_rate': 1e-06, 'save_strategy': 'no'}
    """
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise RecipeError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        try:
            # YAML 1.1 reads yes/no/on/off as booleans; on a command line they mean the words
            # (save_strategy=no), so only true/false are booleans here.
            if raw.strip().lower() in _YAML11_WORDS:
                value: Any = raw.strip()
            elif _FLOAT.fullmatch(raw.strip()):
                value = float(raw)
            else:
                value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise RecipeError(f"--set {item!r}: value is not valid YAML ({exc})") from exc
        target = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise RecipeError(f"--set {item!r}: {part!r} is not a mapping")
        target[parts[-1]] = value
    return out


def merge_overrides(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it, nested mappings merged key by key (a new dict)."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_overrides(merged[key], value)
        else:
            merged[key] = value
    return merged


def recipe_from_dict(data: dict[str, Any], source: str = "recipe") -> Recipe:
    """Split ``data`` into our keys and GRPOConfig keys; unknown keys raise with the valid list. The
    ``judge`` section is kept resolved (every key), so a dumped recipe shows what the run used."""
    moved = [key for key in MOVED_KEYS if key in data]
    if moved:
        raise RecipeError("; ".join(moved_key_message(key, source) for key in moved))
    trl_fields = set(grpo_config_fields())
    unknown = sorted(k for k in data if k not in OUR_KEYS and k not in trl_fields)
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, list(OUR_KEYS) + sorted(trl_fields), n=3)
            hints.append(f"{key!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise RecipeError(
            f"{source}: unknown key(s) {', '.join(hints)}.\nValid keys are ours: {', '.join(OUR_KEYS)};\n"
            f"and TRL GRPOConfig fields: {', '.join(sorted(trl_fields))}"
        )
    for key, hint in MANAGED_TRL_KEYS.items():
        if key in data:
            raise RecipeError(f"{source}: {key!r} is set by embodied-r; {hint}")
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


def recipe_method(value: Any, source: str = "recipe") -> Method | None:
    """The method a recipe's ``method`` key names, imported and registered (``methods.load_method``); None for
    none. A value that is not a string, or names no method, is a RecipeError naming the key."""
    from embodied_r.methods import MethodSpecError, load_method

    if value is None:
        return None
    if not isinstance(value, str):
        raise RecipeError(f"{source}: 'method' must be a method's name or a 'module:attr' path to a Method "
                          f"(e.g. my_pkg.method:METHOD), got {value!r}")
    try:
        return load_method(value)
    except MethodSpecError as exc:
        raise RecipeError(f"{source}: method: {exc}") from None


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
        raise RecipeError(f"{source}: method {method.name}'s reward_schedule (the default of a recipe that names "
                          f"none) does not fit the rewards {names}: {exc}; set reward_schedule (null: constant "
                          "weights)") from None
    return schedule


def run_settings(recipe: Recipe) -> dict[str, Any]:
    """The settings a reward built from options reads (``methods.rewards.RewardFactory``): the recipe's keys,
    the ``judge`` section's as ``judge.KEY`` (defaults filled in; not checked here)."""
    flat = recipe.to_flat_dict()
    section = flat.pop("judge", None)
    written = section if isinstance(section, dict) else {}  # a malformed section is refused by parse_sections
    return {**flat, **{f"judge.{key}": value for key, value in {**JudgeSection().to_config(), **written}.items()}}


def parse_sections(recipe: Recipe, source: str = "recipe") -> RecipeSections:
    """The nested sections as typed settings, each checked (unknown keys listed with the valid ones)."""
    from embodied_r.training.schedule import RewardSchedule, ScheduleError
    from embodied_r.training.warmup import WarmupError, WarmupSettings

    try:
        schedule = RewardSchedule.from_config(recipe.reward_schedule, recipe.reward_names)
    except ScheduleError as exc:
        raise RecipeError(f"{source}: {exc}") from exc
    try:
        warmup = WarmupSettings.from_config(recipe.format_warmup, source)
    except (WarmupError, TypeError) as exc:
        raise RecipeError(str(exc)) from exc
    try:
        judge = JudgeSection.from_config(recipe.judge, source)
    except (ValueError, TypeError) as exc:
        raise RecipeError(str(exc)) from exc
    try:
        context = context_policy(recipe)
    except ValueError as exc:
        raise RecipeError(f"{source}: {exc} (keys context_rule, max_prompt_tokens)") from exc
    return RecipeSections(schedule=schedule, warmup=warmup, lora=LoraSettings.from_config(recipe.lora, source),
                          judge=judge, context=context)


def validate(recipe: Recipe, source: str = "recipe") -> None:
    """Checks that need no model or data: names, types, combinations, and every section
    (:func:`parse_sections`, whose result the recipe keeps)."""
    from embodied_r.methods.rewards import reward_table

    if not recipe.train_data:
        raise RecipeError(f"{source}: 'train_data' is required (a PromptRow .jsonl file, or toy:N)")
    if not recipe.rewards:
        raise RecipeError(f"{source}: 'rewards' is empty; list at least one of {sorted(reward_table())} or a "
                          "module:function path")
    names = recipe.reward_names
    check_rewards(recipe, source)
    if len(set(names)) != len(names):
        raise RecipeError(f"{source}: a reward is listed twice in {names}")
    sections = parse_sections(recipe, source)
    recipe.__dict__["sections"] = sections  # the cached property's value: parsed once, with this source
    if sections.schedule is not None and recipe.trl.get("reward_weights") is not None:
        raise RecipeError(f"{source}: set either reward_weights (static) or reward_schedule, not both")
    check_trl_values(recipe.trl, source)
    check_trl_choices(recipe.trl, source)
    check_rollout_settings(recipe.trl, source)
    if not isinstance(recipe.completion_prefix, str):
        raise RecipeError(
            f"{source}: 'completion_prefix' must be a string (quote it in YAML: completion_prefix: \"<think>\"), "
            f"got {recipe.completion_prefix!r}"
        )
    from embodied_r.training import path_choice

    for key in path_choice.KEYS:
        problem = path_choice.setting_problem(key, getattr(recipe, key))
        if problem is not None:
            raise RecipeError(f"{source}: {problem}")
    check_accuracy_rules(recipe, source)
    if any(reward_spec(e)[0] == "consistency" and "consistency_rule" in reward_spec(e)[1] for e in recipe.rewards):
        # One place for the rule, so the training rows are checked against the rule that is used.
        raise RecipeError(f"{source}: set the rule in the recipe section (judge: {{rule: ...}}), not as an option "
                          "of the consistency reward")
    for key in (
        "eval_every_steps",
        "eval_max_rows",
        "eval_batch_size",
        "eval_max_new_tokens",
        "sample_completions",
    ):
        value = getattr(recipe, key)
        if not isinstance(value, int) or value < 0:
            raise RecipeError(f"{source}: {key!r} must be a non-negative integer, got {value!r}")
    from embodied_r.methods import prompt_versions

    if recipe.prompt_version is not None and recipe.prompt_version not in prompt_versions():
        raise RecipeError(f"{source}: 'prompt_version' must be one of {prompt_versions()} or null, "
                          f"got {recipe.prompt_version!r}")
    check_attention(recipe.attn_implementation, source)
    minutes = recipe.max_train_minutes
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, int | float) or minutes <= 0):
        raise RecipeError(f"{source}: 'max_train_minutes' must be a positive number of minutes or null, "
                          f"got {minutes!r}")
    check_zero_variance_groups(recipe, source)
    from embodied_r.training.option_rotations import MODES as BALANCED_STEPS

    if recipe.balanced_steps not in BALANCED_STEPS:
        raise RecipeError(f"{source}: 'balanced_steps' must be one of {', '.join(BALANCED_STEPS)}; "
                          f"got {recipe.balanced_steps!r}")
    check_curriculum(recipe, source)
    for key in ("max_train_batch_tokens", "checkpoint_over_tokens"):
        budget = getattr(recipe, key)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise RecipeError(f"{source}: {key!r} must be a positive integer or null, got {budget!r}")
    if recipe.checkpoint_over_tokens is not None and recipe.trl.get("gradient_checkpointing", True) is not False:
        raise RecipeError(f"{source}: 'checkpoint_over_tokens' decides which backward passes are checkpointed, "
                          "but gradient_checkpointing (true unless set: TRL's GRPOConfig default) checkpoints "
                          "every one: set gradient_checkpointing: false, or checkpoint_over_tokens: null")


def check_rewards(recipe: Recipe, source: str = "recipe") -> None:
    """Each ``rewards:`` entry names a reward (a ``module:function`` path is imported now), a plain function
    gets no options, and a reward built from options passes its own check with the recipe's settings
    (``methods.rewards.check_reward``), all before any model loads."""
    from embodied_r.methods.rewards import RewardSpecError, check_reward

    for entry in recipe.rewards:
        name, options = reward_spec(entry)
        try:
            check_reward(name, options, run_settings(recipe), source)
        except RewardSpecError as exc:
            raise RecipeError(f"{source}: {exc}") from None
        except ValueError as exc:  # a factory's own check, which names the source itself
            raise RecipeError(str(exc)) from exc


def check_accuracy_rules(recipe: Recipe, source: str = "recipe") -> None:
    """``accuracy_rule``, and a ``{accuracy: {rule: ...}}`` entry's rule, name rules that exist (the
    accuracy reward takes no other option)."""
    from embodied_r.core.scoring import check_accuracy_rule

    rules = [("accuracy_rule", recipe.accuracy_rule)]
    for entry in recipe.rewards:
        name, options = reward_spec(entry)
        if name != "accuracy":
            continue
        unknown = sorted(set(options) - {"rule"})
        if unknown:
            raise RecipeError(f"{source}: the accuracy reward takes no option {unknown}; set accuracy_rule instead")
        if "rule" in options:
            rules.append(("rewards: accuracy rule", options["rule"]))
    for where, rule in rules:
        try:
            check_accuracy_rule(rule, source)
        except ValueError as exc:
            raise RecipeError(f"{exc} ({where})") from None


def check_zero_variance_groups(recipe: Recipe, source: str = "recipe") -> None:
    """``zero_variance_groups`` is one of its treatments; ``drop`` and ``resample`` only where the loss's
    normaliser is in view, and ``resample`` with per-group advantages; ``resample_rounds`` a positive integer."""
    from embodied_r.training.zero_advantage import TREATMENTS, drop_unsupported_reason

    if recipe.zero_variance_groups not in TREATMENTS:
        raise RecipeError(f"{source}: 'zero_variance_groups' must be one of {', '.join(TREATMENTS)}, "
                          f"got {recipe.zero_variance_groups!r}")
    rounds = recipe.resample_rounds
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise RecipeError(f"{source}: 'resample_rounds' must be a positive integer, got {rounds!r}")
    if recipe.zero_variance_groups in ("drop", "resample"):
        steps = recipe.trl.get("steps_per_generation") or recipe.trl.get("gradient_accumulation_steps", 1)
        reason = drop_unsupported_reason(recipe.trl.get("loss_type", "dapo"), int(steps), 1)
        if reason is not None:
            raise RecipeError(f"{source}: zero_variance_groups: {recipe.zero_variance_groups} is not defined for "
                              f"{reason}; use skip")
    if recipe.zero_variance_groups != "resample":
        return
    if recipe.trl.get("scale_rewards", "group") not in ("group", "none", True, False):
        raise RecipeError(f"{source}: zero_variance_groups: resample needs per-group advantages; scale_rewards "
                          f"{recipe.trl.get('scale_rewards')!r} scales them across the batch")
    for key in ("balanced_steps", "curriculum"):
        if getattr(recipe, key) != "none":
            raise RecipeError(f"{source}: zero_variance_groups: resample draws fresh prompts in its own order, which "
                              f"would undo {key} {getattr(recipe, key)}; use drop")


def check_curriculum(recipe: Recipe, source: str = "recipe") -> None:
    """``curriculum`` is one of its modes, its pool factor a positive number, and easy-first has what it
    ranks rows by (the accuracy reward) and the order to itself (``balanced_steps: none``)."""
    if recipe.curriculum not in CURRICULA:
        raise RecipeError(f"{source}: 'curriculum' must be one of {', '.join(CURRICULA)}; got {recipe.curriculum!r}")
    factor = recipe.curriculum_pool_factor
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor > 0:
        raise RecipeError(f"{source}: 'curriculum_pool_factor' must be a positive number, got {factor!r}")
    if recipe.curriculum == "none":
        return
    if recipe.balanced_steps != "none":
        raise RecipeError(f"{source}: curriculum {recipe.curriculum} and balanced_steps {recipe.balanced_steps} "
                          "both choose the order of the prompts; set one of them to none")
    if "accuracy" not in recipe.reward_names:
        raise RecipeError(f"{source}: curriculum {recipe.curriculum} ranks rows by the accuracy reward, which "
                          f"the recipe's rewards {recipe.reward_names} do not include; add accuracy or set "
                          "curriculum: none")


def check_attention(name: str | None, source: str = "recipe") -> None:
    """A known attention implementation whose package is installed, or a RecipeError naming what to do."""
    import importlib.util

    if name is None:
        return
    if name not in ATTENTION_PACKAGES:
        raise RecipeError(f"{source}: attn_implementation {name!r} must be one of {', '.join(ATTENTION_PACKAGES)} "
                          "or null")
    package = ATTENTION_PACKAGES[name]
    if package is not None and importlib.util.find_spec(package) is None:
        raise RecipeError(f"{source}: attn_implementation {name} needs the {package!r} package, which is not "
                          "installed here (on a CUDA machine: pip install flash-attn); or use sdpa")


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


def context_policy(recipe: Recipe) -> Any:
    """The recipe's ContextPolicy (for training prompts and held-out evaluation)."""
    from embodied_r.inference.context_policy import ContextPolicy

    cap = recipe.max_prompt_tokens
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)):
        raise ValueError(f"max_prompt_tokens must be a positive integer or null, got {cap!r}")
    return ContextPolicy(rule=recipe.context_rule, max_prompt_tokens=cap)


# Ranges TRL and torch only enforce deep inside training (or not at all); checked before anything loads.
_POSITIVE = ("learning_rate", "num_train_epochs", "temperature", "per_device_train_batch_size",
             "gradient_accumulation_steps", "max_completion_length", "logging_steps", "save_steps")
_NON_NEGATIVE = ("beta", "top_k", "warmup_steps", "weight_decay", "epsilon", "num_iterations")


def check_trl_values(trl: dict[str, Any], source: str = "recipe") -> None:
    """Types of GRPOConfig values (from the field's type) and the ranges above, each as one clear line."""
    import dataclasses
    import types
    import typing

    from trl import GRPOConfig

    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    for key, value in trl.items():
        field_info = fields.get(key)
        if field_info is None or value is None:
            continue
        kind = field_info.type
        allowed = set(typing.get_args(kind)) if isinstance(kind, types.UnionType) else {kind}
        scalar = allowed & {int, float, bool, str}
        if not scalar or allowed - scalar - {type(None)}:
            continue  # enums, lists and mixed types: TRL's own checks apply
        if not _matches(value, scalar):
            names = " or ".join(sorted(t.__name__ for t in scalar))
            raise RecipeError(f"{source}: {key} must be {names}, got {value!r}")
    for key in _POSITIVE:
        if key in trl and trl[key] is not None and not trl[key] > 0:
            raise RecipeError(f"{source}: {key} must be positive, got {trl[key]!r}")
    for key in _NON_NEGATIVE:
        if key in trl and trl[key] is not None and trl[key] < 0:
            raise RecipeError(f"{source}: {key} must be non-negative, got {trl[key]!r}")
    if trl.get("max_steps") is not None and (trl["max_steps"] == 0 or trl["max_steps"] < -1):
        raise RecipeError(
            f"{source}: max_steps must be positive (or -1 for num_train_epochs), got {trl['max_steps']!r}"
        )
    generations = trl.get("num_generations")
    if generations is not None and generations < 2:
        raise RecipeError(f"{source}: num_generations must be at least 2 (GRPO compares completions of one "
                          f"prompt), got {generations!r}")
    if trl.get("top_p") is not None and not 0 < trl["top_p"] <= 1:
        raise RecipeError(f"{source}: top_p must be in (0, 1], got {trl['top_p']!r}")


def _matches(value: Any, scalar: set[type]) -> bool:
    """Whether a YAML value fits a field typed with these scalar types (an int fits a float field)."""
    if isinstance(value, bool):
        return bool in scalar
    if isinstance(value, int):
        return bool(scalar & {int, float})
    if isinstance(value, float):
        return float in scalar
    return isinstance(value, str) and str in scalar


VLLM_MODES = ("colocate", "server")
# The orders GRPO can take its prompts in (training/curriculum.py imports this module, so they live here).
CURRICULA = ("none", "easy-first")


# String values TRL 1.16 accepts but checks only inside the loss or the reward scaling, i.e. on a
# cluster after the models are loaded and the first rollout is done.
TRL_CHOICES: dict[str, tuple[Any, ...]] = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none", True, False),
    "importance_sampling_level": ("token", "sequence"),
}


def check_trl_choices(trl: dict[str, Any], source: str = "recipe") -> None:
    """Values of TRL's enumerated string keys, each checked against what TRL 1.16 implements."""
    for key, choices in TRL_CHOICES.items():
        if key in trl and trl[key] not in choices:
            raise RecipeError(f"{source}: {key} {trl[key]!r} must be one of {', '.join(map(repr, choices))}")


def check_rollout_settings(trl: dict[str, Any], source: str = "recipe") -> None:
    """Configuration errors of the GPU-only vLLM paths, caught without a GPU (TRL checks them only when
    it starts vLLM, i.e. after the model has been loaded on the cluster)."""
    if not trl.get("use_vllm"):
        return
    mode = trl.get("vllm_mode", "colocate")
    if mode not in VLLM_MODES:
        raise RecipeError(f"{source}: vllm_mode {mode!r} must be one of {VLLM_MODES}")
    if mode == "colocate":
        share = trl.get("vllm_gpu_memory_utilization", 0.3)
        if not isinstance(share, (int, float)) or not 0 < float(share) < 1:
            raise RecipeError(
                f"{source}: vllm_gpu_memory_utilization must be in (0, 1) in colocate mode "
                f"(the rest of the GPU trains), got {share!r}"
            )
        for key in ("vllm_server_base_url", "vllm_server_host"):
            if trl.get(key) not in (None, "0.0.0.0"):
                raise RecipeError(f"{source}: {key} is set but vllm_mode is colocate; set vllm_mode: server")
    tp = trl.get("vllm_tensor_parallel_size", 1)
    if not isinstance(tp, int) or tp < 1:
        raise RecipeError(f"{source}: vllm_tensor_parallel_size must be a positive integer, got {tp!r}")


def check_batch_geometry(trl: dict[str, Any], num_processes: int) -> int:
    """Completions per generation batch with ``num_processes`` processes; it must hold whole groups.

    TRL's ``per_device_train_batch_size`` counts completions, not prompts (TRL 1.16), so the
    same recipe can be valid on 8 GPUs and invalid on one; this says so in those terms.
    """
    per_device = int(trl.get("per_device_train_batch_size", 8))
    steps = int(trl.get("steps_per_generation") or trl.get("gradient_accumulation_steps", 1))
    batch = int(trl.get("generation_batch_size") or per_device * num_processes * steps)
    generations = int(trl.get("num_generations", 8))
    if batch % generations:
        raise RecipeError(
            f"with {num_processes} process(es) a generation batch holds {batch} completions "
            f"(per_device_train_batch_size {per_device} x processes x steps {steps}), which is not a multiple of "
            f"num_generations {generations}; raise per_device_train_batch_size or gradient_accumulation_steps"
        )
    return batch


PAPER_GLOBAL_BATCH = 32  # completions per optimizer step in the Embodied-R paper: 4 prompts x 8, on 8 GPUs


def launcher_processes() -> int:
    """The world size a launcher (accelerate, torchrun) announces in the environment; 1 without one.
    Read from the environment so that nothing (no process group) is created."""
    import os

    return int(os.environ.get("WORLD_SIZE") or os.environ.get("ACCELERATE_NUM_PROCESSES") or 1)


def global_batch(trl: dict[str, Any], num_processes: int) -> dict[str, int]:
    """Completions and prompts per optimizer step with ``num_processes`` processes."""
    per_device = int(trl.get("per_device_train_batch_size", 8))
    completions = per_device * num_processes * int(trl.get("gradient_accumulation_steps", 1))
    return {"processes": num_processes, "completions_per_step": completions,
            "prompts_per_step": completions // int(trl.get("num_generations", 8))}


def check_runtime(recipe: Recipe) -> None:
    """Checks that depend on this machine: vLLM and DeepSpeed need their packages and CUDA."""
    import importlib.util

    import torch

    if recipe.trl.get("use_vllm"):
        if not torch.cuda.is_available():
            raise RecipeError(
                "use_vllm needs a CUDA GPU; on this machine set use_vllm: false (transformers generate)"
            )
        if importlib.util.find_spec("vllm") is None:
            raise RecipeError(
                "use_vllm needs vLLM: pip install 'trl[vllm]' (TRL 1.16 supports vLLM 0.22-0.31)"
            )
    if recipe.trl.get("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise RecipeError(
            "the recipe sets deepspeed but the package is missing: pip install 'embodied-r[deepspeed]'"
        )


def load_recipe(path: str | Path | None, overrides: list[str] | None = None,
                num_processes: int | None = None) -> Recipe:
    """Read a recipe file (or none: defaults only) and apply ``--set`` overrides. With ``num_processes``
    the batch geometry is checked first, before anything heavy is imported (a cluster's commonest
    mistake fails in a second)."""
    data = read_recipe_data(path, overrides)
    if num_processes is not None:
        ours = set(OUR_KEYS)
        try:
            check_batch_geometry({k: v for k, v in data.items() if k not in ours}, num_processes)
        except RecipeError:
            raise
        except (TypeError, ValueError):
            pass  # a value of the wrong type: recipe_from_dict below says which, in its own words
    return recipe_from_dict(data, "recipe" if path is None else str(path))


def read_recipe_data(path: str | Path | None, overrides: list[str] | None = None) -> dict[str, Any]:
    """A recipe file's mapping (or {} for none) with ``--set`` overrides merged in."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise RecipeError(f"{path}: recipe file not found")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise RecipeError(f"{path}: not valid YAML ({exc})") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise RecipeError(f"{path}: a recipe is a mapping of keys to values")
        data = loaded
    return merge_overrides(data, parse_overrides(overrides or []))


def dump_recipe(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.to_flat_dict(), sort_keys=False, allow_unicode=True)


def check_rule_rows(rule: str, reward_names: list[str], rows: list[Any], source: str = "train_data") -> None:
    """``judge.rule: shuffled-options`` needs options to shuffle: a RecipeError, before any model
    loads, when the consistency reward is used and some multiple-choice row has fewer than two options or
    no row is multiple choice."""
    if rule != "shuffled-options" or "consistency" not in reward_names:
        return
    def field(row: Any, key: str) -> Any:
        return row.get(key) if isinstance(row, dict) else getattr(row, key, None)

    choice = [row for row in rows if (field(row, "answer_type") or "choice") == "choice"]
    bare = [str(field(row, "id")) for row in choice if len(field(row, "options") or []) < 2]
    if bare or not choice:
        which = f"{len(bare)} multiple-choice row(s) without options (e.g. {', '.join(bare[:3])})" if bare else \
            "no multiple-choice rows"
        raise RecipeError(
            f"{source}: judge.rule: shuffled-options re-reads each think with the options shuffled, but "
            f"the rows have {which}; give rows with their options, or use judge.rule: judge"
        )
