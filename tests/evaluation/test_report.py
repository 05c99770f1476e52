from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.core.io import DataFileError
from embodied_r.core.records import Prediction
from embodied_r.core.task_table import task_table
from embodied_r.evaluation.report import build_report, training_history


def make_eval_run(folder: Path, correct: list[bool]) -> Path:
    """An eval output folder as ``run_eval`` writes it (metrics.json + predictions.jsonl)."""
    folder.mkdir(parents=True)
    predictions = [Prediction(id=f"q{i}", task="dir" if i % 2 else "dist", completion=f"<think>t{i} <b></think>"
                              f"<answer>{'A' if ok else 'B'}</answer>", parsed_answer="A" if ok else "B", answer="A",
                              answer_type="choice", correct=ok, score=float(ok)).to_dict()
                   for i, ok in enumerate(correct)]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in predictions))
    metrics = task_table(predictions)
    metrics["baselines"] = {"random": {"status": "ok", "tasks": {"dir": {"score": 0.5}, "dist": {"score": 0.5}},
                                       "overall": {"micro": 0.5, "macro": 0.5}},
                            "vlm_only": {"status": "not run", "reason": "no backend", "tasks": {}, "overall": {}}}
    metrics["position_bias"] = {"overall": {"n": 4, "n_parsed": 4, "true": {"A": 4}, "predicted": {"A": 2, "B": 2}}}
    metrics["consistency"] = {"status": "ok", "judge": "tiny", "overall": {"judged": 4, "consistent": 3,
                                                                           "rate": 0.75, "rate_all": 0.75}}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def make_training_run(folder: Path, with_jsonl: bool = True) -> Path:
    folder.mkdir(parents=True)
    history = [{"step": s, "loss": 0.1 / s, "reward": 0.2 * s, "rewards/accuracy/mean": 0.1 * s} for s in range(1, 5)]
    if with_jsonl:
        (folder / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
        (folder / "eval.jsonl").write_text(
            json.dumps({"step": 0, "score": 0.2, "n": 40, "ci95": [0.105, 0.348]}) + "\n"
            + json.dumps({"step": 4, "score": 0.4, "n": 40, "ci95": [0.263, 0.554], "unparsed_rate": 0.0}) + "\n")
    for step in (2, 4):
        (folder / f"checkpoint-{step}").mkdir()
        (folder / f"checkpoint-{step}" / "trainer_state.json").write_text(
            json.dumps({"log_history": history[:step]}))
    return folder


def test_report_before_after_and_training(tmp_path: Path) -> None:
    before = make_eval_run(tmp_path / "before", [True, False, False, False])
    after = make_eval_run(tmp_path / "after", [True, True, True, False])
    train = make_training_run(tmp_path / "train")
    summary = build_report([before, after, train], tmp_path / "report")
    out = tmp_path / "report"
    for name in ("tasks.png", "compare.png", "progression.png", "position_bias.png", "training.png", "report.html",
                 "metrics.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "tasks.png").read_bytes()[:4] == b"\x89PNG"
    assert [r["overall"]["micro"] for r in summary["runs"]] == [0.25, 0.75]
    assert summary["training"][0]["steps"] == 4
    page = (out / "report.html").read_text()
    assert "before / after" in page and "<script" not in page
    assert "75.0" in page and "25.0" in page  # overall scores in %
    assert "&lt;b&gt;" in page  # completions are escaped, not rendered
    assert "no backend" in page  # a baseline that did not run says why
    # n per task and the 95 % interval beside every score; the paired difference with its verdict.
    assert "<th>n</th>" in page and "before [95 % interval]" in page
    assert "25.0 [4.6, 69.9]" in page  # 1 of 4 correct: Wilson's interval
    assert "Differences (paired on the same questions)" in page and "after − before" in page
    # 2 of 4 questions changed, both for the better: no exact test can decide on two pairs.
    assert "+50.0" in page and "too few differing answers" in page and "p (exact test)" in page
    assert "img{max-width:100%" in page
    # The held-out curve over training, with n and the interval of every point.
    assert "Held-out evaluations during training" in page and "40.0 [26.3, 55.4]" in page


def test_report_shows_the_reference_names(tmp_path: Path) -> None:
    from embodied_r.evaluation.reference_names import reference_metrics

    folder = make_eval_run(tmp_path / "vsi", [True, False])
    metrics = json.loads((folder / "metrics.json").read_text())
    answers = [("object_rel_direction_easy", "A", "A"), ("object_rel_direction_hard", "B", "A")] + [
        ("route_planning", "A", gold) for gold in "ABCD"]
    metrics["reference"] = reference_metrics([{"id": f"v{i}", "task": t, "answer": gold, "score": 1.0,
                                               "completion": f"<answer>{text}</answer>"}
                                              for i, (t, text, gold) in enumerate(answers)])
    (folder / "metrics.json").write_text(json.dumps(metrics))
    build_report([folder], tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Under the reference names (lmms-eval)" in page
    assert "vsibench: object_rel_direction_accuracy</td><td>50.0" in page
    assert "vsibench: vsibench_overall</td><td>37.5" in page  # mean of 50 and 25
    assert "missing: obj_appearance_order_accuracy" in page  # an overall over fewer types says so


def test_training_history_falls_back_to_trainer_state(tmp_path: Path) -> None:
    run = make_training_run(tmp_path / "t", with_jsonl=False)
    history = training_history(run)
    assert [h["step"] for h in history] == [1, 2, 3, 4]  # the newest checkpoint's log_history


def test_report_in_the_run_folder_keeps_its_metrics(tmp_path: Path) -> None:
    run = make_eval_run(tmp_path / "run", [True, False])
    before = (run / "metrics.json").read_text()
    build_report([run], run)
    assert (run / "metrics.json").read_text() == before and (run / "report.html").is_file()


def test_report_rejects_unknown_folders(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFileError, match="neither an eval run"):
        build_report([tmp_path / "empty"], tmp_path / "out")
    with pytest.raises(DataFileError, match="not a folder"):
        build_report([tmp_path / "missing"], tmp_path / "out")


def test_eval_prints_the_reference_names(capsys: pytest.CaptureFixture[str]) -> None:
    from embodied_r.cli.eval import print_metrics
    from embodied_r.evaluation.reference_names import reference_metrics

    predictions = [{"id": "c", "task": "object_counting", "score": 0.6, "parsed_answer": 8.0, "answer": 10,
                    "completion": "<answer>8</answer>"},
                   {"id": "r", "task": "route_planning", "score": 1.0, "parsed_answer": "A", "answer": "A",
                    "completion": "<answer>(A)</answer>"}]
    metrics = {**task_table(predictions), "model": "m", "data": "d", "resumed": 0, "generated_this_run": 2,
               "wall_time_s": 1.0}
    metrics["reference"] = reference_metrics(predictions)
    print_metrics(metrics)
    out = capsys.readouterr().out
    # MRA 0.6 and "(A)" scored 0 by the reference's rule: overall 30 %; one question scored differently.
    assert "lmms-eval" in out and "object_counting_mra" in out and "vsibench_overall" in out and "30.0" in out
    assert "missing:" in out and "score 1 of 2 question(s) differently" in out


def test_a_run_of_fewer_questions_says_its_own_n(tmp_path: Path) -> None:
    # The demo's untrained model answers only the first questions: its interval is on its own n.
    first = make_eval_run(tmp_path / "first", [False, False])
    last = make_eval_run(tmp_path / "last", [True, False, True, True, False, True])
    build_report([first, last], tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    overall = page[page.index("overall (micro)"):].split("</tr>")[0]
    assert "<td>6</td>" in overall and "(n 2)" in overall  # the n column is the last run's
    assert overall.count("(n ") == 1  # the last run's own cell needs no note


def test_report_compares_a_run_with_its_blind_self_and_says_how_many_steps_ran(tmp_path: Path) -> None:
    after = make_eval_run(tmp_path / "after", [True] * 8 + [False] * 2)
    (after / "baselines").mkdir()
    blind = [{"id": f"q{i}", "task": "dir" if i % 2 else "dist", "score": 0.0} for i in range(10)]
    (after / "baselines" / "blind.jsonl").write_text("".join(json.dumps(p) + "\n" for p in blind))
    train = make_training_run(tmp_path / "train")
    (train / "summary.json").write_text(json.dumps({"global_step": 3, "time_budget": {
        "minutes": 4.5, "stopped_at_step": 3, "max_steps": 36}}))
    build_report([after, train], tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    # 8 improved, 0 worse of 10 by the sign test: p = 0.0078, better.
    assert "after − after blind" in page and "0.008" in page and "8 / 0" in page
    assert "GRPO steps run: 3 of 36</b> (its time budget of 4.5 min ended it)" in page


def test_report_of_an_eval_run_beside_a_baselines_only_run(tmp_path: Path) -> None:
    # `embodied-r score` without completions: baselines, "model": null, no model table.
    run = make_eval_run(tmp_path / "model", [True, False, True, True])
    only = tmp_path / "baselines_only"
    only.mkdir()
    baselines = json.loads((run / "metrics.json").read_text())["baselines"]
    (only / "metrics.json").write_text(json.dumps({
        "model": None, "completions": None, "source": "score", "data": "rows.jsonl", "n_questions": 4,
        "questions_per_task": {"dir": 2, "dist": 2}, "baselines": baselines,
        "loader": {"n_skipped": 1, "skipped_by_reason": {"empty prompt": 1}}}))
    summary = build_report([run, only], tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    assert [r["name"] for r in summary["runs"]] == ["model"]  # the model's tables hold the scored run only
    assert summary["baseline_runs"][0]["baselines"]["random"] == {"micro": 0.5, "macro": 0.5}
    assert "No model scored: baselines_only" in page and "empty prompt" in page
    assert "baselines.png" in summary["images"] and "tasks.png" in summary["images"]
