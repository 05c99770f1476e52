from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from embodied_r.demo import MIN_TRAIN_MINUTES, DemoSize, plan, run_demo, train_minutes, training_recipe
from embodied_r.judge.settings import probe_defaults


def test_sizes_follow_the_time_budget() -> None:
    short, full = DemoSize.for_minutes(5), DemoSize.for_minutes(15)
    assert short.scenes < full.scenes and short.train_steps < full.train_steps
    with pytest.raises(ValueError, match="at least 3 minutes"):
        DemoSize.for_minutes(1)


def test_the_train_stage_gets_the_time_the_other_stages_leave() -> None:
    # A slower evaluation (a slower CPU) or more time spent already leave training less; never nothing.
    assert train_minutes(15, 60, 30) > train_minutes(15, 60, 60) > train_minutes(15, 300, 60)
    assert train_minutes(15, 900, 60) == MIN_TRAIN_MINUTES


def test_the_full_demo_is_sized_for_twenty_grpo_steps_on_its_tasks() -> None:
    from embodied_r.demo import DEMO_TASKS, MIN_GRPO_STEPS

    size = DemoSize.for_minutes(15)
    assert size.train_steps >= MIN_GRPO_STEPS and size.tasks == DEMO_TASKS
    assert size.prompt_version == "compact-v1"
    # The verdict is on at least 120 held-out questions (one per scene of the test part, none dropped).
    assert (size.scenes - round(size.scenes * (1 - size.test_share))) * size.per_task >= 120
    assert size.eval_limit == 0 and size.span is None


def test_plan_chains_each_stage_into_the_next(tmp_path: Path) -> None:
    stages = plan(tmp_path, DemoSize.for_minutes(15))
    names = [s.name for s in stages]
    assert names == ["world", "keyframes", "perception", "split", "prompts-train", "prompts-test", "sft",
                     "eval-sft", "train", "eval-after", "report"]
    by_name = {s.name: s for s in stages}
    assert str(tmp_path / "perception.jsonl") in by_name["prompts-test"].argv  # perception feeds the prompts
    assert str(tmp_path / "train" / "final") in by_name["eval-after"].argv       # the trained model is evaluated
    assert str(tmp_path / "train" / "warmup" / "model") in by_name["eval-sft"].argv
    assert all(s.command.startswith("embodied-r ") for s in stages)
    assert "--warmup-only" in by_name["sft"].argv  # evaluated before GRPO, which times the budget by it
    assert "blind" in by_name["eval-after"].argv[by_name["eval-after"].argv.index("--baselines") + 1]
    for name in ("eval-sft", "eval-after"):  # the exact solver's ceiling beside the models
        assert "solver" in by_name[name].argv[by_name[name].argv.index("--baselines") + 1]
    assert by_name["split"].argv[by_name["split"].argv.index("--tasks") + 1] == "last_action"
    assert by_name["perception"].argv[by_name["perception"].argv.index("--detail") + 1] == "words"


@pytest.mark.slow
def test_demo_end_to_end_with_a_tiny_model(tmp_path: Path, tiny_lm_dir: Path) -> None:
    size = DemoSize(scenes=4, seconds=6, per_task=1, train_steps=2, eval_limit=4, max_new_tokens=8, sft_steps=2)
    seen: list[tuple[str, str]] = []
    summary = run_demo(tmp_path / "demo", model=str(tiny_lm_dir), workers=1, size=size,
                       on_stage=lambda stage, i, n, status: seen.append((stage.name, status)))
    assert [name for name, _ in seen][-1] == "report"
    demo = tmp_path / "demo"
    assert (demo / "report" / "report.html").is_file()
    assert (demo / "train" / "final" / "config.json").is_file()
    assert (demo / "train" / "warmup" / "model" / "warmup.json").is_file()
    sft = json.loads((demo / "train" / "warmup" / "model" / "warmup.json").read_text())
    assert sft["settings"]["answers"] == "gold" and sft["base_model"] == str(tiny_lm_dir)
    for name in ("eval_sft", "eval_after"):
        metrics = summary[name]
        assert 0 < metrics["overall"]["n"] <= 4
    assert summary["eval_after"]["baselines"]["blind"]["status"] == "ok"
    assert summary["eval_after"]["baselines"]["text-rule"]["status"] == "ok"
    state = json.loads((demo / "demo_state.json").read_text())
    assert set(state) == {name for name, _ in seen}
    # The train stage ran with the time the demo had left, and says whether that ended it.
    budget = yaml.safe_load((demo / "train_recipe.yaml").read_text())["max_train_minutes"]
    assert MIN_TRAIN_MINUTES <= budget < 15
    assert summary["train"]["time_budget"] == {"minutes": budget, "stopped_at_step": None, "max_steps": 2}
    # Each stage ran in its own process, whose peak memory is recorded (the demo's 8 GB goal).
    assert all(0 < info["peak_rss_gib"] < 8 for info in state.values())
    assert summary["peak_rss_gib"] == max(info["peak_rss_gib"] for info in state.values())
    # A second run resumes: every stage is skipped, nothing is recomputed.
    seen.clear()
    run_demo(tmp_path / "demo", model=str(tiny_lm_dir), workers=1, size=size,
             on_stage=lambda stage, i, n, status: seen.append((stage.name, status)))
    assert all(status.startswith("skipped") for _, status in seen)


