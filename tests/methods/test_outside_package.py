"""A method and a benchmark loader from the user's own package, named by one dotted path each, from outside the
repository: a small package written into a temporary folder (a Method with its row builder, prompt version,
answer form, scorer and reward, and a question loader) runs ``data check`` (its loader, ``MODULE:FUNCTION:PATH``)
-> ``build-prompts --method`` -> ``train`` (recipe key ``method:``; 2 steps of the tiny model) -> ``eval
--method`` -> ``score --method`` (in this process and in a fresh one with the folder on PYTHONPATH), and bad
paths fail with the path and what failed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from embodied_r.cli.main import main
from embodied_r.methods import all_methods, unregister_method

PACKAGE = "outside_method_pkg"
METHOD_PATH = f"{PACKAGE}.method:METHOD"
FILES = {
    "__init__.py": "",
    # The method: rows built by build-prompts with its own row builder, answers written <<X>> (read by its own
    # scorer only), its own reward, and a schedule of its own (by step) for recipes that name none.
    "method.py": '''
from embodied_r.methods import BUILD_PROMPTS, Method

METHOD = Method(
    name="outside", builds_rows=BUILD_PROMPTS, row_builder="outside_method_pkg.rows:build_rows",
    prompt_versions=("outside_v1",), choice_form="<<{letter}>>", rewards=("format", "accuracy", "brevity"),
    reward_schedule={"unit": "step", "stages": [{"start": 1, "weights": {"format": 1.0, "accuracy": 1.0,
                                                                         "brevity": 0.5}}]},
    own_rewards={"brevity": "outside_method_pkg.rewards:brevity"}, scorer="outside_method_pkg.scoring:score",
)
IMPOSTOR = Method(name="outside", builds_rows=BUILD_PROMPTS, row_builder="outside_method_pkg.rows:build_rows",
                  prompt_versions=("impostor_v1",), choice_form="[{letter}]", rewards=("format",))
NOT_A_METHOD = {"name": "outside"}
''',
    # build-prompts' contract: (questions, perceptions by id, prompt version) -> (rows, ids without a row).
    "rows.py": '''
from embodied_r.core.records import PromptRow


def build_rows(questions, perceptions, prompt_version):
    rows, missing = [], []
    for q in questions:
        if q.answer_type != "choice":  # this method asks choices only
            missing.append(q.id)
            continue
        prompt = [{"role": "user", "content": q.question + " " + " ".join(q.options) + " Answer <<X>>."}]
        rows.append(PromptRow(id=q.id, task=q.task, prompt=prompt, answer=q.answer, options=q.options,
                              meta={"prompt_version": prompt_version}))
    return rows, missing
''',
    # Its scorer reads the first <answer><<X>></answer> and nothing else: a bare letter is wrong here.
    "scoring.py": '''
import re

from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE, Scored


def score(completion, answer, answer_type, options, rule=DEFAULT_ACCURACY_RULE):
    found = re.search(r"<answer><<([A-Z])>></answer>", completion)
    parsed = found.group(1) if found else None
    return Scored(parsed, float(parsed == answer))
''',
    "rewards.py": '''
def brevity(completions, **columns):
    return [1.0 if len(str(c)) < 40 else 0.0 for c in completions]
''',
    # A loader: fn(path) -> (list[QARecord], LoadReport), as every built-in one.
    "loaders.py": '''
import csv

from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.common import LoadReport


def load_mine(path):
    report, records = LoadReport(), []
    with open(path, encoding="utf-8", newline="") as handle:
        for line in csv.DictReader(handle):
            options = [o for o in line["options"].split("|") if o]
            records.append(QARecord(id=line["id"], source="mine", task=line["task"], video="",
                                    question=line["question"], options=options or None,
                                    answer=line["answer"] if options else float(line["answer"]),
                                    answer_type="choice" if options else "number"))
    return records, report


def load_wrong(path):
    return ["not", "records"]


NOT_CALLABLE = 3
''',
}
QUESTIONS = """id,task,question,options,answer
q1,pick,Which cup is red?,A. left|B. right,B
q2,pick,Which cup is blue?,A. left|B. right,A
q3,place,Where is the box?,A. floor|B. shelf,B
q4,place,Where is the pen?,A. floor|B. desk,B
q5,pick,Which cup is green?,A. left|B. right,Z
q6,count,How many cups?,,3
"""


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The package in ``tmp_path/pkgs`` (on sys.path), the working folder ``tmp_path/work`` (outside the
    repository); the method and the package's modules are gone afterwards."""
    import torch

    package = tmp_path / "pkgs" / PACKAGE
    package.mkdir(parents=True)
    for name, text in FILES.items():
        (package / name).write_text(text, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    (work / "questions.csv").write_text(QUESTIONS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.chdir(work)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core machine: one torch thread
    yield work
    torch.set_num_threads(threads)
    unregister_method("outside")
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_method_and_loader_of_your_own_package_run_from_rows_to_scores(outside: Path, tiny_lm_dir: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    # Its loader, by MODULE:FUNCTION:PATH; its records are checked as every loader's (q5's answer is no option).
    assert main(["data", "check", f"{PACKAGE}.loaders:load_mine:questions.csv", "--out", "questions.jsonl"]) == 0
    assert "kept 5, skipped 1" in capsys.readouterr().out
    assert [q["id"] for q in read_jsonl(outside / "questions.jsonl")] == ["q1", "q2", "q3", "q4", "q6"]

    # build-prompts: its row builder writes the rows (no perception needed), with its prompt version.
    assert main(["build-prompts", "--method", METHOD_PATH, "--qa", "questions.jsonl", "--out", "prompts.jsonl"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "wrote 4 prompt row(s) (method outside, outside_v1, text)" in printed
    assert "skipped 1 question(s) that method outside's row builder made no row for: q6" in printed
    rows = read_jsonl(outside / "prompts.jsonl")
    assert [r["id"] for r in rows] == ["q1", "q2", "q3", "q4"]
    assert {r["meta"]["prompt_version"] for r in rows} == {"outside_v1"}
    assert rows[0]["prompt"][0]["content"] == "Which cup is red? A. left B. right Answer <<X>>."

    # train: the recipe names the method by its path and no rewards or schedule, so both are the method's.
    recipe = {"method": METHOD_PATH, "model": str(tiny_lm_dir), "dtype": "float32", "train_data": "prompts.jsonl",
              "output_dir": "run", "max_steps": 2, "num_generations": 2, "per_device_train_batch_size": 4,
              "max_completion_length": 8, "save_steps": 2, "logging_steps": 1, "seed": 0, "report_to": "none",
              "sample_completions": 0}
    (outside / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    assert main(["train", "--recipe", "recipe.yaml"]) == 0
    capsys.readouterr()
    run = outside / "run"
    assert (run / "checkpoint-2").is_dir() and (run / "final" / "model.safetensors").is_file()
    resolved = yaml.safe_load((run / "resolved_recipe.yaml").read_text(encoding="utf-8"))
    assert resolved["method"] == METHOD_PATH and resolved["rewards"] == ["format", "accuracy", "brevity"]
    logs = [r for r in read_jsonl(run / "metrics.jsonl") if "reward_stage" in r]
    assert [r["step"] for r in logs] == [1, 2]
    assert all(r["reward_weight/brevity"] == 0.5 and "rewards/brevity/mean" in r for r in logs)

    # eval: the trained model; the prefilled answer is read by the method's scorer (B right for q1, q3, q4).
    assert main(["eval", "--method", METHOD_PATH, "--data", "prompts.jsonl", "--model", str(run / "final"),
                 "--out", "eval", "--max-new-tokens", "4", "--batch-size", "4", "--dtype", "float32",
                 "--completion-prefix", "<answer><<B>></answer>", "--baselines", "none", "--no-report"]) == 0
    metrics = json.loads((outside / "eval" / "metrics.json").read_text(encoding="utf-8"))
    assert {task: t["score"] for task, t in metrics["tasks"].items()} == {"pick": 0.5, "place": 1.0}
    assert metrics["overall"]["micro"] == 0.75 and "embodied_r" not in metrics["reference"]
    assert {p["id"]: p["parsed_answer"] for p in read_jsonl(outside / "eval" / "predictions.jsonl")} == \
        {"q1": "B", "q2": "B", "q3": "B", "q4": "B"}

    # score: completions produced elsewhere, by the same scorer (a bare letter, right for Embodied-R, is wrong).
    completions = [{"id": "q1", "completion": "<think>.</think><answer><<B>></answer>"},
                   {"id": "q2", "completion": "<think>.</think><answer>A</answer>"},
                   {"id": "q3", "completion": "<answer><<A>></answer>"},
                   {"id": "q4", "completion": "<answer><<B>></answer>"}]
    (outside / "completions.jsonl").write_text("".join(json.dumps(c) + "\n" for c in completions), encoding="utf-8")
    score = ["score", "--data", "prompts.jsonl", "--completions", "completions.jsonl", "--baselines", "none",
             "--no-report"]
    assert main([*score, "--method", METHOD_PATH, "--out", "score"]) == 0
    scored = json.loads((outside / "score" / "metrics.json").read_text(encoding="utf-8"))
    assert {task: t["score"] for task, t in scored["tasks"].items()} == {"pick": 0.5, "place": 0.5}

    # Without the method its rows name a version no method writes: an error, never another method's scorer.
    unregister_method("outside")
    capsys.readouterr()
    assert main([*score, "--out", "score_without"]) == 2
    assert "prompt version 'outside_v1' is written by no known method" in capsys.readouterr().err

    # A fresh interpreter, the package's folder on PYTHONPATH, run from the working folder: the same scores.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(outside.parent / "pkgs"),
                                                                      os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "embodied_r.cli.main", *score, "--method", METHOD_PATH, "--out",
                           "score_fresh"], cwd=outside, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    fresh = json.loads((outside / "score_fresh" / "metrics.json").read_text(encoding="utf-8"))
    assert fresh["tasks"] == scored["tasks"]


@pytest.mark.parametrize(("argv", "said"), [
    (["score", "--method", "no_such_pkg_qq.method:METHOD"],
     "--method no_such_pkg_qq.method:METHOD: module 'no_such_pkg_qq.method' not found"),
    (["score", "--method", f"{PACKAGE}.method:MISSING"],
     f"--method {PACKAGE}.method:MISSING: module '{PACKAGE}.method' has no attribute 'MISSING'"),
    (["score", "--method", f"{PACKAGE}.method:NOT_A_METHOD"],
     f"--method {PACKAGE}.method:NOT_A_METHOD: is a dict, not an embodied_r.methods.Method"),
    (["score", "--method", "no_such_method"], "--method no_such_method: no method has this name"),
    (["eval", "--model", "m", "--out", "o", "--method", f"{PACKAGE}.nope:METHOD"],
     f"module '{PACKAGE}.nope' not found"),
    (["build-prompts", "--qa", "q.jsonl", "--out", "o.jsonl", "--method", "robot_r1"],
     "method robot_r1: its rows are written by `embodied-r synth robot`, not by build-prompts"),
    (["build-prompts", "--qa", "q.jsonl", "--out", "o.jsonl", "--method", METHOD_PATH, "--prompt-version",
      "official-v1"], "--prompt-version 'official-v1': method outside writes outside_v1"),
    (["train", "--recipe", "recipe.yaml", "--method", f"{PACKAGE}.method:NOT_A_METHOD"],
     f"--method {PACKAGE}.method:NOT_A_METHOD: is a dict"),
    (["data", "check", f"{PACKAGE}.loaders:nope:questions.csv"],
     f"data loader {PACKAGE}.loaders:nope: module '{PACKAGE}.loaders' has no attribute 'nope'"),
    (["data", "check", "no_such_pkg_qq.loaders:load:questions.csv"],
     "data loader no_such_pkg_qq.loaders:load: module 'no_such_pkg_qq.loaders' not found"),
    (["data", "check", f"{PACKAGE}.loaders:NOT_CALLABLE:questions.csv"], "is a int, not a function"),
    (["data", "check", f"{PACKAGE}.loaders:load_wrong:questions.csv"],
     "returned list; it must return (list[QARecord], LoadReport)"),
    (["data", "check", f"{PACKAGE}.loaders:load_mine:"], "has no path after"),
])
def test_a_path_that_names_nothing_is_an_error_naming_it(outside: Path, argv: list[str], said: str,
                                                         capsys: pytest.CaptureFixture) -> None:
    (outside / "recipe.yaml").write_text("train_data: toy:4\n", encoding="utf-8")
    base = {"score": ["--data", "x.jsonl", "--out", "o"], "eval": ["--data", "x.jsonl"]}.get(argv[0], [])
    assert main([*argv, *base]) == 2
    assert said in " ".join(capsys.readouterr().err.split())
    assert "outside" not in {m.name for m in all_methods()} or argv[0] == "build-prompts"


@pytest.mark.parametrize(("value", "said"), [
    (3, "recipe.yaml: 'method' must be a method's name or a 'module:attr' path to a Method"),
    (["a"], "'method' must be a method's name"),
    (f"{PACKAGE}.method:IMPOSTOR", f"recipe.yaml: method: {PACKAGE}.method:IMPOSTOR: a different method named "
                                   "'outside' is already registered"),
    ("no_such_pkg_qq:METHOD", "recipe.yaml: method: no_such_pkg_qq:METHOD: module 'no_such_pkg_qq' not found"),
])
def test_a_recipe_method_that_names_nothing_is_an_error_naming_the_key(outside: Path, value: object, said: str,
                                                                       capsys: pytest.CaptureFixture) -> None:
    from embodied_r.methods import load_method

    load_method(METHOD_PATH)  # registered (again: nothing happens), so the impostor's name is taken
    load_method(METHOD_PATH)
    (outside / "recipe.yaml").write_text(yaml.safe_dump({"train_data": "toy:4", "method": value}), encoding="utf-8")
    assert main(["train", "--recipe", "recipe.yaml", "--check"]) == 2
    assert said in " ".join(capsys.readouterr().err.split())


def test_a_recipe_naming_a_method_takes_its_rewards_and_schedule_unless_it_names_its_own(outside: Path) -> None:
    from embodied_r.training.recipe import RecipeError, recipe_from_dict

    named = recipe_from_dict({"train_data": "toy:4", "method": METHOD_PATH})
    assert named.reward_names == ["format", "accuracy", "brevity"]
    assert named.sections.schedule.stages[0].weights == (1.0, 1.0, 0.5)
    own = recipe_from_dict({"train_data": "toy:4", "method": METHOD_PATH, "rewards": ["format"],
                            "reward_schedule": None})
    assert own.reward_names == ["format"] and own.sections.schedule is None
    with pytest.raises(RecipeError, match=r"recipe: method outside's reward_schedule \(the default of a recipe that "
                       r"names none\) does not fit the rewards \['format'\]: .*; set reward_schedule"):
        recipe_from_dict({"train_data": "toy:4", "method": METHOD_PATH, "rewards": ["format"]})
    weighted = recipe_from_dict({"train_data": "toy:4", "method": METHOD_PATH, "reward_weights": [1.0, 1.0, 2.0]})
    assert weighted.reward_schedule is None  # weights of its own: the method's schedule is not added
    # The shipped methods by name: Embodied-R's paper schedule, Robot-R1's constant weights.
    assert recipe_from_dict({"train_data": "toy:4", "method": "embodied_r"}).reward_schedule == "paper"
    robot = recipe_from_dict({"train_data": "toy:4", "method": "robot_r1"})
    assert (robot.reward_names, robot.reward_schedule) == (["format", "accuracy"], None)
    # A recipe without method: keeps its defaults (Embodied-R's terms, constant weights).
    assert recipe_from_dict({"train_data": "toy:4"}).reward_schedule is None


def test_rows_of_another_version_are_refused_naming_the_command_that_builds_the_recipes_rows(outside: Path) -> None:
    """The error names the recipe method's ``builds_rows``: build-prompts with --method, or its own command."""
    from types import SimpleNamespace

    from embodied_r.training.recipe import RecipeError, check_prompt_version, recipe_from_dict

    rows = [SimpleNamespace(meta={"prompt_version": "compact-v1"})]
    cases = [({"prompt_version": "official"}, "rebuild them with `embodied-r build-prompts --prompt-version official`"),
             ({"prompt_version": "robot_r1_mw_v1"},
              "rebuild them with `embodied-r synth robot` (it writes prompt version robot_r1_mw_v1)"),
             ({"method": METHOD_PATH, "prompt_version": "outside_v1"},
              f"rebuild them with `embodied-r build-prompts --method {METHOD_PATH} --prompt-version outside_v1`")]
    for keys, said in cases:
        recipe = recipe_from_dict({"train_data": "toy:4", "rewards": ["format"], "reward_schedule": None, **keys})
        with pytest.raises(RecipeError, match="rebuild") as raised:
            check_prompt_version(recipe, rows, "train_data")
        assert said in str(raised.value)
