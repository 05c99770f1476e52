"""The shared-prefix fast paths prove themselves on a run's first step (training/path_choice.py,
training/fast_paths.py): a broken fast path fails its check and the run falls back with the reason
recorded; ``auto`` keeps the path the timer says is faster; ``true`` / ``false`` force; the record holds
the choice, both timings and the check; bad values are refused."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from embodied_r.training import path_choice, prefix_generation, shared_prefix
from embodied_r.training.grpo import build_trainer, train
from embodied_r.training.path_choice import PER_ROW, SHARED
from embodied_r.training.recipe import RecipeError, load_recipe


class Calls:
    """Wraps a module function, counting its calls; ``change`` may alter what it returns."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, name: str, change: Any = None) -> None:
        self.count = 0
        original = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            out = original(*args, **kwargs)
            return change(out) if change is not None else out

        monkeypatch.setattr(module, name, wrapper)


def off_by_half(out: tuple[torch.Tensor, Any]) -> tuple[torch.Tensor, Any]:
    """A broken update path: one scored log-probability 0.5 nat off."""
    logps, entropies = out
    first = (logps != 0).nonzero()[0]
    broken = logps.clone()
    broken[first[0], first[1]] += 0.5
    return broken, entropies


def one_token_off(out: list[list[int]]) -> list[list[int]]:
    """A broken sampling path: the first row's first token replaced."""
    return [[(out[0][0] + 1) % 50 + 5, *out[0][1:]], *out[1:]]


def stub_timer(shared_s: float, per_row_s: float) -> Any:
    def measure(paths: dict[str, Any], first: dict[str, float], **_: Any) -> dict[str, float]:
        assert set(paths) == {SHARED, PER_ROW}
        return {SHARED: shared_s, PER_ROW: per_row_s}

    return measure


