"""The recipe section ``judge``: which model judges logical consistency, how it reads and answers, the rule
the consistency reward applies with it, and the probe it must pass before training.

```yaml
judge:
  model: policy          # policy | name/path | {model: NAME, no_basis: T} | {base_url: URL, model: NAME}
  sees_letters: false    # true: the judge reads option letters in the think (the official rule)
  scoring: null          # option-text | letter | null (the judge's own default)
  rule: judge            # judge | shuffled-options
  probe: {cases: 64, min_agreement: 0.8, max_letter_share: 0.5, seed: 0, conflict: true}
  allow_weak: false      # go on (recorded in judge_probe.json) when the judge fails its probe
```

Every key is optional; ``--set judge.model=NAME`` sets one. These keys were top-level recipe keys before
(``MOVED_KEYS``); a recipe that still has one is refused with the new spelling.

>>> JudgeSection.from_config({"model": "mentioned-last", "probe": {"cases": 32}}).probe["cases"]
32
>>> JudgeSection.from_config({"rule": "shuffle"})
Traceback (most recent call last):
...
ValueError: recipe: judge.rule 'shuffle' does not exist; use one of judge, shuffled-options
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from embodied_r.core.validity import section_keys
from embodied_r.judge.judges import SCORING_RULES
from embodied_r.judge.probe import DEFAULT_CASES, DEFAULT_MAX_LETTER_SHARE, DEFAULT_MIN_AGREEMENT

# judge: a reader (the reference model) picks the option the think leads to, as the paper does;
# shuffled-options: the same reader, asked with the options shuffled and relabelled (ACRE's self-check).
CONSISTENCY_RULES = ("judge", "shuffled-options")

# The top-level recipe keys this section replaced, and where each one lives now.
MOVED_KEYS = {
    "reference_model": "judge.model",
    "judge_sees_letters": "judge.sees_letters",
    "judge_scoring": "judge.scoring",
    "consistency_rule": "judge.rule",
    "judge_probe": "judge.probe",
    "allow_weak_judge": "judge.allow_weak",
}

PROBE_KEYS = {"cases": int, "min_agreement": float, "max_letter_share": float, "seed": int, "conflict": bool}


def check_consistency_rule(rule: Any, source: str = "recipe", key: str = "judge.rule") -> None:
    """A clear error for a consistency rule that does not exist (checked before any model loads).

    >>> check_consistency_rule("shuffled-options")
    >>> check_consistency_rule("shuffle", "consistency reward", "consistency_rule")
    Traceback (most recent call last):
    ...
    ValueError: consistency reward: consistency_rule 'shuffle' does not exist; use one of judge, shuffled-options
    """
    if rule not in CONSISTENCY_RULES:
        known = ", ".join(CONSISTENCY_RULES)
        raise ValueError(f"{source}: {key} {rule!r} does not exist; use one of {known}")


def probe_defaults() -> dict[str, Any]:
    """The probe settings a recipe leaves out."""
    return {"cases": DEFAULT_CASES, "min_agreement": DEFAULT_MIN_AGREEMENT,
            "max_letter_share": DEFAULT_MAX_LETTER_SHARE, "seed": 0, "conflict": True}


def probe_settings(spec: Any, source: str = "recipe") -> dict[str, Any]:
    """The section's ``probe`` mapping (null: the defaults) with defaults filled in, checked (ValueError)."""
    settings = probe_defaults()
    if spec is None:
        return settings
    section_keys(spec, "judge.probe", sorted(PROBE_KEYS), "{cases: 64, min_agreement: 0.8}", source)
    for key, value in spec.items():
        kind = PROBE_KEYS[key]
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{source}: judge.probe.{key} must be true or false, got {value!r}")
            settings[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
            raise ValueError(f"{source}: judge.probe.{key} must be a number, got {value!r}")
        settings[key] = kind(value)
    if settings["cases"] < 16:
        raise ValueError(f"{source}: judge.probe.cases must be at least 16, got {settings['cases']}")
    for key in ("min_agreement", "max_letter_share"):
        if not 0 < settings[key] <= 1:
            raise ValueError(f"{source}: judge.probe.{key} must be in (0, 1], got {settings[key]}")
    return settings


@dataclass(frozen=True)
class JudgeSection:
    """Recipe section ``judge`` (see the module docstring), checked and with its defaults filled in."""

    # consistency judge: policy (a frozen copy of the starting policy) | name/path | {model: NAME, ...} |
    # {base_url, model} for an OpenAI-compatible endpoint | mentioned-last / always-a (reference judges)
    model: Any = "policy"
    # The judge reads option letters in the think (the official rule); default: letters are masked, so only
    # reasoning whose content leads to the answer is paid.
    sees_letters: bool = False
    # How a local judge picks its answer: option-text (each option's text scored after the reasoning,
    # calibrated by the same with an empty reasoning) or letter (the official next-token letter); null = the
    # judge's own default: option-text for a local model, letter for an endpoint (the only rule it has).
    scoring: str | None = None
    # judge (the reference model picks the option the think leads to) or shuffled-options (it re-reads the
    # think with the options shuffled and relabelled, and must pick the same option: ACRE's self-check).
    rule: str = "judge"
    # The probe run before training: {cases, min_agreement, max_letter_share, seed, conflict}; defaults 64
    # cases of each kind (content, letter named, with conflict: true a contradicting letter, target first,
    # paraphrase, no basis) / 0.8 for every kind / 0.5.
    probe: dict[str, Any] = field(default_factory=probe_defaults)
    allow_weak: bool = False  # go on (recorded in judge_probe.json) when the judge fails its probe

    @classmethod
    def from_config(cls, value: Any, source: str = "recipe") -> JudgeSection:
        """The section from a recipe's mapping (null: every default); a ValueError naming the key otherwise."""
        if value is None:
            return cls()
        names = [f.name for f in dataclasses.fields(cls)]
        section_keys(value, "judge", names, "{model: policy, rule: judge}", source)
        for key in ("sees_letters", "allow_weak"):
            if key in value and not isinstance(value[key], bool):
                raise ValueError(f"{source}: judge.{key} must be true or false, got {value[key]!r}")
        scoring = value.get("scoring")
        if scoring is not None and scoring not in SCORING_RULES:
            raise ValueError(f"{source}: judge.scoring must be one of {', '.join(SCORING_RULES)} or null, "
                             f"got {scoring!r}")
        check_consistency_rule(value.get("rule", "judge"), source)
        return cls(**{**value, "probe": probe_settings(value.get("probe"), source)})

    def to_config(self) -> dict[str, Any]:
        """The section as a recipe holds it, every key written out (what resolved_recipe.yaml shows)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def run_settings(self) -> dict[str, Any]:
        """The section as run settings ``judge.KEY`` (what a reward factory names, ``methods.rewards``)."""
        return {f"judge.{key}": value for key, value in self.to_config().items()}


def moved_key_message(key: str, source: str = "recipe") -> str:
    """The error for a recipe that still sets one of the ``MOVED_KEYS``.

    >>> moved_key_message("reference_model")
    'recipe: reference_model moved to judge.model: write judge: {model: ...} (or --set judge.model=...)'
    """
    new = MOVED_KEYS[key]
    field_name = new.split(".", 1)[1]
    return f"{source}: {key} moved to {new}: write judge: {{{field_name}: ...}} (or --set {new}=...)"


__all__ = ["CONSISTENCY_RULES", "MOVED_KEYS", "PROBE_KEYS", "JudgeSection", "check_consistency_rule",
           "moved_key_message", "probe_defaults", "probe_settings"]
