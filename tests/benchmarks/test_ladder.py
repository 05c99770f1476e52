"""benchmarks/ladder.py: the protocol's rules hold on written evaluation folders (no model is run here):
seeds are pooled only when they differ in nothing but the seed, a task type with too few questions gets
no verdict, a verdict comes from the exact test per seed and a t-interval across seeds, test is evaluated
once per arm's settings, and a split that shares a scene between parts is refused. The random-reward control
and GRPO alone train beside an arm's GRPO at its recipe, get their own table and comparisons, can be added to
an arm that ran without them, and the record for the docs holds the table's numbers. With --ood, an OOD world
is made once at the ID data's settings and each seed's SFT and GRPO after SFT are evaluated there too; the OOD
table and record set each run's ID and OOD score and drop beside GRPO − SFT on the OOD questions."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def ladder() -> ModuleType:
    return load_benchmark("ladder")


def row(i: int, task: str) -> dict:
    text = "Video content:\nFrame 0: Observe: I see a red chair.\nFrame 1: After Rotate left, Observe: a door.\n"
    return {"id": f"q{i}", "task": task, "answer": "A", "answer_type": "choice",
            "options": ["A. Rotate left", "B. Move forward"],
            "prompt": [{"role": "user", "content": text + "Question: Which action?"}], "meta": {}}


def write_eval(folder: Path, scores: dict[str, tuple[str, float]], blind: dict[str, float] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": i, "task": t, "score": s, "parsed_answer": "A"}) for i, (t, s) in scores.items()]
    (folder / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "metrics.json").write_text(json.dumps({"baselines": {
        "random": {"tasks": {"last_action": {"score": 0.5}, "route_planning": {"score": 0.5}},
                   "overall": {"micro": 0.5}}}}))
    if blind is not None:
        (folder / "baselines").mkdir(exist_ok=True)
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


def test_the_table_refuses_a_detail_or_span_its_data_was_not_made_at(ladder: ModuleType, tmp_path: Path) -> None:
    out = ladder_out(tmp_path, [20])
    (out / "data" / "settings.json").write_text(json.dumps({"detail": "facts", "span": "any"}))
    with pytest.raises(SystemExit, match="made at detail 'facts', span 'any'; this run asks for detail 'map'"):
        ladder.main(["--out", str(out), "--table", "--detail", "map"])
    with pytest.raises(SystemExit, match="this run asks for span '1'"):
        ladder.main(["--out", str(out), "--table", "--span", "1"])
    # Without them, or with the data's own, the table is written (its data's detail and span).
    assert ladder.main(["--out", str(out), "--table"]) == 0
    assert ladder.main(["--out", str(out), "--table", "--detail", "facts", "--span", "any"]) == 0
    assert json.loads((out / "ladder-dev.json").read_text())["data"] == {"detail": "facts", "span": "any"}


def test_the_solver_column_reads_the_eval_metrics_and_shows_a_dash_without_them(ladder: ModuleType,
                                                                                tmp_path: Path) -> None:
    out = ladder_out(tmp_path, [20])
    line = next(line for line in ladder.markdown(ladder.summarise(out, "dev")).splitlines()
                if line.startswith("| last_action"))
    assert line.split(" | ")[6] == "–"  # evaluations made before the solver baseline
    (out / "data" / "settings.json").write_text(json.dumps({"scenes": 300, "detail": "map", "span": "2"}))
    metrics = out / "evals" / "dev" / "base-seed0" / "metrics.json"
    solver = {"status": "ok", "name": "solver", "tasks": {"last_action": {"applicable": 0.75, "ceiling": 1.0,
                                                                          "copy": True},
                                                          "route_planning": {"applicable": 0.0, "ceiling": None}},
              "overall": {"applicable": 0.6, "ceiling": 1.0}}
    metrics.write_text(json.dumps({"baselines": {**json.loads(metrics.read_text())["baselines"], "solver": solver}}))
    result = ladder.summarise(out, "dev")
    assert result["data"] == {"detail": "map", "span": "2"}
    assert result["tasks"]["last_action"]["solver"] == {"applicable": 0.75, "ceiling": 1.0, "copy": True}
    table = ladder.markdown(result)
    assert "### arm base (dev, seeds 0, warm-up w, detail 'map', span '2')" in table
    cells = {line.split(" | ")[0]: line.split(" | ") for line in table.splitlines() if line.startswith("| ")}
    assert cells["| task type"][6] == "solver applicable (ceiling)"
    assert cells["| last_action"][6] == "75.0 (100.0)"
    assert cells["| route_planning"][6] == "0.0 (–)"
    assert cells["| all"][6] == "60.0 (100.0)"


def last_action_scores(correct: int, n_last: int = 40, n_route: int = 10) -> dict[str, tuple[str, float]]:
    """The first ``correct`` last-action questions right, everything else wrong (ladder_out's question ids)."""
    tasks = {f"q{i}": ("last_action" if i < n_last else "route_planning") for i in range(n_last + n_route)}
    return {i: (t, 1.0 if t == "last_action" and int(i[1:]) < correct else 0.0) for i, t in tasks.items()}


def four_arm_out(tmp_path: Path) -> Path:
    """An arm of GRPO after SFT with both variants, two seeds (last action, of 40): SFT gets 10 right,
    GRPO 30, the control 20 and 26, GRPO alone 5; every blind pass gets none right."""
    out = ladder_out(tmp_path, [30, 30])
    settings = out / "arms" / "base" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "grpo_from": "sft", "variants": {
        "control": {"rewards": ["format", "accuracy_shuffled"]}, "alone": {"model": "w"}}}))
    runs = {"sft": [10, 10], "control": [20, 26], "alone": [5, 5]}
    for name, correct in runs.items():
        for seed, right in enumerate(correct):
            scores = last_action_scores(right)
            write_eval(out / "evals" / "dev" / f"base-{name}-seed{seed}", scores,
                       blind=None if name == "sft" else {i: 0.0 for i in scores})
    for seed in (0, 1):
        base = {"learning_rate": 1e-5, "rewards": ["format", "accuracy"], "model": f"sft-seed{seed}", "seed": seed}
        variants = {"": {}, "-control": {"rewards": ["format", "accuracy_shuffled"]}, "-alone": {"model": "w"}}
        for suffix, changes in variants.items():
            folder = out / "arms" / "base" / f"seed{seed}{suffix}"
            folder.mkdir(exist_ok=True)
            (folder / "recipe.yaml").write_text(yaml.safe_dump({**base, **changes, "output_dir": str(folder)}))
    return out