def read_record(recipe: Any) -> dict[str, Any]:
    record = json.loads((recipe.output_dir / "fast_paths.json").read_text(encoding="utf-8"))
    summary = json.loads((recipe.output_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["fast_paths"] == record
    return record


def run(tiny_recipe: Any, reward: str, **settings: Any) -> dict[str, Any]:
    recipe = load_recipe(tiny_recipe(rewards=[reward], max_steps=2, save_steps=100, **settings))
    summary = train(recipe)
    assert summary["global_step"] == 2
    return read_record(recipe)


@pytest.mark.parametrize("setting", [True, "auto"])
def test_a_broken_update_fails_its_check_and_the_run_falls_back(tiny_recipe, varying_reward, monkeypatch, caplog,
                                                                setting) -> None:
    packed = Calls(monkeypatch, shared_prefix, "shared_prefix_logps", change=off_by_half)
    caplog.set_level(logging.INFO, logger="embodied_r.training.fast_paths")
    record = run(tiny_recipe, varying_reward, shared_prefix_update=setting, shared_prefix_generation=False)
    update = record["update"]
    assert update["path"] == PER_ROW and update["step"] == 1
    assert update["check"]["passed"] is False and 0.49 < update["check"]["max_abs_difference"] < 0.51
    assert update["check"]["tolerance"] == {"atol": 1e-4, "rtol": 1e-4, "precision": "float32"}
    assert "self-check failed" in update["reason"] and update["timings_s"] is None
    assert packed.count == 1  # the check's call; every pass after it is TRL's
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "self-check failed" in r.getMessage()]
    assert len(warnings) == 1
    assert record["generation"] == {**record["generation"], "setting": "false", "path": PER_ROW, "check": None}


def test_a_broken_sampling_path_fails_its_check_and_the_run_falls_back(tiny_recipe, varying_reward,
                                                                       monkeypatch) -> None:
    sampled = Calls(monkeypatch, prefix_generation, "generate_sharing_prompts", change=one_token_off)
    record = run(tiny_recipe, varying_reward, shared_prefix_generation=True, shared_prefix_update=False)
    generation = record["generation"]
    assert generation["path"] == PER_ROW and "self-check failed" in generation["reason"]
    assert generation["check"]["passed"] is False
    assert generation["check"]["first_mismatch"] == {"row": 0, "position": 0}
    assert sampled.count == 1  # the check's greedy call; both steps sampled through TRL's path
    assert record["update"]["path"] == PER_ROW and record["update"]["setting"] == "false"


@pytest.mark.parametrize(("shared_s", "per_row_s", "expected"), [(2.0, 1.0, PER_ROW), (1.0, 2.0, SHARED)])
def test_auto_keeps_the_path_the_timer_says_is_faster(tiny_recipe, varying_reward, monkeypatch, shared_s, per_row_s,
                                                      expected) -> None:
    monkeypatch.setattr(path_choice, "measure", stub_timer(shared_s, per_row_s))
    packed = Calls(monkeypatch, shared_prefix, "shared_prefix_logps")
    sampled = Calls(monkeypatch, prefix_generation, "generate_sharing_prompts")
    record = run(tiny_recipe, varying_reward)  # the defaults: auto, auto
    for name in ("update", "generation"):
        entry = record[name]
        assert entry["setting"] == "auto" and entry["path"] == expected, entry
        assert entry["timings_s"] == {SHARED: shared_s, PER_ROW: per_row_s}
        assert entry["check"]["passed"] is True and entry["step"] == 1 and entry["cost_s"] >= 0
        assert "auto: faster on the first group" in entry["reason"]
    # The check's call alone when TRL's path won; every pass and both steps' sampling when the shared one did.
    assert (packed.count == 1) == (expected == PER_ROW) and (sampled.count == 1) == (expected == PER_ROW)
    assert packed.count >= 1 and sampled.count >= 1


@pytest.mark.parametrize("setting", [True, False])
def test_true_and_false_force_the_path(tiny_recipe, varying_reward, monkeypatch, setting) -> None:
    timed: list[Any] = []
    monkeypatch.setattr(path_choice, "measure", lambda *a, **k: timed.append(a) or {SHARED: 9.0, PER_ROW: 1.0})
    packed = Calls(monkeypatch, shared_prefix, "shared_prefix_logps")
    sampled = Calls(monkeypatch, prefix_generation, "generate_sharing_prompts")
    record = run(tiny_recipe, varying_reward, shared_prefix_update=setting, shared_prefix_generation=setting)
    assert timed == []  # only auto times the paths
    for name in ("update", "generation"):
        entry = record[name]
        assert entry["setting"] == ("true" if setting else "false") and entry["timings_s"] is None
        assert entry["timing_noise"] is None
        assert entry["path"] == (SHARED if setting else PER_ROW)
        assert (entry["check"]["passed"] is True) if setting else (entry["check"] is None)
    # true: the check and then every pass / both steps' sampling; false: the shared paths never run.
    assert (packed.count > 1 and sampled.count == 3) if setting else (packed.count == sampled.count == 0)


def test_the_default_records_the_check_and_both_timings(tiny_recipe, varying_reward, caplog) -> None:
    caplog.set_level(logging.INFO, logger="embodied_r.training.fast_paths")
    record = run(tiny_recipe, varying_reward, beta=0.04)  # the reference pass decides the update
    for name in ("update", "generation"):
        entry = record[name]
        assert entry["setting"] == "auto" and entry["check"]["passed"] is True, entry
        assert entry["path"] in (SHARED, PER_ROW) and entry["step"] == 1
        assert set(entry["timings_s"]) == {SHARED, PER_ROW} and all(v > 0 for v in entry["timings_s"].values())
        assert entry["timing_noise"] == pytest.approx(path_choice.CLEAR_RATIO - 1)
        faster = min(entry["timings_s"], key=entry["timings_s"].get)
        assert entry["path"] == faster
    assert record["update"]["check"]["tokens"] > 0 and record["update"]["check"]["rows"] == 2
    assert record["generation"]["check"]["rows"] == 2  # the first group: its prompt, G = 2 rows
    lines = [r.getMessage() for r in caplog.records if r.name == "embodied_r.training.fast_paths"]
    assert len(lines) == 2 and all("auto: faster on the first group (shared-prefix" in line for line in lines)


def test_a_larger_group_is_checked_and_timed_on_two_of_its_rows(tiny_recipe, varying_reward) -> None:
    # The per-row paths' cost grows with the rows; two rows share a prefix, so they exercise the packing.
    record = run(tiny_recipe, varying_reward, beta=0.04, num_generations=4)
    for name in ("update", "generation"):
        check = record[name]["check"]
        assert check["passed"] is True and check["rows"] == path_choice.CHECK_ROWS == 2, check
        assert check["group_rows"] == 4 and set(record[name]["timings_s"]) == {SHARED, PER_ROW}


@pytest.mark.parametrize("value", ["yes", 1, "True", None])
def test_other_values_are_refused_naming_the_key_and_the_allowed_values(tiny_recipe, value) -> None:
    for key in ("shared_prefix_update", "shared_prefix_generation"):
        with pytest.raises(RecipeError, match=rf"'{key}' must be one of auto, true, false; got {value!r}"):
            load_recipe(tiny_recipe(**{key: value}))
    assert load_recipe(tiny_recipe()).shared_prefix_update == "auto"


def test_a_model_that_cannot_pack_takes_the_per_row_path_recorded(tiny_recipe, varying_reward, monkeypatch) -> None:
    monkeypatch.setattr(shared_prefix, "SUPPORTED_MODEL_TYPES", ())
    packed = Calls(monkeypatch, shared_prefix, "shared_prefix_logps")
    record = run(tiny_recipe, varying_reward, shared_prefix_generation=False)
    assert record["update"]["path"] == PER_ROW and record["update"]["check"] is None
    assert "no batch so far could take the shared-prefix path" in record["update"]["reason"]
    assert "model type 'llama'" in record["update"]["reason"] and packed.count == 0


def test_a_resumed_run_keeps_the_first_start_s_choice(tiny_recipe, tmp_path: Path) -> None:
    trainer, _ = build_trainer(load_recipe(tiny_recipe()))
    earlier = tmp_path / "fast_paths.json"
    earlier.write_text(json.dumps({
        "update": {"setting": "auto", "path": PER_ROW, "reason": "auto: faster", "timings_s": {SHARED: 2, PER_ROW: 1}},
        "generation": {"setting": "auto", "path": SHARED, "reason": "auto: faster", "timings_s": None},
    }), encoding="utf-8")
    trainer.keep_fast_paths(earlier)
    assert trainer._chosen_path("update") == PER_ROW  # kept without a check
    assert trainer.fast_paths["update"]["kept_from_earlier_start"] is True
    # A kept shared-prefix path is decided again as under true: checked, not timed.
    assert trainer._chosen_path("generation") is None and trainer._effective_setting("generation") == "true"


def test_train_check_paths_prints_the_result_and_trains_nothing(tiny_recipe, capsys) -> None:
    from embodied_r.cli.main import main

    path = tiny_recipe(rewards=["format"])
    assert main(["train", "--recipe", str(path), "--check-paths"]) == 0
    out = capsys.readouterr().out
    assert "fast paths on the first batch" in out and "shared_prefix_update" in out and "passed" in out
    run_dir = load_recipe(path).output_dir
    assert not (run_dir / "fast_paths.json").exists() and not (run_dir / "final").exists()
    assert not list(run_dir.glob("checkpoint-*"))


@pytest.mark.parametrize(("per_row_s", "more_rounds"), [(1.2, 0), (1.1, 2)])
def test_more_timing_rounds_run_only_within_the_noise(per_row_s, more_rounds) -> None:
    # A gap of 15 % or more on the check's own calls decides; a smaller one is timed again, three rounds at most.
    calls: list[str] = []
    estimates = {SHARED: lambda: calls.append(SHARED) or 1.0, PER_ROW: lambda: calls.append(PER_ROW) or per_row_s}
    medians = path_choice.measure(estimates, first={SHARED: 1.0, PER_ROW: per_row_s})
    assert len(calls) == 2 * more_rounds and medians == {SHARED: 1.0, PER_ROW: per_row_s}
