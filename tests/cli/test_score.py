"""``embodied-r score``: completions produced elsewhere, scored as ``eval`` scores its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.records import PromptRow

VSI_ROWS = [
    ("object_rel_direction_easy", ["A. left", "B. right"], "B"),
    ("object_rel_direction_medium", ["A. left", "B. right", "C. back"], "C"),
    ("object_rel_direction_hard", ["A. front-left", "B. front-right", "C. back-left", "D. back-right"], "A"),
    ("object_counting", None, "213"),
]


def write_vsibench(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "dataset": "scannet", "scene_name": "scene0001_00", "question_type": qtype, "question": "?",
             "options": options, "ground_truth": gold} for i, (qtype, options, gold) in enumerate(VSI_ROWS)]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def write_completions(path: Path, answers: dict[object, object]) -> Path:
    path.write_text("".join(json.dumps({"id": qid, "completion": text}) + "\n" for qid, text in answers.items()))
    return path


ANSWERS = {0: "<think>r</think><answer>(B)</answer>",   # ours 1, lmms-eval's rule 0
           1: "<answer>C</answer>",
           2: "<answer>C</answer>",                     # wrong
           3: "<answer>two hundred and thirteen</answer>"}


def test_score_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_vsibench(tmp_path / "vsi")
    completions = write_completions(tmp_path / "completions.jsonl", ANSWERS)
    out = tmp_path / "out"
    assert main(["score", "--data", f"vsibench-merged:{data}", "--completions", str(completions),
                 "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["tasks"]["object_rel_direction"]["score"] == pytest.approx(2 / 3)
    assert metrics["tasks"]["object_counting"]["score"] == 1.0  # 213 read from words
    reference = metrics["reference"]["vsibench"]
    # By level as lmms-eval: easy 0 ("(B)"), medium 1, hard 0 -> 1/3; counting 1.0; overall 2/3.
    assert reference["object_rel_direction_accuracy"] == pytest.approx(100 / 3)
    assert reference["vsibench_overall"] == pytest.approx(200 / 3)
    assert reference["item_disagreements"] == 1 and reference["n_items"] == 4
    assert metrics["completions"]["n_scored"] == 4 and metrics["completions"]["n_missing"] == 0
    assert metrics["baselines"]["random"]["status"] == "ok"
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 4 and (out / "report.html").is_file()
    printed = capsys.readouterr().out
    assert "vsibench_overall" in printed and "1 of 4 question(s) differently" in printed
    # Scoring the same completions again rewrites the folder; other completions need another folder.
    assert main(["score", "--data", f"vsibench-merged:{data}", "--completions", str(completions), "--out",
                 str(out), "--no-report"]) == 0
    other = write_completions(tmp_path / "other.jsonl", ANSWERS)
    assert main(["score", "--data", f"vsibench-merged:{data}", "--completions", str(other), "--out", str(out)]) == 2
    assert "use another --out" in capsys.readouterr().err


def test_score_fits_both_priors_on_a_training_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [PromptRow(id=f"t{i}", task="dir", prompt=[{"role": "user", "content": f"Q{i}"}], answer=gold,
                      answer_type="choice", options=options)
            for i, (gold, options) in enumerate([("A", ["A. front", "B. back"]), ("B", ["A. back", "B. front"])])]
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    # Train: "front" is the answer three times, always behind letter A.
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(PromptRow(id=f"r{i}", task="dir", prompt=[{"role": "user", "content": "Q"}],
                                                  answer="A", answer_type="choice",
                                                  options=["A. front", "B. back"]).to_dict()) + "\n"
                             for i in range(3)))
    completions = write_completions(tmp_path / "c.jsonl", {"t0": "<answer>A</answer>", "t1": "<answer>A</answer>"})
    out = tmp_path / "out"
    assert main(["score", "--data", str(data), "--completions", str(completions), "--out", str(out), "--no-report",
                 "--prior-from", str(train)]) == 0
    baselines = json.loads((out / "metrics.json").read_text())["baselines"]
    assert baselines["prior"]["overall"]["micro"] == 0.5           # A: right on t0 only
    assert baselines["answer-prior"]["overall"]["micro"] == 1.0    # "front": A on t0, B on t1
    assert all("train.jsonl (3 questions)" in baselines[k]["fit_on"] for k in ("prior", "answer-prior"))
    assert "answer-prior" in capsys.readouterr().out
    assert main(["score", "--data", str(data), "--completions", str(completions), "--out", str(tmp_path / "o2"),
                 "--prior-from", str(tmp_path / "nope.jsonl")]) == 2
    assert "--prior-from file not found" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text(json.dumps({**rows[0].to_dict(), "prompt": []}) + "\n")
    assert main(["score", "--data", str(data), "--completions", str(completions), "--out", str(tmp_path / "o3"),
                 "--prior-from", str(tmp_path / "empty.jsonl")]) == 2
    assert "no usable question to fit the priors on ({'empty prompt': 1})" in capsys.readouterr().err


def test_unknown_and_missing_ids_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = f"vsibench:{write_vsibench(tmp_path / 'vsi')}"
    unknown = write_completions(tmp_path / "unknown.jsonl", {**ANSWERS, "q7": "<answer>A</answer>"})
    assert main(["score", "--data", data, "--completions", str(unknown), "--out", str(tmp_path / "a")]) == 2
    assert "1 completion id(s) name no question of the data: q7" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()  # nothing written for a refused run

    partial = write_completions(tmp_path / "partial.jsonl", {0: ANSWERS[0], 1: ANSWERS[1]})
    assert main(["score", "--data", data, "--completions", str(partial), "--out", str(tmp_path / "b")]) == 2
    assert "2 of 4 question(s) have no completion: 2, 3" in capsys.readouterr().err

    assert main(["score", "--data", data, "--completions", str(partial), "--out", str(tmp_path / "c"),
                 "--missing", "unanswered", "--no-report"]) == 0
    metrics = json.loads((tmp_path / "c" / "metrics.json").read_text())
    assert metrics["overall"]["n"] == 4 and metrics["overall"]["unparsed"] == 2
    assert metrics["completions"]["missing_ids"] == ["2", "3"]

    assert main(["score", "--data", data, "--completions", str(partial), "--out", str(tmp_path / "d"),
                 "--missing", "leave-out", "--no-report"]) == 0
    metrics = json.loads((tmp_path / "d" / "metrics.json").read_text())
    assert metrics["overall"]["n"] == 2 and metrics["completions"]["n_missing"] == 2
    assert "2 question(s) had no completion (left out)" in capsys.readouterr().out


@pytest.mark.parametrize("line,message", [
    ("not json", "not valid JSON"),
    ('{"id": 0}', 'expected an object with "id" and "completion"'),
    ('{"id": 0, "completion": null}', "completion must be a string"),
    ('{"id": 1.0, "completion": "x"}', "id must be a non-empty string or an integer"),
    ('{"id": 0, "completion": "a"}', "id '0' already given on line 1"),
])
def test_malformed_completions_name_their_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str,
                                               message: str) -> None:
    completions = tmp_path / "c.jsonl"
    completions.write_text(json.dumps({"id": 0, "completion": "<answer>B</answer>"}) + "\n" + line)
    data = f"vsibench:{write_vsibench(tmp_path / 'vsi')}"
    assert main(["score", "--data", data, "--completions", str(completions), "--out", str(tmp_path / "o")]) == 2
    assert f"c.jsonl:2: {message}" in capsys.readouterr().err


def test_score_refuses_an_eval_folder_and_baselines_that_need_a_model(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    data = f"vsibench:{write_vsibench(tmp_path / 'vsi')}"
    completions = write_completions(tmp_path / "c.jsonl", ANSWERS)
    run = tmp_path / "eval_run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"data": "x", "model": "m"}))
    assert main(["score", "--data", data, "--completions", str(completions), "--out", str(run)]) == 2
    assert "holds a run of" in capsys.readouterr().err
    assert main(["score", "--data", data, "--completions", str(completions), "--out", str(tmp_path / "o"),
                 "--baselines", "direct"]) == 2
    assert "not available without a model" in capsys.readouterr().err


def test_score_of_eval_predictions_reproduces_eval_metrics(tmp_path: Path, tiny_lm_dir: Path) -> None:
    # eval's own predictions.jsonl is a completions file: scoring it must give eval's numbers.
    rows = [PromptRow(id=f"q{i}", task="object_rel_distance", prompt=[{"role": "user", "content": "which?"}],
                      answer="AB"[i % 2], options=["A. chair", "B. table"]) for i in range(4)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    assert main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(tmp_path / "eval"),
                 "--max-new-tokens", "4", "--dtype", "float32", "--no-report"]) == 0
    assert main(["score", "--data", str(data), "--completions", str(tmp_path / "eval" / "predictions.jsonl"),
                 "--out", str(tmp_path / "score"), "--no-report"]) == 0
    evaluated, scored = (json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("eval", "score"))
    for key in ("tasks", "overall", "reference", "position_bias"):
        assert scored[key] == evaluated[key], key


# ---------------------------------------------------------------------------------------------------
# The solver baseline (a fake method's solver: tests/fake_solver.py)
# ---------------------------------------------------------------------------------------------------

SOLVER_OPTIONS = ["A. left", "B. right", "C. front", "D. back"]


def write_solver_rows(path: Path) -> Path:
    from fake_solver import row

    rows = [row("c1", "direction", "SOLVE B copy", "B", SOLVER_OPTIONS, detail="words"),
            row("c2", "direction", "SOLVE A", "C", SOLVER_OPTIONS, detail="words"),
            row("c3", "direction", "NONE the sofa is in no frame", "D", SOLVER_OPTIONS, detail="words"),
            row("n1", "counting", "SOLVE 8 copy", 10.0, detail="map"),
            row("n2", "counting", "NONE no count stated", 3.0, detail="map"),
            row("r1", "counting", "SOLVE 3", 3.0, version="robot_r1_mw_v1")]
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    return path


def check_solver_metrics(out: Path) -> None:
    solver = json.loads((out / "metrics.json").read_text())["baselines"]["solver"]
    direction, counting = solver["tasks"]["direction"], solver["tasks"]["counting"]
    assert solver["status"] == "ok"
    assert (direction["n_applicable"], direction["ceiling"], direction["copy"]) == (2, 0.5, "mixed")
    assert direction["applicable"] == pytest.approx(2 / 3) and direction["detail"] == {"words": 3}
    assert direction["score"] == pytest.approx((1 + 0 + 0.25) / 3)
    # 8 for 10 scores 0.6 by MRA; the Robot-R1 row's method has no solver: not applicable, never guessed.
    assert (counting["n_applicable"], counting["copy"]) == (1, True) and counting["ceiling"] == pytest.approx(0.6)
    assert counting["not_applicable"] == {"no count stated": 1, "method robot_r1 has no solver": 1}
    assert counting["detail"] == {"map": 2, "missing": 1}
    assert solver["overall"]["n_applicable"] == 3 and solver["overall"]["ceiling"] == pytest.approx(1.6 / 3)
    assert len((out / "baselines" / "solver.jsonl").read_text().splitlines()) == 6


def test_score_runs_the_solver_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_solver import fake_method

    monkeypatch.setenv("COLUMNS", "250")  # one table row per line

    data = write_solver_rows(tmp_path / "rows.jsonl")
    completions = write_completions(tmp_path / "c.jsonl", {qid: "<answer>A</answer>" for qid in
                                                           ("c1", "c2", "c3", "n1", "n2", "r1")})
    with fake_method():
        assert main(["score", "--data", str(data), "--completions", str(completions), "--out", str(tmp_path / "out"),
                     "--baselines", "random,solver"]) == 0
    check_solver_metrics(tmp_path / "out")
    printed = capsys.readouterr().out
    assert "solver baseline per task" in printed and "the sofa is in no frame (1)" in printed
    report = (tmp_path / "out" / "report.html").read_text()
    assert "solver ceiling" in report and "<td>66.7</td><td>50.0</td><td>mixed</td>" in report
    # An unknown name is still refused, by score and by eval.
    assert main(["score", "--data", str(data), "--completions", str(completions), "--out", str(tmp_path / "o2"),
                 "--baselines", "solver,oracle"]) == 2
    assert "['oracle'] not available without a model" in capsys.readouterr().err
    assert main(["eval", "--data", str(data), "--out", str(tmp_path / "o3"), "--baselines", "solver,oracle"]) == 2
    assert "--baselines: unknown ['oracle']" in capsys.readouterr().err


def test_eval_runs_the_solver_baseline(tmp_path: Path, tiny_lm_dir: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_solver import fake_method

    monkeypatch.setenv("COLUMNS", "250")

    data = write_solver_rows(tmp_path / "rows.jsonl")
    with fake_method():
        assert main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(tmp_path / "eval"),
                     "--max-new-tokens", "2", "--dtype", "float32", "--no-report", "--baselines", "solver"]) == 0
    check_solver_metrics(tmp_path / "eval")
    printed = capsys.readouterr().out
    assert "solver baseline per task" in printed and "applicable to 3 of 6; ceiling 53.3% of those" in printed


def test_score_without_completions_measures_the_baselines_only(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_solver import fake_method

    monkeypatch.setenv("COLUMNS", "250")
    data = write_solver_rows(tmp_path / "rows.jsonl")
    out = tmp_path / "out"
    with fake_method():
        assert main(["score", "--data", str(data), "--out", str(out), "--baselines", "random,solver"]) == 0
    check_solver_metrics(out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] is None and metrics["completions"] is None and metrics["source"] == "score"
    assert metrics["baselines"]["random"]["status"] == "ok"
    assert metrics["baselines"]["random"]["tasks"]["direction"]["score"] == pytest.approx(0.25)
    assert metrics["n_questions"] == 6 and metrics["questions_per_task"] == {"counting": 3, "direction": 3}
    assert not {"tasks", "overall", "reference", "position_bias"} & set(metrics)  # no model scores
    assert not (out / "predictions.jsonl").exists()
    printed = capsys.readouterr().out
    assert "no completions: no model scored; the baselines of 6 question(s)" in printed
    assert "solver baseline per task" in printed and "score % [95 % interval]" not in printed
    # The report builds, of the baselines only: no model column, no model table, no samples.
    report = (out / "report.html").read_text()
    assert "No model scored" in report and "<th>random</th><th>solver</th>" in report
    assert "<td>66.7</td><td>50.0</td><td>mixed</td>" in report
    assert "<th>model</th>" not in report and "Per-task scores</h2>" not in report and "Sample reasoning" not in report
    assert (out / "baselines.png").read_bytes()[:4] == b"\x89PNG"
    # The same again rewrites the folder; completions scored into it need another folder.
    with fake_method():
        assert main(["score", "--data", str(data), "--out", str(out), "--baselines", "random,solver",
                     "--no-report"]) == 0
    completions = write_completions(tmp_path / "c.jsonl", {qid: "<answer>A</answer>" for qid in
                                                           ("c1", "c2", "c3", "n1", "n2", "r1")})
    assert main(["score", "--data", str(data), "--completions", str(completions), "--out", str(out)]) == 2
    assert "use another --out" in capsys.readouterr().err


def test_score_without_completions_refuses_nothing_to_score_and_completion_options(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_solver_rows(tmp_path / "rows.jsonl")
    assert main(["score", "--data", str(data), "--out", str(tmp_path / "a"), "--baselines", "none"]) == 2
    assert "nothing to score: no --completions and --baselines none" in capsys.readouterr().err
    for flag, value in (("--missing", "unanswered"), ("--name", "m")):
        assert main(["score", "--data", str(data), "--out", str(tmp_path / "b"), flag, value]) == 2
        assert f"{flag} apply to completions, and no --completions was given" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


BAD_BYTES = {
    "latin-1": (b'{"id": 1, "completion": "caf\xe9"}\n', "not UTF-8 text (byte 0xe9"),
    "binary": (b"\x89PNG\r\n\x1a\n\xff\xd8\xff\xe0\x00\x10JFIF", "not UTF-8 text (byte 0x89"),
    "nul-bytes": (b"\x00" * 32 + b"\n", "a NUL byte at character 1"),
    "not-json": (b"<answer>B</answer>\n", "not valid JSON"),
}


@pytest.mark.parametrize("kind", BAD_BYTES)
def test_a_bad_completions_file_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  kind: str) -> None:
    content, message = BAD_BYTES[kind]
    line = 1 if kind in ("binary", "nul-bytes") else 2
    completions = tmp_path / "c.jsonl"
    completions.write_bytes(b"" if line == 1 else json.dumps({"id": 0, "completion": "x"}).encode() + b"\n")
    with completions.open("ab") as handle:
        handle.write(content)
    data = f"vsibench:{write_vsibench(tmp_path / 'vsi')}"
    assert main(["score", "--data", data, "--completions", str(completions), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"c.jsonl:{line}: {message}" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", BAD_BYTES)
def test_bad_prompt_rows_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    content, message = BAD_BYTES[kind]
    row = PromptRow(id="q0", task="dir", prompt=[{"role": "user", "content": "Q"}], answer="A",
                    options=["A. x", "B. y"])
    data = tmp_path / "rows.jsonl"
    data.write_bytes(json.dumps(row.to_dict()).encode() + b"\n" + content)
    completions = write_completions(tmp_path / "c.jsonl", {"q0": "<answer>A</answer>"})
    assert main(["score", "--data", str(data), "--completions", str(completions), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"rows.jsonl:2: {message}" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
