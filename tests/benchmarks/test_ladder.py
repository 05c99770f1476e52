"""benchmarks/ladder.py: the protocol's rules hold on written evaluation folders (no model is run here):
seeds are pooled only when they differ in nothing but the seed, a task type with too few questions gets
no verdict, a verdict comes from the exact test per seed and a t-interval across seeds, test is evaluated
once per arm's settings, and a split that shares a scene between parts is refused."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ladder() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("ladder", ROOT / "benchmarks" / "ladder.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(i: int, task: str) -> dict:
    text = "Video content:\nFrame 0: Observe: I see a red chair.\nFrame 1: After Rotate left, Observe: a door.\n"
    return {"id": f"q{i}", "task": task, "answer": "A", "answer_type": "choice",
            "options": ["A. Rotate left", "B. Move forward"],
            "prompt": [{"role": "user", "content": text + "Question: Which action?"}], "meta": {}}


def write_eval(folder: Path, scores: dict[str, tuple[str, float]], blind: dict[str, float] | None = None) -> None:
    folder.mkdir(parents=True)
    lines = [json.dumps({"id": i, "task": t, "score": s, "parsed_answer": "A"}) for i, (t, s) in scores.items()]
    (folder / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "metrics.json").write_text(json.dumps({"baselines": {
        "random": {"tasks": {"last_action": {"score": 0.5}, "route_planning": {"score": 0.5}},
                   "overall": {"micro": 0.5}}}}))
    if blind is not None:
        (folder / "baselines").mkdir()
        (folder / "baselines" / "blind.jsonl").write_text("\n".join(
            json.dumps({"id": i, "task": scores[i][0], "score": s}) for i, s in blind.items()) + "\n")


def arm_on_disk(out: Path, arm: str, seeds: list[int], recipe: dict | None = None) -> None:
    (out / "arms" / arm).mkdir(parents=True)
    (out / "arms" / arm / "settings.json").write_text(json.dumps({"recipe": {}, "warmup": "w", "sft": None}))
    for seed in seeds:
        folder = out / "arms" / arm / f"seed{seed}"
        folder.mkdir()
        settings = {"learning_rate": 1e-5, **(recipe or {}), "seed": seed, "output_dir": str(folder)}
        (folder / "recipe.yaml").write_text(yaml.safe_dump(settings))


def ladder_out(tmp_path: Path, per_seed_correct: list[int], n_last: int = 40, n_route: int = 10) -> Path:
    """A ladder OUT: a warm-up that answers every last-action question wrong, and one GRPO evaluation per
    seed that gets ``per_seed_correct[k]`` of them right; a few route-planning questions too."""
    out = tmp_path / "ladder"
    rows = [row(i, "last_action") for i in range(n_last)] + [row(n_last + i, "route_planning") for i in range(n_route)]
    (out / "data").mkdir(parents=True)
    (out / "data" / "dev-eval.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    # Train: the same answer text, "Rotate left", always behind letter B.
    train = [{**row(100 + i, "last_action"), "answer": "B", "options": ["A. Move forward", "B. Rotate left"]}
             for i in range(6)]
    (out / "data" / "prompts").mkdir()
    (out / "data" / "prompts" / "train.jsonl").write_text("\n".join(json.dumps(r) for r in train) + "\n")
    tasks = {r["id"]: r["task"] for r in rows}
    write_eval(out / "evals" / "dev" / "warmup-w", {i: (t, 0.0) for i, t in tasks.items()},
               blind={i: 0.0 for i in tasks})
    for seed, correct in enumerate(per_seed_correct):
        scores = {i: (t, 1.0 if t == "last_action" and int(i[1:]) < correct else 0.0) for i, t in tasks.items()}
        write_eval(out / "evals" / "dev" / f"base-seed{seed}", scores, blind={i: 0.0 for i in tasks})
    arm_on_disk(out, "base", list(range(len(per_seed_correct))))
    return out


def test_seeds_are_the_unit_and_each_seed_has_its_exact_test(ladder: ModuleType, tmp_path: Path) -> None:
    result = ladder.summarise(ladder_out(tmp_path, [20, 15, 3, 25, 18]), "dev")
    last = result["arms"]["base"]["tasks"]["last_action"]
    vs_warmup = last["grpo_vs_warmup"]
    # Seed 2: 3 improved of 40 cannot reach p < 0.05 -> no verdict; the others are better.
    assert vs_warmup["per_seed"][2]["verdict"] == "too few differing answers"
    assert vs_warmup["per_seed"][0]["verdict"] == "better" and vs_warmup["per_seed"][0]["p_value"] < 0.05
    pooled = vs_warmup["across_seeds"]
    assert pooled["n_seeds"] == 5 and pooled["better_by_test_in"] == 4 and pooled["verdict"] == "better"
    assert pooled["mean"] == pytest.approx((20 + 15 + 3 + 25 + 18) / 5 / 40)
    assert last["grpo"] == {0: 0.5, 1: 0.375, 2: 0.075, 3: 0.625, 4: 0.45}
    assert last["grpo_vs_blind"]["across_seeds"]["verdict"] == "better"
    table = ladder.markdown(result)
    assert "better in 4/5" in table and "-> better" in table


def test_the_priors_are_fit_on_train_and_the_answer_prior_sees_the_text(ladder: ModuleType,
                                                                         tmp_path: Path) -> None:
    result = ladder.summarise(ladder_out(tmp_path, [20]), "dev")
    last = result["tasks"]["last_action"]
    # Train answers B every time, which is "Move forward" on dev (wrong); its text, "Rotate left", is A there.
    assert last["prior"] == 0.0 and last["answer_prior"] == 1.0 and last["random"] == 0.5
    line = next(line for line in ladder.markdown(result).splitlines() if line.startswith("| last_action"))
    assert line.startswith("| last_action | 40 | 50.0 | 0.0 | 100.0 |")


def test_a_task_type_with_too_few_questions_gets_no_verdict(ladder: ModuleType, tmp_path: Path) -> None:
    result = ladder.summarise(ladder_out(tmp_path, [20, 15], n_route=10), "dev")
    assert result["tasks"]["route_planning"]["too_few"] and not result["tasks"]["last_action"]["too_few"]
    line = next(line for line in ladder.markdown(result).splitlines() if line.startswith("| route_planning"))
    assert "too few questions" in line and "-> " not in line


def test_seeds_whose_settings_differ_in_more_than_the_seed_are_not_pooled(ladder: ModuleType,
                                                                          tmp_path: Path) -> None:
    out = ladder_out(tmp_path, [20, 15])
    recipe = out / "arms" / "base" / "seed1" / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({**yaml.safe_load(recipe.read_text()), "learning_rate": 3e-5}))
    with pytest.raises(ValueError, match="learning_rate"):
        ladder.summarise(out, "dev")


def test_test_is_evaluated_once_per_arm_setting(ladder: ModuleType, tmp_path: Path) -> None:
    args = ladder.parse_args(["--out", str(tmp_path), "--arm", "final", "--split", "test"])
    ladder.log_test(args, {"recipe": {"learning_rate": 1e-5}, "warmup": "w"})
    ladder.log_test(args, {"recipe": {"learning_rate": 1e-5}, "warmup": "w"})  # more seeds of the same arm
    with pytest.raises(SystemExit, match="evaluated on test with other settings"):
        ladder.log_test(args, {"recipe": {"learning_rate": 3e-5}, "warmup": "w"})


def test_an_arm_s_settings_are_frozen_by_its_first_run(ladder: ModuleType, tmp_path: Path) -> None:
    args = ladder.parse_args(["--out", str(tmp_path), "--arm", "a"])
    ladder.freeze_arm(args, {"recipe": {"learning_rate": 1e-5}, "warmup": "w", "sft": None})
    ladder.freeze_arm(args, {"recipe": {"learning_rate": 1e-5}, "warmup": "w", "sft": None})
    with pytest.raises(SystemExit, match="other settings"):
        ladder.freeze_arm(args, {"recipe": {"learning_rate": 2e-5}, "warmup": "w", "sft": None})


def test_a_split_that_shares_a_scene_is_refused() -> None:
    from embodied_r.evaluation.split import check_scene_disjoint

    record = {"id": "a", "source": "synthetic_world", "task": "t", "video": "v.mp4", "question": "q",
              "options": None, "answer": "1", "meta": {"scene": "s1"}}
    check_scene_disjoint({"train": [record], "dev": [{**record, "meta": {"scene": "s2"}}]})
    with pytest.raises(ValueError, match="synthetic_world:s1 is in more than one part"):
        check_scene_disjoint({"train": [record], "test": [{**record, "id": "b"}]})


def test_bad_arguments_are_refused_before_anything_runs(ladder: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        ladder.parse_args(["--out", str(tmp_path), "--ratios", "0.5,0.5"])
    with pytest.raises(SystemExit):
        ladder.parse_args(["--out", str(tmp_path), "--seeds", "0,x"])
    with pytest.raises(SystemExit):  # a think style the warm-up does not know would fail minutes later
        ladder.parse_args(["--out", str(tmp_path), "--warmup-think", "quoted"])
    assert ladder.parse_args(["--out", str(tmp_path), "--warmup-think", "listed"]).warmup_think == "listed"


def test_eval_tasks_takes_every_question_of_those_types_from_the_split_evaluated(ladder: ModuleType,
                                                                                 tmp_path: Path) -> None:
    prompts = tmp_path / "data" / "prompts"
    prompts.mkdir(parents=True)
    for part in ("dev", "test"):
        rows = [{"id": f"{part}-{i}", "task": task} for i, task in enumerate(["last_action", "object_count"] * 3)]
        (prompts / f"{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ladder.parse_args(["--out", str(tmp_path), "--split", "test", "--eval-tasks", "last_action"])
    assert args.part == "test+last_action"
    path = ladder.eval_rows(args, {})
    ids = [json.loads(line)["id"] for line in path.read_text().splitlines()]
    assert ids == ["test-0", "test-2", "test-4"]
    with pytest.raises(SystemExit, match="no test questions"):
        ladder.eval_rows(ladder.parse_args(["--out", str(tmp_path), "--split", "test", "--eval-tasks",
                                            "route_planning"]), {})


def test_grpo_after_sft_starts_each_seed_from_its_own_sft_model(ladder: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        ladder.parse_args(["--out", str(tmp_path), "--grpo-from-sft"])  # there is no SFT model to start from
    args = ladder.parse_args(["--out", str(tmp_path), "--arm", "after", "--sft", "--grpo-from-sft"])
    settings = ladder.arm_settings(args, tmp_path / "train.jsonl", tmp_path / "warmup")
    assert settings["grpo_from"] == "sft"
    assert settings["recipe"]["model"].endswith("after/sft-seed{seed}/warmup/model")
    ladder.freeze_arm(args, settings)
    plain = ladder.parse_args(["--out", str(tmp_path), "--arm", "after", "--sft"])
    with pytest.raises(SystemExit, match="other settings"):  # the same name from the warm-up is another arm
        ladder.freeze_arm(plain, ladder.arm_settings(plain, tmp_path / "train.jsonl", tmp_path / "warmup"))

    # Its seeds start from different models and still pool; GRPO - SFT compares each seed with its own SFT.
    out = ladder_out(tmp_path / "table", [30, 30])
    settings_path = out / "arms" / "base" / "settings.json"
    settings_path.write_text(json.dumps({**json.loads(settings_path.read_text()), "grpo_from": "sft"}))
    for seed in (0, 1):
        recipe = out / "arms" / "base" / f"seed{seed}" / "recipe.yaml"
        recipe.write_text(yaml.safe_dump({**yaml.safe_load(recipe.read_text()), "model": f"sft-seed{seed}"}))
        tasks = {f"q{i}": ("last_action" if i < 40 else "route_planning") for i in range(50)}
        write_eval(out / "evals" / "dev" / f"base-sft-seed{seed}",
                   {i: (t, 1.0 if t == "last_action" and int(i[1:]) < 10 else 0.0) for i, t in tasks.items()})
    row = ladder.summarise(out, "dev")["arms"]["base"]["tasks"]["last_action"]
    assert row["sft"] == {0: 0.25, 1: 0.25}
    assert row["grpo_vs_sft"]["per_seed"][0]["verdict"] == "better"  # 20 improved, 0 worse of 40
    assert row["grpo_vs_sft"]["across_seeds"]["mean"] == pytest.approx(0.5)
    settings_path.write_text(json.dumps({**json.loads(settings_path.read_text()), "grpo_from": None}))
    with pytest.raises(ValueError, match="model"):  # from the warm-up, seeds must share the starting model
        ladder.summarise(out, "dev")


def test_sft_settings_are_part_of_the_arm_and_no_warm_up_starts_from_the_base_model(
        ladder: ModuleType, tmp_path: Path, tiny_lm_dir: Path) -> None:
    args = ladder.parse_args(["--out", str(tmp_path), "--arm", "rot", "--sft", "--sft-rotations", "--sft-batch", "4",
                              "--sft-steps", "15", "--grpo-from-sft"])
    sft = ladder.arm_settings(args, tmp_path / "train.jsonl", tmp_path / "warmup")["sft"]
    assert sft == {"steps": 15, "batch_size": 4, "learning_rate": 1.0e-4, "rotations": True}
    ladder.freeze_arm(args, ladder.arm_settings(args, tmp_path / "train.jsonl", tmp_path / "warmup"))
    plain = ladder.parse_args(["--out", str(tmp_path), "--arm", "rot", "--sft", "--sft-steps", "15",
                               "--sft-batch", "4", "--grpo-from-sft"])
    with pytest.raises(SystemExit, match="ran SFT with"):  # SFT without rotations is another arm
        ladder.freeze_arm(plain, ladder.arm_settings(plain, tmp_path / "train.jsonl", tmp_path / "warmup"))
    defaults = ladder.parse_args(["--out", str(tmp_path), "--sft", "--prompts", "3", "--steps", "7"])
    assert (defaults.sft_steps, defaults.sft_batch) == (7, 3)  # SFT matches GRPO's rows unless told otherwise
    # No warm-up: nothing is trained, and the base model is what SFT (and the warm-up column) starts from.
    bare = ladder.parse_args(["--out", str(tmp_path), "--warmup-steps", "0", "--model", str(tiny_lm_dir)])
    assert ladder.warm_up(bare, tmp_path / "train.jsonl", None) == tiny_lm_dir


def test_a_second_model_never_shares_the_default_model_s_warm_up(ladder: ModuleType, tmp_path: Path) -> None:
    common = ["--out", str(tmp_path), "--tasks", "last_action", "--warmup-think", "listed", "--warmup-steps", "0"]
    default = ladder.warmup_name(ladder.parse_args(common))
    assert default == "listed-0-last_action"  # the names of the runs already on disk stay valid
    gemma = ladder.warmup_name(ladder.parse_args(common + ["--model", "gemma3-270m"]))
    local = ladder.warmup_name(ladder.parse_args(common + ["--model", "/models/my model"]))
    assert len({default, gemma, local}) == 3 and gemma.endswith("gemma3_270m")
    assert "/" not in local and " " not in local  # a folder name, not a path


def test_detail_and_span_reach_the_perception_and_every_prompts_stage(ladder: ModuleType, tmp_path: Path) -> None:
    args = ladder.parse_args(["--out", str(tmp_path), "--detail", "map", "--span", "any"])
    stages = dict(ladder.data_stages(args, tmp_path / "data"))
    perception = stages["perception"]
    assert perception[perception.index("--detail") + 1] == "map"
    for part in ("train", "dev", "test"):
        argv = stages[f"prompts-{part}"]
        assert argv[argv.index("--span") + 1] == "any"
    # The defaults: words, and no span filter (build-prompts keeps every question).
    plain = dict(ladder.data_stages(ladder.parse_args(["--out", str(tmp_path)]), tmp_path / "data"))
    assert plain["perception"][plain["perception"].index("--detail") + 1] == "words"
    assert all("--span" not in argv for name, argv in plain.items() if name.startswith("prompts-"))
    with pytest.raises(SystemExit):
        ladder.parse_args(["--out", str(tmp_path), "--detail", "pixels"])
    with pytest.raises(SystemExit):
        ladder.parse_args(["--out", str(tmp_path), "--span", "3"])


def data_settings(ladder: ModuleType, argv: list[str]) -> dict:
    args = ladder.parse_args(["--out", "unused", *argv])
    return {k: getattr(args, k) for k in ("scenes", "seconds", "max_frames", "ratios", "data_seed", "prompt_version",
                                          "per_type", "dev_per_type", "detail", "span")}


def test_the_data_stamp_refusal_names_the_data_s_and_the_asked_settings(ladder: ModuleType, tmp_path: Path) -> None:
    made = json.loads(json.dumps(data_settings(ladder, ["--detail", "map", "--span", "any", "--scenes", "40"])))
    ladder.check_data_settings(tmp_path, made, data_settings(ladder, ["--detail", "map", "--span", "any",
                                                                      "--scenes", "40"]))
    with pytest.raises(SystemExit) as refused:
        ladder.check_data_settings(tmp_path, made, data_settings(ladder, []))
    message = str(refused.value)
    assert message.startswith(f"{tmp_path} was made at detail 'map', span 'any' (and scenes 40); this run asks for ")
    assert "detail 'words'" in message and "span none" in message and "scenes 300" in message
    assert message.endswith("choose another --out or the data's settings")
    # Every setting is compared, not only the new ones.
    with pytest.raises(SystemExit, match=r"\(and per type 30\); this run asks for per type 5"):
        ladder.check_data_settings(tmp_path, made, data_settings(ladder, ["--detail", "map", "--span", "any",
                                                                          "--scenes", "40", "--per-type", "5"]))


def test_an_old_stamp_without_detail_or_span_is_the_old_defaults(ladder: ModuleType, tmp_path: Path) -> None:
    old = {k: v for k, v in json.loads(json.dumps(data_settings(ladder, []))).items() if k not in ("detail", "span")}
    ladder.check_data_settings(tmp_path, old, data_settings(ladder, []))  # words, every span: the same data
    with pytest.raises(SystemExit, match="made at detail 'words', span none; this run asks for detail 'relations'"):
        ladder.check_data_settings(tmp_path, old, data_settings(ladder, ["--detail", "relations"]))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "settings.json").write_text(json.dumps(old))
    assert ladder.data_level(tmp_path) == {"detail": "words", "span": None}


def test_the_solver_column_reads_the_eval_metrics_and_shows_a_dash_without_them(ladder: ModuleType,
                                                                                tmp_path: Path) -> None:
    out = ladder_out(tmp_path, [20])
    line = next(line for line in ladder.markdown(ladder.summarise(out, "dev")).splitlines()
                if line.startswith("| last_action"))
    assert line.split(" | ")[6] == "–"  # evaluations made before the solver baseline
    (out / "data" / "settings.json").write_text(json.dumps({"scenes": 300, "detail": "map", "span": "2"}))
    metrics = out / "evals" / "dev" / "base-seed0" / "metrics.json"
    solver = {"status": "ok", "name": "solver", "tasks": {"last_action": {"applicable": 0.75, "ceiling": 1.0},
                                                          "route_planning": {"applicable": 0.0, "ceiling": None}},
              "overall": {"applicable": 0.6, "ceiling": 1.0}}
    metrics.write_text(json.dumps({"baselines": {**json.loads(metrics.read_text())["baselines"], "solver": solver}}))
    result = ladder.summarise(out, "dev")
    assert result["data"] == {"detail": "map", "span": "2"}
    assert result["tasks"]["last_action"]["solver"] == {"applicable": 0.75, "ceiling": 1.0}
    table = ladder.markdown(result)
    assert "### arm base (dev, seeds 0, warm-up w, detail 'map', span '2')" in table
    cells = {line.split(" | ")[0]: line.split(" | ") for line in table.splitlines() if line.startswith("| ")}
    assert cells["| task type"][6] == "solver applicable (ceiling)"
    assert cells["| last_action"][6] == "75.0 (100.0)"
    assert cells["| route_planning"][6] == "0.0 (–)"
    assert cells["| all"][6] == "60.0 (100.0)"