def table_cells(table: str, heading: str) -> dict[str, list[str]]:
    """The cells of each line of the markdown table under ``heading`` (first cell: the task type)."""
    lines = table.split(heading, 1)[1].split("\n\n")[1].splitlines()
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines)}


def test_the_control_and_grpo_alone_get_their_own_columns(ladder: ModuleType, tmp_path: Path) -> None:
    result = ladder.summarise(four_arm_out(tmp_path), "dev")
    row = result["arms"]["base"]["tasks"]["last_action"]
    assert row["control"] == {0: 0.5, 1: 0.65} and row["control_blind"] == {0: 0.0, 1: 0.0}
    assert row["grpo_alone"] == {0: 0.125, 1: 0.125}
    vs_control = row["grpo_vs_control"]
    assert vs_control["across_seeds"]["mean"] == pytest.approx((10 + 4) / 2 / 40)
    assert vs_control["per_seed"][0]["verdict"] == "better"  # 10 improved, none worse
    assert vs_control["per_seed"][1]["verdict"] == "too few differing answers"  # 4 cannot reach p < 0.05
    assert row["grpo_alone_vs_sft"]["across_seeds"]["mean"] == pytest.approx(-5 / 40)
    assert row["grpo_alone_vs_warmup"]["across_seeds"]["mean"] == pytest.approx(5 / 40)
    assert row["grpo_alone_vs_blind"]["across_seeds"]["mean"] == pytest.approx(5 / 40)
    table = ladder.markdown(result)
    heading = "### arm base: control and GRPO alone (dev, control seeds 0,1; GRPO alone seeds 0,1,"
    cells = table_cells(table, heading)
    header = cells["task type"]
    last = dict(zip(header, cells["last_action"]))
    assert last["SFT"] == "25.0 / 25.0" and last["GRPO per seed"] == "75.0 / 75.0"
    assert last["control per seed"] == "50.0 / 65.0" and last["control blind"] == "0.0 / 0.0"
    assert last["GRPO − control"].startswith("+17.5 [") and "better in 1/2" in last["GRPO − control"]
    assert last["GRPO alone per seed"] == "12.5 / 12.5" and last["alone − SFT"].startswith("-12.5")
    assert row["grpo_alone_vs_control"]["across_seeds"]["mean"] == pytest.approx((0.125 - 0.5 + 0.125 - 0.65) / 2)
    assert last["alone − control"].startswith("-45.0")
    assert last["alone − warm-up"].startswith("+12.5") and last["alone − blind"].startswith("+12.5")
    assert "too few questions" in dict(zip(header, cells["route_planning"]))["GRPO − control"]
    # The first table is the one it always was; an arm without variants gets no second table.
    assert table_cells(table, "### arm base (dev")["task type"][-1] == "GRPO − SFT"
    plain = ladder.markdown(ladder.summarise(ladder_out(tmp_path / "plain", [20]), "dev"))
    assert "### arm base: control" not in plain and "control per seed" not in plain