def test_demo_recipe_fine_tunes_on_gold_answers_then_trains_with_format_and_accuracy(tmp_path: Path) -> None:
    from embodied_r.training.recipe import recipe_from_dict

    size = DemoSize.for_minutes(15)
    recipe = recipe_from_dict(training_recipe(tmp_path, size, "smollm2-135m-instruct"))
    # No consistency term, so no judge probe spends the demo's time on a term without weight.
    assert recipe.reward_names == ["format", "accuracy"] and recipe.sections.judge.probe == probe_defaults()
    # Supervised on the gold answers first (GRPO from a random-answer primer read in 1 of 5 ladder seeds), with
    # a think that writes each option's letter after its words (the letter is copied, not looked up).
    assert recipe.format_warmup["think"] == "listed" and recipe.format_warmup["answers"] == "gold"
    assert recipe.completion_prefix == ""  # the paper's prompt, evaluated the same way before and after
    assert recipe.format_warmup and recipe.format_warmup["steps"] == size.sft_steps > 0
    # One pass over the training prompts (one question per held-in scene).
    train_prompts = round(size.scenes * (1 - size.test_share)) * size.per_task
    assert recipe.format_warmup["steps"] * recipe.format_warmup["batch_size"] == train_prompts
    for stage in plan(tmp_path, size):
        assert "--completion-prefix" not in stage.argv
        assert shlex.split(stage.command)[1:] == stage.argv  # printed commands survive a shell


