"""Reading a recipe: the YAML file's mapping and the ``--set key=value`` overrides laid over it.

The values are checked afterwards, all at once (``training.recipe.recipe_from_dict``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from embodied_r.training.recipe_keys import RecipeError

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
        value = override_value(item, raw)
        target = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise RecipeError(f"--set {item!r}: {part!r} is not a mapping")
        target[parts[-1]] = value
    return out


def override_value(item: str, raw: str) -> Any:
    """The value of one ``--set KEY=RAW`` (``item``), parsed as YAML with the command line's exceptions."""
    try:
        # YAML 1.1 reads yes/no/on/off as booleans; on a command line they mean the words
        # (save_strategy=no), so only true/false are booleans here.
        if raw.strip().lower() in _YAML11_WORDS:
            return raw.strip()
        if _FLOAT.fullmatch(raw.strip()):
            return float(raw)
        return yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise RecipeError(f"--set {item!r}: value is not valid YAML ({exc})") from exc


def merge_overrides(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it, nested mappings merged key by key (a new dict)."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_overrides(merged[key], value)
        else:
            merged[key] = value
    return merged


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