def test_only_finished_seeds_count_and_a_blind_pass_only_when_whole(ladder: ModuleType, tmp_path: Path) -> None:
    out = four_arm_out(tmp_path)
    dev = out / "evals" / "dev"
    scores = last_action_scores(10)
    # SFT's blind pass, a stage of its own: whole on seed 0, cut short on seed 1 (a stopped run).
    write_eval(dev / "base-sft-seed0", scores, blind={i: 0.0 for i in scores})
    write_eval(dev / "base-sft-seed1", scores, blind={i: 0.0 for i in list(scores)[:7]})
    # Seed 2 under way: SFT evaluated, GRPO not yet; seed 3: GRPO and GRPO alone evaluated, the control not yet.
    write_eval(dev / "base-sft-seed2", last_action_scores(40), blind={i: 0.0 for i in scores})
    for name in ("sft-seed3", "seed3", "alone-seed3"):
        write_eval(dev / f"base-{name}", last_action_scores(40), blind={i: 0.0 for i in scores})
    row = ladder.summarise(out, "dev")["arms"]["base"]["tasks"]["last_action"]
    assert set(row["sft"]) == {0, 1} and row["sft_blind"] == {0: 0.0}
    assert "sft_vs_blind" not in row  # seed 1 has no whole blind pass
    write_eval(dev / "base-sft-seed1", scores, blind={i: 0.0 for i in scores})
    result = ladder.summarise(out, "dev")
    row = result["arms"]["base"]["tasks"]["last_action"]
    assert row["sft_blind"] == {0: 0.0, 1: 0.0} and row["sft_vs_blind"]["across_seeds"]["mean"] == pytest.approx(0.25)
    assert result["arms"]["base"]["seeds"] == [0, 1] and set(result["arms"]["base"]["models"]["sft"]) == {0, 1}
    assert set(row["grpo"]) == set(row["grpo_alone"]) == {0, 1}
    runs = ladder.record(result)["runs"]
    assert {r["seed"] for r in runs if r["variant"] == "sft"} == {0, 1}
    assert {r["blind_accuracy"] for r in runs if r["variant"] == "sft" and r["task"] == "last_action"} == {0.0}


def test_a_variant_must_match_its_arm_s_grpo_run_but_for_what_it_changes(ladder: ModuleType, tmp_path: Path) -> None:
    out = four_arm_out(tmp_path)
    recipe = out / "arms" / "base" / "seed1-control" / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({**yaml.safe_load(recipe.read_text()), "max_steps": 80}))
    with pytest.raises(ValueError, match="max_steps"):  # more compute than GRPO's is no control
        ladder.summarise(out, "dev")


