"""benchmarks/learning_curve.py: its GRPO recipe is a valid recipe, and its summary reads the evaluations right."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from embodied_r.training.recipe import load_recipe

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "learning_curve.py"


@pytest.fixture(scope="module")
def curve() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("learning_curve", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # doctest keeps the functions whose module (looked up by name in sys.modules) is this one; another test
    # may have imported the script under the same name already (benchmarks/ladder.py imports it).
    previous = sys.modules.get("learning_curve")
    sys.modules["learning_curve"] = module
    yield module
    if previous is None:
        sys.modules.pop("learning_curve", None)
    else:
        sys.modules["learning_curve"] = previous


def arguments(out: Path, **changes: object) -> argparse.Namespace:
    values = {"out": out, "holdout_task": "route", "steps": 4, "eval_every": 2, "arm": "a", "prompts": 2,
              "generations": 4, "learning_rate": 5e-5, "max_new_tokens": 32, "set": [], "dtype": "auto"}
    values.update(changes)
    return argparse.Namespace(**values)


def test_the_grpo_recipe_loads_and_overrides_apply(curve: ModuleType, tmp_path: Path) -> None:
    args = arguments(tmp_path, set=["learning_rate=1e-6", "lora.r=4", "num_generations=2"])
    recipe = curve.grpo_recipe(args, tmp_path / "train.jsonl", tmp_path / "warmup" / "model", tmp_path / "arm")
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    loaded = load_recipe(path)
    assert loaded.trl["learning_rate"] == 1e-6 and loaded.trl["num_generations"] == 2
    assert loaded.lora == {"r": 4}
    assert loaded.format_warmup is None and loaded.reward_names == ["format", "accuracy"]
    assert loaded.model == str(tmp_path / "warmup" / "model")  # every arm starts from the one warm-up
    assert loaded.trl["save_steps"] == 2 and loaded.trl["max_steps"] == 4  # a checkpoint per evaluation


def test_the_dtype_reaches_the_grpo_recipe_and_one_out_keeps_one(curve: ModuleType, tmp_path: Path) -> None:
    args = arguments(tmp_path, dtype="float32")
    recipe = curve.grpo_recipe(args, tmp_path / "t.jsonl", tmp_path / "m", tmp_path / "a")
    assert recipe["dtype"] == "float32"
    progress = curve.Progress(tmp_path)
    curve.check_dtype(tmp_path, "float32", progress)
    curve.check_dtype(tmp_path, "float32", progress)  # the same precision again: resumes
    with pytest.raises(SystemExit, match="trained with --dtype float32, not auto"):
        curve.check_dtype(tmp_path, "auto", progress)
    # An OUT from before the option, whose warm-up has run, was trained with auto.
    older = tmp_path / "older"
    older.mkdir()
    (older / "state.json").write_text(json.dumps({curve.WARMUP: {"seconds": 1.0}}))
    with pytest.raises(SystemExit, match="--dtype auto, not float32"):
        curve.check_dtype(older, "float32", curve.Progress(older))


def test_an_unknown_dtype_is_refused_before_anything_runs(curve: ModuleType, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["learning_curve.py", "--out", str(tmp_path / "out"), "--dtype", "fp8"])
    with pytest.raises(SystemExit):
        curve.main()
    assert "invalid choice: 'fp8'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before the data stages


def write_eval(folder: Path, scores: dict[str, tuple[str, float]], baselines: dict | None = None) -> None:
    folder.mkdir(parents=True)
    rows = [{"id": i, "task": task, "score": score, "parsed_answer": "A"} for i, (task, score) in scores.items()]
    # A duplicated id (a file written by an older run) counts once.
    (folder / "predictions.jsonl").write_text("\n".join(json.dumps(r) for r in [*rows, rows[0]]) + "\n")
    (folder / "metrics.json").write_text(json.dumps({"baselines": baselines or {}}))


def test_summary_separates_the_held_out_task_and_pairs_with_the_warm_up(curve: ModuleType, tmp_path: Path) -> None:
    ids = {f"q{i}": ("count" if i < 20 else "route") for i in range(30)}
    warm = {i: (task, 0.0) for i, task in ids.items()}
    better = {i: (task, 1.0 if task == "count" else 0.0) for i, task in ids.items()}  # learned only seen tasks
    evals = tmp_path / "evals"
    baselines = {"random": {"tasks": {"count": {"n": 20, "score": 0.25}, "route": {"n": 10, "score": 0.5}}}}
    write_eval(evals / "warmup", warm, baselines)
    write_eval(evals / "grpo-a-step0002", warm)
    write_eval(evals / "grpo-a-step0004", better)
    write_eval(evals / "sft", {i: (task, 1.0 if task == "route" else 0.0) for i, task in ids.items()})
    (tmp_path / "sft" / "warmup" / "model").mkdir(parents=True)
    (tmp_path / "sft" / "warmup" / "model" / "warmup.json").write_text(json.dumps({"settings": {"steps": 4}}))
    (tmp_path / "grpo-a").mkdir()
    (tmp_path / "grpo-a" / "recipe.yaml").write_text(yaml.safe_dump({"learning_rate": 5e-5, "seed": 1}))
    (tmp_path / "state.json").write_text("{}")
    prompts = tmp_path / "data" / "prompts"
    prompts.mkdir(parents=True)
    # One last-action row whose text names the answer, and one that was not evaluated (not counted).
    two_frames = "Frame 0: Observe: a bed.\nFrame 1: After Rotate left, Observe: x"
    stated = {"task": "last_action", "answer": "B", "options": ["A. Move forward", "B. Rotate left"],
              "prompt": [{"role": "user", "content": two_frames}]}
    rows = [{"id": i, "task": task, "prompt": [{"role": "user", "content": "Frame 0: Observe: a bed."}]}
            for i, task in ids.items() if i != "q0"]
    rows += [{**stated, "id": "q0"}, {**stated, "id": "unevaluated"}]
    (prompts / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    result = curve.summarise(arguments(tmp_path))

    assert result["held_out_questions"] == 30
    assert result["dtype"] == "auto" and result["grpo_settings"]["a"]["seed"] == 1  # what tells two arms apart
    steps = result["grpo"]["a"]
    assert [r["step"] for r in steps] == [2, 4]
    final = steps[-1]
    assert final["trained_tasks"]["n"] == 20 and final["holdout_task"]["n"] == 10
    assert final["trained_tasks"]["score"] == 1.0 and final["holdout_task"]["score"] == 0.0
    assert final["trained_tasks"]["vs_warmup"]["verdict"] == "better"
    assert final["holdout_task"]["vs_warmup"]["verdict"] == "too few differing answers"  # no answer changed
    assert steps[0]["trained_tasks"]["vs_warmup"]["difference"] == 0.0
    assert result["sft"]["holdout_task"]["vs_warmup"]["verdict"] == "better" and result["sft"]["step"] == 4
    assert result["baselines"]["random"] == {"trained_tasks": 0.25, "holdout_task": 0.5,
                                             "tasks": {"count": 0.25, "route": 0.5}}
    assert result["last_action_in_text"] == {"questions": 1, "stated": 1}
    # q0 answered A ("Move forward") where the latest frame says "Rotate left"; no think in the warm-up words.
    assert final["reading"] == {"questions": 1, "letter_is_latest_action": 0, "think_choices": 0,
                                "think_choice_is_latest_action": 0, "think_choice_is_letter": 0,
                                "think_choice_not_an_option": 0}
    curve.print_summary(result)
    curve.plot(result, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def test_eval_tasks_must_be_trained_on_or_held_out(curve: ModuleType, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture) -> None:
    # The summary has only two parts (trained on, held out): a third kind of task would be miscounted.
    monkeypatch.setattr("sys.argv", ["learning_curve.py", "--out", str(tmp_path / "out"), "--tasks", "last_action",
                                     "--eval-tasks", "last_action,object_counting"])
    with pytest.raises(SystemExit) as info:
        curve.main()
    assert info.value.code == 2 and "['object_counting'] are neither trained on" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_last_action_in_text_reads_only_the_latest_frame(curve: ModuleType) -> None:
    text = "Frame 0: Observe: a bed.\nFrame 1: After Rotate left, Observe: x\nFrame 2: After Move forward, Observe: y"
    row = {"task": "last_action", "answer": "A", "options": ["A. Move forward", "B. Rotate left"],
           "prompt": [{"role": "system", "content": "Frame 9: After Rotate left, Observe: z"},
                      {"role": "user", "content": text}]}
    # An earlier frame's action is not the answer, nor is the system message's.
    assert curve.last_action_in_text([row, {**row, "answer": "B"}]) == {"questions": 2, "stated": 1}


def test_docstring_examples(curve: ModuleType) -> None:
    import doctest

    result = doctest.testmod(curve)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("think", ["option-first", "latest-frame"])
def test_reading_parses_the_warm_up_s_own_choice_words(curve: ModuleType, think: str) -> None:
    # The counts read completions in the warm-up's template: built here by the warm-up itself, so a change
    # of its wording that the parser does not follow fails this test instead of counting nothing.
    from embodied_r.core.records import PromptRow
    from embodied_r.training.warmup import choice_parts

    text = "Frame 0: Observe: a bed.\nFrame 1: After Rotate left, Observe: a door."
    row = PromptRow(id="q", task="last_action", prompt=[{"role": "user", "content": text}], answer="B",
                    options=["A. Move forward", "B. Rotate left", "C. Rotate right"])
    rows = {"q": row.to_dict(), "p": {**row.to_dict(), "id": "p"}}

    def said(letter: str, answered: str) -> dict[str, str]:
        return {"id": "q", "parsed_answer": answered, "completion": "".join(choice_parts(row, letter, think))}

    consistent_reader = said("B", "B")
    assert curve.reading([consistent_reader], rows) == {
        "questions": 1, "letter_is_latest_action": 1, "think_choices": 1, "think_choice_is_latest_action": 1,
        "think_choice_is_letter": 1, "think_choice_not_an_option": 0}
    # The think chooses A, the answer says C; a think that names no option at all; a non-last-action row.
    off = said("A", "C")
    elsewhere = {**said("B", "B"), "completion": "<think> I choose Turn around, which is option B. </think>"}
    other_task = {**said("B", "B"), "id": "p"}
    rows["p"]["task"] = "object_count"
    counts = curve.reading([off, elsewhere, other_task], rows)
    assert counts == {"questions": 2, "letter_is_latest_action": 1, "think_choices": 2,
                      "think_choice_is_latest_action": 0, "think_choice_is_letter": 0, "think_choice_not_an_option": 1}