def test_the_terminal_table_shows_each_baseline_and_whole_task_names(capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from embodied_r.cli.demo import print_before_after

    def metrics(score: float, baselines: dict[str, float]) -> dict:
        task = {"n": 40, "score": score, "ci95": [score - 0.1, score + 0.1], "unparsed": 0}
        return {"tasks": {"egocentric_direction": task}, "overall": {"n": 40, "micro": score, "ci95": task["ci95"]},
                "baselines": {name: {"tasks": {"egocentric_direction": {"score": value, "ci95": [0.1, 0.6]}},
                                     "overall": {"micro": value, "ci95": [0.1, 0.6]}}
                              for name, value in baselines.items()}}

    after = metrics(0.5, {"blind": 0.3, "text-rule": 0.45, "random": 0.25, "prior": 0.261, "answer-prior": 0.205})
    reach = {"applicable": 0.975, "ceiling": 1.0}
    after["baselines"]["solver"] = {"tasks": {"egocentric_direction": reach}, "overall": reach}
    monkeypatch.setenv("COLUMNS", "200")
    print_before_after({"eval_sft": metrics(0.4, {}), "eval_after": after})
    wide = capsys.readouterr().out
    assert "random / letter prior / answer prior" in wide and "25.0 / 26.1 / 20.5" in wide
    assert "45.0 [10.0, 60.0]" in wide and "30.0 [10.0, 60.0]" in wide  # text rule, blind
    assert "solver ceiling (applies to)" in wide and "100.0 (98 %)" in wide
    monkeypatch.setenv("COLUMNS", "80")  # the width of a log file or a small terminal
    print_before_after({"eval_sft": metrics(0.4, {}), "eval_after": after})
    narrow = capsys.readouterr().out
    assert "egocentric_direction" in narrow  # wrapped numbers, not a name cut to "egocentri…"
    assert max(len(line) for line in narrow.splitlines()) <= 80


def test_the_record_reads_every_number_from_the_stages_outputs(tmp_path: Path) -> None:
    from embodied_r.demo_record import demo_record

    def write(folder: Path, scores: list[float]) -> list[dict]:
        rows = [{"id": f"q{i}", "task": "object_rel_direction_medium", "score": s} for i, s in enumerate(scores)]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return rows

    write(tmp_path / "eval_sft", [1.0] * 10 + [0.0] * 10)
    after = write(tmp_path / "eval_after", [1.0] * 16 + [0.0] * 4)
    (tmp_path / "eval_after" / "baselines").mkdir()
    (tmp_path / "eval_after" / "baselines" / "blind.jsonl").write_text(
        "".join(json.dumps({**r, "score": 0.0}) + "\n" for r in after))
    baselines = {"blind": {"overall": {"micro": 0.0}}, "text-rule": {"overall": {"micro": 0.35}},
                 "random": {"overall": {"micro": 0.333}}, "prior": {"overall": {"micro": 0.4}},
                 "answer-prior": {"overall": {"micro": 0.3}},
                 "solver": {"overall": {"micro": 1.0, "ceiling": 1.0, "applicable": 1.0}}}
    summary = {"eval_sft": {"overall": {"n": 20, "micro": 0.5}},
               "eval_after": {"overall": {"n": 20, "micro": 0.8}, "baselines": baselines},
               "train": {"global_step": 24}, "stages": {"world": {"seconds": 60.0}, "train": {"seconds": 300.5}},
               "wall_time_s": 12.0, "peak_rss_gib": 3.1}
    size = DemoSize(scenes=80, seconds=12, per_task=6, train_steps=30, eval_limit=0, max_new_tokens=64,
                    tasks=("object_rel_direction_medium",), detail="facts", span="any", dtype="float32")
    assert demo_record(summary, tmp_path, size)["grpo_steps_with_signal"] is None  # no train metrics
    (tmp_path / "train").mkdir()
    # Step 2 is logged twice (a resumed run): its last row counts; the final summary row has no share.
    # A step has signal when some reward function varied in some group (its zero-variance share below 1).
    logged = [(1, 1.0, 1.0), (2, 0.5, 1.0), (3, 1.0, 1.0), (2, 1.0, 1.0), (4, 1.0, 0.5), (5, 0.0, 1.0)]
    (tmp_path / "train" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "zero_variance_groups/format": fmt, "zero_variance_groups/accuracy": acc,
                    "frac_reward_zero_std": 0.0}) + "\n" for step, fmt, acc in logged)
        + json.dumps({"step": 5, "train_loss": 0.1}) + "\n")
    record = demo_record(summary, tmp_path, size)
    assert record["grpo_steps_with_signal"] == 2  # steps 4 and 5
    assert record["accuracy"] == {"sft": 0.5, "grpo": 0.8, "blind": 0.0, "text_rule": 0.35, "random": 0.333,
                                  "letter_prior": 0.4, "answer_prior": 0.3, "solver_ceiling": 1.0,
                                  "solver_applicable": 1.0}
    vs_sft = record["comparisons"]["grpo_vs_sft"]
    assert (vs_sft["n"], vs_sft["improved"], vs_sft["worsened"]) == (20, 6, 0)
    assert vs_sft["difference"] == pytest.approx(0.3) and vs_sft["p_value"] == pytest.approx(2 / 2**6)
    assert record["comparisons"]["grpo_vs_blind"]["improved"] == 16
    assert (record["stages_s"], record["grpo_steps"], record["n"], record["detail"]) == (360.5, 24, 20, "facts")
    assert set(record["machine"]) == {"cpu", "cores", "avx512_bf16"}
    with pytest.raises(ValueError, match="not finished both evaluations"):
        demo_record({"eval_sft": summary["eval_sft"]}, tmp_path, size)


def test_the_demo_runs_on_the_task_types_detail_and_span_asked_for(tmp_path: Path) -> None:
    from dataclasses import replace

    from embodied_r.demo import WorldChoice

    world = WorldChoice(tasks=("object_rel_direction_medium",), detail="facts", span="any")
    world.check()
    assert world.flags() == ["--tasks", "object_rel_direction_medium", "--detail", "facts", "--span", "any"]
    size = replace(DemoSize.for_minutes(15), tasks=world.tasks, detail=world.detail, span=world.span)
    by_name = {s.name: s for s in plan(tmp_path, size)}

    def value(stage: str, flag: str) -> str:
        argv = by_name[stage].argv
        return argv[argv.index(flag) + 1]

    assert value("split", "--tasks") == "object_rel_direction_medium"
    assert value("perception", "--detail") == "facts"
    assert value("prompts-train", "--span") == value("prompts-test", "--span") == "any"
    assert "the line the answer depends on" in by_name["sft"].what  # not "the last frame's action"
    assert WorldChoice().flags() == []