def test_the_record_holds_the_table_s_numbers(ladder: ModuleType, tmp_path: Path) -> None:
    out = four_arm_out(tmp_path)
    (out / "data" / "settings.json").write_text(json.dumps({"detail": "relations", "span": "any"}))
    settings = out / "arms" / "base" / "settings.json"
    recipe = {"max_steps": 30, "num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 128,
              "learning_rate": 1e-5}
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "recipe": recipe, "warmup": "listed-48-a",
                                    "sft": {"steps": 60, "batch_size": 2, "learning_rate": 1e-4}}))
    (out / "evals" / "dev" / "warmup-w").rename(out / "evals" / "dev" / "warmup-listed-48-a")
    # Stage times as the ladder's Progress keeps them; seed 1's control and GRPO's evaluations are missing.
    seconds = {"warmup:listed-48-a": 1577.0, "sft:base:seed0": 400.0, "sft:base:seed1": 500.0,
               "train:base:seed0": 390.0, "train:base:seed1": 410.0, "train:base:seed0-control": 600.0,
               "train:base:seed0-alone": 520.0, "train:base:seed1-alone": 540.0, "eval:dev:base-seed0": 530.0}
    (out / "state.json").write_text(json.dumps({k: {"seconds": v} for k, v in seconds.items()}))
    # Seed 0's GRPO ran 3 steps, one with a group whose accuracy varied (step 4's row is an earlier, longer
    # run's); seed 1's has metrics but no summary yet; the other runs logged nothing.
    for seed, summary in ((0, {"global_step": 3}), (1, None)):
        folder = out / "arms" / "base" / f"seed{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "metrics.jsonl").write_text("".join(
            json.dumps({"step": step, "zero_variance_groups/accuracy": share}) + "\n"
            for step, share in ((4, 0.5), (1, 1.0), (2, 0.5), (3, 1.0))))
        if summary is not None:
            (folder / "summary.json").write_text(json.dumps(summary))
    path = tmp_path / "docs" / "ladder.json"
    assert ladder.main(["--out", str(out), "--table", "--record", str(path)]) == 0
    written = json.loads(path.read_text())
    result = ladder.summarise(out, "dev")
    assert (written["split"], written["detail"], written["span"]) == ("dev", "relations", "any")
    compute = {"warmup_steps": 48, "sft": {"steps": 60, "batch_size": 2, "learning_rate": 1e-4},
               "grpo": {"steps": 30, "prompts": 2, "generations": 4, "max_completion_length": 128,
                        "learning_rate": 1e-5},
               "stage_seconds": {"warmup": 1577.0, "sft": 450.0, "grpo": 400.0, "alone": 530.0, "control": 600.0,
                                 "grpo_evaluation": 530.0},
               "grpo_steps_with_signal": {"grpo": {"0": 1, "1": None}, "alone": {"0": None, "1": None},
                                          "control": {"0": None, "1": None}}}
    assert written["arms"]["base"] == {"warmup": "listed-48-a", "base_model": "smollm2-135m-instruct",
                                       "grpo_from": "sft", "seeds": [0, 1], "variants": ["alone", "control"],
                                       "compute": compute}
    runs = written["runs"]
    assert {(r["variant"], r["seed"]) for r in runs if r["task"] == "last_action"} == {
        ("warmup", None), *((v, s) for v in ("sft", "grpo", "grpo_alone", "control") for s in (0, 1))}
    keys = {"arm", "task", "variant", "seed", "split", "detail", "span", "model", "n", "accuracy", "blind_accuracy"}
    assert all(set(r) == keys for r in runs)
    for r in runs:
        row = result["arms"]["base"]["tasks"][r["task"]]
        if r["variant"] == "warmup":
            assert (r["accuracy"], r["blind_accuracy"]) == (row["warmup"], row["warmup_blind"])
        else:
            assert r["accuracy"] == row[r["variant"]][r["seed"]]
            assert r["blind_accuracy"] == (None if r["variant"] == "sft" else row[f"{r['variant']}_blind"][r["seed"]])
        assert r["n"] == result["tasks"][r["task"]]["n"] and r["split"] == "dev"
    control = next(r for r in runs if (r["task"], r["variant"], r["seed"]) == ("last_action", "control", 1))
    assert control["accuracy"] == 0.65 and control["n"] == 40 and control["blind_accuracy"] == 0.0
    cells = table_cells(ladder.markdown(result), "### arm base: control and GRPO alone")
    assert dict(zip(cells["task type"], cells["last_action"]))["control per seed"].endswith(ladder.pct(0.65))

    assert written["baselines"]["last_action"] == {
        "n": 40, "too_few": False, "random": 0.5, "letter_prior": 0.0, "answer_prior": 1.0,
        "text_rule": result["tasks"]["last_action"]["text_rule"],
        "text_rule_ceiling": result["tasks"]["last_action"]["ceiling"], "solver_applicable": None,
        "solver_ceiling": None, "solver_copy": None}
    # GRPO after SFT beat SFT and its blind self on the last action, but not the control across two seeds
    # (+17.5 with an interval over 0), so the goal is not met there. GRPO alone lost the same 5 of 40 questions
    # to SFT on both seeds: a zero-width interval, but neither seed's exact test could find that (5 answers
    # all one way: p = 0.0625), so no verdict.
    goal = written["goal"]["arms"]["base"]
    assert goal["tasks"]["last_action"]["grpo"] == {"vs_sft": "better", "vs_blind": "better",
                                                    "vs_control": "no measurable change", "met": False}
    assert goal["tasks"]["last_action"]["grpo_alone"]["vs_sft"] == "no measurable change"
    alone_vs_sft = next(c for c in written["comparisons"]
                        if c["task"] == "last_action" and c["comparison"] == "grpo_alone_vs_sft")
    assert alone_vs_sft["ci95"][0] == alone_vs_sft["ci95"][1] < 0
    assert (goal["types_met"], goal["met"]) == ([], False)
    assert "not met; types where it holds: none" in ladder.markdown(result)
    compared = {(c["task"], c["comparison"]): c for c in written["comparisons"]}
    assert {"grpo_vs_control", "grpo_vs_sft", "grpo_vs_blind", "grpo_vs_warmup", "grpo_alone_vs_warmup",
            "grpo_alone_vs_sft", "grpo_alone_vs_blind"} <= {c for _, c in compared}
    vs_control = compared[("last_action", "grpo_vs_control")]
    pooled = result["arms"]["base"]["tasks"]["last_action"]["grpo_vs_control"]["across_seeds"]
    assert (vs_control["mean_difference"], vs_control["ci95"]) == (pooled["mean"], pooled["ci95"])
    assert (vs_control["better_by_test_in"], vs_control["n_seeds"], vs_control["verdict"]) == (1, 2, pooled["verdict"])
    assert vs_control["per_seed"][0]["seed"] == 0 and vs_control["per_seed"][0]["p_value"] < 0.05
    assert vs_control["per_seed"][0]["difference"] == 0.25 and vs_control["per_seed"][0]["n"] == 40
    assert compared[("route_planning", "grpo_vs_control")]["too_few"]


