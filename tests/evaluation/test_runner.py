from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.core.io import DataFileError, read_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.evaluation import predict
from embodied_r.evaluation.predict import evaluate_rows, score_completion
from embodied_r.evaluation.runner import load_eval_rows, run_eval
from embodied_r.evaluation.settings import (
    BaselineSettings,
    EvalSettings,
    EvalSettingsError,
    GenerationSettings,
)

# The tiny model's greedy answers, short: these tests are about the run's files, not what it answers.
TWO_TOKENS = GenerationSettings(max_new_tokens=2, dtype="float32")


def _rows(n: int) -> list[PromptRow]:
    return [
        PromptRow(id=f"q{i}", task="dir" if i % 2 else "dist",
                  prompt=[{"role": "user", "content": f"Question {i}: where is the door?"}],
                  answer="A", answer_type="choice", options=["A. left", "B. right"])
        for i in range(n)
    ]


def _write_rows(path: Path, rows: list[PromptRow]) -> Path:
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    return path


def test_score_completion_uses_the_shared_parser() -> None:
    row = _rows(1)[0]
    assert score_completion(row, "<think>left</think><answer>A</answer>").correct
    unparsed = score_completion(row, "I think A")
    assert unparsed.parsed_answer is None and unparsed.score == 0.0


def test_evaluate_rows_with_a_tiny_model(tiny_lm_dir: Path) -> None:
    from embodied_r.inference.models import load_reasoner

    model, tokenizer = load_reasoner(str(tiny_lm_dir), dtype="float32")
    rows = _rows(5)
    seen: list[str] = []
    predictions = evaluate_rows(model, tokenizer, rows, batch_size=2, max_new_tokens=8,
                                on_predictions=lambda batch: seen.extend(p.id for p in batch))
    assert sorted(p.id for p in predictions) == sorted(r.id for r in rows)
    assert sorted(seen) == sorted(r.id for r in rows)  # every batch was handed over as it finished
    assert all(isinstance(p.completion, str) for p in predictions)


def test_run_eval_resumes_without_recomputing(tmp_path: Path, tiny_lm_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    data = _write_rows(tmp_path / "rows.jsonl", _rows(6))
    out = tmp_path / "out"
    # First run "killed" after 4 questions: emulate by evaluating a limited prefix.
    tiny = GenerationSettings(batch_size=2, max_new_tokens=4, dtype="float32")
    first = run_eval(data, str(tiny_lm_dir), out, EvalSettings(limit=4, generation=tiny))
    assert first["generated_this_run"] == 4
    # The first batch checked the greedy loop against model.generate, and the loop decoded the rest.
    assert first["generation"]["greedy_loop"] == {"used": True, "checked_rows": 2, "agreed": True}
    before = read_jsonl(out / "predictions.jsonl")

    generated_ids: list[str] = []
    original = predict.evaluate_rows

    def spy(model, tokenizer, rows, **kwargs):
        generated_ids.extend(r.id for r in rows)
        return original(model, tokenizer, rows, **kwargs)

    monkeypatch.setattr(predict, "evaluate_rows", spy)
    second = run_eval(data, str(tiny_lm_dir), out, EvalSettings(generation=tiny))
    assert sorted(generated_ids) == ["q4", "q5"]  # only the unfinished ones
    after = read_jsonl(out / "predictions.jsonl")
    assert after[:4] == before and len(after) == 6
    assert second["resumed"] == 4 and second["overall"]["n"] == 6
    third = run_eval(data, str(tiny_lm_dir), out, EvalSettings(generation=tiny))
    assert third["generated_this_run"] == 0 and third["generation"]["greedy_loop"] is None  # no model ran
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["tasks"]) == {"dir", "dist"}
    assert metrics["overall"]["unparsed"] <= 6