@pytest.mark.parametrize(("world", "message"), [
    ({"tasks": ("object_rel_direction_medium", "room_size")}, r"asks no room_size; its task types are .*last_action"),
    ({"tasks": ()}, "name at least one task type"),
    ({"detail": "pixels"}, "'pixels' is not one of words, bearings"),
    ({"span": "3"}, "'3' is not one of 1, 2, any"),
])
def test_a_world_the_demo_cannot_make_is_refused_before_any_stage(tmp_path: Path, world: dict, message: str) -> None:
    from embodied_r.demo import WorldChoice

    with pytest.raises(ValueError, match=message):
        run_demo(tmp_path / "demo", world=WorldChoice(**world))
    assert not (tmp_path / "demo").exists()


def test_the_cli_refuses_an_unknown_task_type_with_the_known_ones(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from embodied_r.cli.main import main

    assert main(["demo", "--out", str(tmp_path / "demo"), "--tasks", "last_actions"]) == 2
    assert "asks no last_actions" in capsys.readouterr().err


def test_a_demo_folder_made_on_another_world_is_not_resumed(tmp_path: Path) -> None:
    from embodied_r.demo import WorldChoice

    out = tmp_path / "demo"
    out.mkdir()
    (out / "demo_plan.json").write_text(json.dumps({"size": {**DemoSize.for_minutes(15).__dict__, "detail": "words"}}))
    (out / "demo_state.json").write_text(json.dumps({"world": {"seconds": 1.0}}))
    (out / "train_recipe.yaml").write_text("the folder's own recipe\n")
    def files() -> dict[str, str]:  # the folder's lock is the guard against a second demo, not the demo's output
        return {path.name: path.read_text() for path in out.iterdir() if not path.name.endswith(".lock")}

    before = files()
    with pytest.raises(ValueError, match=r"other settings \(detail 'words' -> 'facts'\).*--force"):
        run_demo(out, world=WorldChoice(detail="facts"))
    with pytest.raises(ValueError, match=r"train_steps .*--force"):
        run_demo(out, minutes=5)  # another budget: other sizes
    with pytest.raises(ValueError, match=r"dtype 'auto' -> 'float32'"):
        run_demo(out, dtype="float32")
    assert files() == before  # a refused run wrote nothing


def test_a_plan_read_back_from_json_or_lacking_newer_fields_resumes(tmp_path: Path) -> None:
    from dataclasses import asdict

    from embodied_r.demo import check_same_size

    size = DemoSize.for_minutes(15)
    check_same_size(json.loads(json.dumps(asdict(size))), size, tmp_path)  # its tasks tuple comes back a list
    older = {key: value for key, value in asdict(size).items() if key not in ("detail", "span")}
    check_same_size(json.loads(json.dumps(older)), size, tmp_path)


def test_the_record_names_the_world_flags_it_ran_with(tmp_path: Path) -> None:
    from embodied_r.cli.demo import write_record

    for folder, scores in (("eval_sft", [1.0, 0.0]), ("eval_after", [1.0, 1.0])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "predictions.jsonl").write_text("".join(
            json.dumps({"id": f"q{i}", "task": "last_action", "score": s}) + "\n" for i, s in enumerate(scores)))
    (tmp_path / "demo_plan.json").write_text(json.dumps({"size": DemoSize.for_minutes(15).__dict__}))
    summary = {"eval_sft": {"overall": {"n": 2, "micro": 0.5}}, "eval_after": {"overall": {"n": 2, "micro": 1.0}},
               "stages": {}, "wall_time_s": 1.0, "peak_rss_gib": 1.0}
    write_record(summary, tmp_path, tmp_path / "record.json", 15, "float32", ["--detail", "facts"])
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["command"] == "embodied-r demo --minutes 15 --dtype float32 --detail facts"


def test_the_terminal_says_in_how_many_grpo_steps_a_group_differed(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from embodied_r.cli.demo import print_grpo_steps

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": step, "zero_variance_groups/accuracy": 1.0}) + "\n"
                               for step in (1, 2, 3)))
    print_grpo_steps({"global_step": 3}, metrics)
    assert "differed in reward in 0 of 3 steps; in every step" in " ".join(capsys.readouterr().out.split())
    metrics.write_text("".join(json.dumps({"step": step, "zero_variance_groups/accuracy": share}) + "\n"
                               for step, share in ((1, 0.5), (2, 1.0))))
    print_grpo_steps({"global_step": 2}, metrics)
    assert "differed in reward in 1 of 2 steps (in the others" in " ".join(capsys.readouterr().out.split())
    print_grpo_steps({"global_step": 1}, metrics)
    assert "differed in reward in 1 of 1 steps warning" in " ".join(capsys.readouterr().out.split())