def test_an_arm_run_without_the_variants_can_add_them_but_not_change_its_recipe(ladder: ModuleType,
                                                                                tmp_path: Path) -> None:
    common = ["--out", str(tmp_path), "--arm", "after", "--sft", "--grpo-from-sft"]

    def settings(*extra: str) -> tuple:
        args = ladder.parse_args(common + list(extra))
        return args, ladder.arm_settings(args, tmp_path / "train.jsonl", tmp_path / "warmup")

    ladder.freeze_arm(*settings())  # the arm's first run: GRPO after SFT alone
    ladder.freeze_arm(*settings("--control"))
    ladder.freeze_arm(*settings("--grpo-alone"))
    ladder.freeze_arm(*settings())  # a later run without them keeps them
    frozen = json.loads((tmp_path / "arms" / "after" / "settings.json").read_text())
    assert frozen["variants"] == {"control": {"rewards": ["format", "accuracy_shuffled"]},
                                  "alone": {"model": str(tmp_path / "warmup")}}
    with pytest.raises(SystemExit, match="other settings"):  # the recipe is still the arm's
        ladder.freeze_arm(*settings("--control", "--learning-rate", "3e-5"))
    args, changed = settings("--control")
    changed["variants"]["control"] = {"rewards": ["format_soft", "accuracy_shuffled"]}
    with pytest.raises(SystemExit, match="ran its control with"):
        ladder.freeze_arm(args, changed)

    # Test: an arm evaluated there before its control may add it (the log notes when), not a new recipe.
    test = ["--split", "test"]
    ladder.log_test(*settings(*test))
    ladder.log_test(*settings(*test, "--control"))
    log = json.loads((tmp_path / "test_log.json").read_text())["after"]
    assert set(log["variants"]) == {"control"}
    with pytest.raises(SystemExit, match="evaluated on test with other settings"):
        ladder.log_test(*settings(*test, "--control", "--steps", "80"))


class Stages:
    """A stand-in for learning_curve.Progress: records each stage's name and command, runs nothing."""

    def __init__(self, done: list[str]) -> None:
        self.done = dict.fromkeys(done, {})
        self.ran: dict[str, list[str]] = {}

    def run(self, name: str, argv: list[str]) -> None:
        self.ran[name] = argv


def test_each_variant_trains_in_its_own_folder_from_its_own_start(ladder: ModuleType, tmp_path: Path) -> None:
    args = ladder.parse_args(["--out", str(tmp_path), "--arm", "a", "--sft", "--grpo-from-sft", "--control",
                              "--grpo-alone", "--steps", "7"])
    stages = Stages(["sft:a:seed3"])  # SFT is done; its model is what GRPO and the control start from
    warmup = tmp_path / "warmup"
    ladder.run_seed(args, tmp_path / "train.jsonl", warmup, 3, tmp_path / "dev.jsonl", tmp_path / "train.jsonl",
                    stages)
    assert {"train:a:seed3", "train:a:seed3-control", "train:a:seed3-alone", "eval:dev:a-seed3",
            "eval:dev:a-control-seed3", "eval:dev:a-alone-seed3", "eval:dev:a-sft-seed3",
            "eval:dev:a-sft-seed3+blind"} == set(stages.ran)
    # SFT's blind pass: the same evaluation folder, so an evaluation made without it keeps its answers.
    first, blind = stages.ran["eval:dev:a-sft-seed3"], stages.ran["eval:dev:a-sft-seed3+blind"]
    assert first[first.index("--out") + 1] == blind[blind.index("--out") + 1] == str(tmp_path / "evals" / "dev" /
                                                                                     "a-sft-seed3")
    assert "blind" not in first[first.index("--baselines") + 1]
    assert blind[blind.index("--baselines") + 1] == ladder.EVAL_BASELINES
    recipes = {name: yaml.safe_load((tmp_path / "arms" / "a" / name / "recipe.yaml").read_text())
               for name in ("seed3", "seed3-control", "seed3-alone")}
    sft = str(tmp_path / "arms" / "a" / "sft-seed3" / "warmup" / "model")
    assert recipes["seed3"]["model"] == recipes["seed3-control"]["model"] == sft
    assert recipes["seed3-alone"]["model"] == str(warmup)
    assert recipes["seed3-control"]["rewards"] == ["format", "accuracy_shuffled"]
    assert recipes["seed3-control"]["reward_weights"] == recipes["seed3"]["reward_weights"]
    for name in ("seed3-control", "seed3-alone"):  # the same rows and steps as the arm's GRPO
        assert recipes[name]["max_steps"] == 7 and recipes[name]["train_data"] == recipes["seed3"]["train_data"]
        assert recipes[name]["seed"] == 3
    evaluated = stages.ran["eval:dev:a-alone-seed3"]
    assert evaluated[evaluated.index("--model") + 1] == str(tmp_path / "arms" / "a" / "seed3-alone" / "final")
    assert "blind" in evaluated[evaluated.index("--baselines") + 1]  # evaluated like GRPO, blind included


def test_the_variants_are_refused_where_they_mean_nothing(ladder: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):  # beside GRPO from the warm-up, GRPO alone is the arm itself
        ladder.parse_args(["--out", str(tmp_path), "--sft", "--grpo-alone"])
    with pytest.raises(SystemExit):
        ladder.parse_args(["--out", str(tmp_path), "--control"])
    with pytest.raises(SystemExit):  # its evaluations would read as arm "x"'s control
        ladder.parse_args(["--out", str(tmp_path), "--arm", "x-control"])
    with pytest.raises(SystemExit, match="have none"):
        ladder.control_rewards({"rewards": ["format"], "reward_schedule": None})
    with pytest.raises(SystemExit, match="reward_schedule"):
        ladder.control_rewards({"rewards": ["format", "accuracy"], "reward_schedule": "paper"})
    assert ladder.control_rewards({"rewards": ["format", {"accuracy": {"rule": "official"}}]}) == [
        "format", {"accuracy_shuffled": {"rule": "official"}}]