def test_run_eval_refuses_to_mix_models(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = _write_rows(tmp_path / "rows.jsonl", _rows(2))
    run_eval(data, str(tiny_lm_dir), tmp_path / "out", EvalSettings(generation=TWO_TOKENS))
    with pytest.raises(DataFileError, match="use another --out folder"):
        run_eval(data, "another-model", tmp_path / "out")


def test_unusable_rows_are_reported(tmp_path: Path) -> None:
    rows = _rows(2)
    rows.append(PromptRow(id="bad", task="t", prompt=[{"role": "user", "content": "q"}], answer="A",
                          answer_type="choice", options=None))
    rows.append(PromptRow(id="empty", task="t", prompt=[], answer="A", answer_type="choice", options=["A. x"]))
    path = _write_rows(tmp_path / "rows.jsonl", rows)
    with path.open("a") as handle:
        handle.write('{"id": "broken"}\n')
    kept, report = load_eval_rows(path)
    assert [r.id for r in kept] == ["q0", "q1"]
    assert {s["id"] for s in report.skipped} == {"bad", "empty", "broken"}


def test_unsupported_or_missing_data(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="file not found"):
        load_eval_rows(tmp_path / "nope.jsonl")
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(DataFileError, match="unsupported data file"):
        load_eval_rows(tmp_path / "x.csv")


def test_sharded_eval_merges_every_row_once(tmp_path: Path, tiny_lm_dir: Path) -> None:
    """`eval --shard I/N` per process, then one plain run: every question predicted once, nothing generated
    again, and the same predictions as a run without shards (greedy decoding)."""
    from embodied_r.cli.main import main

    data = _write_rows(tmp_path / "rows.jsonl", _rows(7))
    out = tmp_path / "out"
    common = ["--data", str(data), "--model", str(tiny_lm_dir), "--max-new-tokens", "4", "--dtype", "float32",
              "--batch-size", "2", "--no-report", "--baselines", "none"]
    for shard in ("0/3", "1/3", "2/3"):
        assert main(["eval", *common, "--out", str(out), "--shard", shard]) == 0
    sizes = [len(read_jsonl(out / f"shard-{i}-of-3" / "predictions.jsonl")) for i in range(3)]
    assert sizes == [3, 2, 2]
    assert main(["eval", *common, "--out", str(out)]) == 0
    merged = json.loads((out / "metrics.json").read_text())
    assert merged["generated_this_run"] == 0 and merged["resumed"] == 7
    predictions = read_jsonl(out / "predictions.jsonl")
    assert sorted(p["id"] for p in predictions) == sorted(f"q{i}" for i in range(7))
    assert main(["eval", *common, "--out", str(tmp_path / "whole")]) == 0
    whole = {p["id"]: p["completion"] for p in read_jsonl(tmp_path / "whole" / "predictions.jsonl")}
    assert {p["id"]: p["completion"] for p in predictions} == whole


def test_shards_of_another_model_are_not_merged(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = _write_rows(tmp_path / "rows.jsonl", _rows(2))
    out = tmp_path / "out"
    no_baselines = BaselineSettings(names=())
    run_eval(data, str(tiny_lm_dir), out, EvalSettings(shard=(0, 2), generation=TWO_TOKENS, baselines=no_baselines,
                                                       report=False))
    with pytest.raises(DataFileError, match="use another --out folder"):
        run_eval(data, "another-model", out, EvalSettings(baselines=no_baselines, report=False))
    with pytest.raises(EvalSettingsError, match="0 <= I < N"):
        EvalSettings(shard=(2, 2))


def test_letter_prior_fit_on_a_training_file(tmp_path: Path, tiny_lm_dir: Path) -> None:
    """Leave-one-out on balanced letters is adversarial (leaving a question's own letter out makes another
    letter the most frequent); fit on the training split, the prior is the training letters' mode."""
    rows = _rows(4)                                     # gold A everywhere
    for row, letter in zip(rows, "AABB"):
        row.answer = letter
    data = _write_rows(tmp_path / "test.jsonl", rows)
    train = _rows(6)
    for row in train:
        row.answer = "B"
    prior_file = _write_rows(tmp_path / "train.jsonl", train)
    settings = EvalSettings(generation=TWO_TOKENS, report=False,
                            baselines=BaselineSettings(names=("prior", "answer-prior"), prior_data=prior_file))
    metrics = run_eval(data, str(tiny_lm_dir), tmp_path / "out", settings)
    prior = metrics["baselines"]["prior"]
    assert prior["overall"]["micro"] == 0.5 and "train.jsonl (6 questions)" in prior["fit_on"]
    # The rows share their option texts, so the answer text follows the letter here: B's text, right in 2 of 4.
    answer_prior = metrics["baselines"]["answer-prior"]
    assert answer_prior["overall"]["micro"] == 0.5 and "train.jsonl (6 questions)" in answer_prior["fit_on"]
    loo_settings = EvalSettings(generation=TWO_TOKENS, report=False, baselines=BaselineSettings(names=("prior",)))
    loo = run_eval(data, str(tiny_lm_dir), tmp_path / "out2", loo_settings)["baselines"]["prior"]
    assert loo["fit_on"] == "evaluated questions, leave-one-out"