def ood_scores(correct: int, n_last: int = 40, n_route: int = 10) -> dict[str, tuple[str, float]]:
    """last_action_scores on the OOD questions (ids ``o0``...): other questions than the ID ones."""
    return {f"o{i[1:]}": value for i, value in last_action_scores(correct, n_last, n_route).items()}


def ood_out(tmp_path: Path) -> Path:
    """four_arm_out with OOD evaluations (last action, of 40): SFT gets 4 and 6 right (ID: 10 and 10), GRPO
    after SFT 28 and 26 (ID: 30 and 30), the control 10 and 12 (ID: 20 and 26); GRPO alone was not evaluated
    there; every blind pass, SFT's included, gets none right."""
    out = four_arm_out(tmp_path)
    rows = [{**row(i, "last_action" if i < 40 else "route_planning"), "id": f"o{i}"} for i in range(50)]
    (out / "data-ood").mkdir()
    (out / "data-ood" / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "data-ood" / "settings.json").write_text(json.dumps({"detail": "relations", "span": "any"}))
    for name, correct in {"base-sft": [4, 6], "base": [28, 26], "base-control": [10, 12]}.items():
        for seed, right in enumerate(correct):
            scores = ood_scores(right)
            write_eval(out / "evals" / "ood-dev" / f"{name}-seed{seed}", scores, blind={i: 0.0 for i in scores})
    return out


def test_the_ood_table_sets_each_run_s_drop_beside_grpo_against_sft_there(ladder: ModuleType,
                                                                          tmp_path: Path) -> None:
    plain = ladder.summarise(four_arm_out(tmp_path / "plain"), "dev")
    assert "ood" not in plain  # no OOD evaluation: the summary is what it always was
    result = ladder.summarise(ood_out(tmp_path), "dev")
    last = result["ood"]["arms"]["base"]["tasks"]["last_action"]
    assert last["sft"] == {0: 0.1, 1: 0.15} and last["grpo"] == {0: 0.7, 1: 0.65}
    assert last["sft_blind"] == {0: 0.0, 1: 0.0}  # the OOD evaluation of SFT has its blind pass
    assert last["id"]["grpo"] == {0: 0.75, 1: 0.75} and last["id"]["sft"] == {0: 0.25, 1: 0.25}
    assert last["drop"]["sft"] == {0: 0.15, 1: 0.1} and last["drop"]["grpo"] == {0: 0.05, 1: 0.1}
    assert "grpo_alone" not in last["drop"]  # not evaluated out of distribution
    vs_sft = last["grpo_vs_sft"]  # paired on the OOD questions: 24 and 20 improved, none worse
    assert vs_sft["per_seed"][0]["verdict"] == "better" and vs_sft["per_seed"][0]["n"] == 40
    assert vs_sft["across_seeds"]["mean"] == pytest.approx((24 + 20) / 2 / 40)
    gap = last["sft_drop_minus_grpo_drop"]
    assert gap["per_seed"] == {0: 0.1, 1: 0.0}  # seed 1: the same drop, exactly (not by float noise)
    assert gap["across_seeds"]["mean"] == pytest.approx(0.05) and gap["across_seeds"]["better_in"] == 1

    table = ladder.markdown(result)
    assert table.startswith(ladder.markdown(plain))  # the ID tables come first, as they were
    heading = "### arm base: out of distribution (ID dev, OOD ood-dev, seeds 0,1, detail 'relations', span 'any')"
    cells = table_cells(table, heading)
    header = cells["task type"]
    assert "GRPO alone OOD" not in header and "control drop" in header
    row = dict(zip(header, cells["last_action"]))
    assert (row["n ID"], row["n OOD"]) == ("40", "40")
    assert (row["SFT ID"], row["SFT OOD"], row["SFT drop"]) == ("25.0 / 25.0", "10.0 / 15.0", "15.0 / 10.0")
    assert (row["GRPO ID"], row["GRPO OOD"], row["GRPO drop"]) == ("75.0 / 75.0", "70.0 / 65.0", "5.0 / 10.0")
    assert (row["control OOD"], row["control drop"]) == ("25.0 / 30.0", "25.0 / 35.0")
    assert row["GRPO − SFT on OOD"].startswith("+55.0 [") and "better in 2/2" in row["GRPO − SFT on OOD"]
    gap_text = row["SFT drop − GRPO drop"]
    assert gap_text.startswith("+5.0 [") and "GRPO lost less in 1/2 ->" in gap_text  # seed 1: the same drop
    route = dict(zip(header, cells["route_planning"]))
    assert "too few questions" in route["GRPO − SFT on OOD"] and "too few questions" in route["SFT drop − GRPO drop"]


def test_the_record_holds_the_ood_table_s_numbers(ladder: ModuleType, tmp_path: Path) -> None:
    plain = ladder.record(ladder.summarise(four_arm_out(tmp_path / "plain"), "dev"))
    assert not any(key.startswith("ood") for key in plain)
    result = ladder.summarise(ood_out(tmp_path), "dev")
    written = ladder.record(result)
    assert {k: v for k, v in written.items() if not k.startswith("ood")} == plain  # the ID record is unchanged
    assert written["ood_questions"] == 50 and written["ood_baselines"]["last_action"]["n"] == 40
    runs = {(r["task"], r["variant"], r["seed"]): r for r in written["ood_runs"]}
    assert {(v, s) for t, v, s in runs if t == "last_action"} == {(v, s) for v in ("sft", "grpo", "control")
                                                                  for s in (0, 1)}
    grpo = runs[("last_action", "grpo", 1)]
    assert (grpo["split"], grpo["part"], grpo["id_split"], grpo["detail"], grpo["span"]) == (
        "ood", "ood-dev", "dev", "relations", "any")
    assert (grpo["n"], grpo["accuracy"], grpo["blind_accuracy"], grpo["id_accuracy"]) == (40, 0.65, 0.0, 0.75)
    assert grpo["drop"] == 0.1
    assert runs[("last_action", "sft", 0)]["blind_accuracy"] == 0.0
    compared = {(c["task"], c["comparison"]): c for c in written["ood_comparisons"]}
    vs_sft = compared[("last_action", "grpo_vs_sft")]
    assert vs_sft["per_seed"][0]["difference"] == 0.6 and vs_sft["per_seed"][0]["p_value"] < 0.05
    assert (vs_sft["better_by_test_in"], vs_sft["n_seeds"]) == (2, 2)
    gap = compared[("last_action", "sft_drop_minus_grpo_drop")]
    assert gap["mean_difference"] == pytest.approx(0.05) and (gap["better_in"], gap["n_seeds"]) == (1, 2)
    assert [p["seed"] for p in gap["per_seed"]] == [0, 1]
    assert [p["difference"] for p in gap["per_seed"]] == [0.1, 0.0]
    assert compared[("route_planning", "sft_drop_minus_grpo_drop")]["too_few"]
    ood_goal = written["ood_goal"]["base"]
    assert ood_goal["last_action"] == gap["verdict"]  # the OOD goal is the pooled drop gap's verdict


def test_ood_builds_its_data_once_and_evaluates_sft_and_grpo_after_sft_there(ladder: ModuleType,
                                                                              tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--arm", "a", "--sft", "--grpo-from-sft", "--control", "--ood", "--detail", "map",
            "--span", "2", "--eval-tasks", "last_action"]
    args = ladder.parse_args(argv)
    split = tmp_path / "data" / "split"
    split.mkdir(parents=True)
    record = {"id": "t0", "source": "synthetic_world", "task": "last_action", "video": "v.mp4", "question": "q",
              "options": None, "answer": "1", "meta": {"scene": "scene_0_0000"}}
    (split / "train.jsonl").write_text(json.dumps(record) + "\n")
    world = tmp_path / "data-ood" / "world"
    world.mkdir(parents=True)  # what the stages (not run here) would have written
    (world / "questions.jsonl").write_text(json.dumps({**record, "id": "o0", "meta": {"scene": "ood_0_0000"}}) + "\n")
    prompts = [{"id": f"o{i}", "task": task} for i, task in enumerate(["last_action", "object_count"] * 40)]
    (tmp_path / "data-ood" / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in prompts))
    stages = Stages([])
    ood = ladder.build_ood_data(args, stages)
    assert [name for name in stages.ran] == ["ood-data:world", "ood-data:keyframes", "ood-data:perception",
                                             "ood-data:prompts"]
    world_argv, keyframes, perception, built = (stages.ran[f"ood-data:{n}"]
                                                for n in ("world", "keyframes", "perception", "prompts"))
    assert "--ood" in world_argv and "--seconds" not in world_argv  # the OOD preset's own 30 s walks
    assert world_argv[world_argv.index("--scenes") + 1] == "60"
    assert keyframes[keyframes.index("--max-frames") + 1] == "10"  # the OOD world's suggestion
    assert perception[perception.index("--detail") + 1] == "map"
    assert perception[perception.index("--backend") + 1] == "oracle"
    assert built[built.index("--span") + 1] == "2"
    assert built[built.index("--qa") + 1] == str(world / "questions.jsonl")  # no split: no OOD scene is trained on
    # Only the task types the arm evaluates, at most --ood-per-type (30) of them.
    assert ood == tmp_path / "data-ood" / "eval+last_action.jsonl"
    kept = [json.loads(line) for line in ood.read_text().splitlines()]
    assert {r["task"] for r in kept} == {"last_action"} and len(kept) == 30
    fewer = ladder.parse_args(["--out", str(tmp_path), "--sft", "--grpo-from-sft", "--ood", "--ood-max-frames", "8"])
    assert dict(ladder.ood_data_stages(fewer, tmp_path))["keyframes"][-1] == "8"

    stages = Stages(["sft:a:seed3"])
    ladder.run_seed(args, tmp_path / "train.jsonl", tmp_path / "warmup", 3, tmp_path / "dev.jsonl",
                    tmp_path / "train.jsonl", stages, ood)
    part = "ood-dev+last_action"
    assert {f"eval:{part}:a-sft-seed3", f"eval:{part}:a-seed3", "eval:dev+last_action:a-seed3",
            "eval:dev+last_action:a-control-seed3"} <= set(stages.ran)
    assert f"eval:{part}:a-control-seed3" not in stages.ran  # the variants stay in distribution by default
    sft = stages.ran[f"eval:{part}:a-sft-seed3"]
    assert sft[sft.index("--data") + 1] == str(ood)
    assert sft[sft.index("--out") + 1] == str(tmp_path / "evals" / part / "a-sft-seed3")
    assert "blind" in sft[sft.index("--baselines") + 1] and "solver" in sft[sft.index("--baselines") + 1]
    grpo = stages.ran[f"eval:{part}:a-seed3"]
    assert grpo[grpo.index("--model") + 1] == str(tmp_path / "arms" / "a" / "seed3" / "final")
    variants = ladder.parse_args([*argv, "--ood-variants"])
    stages = Stages(["sft:a:seed3"])
    ladder.run_seed(variants, tmp_path / "train.jsonl", tmp_path / "warmup", 3, tmp_path / "dev.jsonl",
                    tmp_path / "train.jsonl", stages, ood)
    control = stages.ran[f"eval:{part}:a-control-seed3"]
    assert control[control.index("--model") + 1] == str(tmp_path / "arms" / "a" / "seed3-control" / "final")
    without = Stages(["sft:a:seed3"])  # no --ood: no OOD evaluation
    ladder.run_seed(args, tmp_path / "train.jsonl", tmp_path / "warmup", 3, tmp_path / "dev.jsonl",
                    tmp_path / "train.jsonl", without)
    assert not any(name.startswith("eval:ood-") for name in without.ran)


def test_ood_is_refused_without_grpo_after_sft_and_at_another_detail_or_span(ladder: ModuleType, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture) -> None:
    for argv in (["--ood"], ["--ood", "--sft"]):
        with pytest.raises(SystemExit):
            ladder.parse_args(["--out", str(tmp_path), *argv])
        error = capsys.readouterr().err
        assert "--ood asks whether GRPO after SFT loses less" in error and "add --sft --grpo-from-sft" in error
    for argv in (["--ood-variants", "--control"], ["--ood-variants", "--ood"]):
        with pytest.raises(SystemExit):
            ladder.parse_args(["--out", str(tmp_path), "--sft", "--grpo-from-sft", *argv])
        assert "--ood-variants evaluates the control and GRPO alone" in capsys.readouterr().err
    common = ["--out", str(tmp_path), "--sft", "--grpo-from-sft", "--ood"]
    made = ladder.parse_args(common + ["--detail", "map", "--span", "any"])
    (tmp_path / "data-ood").mkdir()
    (tmp_path / "data-ood" / "settings.json").write_text(json.dumps(ladder.ood_settings(made)))
    with pytest.raises(SystemExit) as refused:  # refused before any stage runs
        ladder.build_ood_data(ladder.parse_args(common + ["--detail", "words"]), Stages([]))
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'data-ood'} was made at detail 'map', span 'any'; this run asks for ")
    assert "detail 'words'" in message and "span none" in message
    with pytest.raises(SystemExit, match=r"\(and scenes 60\); this run asks for scenes 80"):
        ladder.build_ood_data(ladder.parse_args(common + ["--detail", "map", "--span", "any", "--ood-scenes", "80"]),
                              Stages([]))


def test_the_goal_counts_types_where_a_grpo_run_beats_all_three_references(ladder: ModuleType) -> None:
    def verdicts(**which: str) -> dict:
        return {key: {"across_seeds": {"verdict": verdict}} for key, verdict in which.items()}

    better = verdicts(grpo_vs_sft="better", grpo_vs_blind="better", grpo_vs_control="better")
    alone = verdicts(grpo_alone_vs_sft="better", grpo_alone_vs_blind="better", grpo_alone_vs_control="better")
    rows = {"a": better, "b": alone, "c": better, "copy": better, "few": better,
            "no_control": verdicts(grpo_vs_sft="better", grpo_vs_blind="better"), "all": better}
    tasks = {task: {"too_few": task == "few", "solver": {"copy": task == "copy"}} for task in rows}
    result = {"arms": {"x": {"tasks": rows}}, "tasks": tasks}
    goal = ladder.goal_record(result)["arms"]["x"]
    assert goal["types_met"] == ["a", "b", "c"] and goal["met"]  # not the copy type, too few questions, or "all"
    assert goal["tasks"]["no_control"]["grpo"] == {"vs_sft": "better", "vs_blind": "better", "vs_control": None,
                                                   "met": False}  # no control run: no gain counts
    assert goal["tasks"]["copy"]["copy"] and "all" not in goal["tasks"]
    rows.pop("c")
    assert not ladder.goal_record(result)["arms"]["x"]["met"]  # two types are fewer than three
