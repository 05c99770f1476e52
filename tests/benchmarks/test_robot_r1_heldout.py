"""benchmarks/robot_r1_heldout.py: the table's baselines, both priors fit on the training rows when
``--prior-from`` is given (no model is run here)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark

from embodied_r.core.records import PromptRow


@pytest.fixture(scope="module")
def heldout() -> ModuleType:
    return load_benchmark("robot_r1_heldout")


def question(i: int, gold: str, options: list[str]) -> dict:
    return PromptRow(id=f"q{i}", task="movement", prompt=[{"role": "user", "content": f"Where to move? {i}"}],
                     answer=gold, answer_type="choice", options=options).to_dict()


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_both_priors_fit_on_training_rows(heldout: ModuleType, tmp_path: Path) -> None:
    # Test: "up" is the answer twice, behind A and then B. Training: "up" always, always behind B.
    test = write(tmp_path / "test_in.jsonl", [question(0, "A", ["A. up", "B. down"]),
                                              question(1, "B", ["A. down", "B. up"])])
    train = write(tmp_path / "train.jsonl", [question(10 + i, "B", ["A. down", "B. up"]) for i in range(3)])
    folder = tmp_path / "runs" / "final_test_in"
    folder.mkdir(parents=True)
    write(folder / "predictions.jsonl", [{"id": "q0", "task": "movement", "score": 1.0, "parsed_answer": "A"},
                                         {"id": "q1", "task": "movement", "score": 0.0, "parsed_answer": "A"}])
    (folder / "metrics.json").write_text(json.dumps({
        "data": str(test), "tasks": {"movement": {"n": 2, "score": 0.5, "ci95": None}},
        "overall": {"n": 2, "micro": 0.5, "ci95": None},
        "baselines": {"random": {"tasks": {"movement": {"score": 0.5}}, "overall": {"micro": 0.5}}}}))
    summary = heldout.summarise(tmp_path / "runs", ["final"], None, prior_from=train)
    row = summary["test_in"]["movement"]
    assert (row["random"], row["prior"], row["answer-prior"]) == (0.5, 0.5, 1.0)
    table = heldout.markdown(summary, ["final"], None)
    assert "| letter prior | answer prior |" in table and "| 50.0 | 50.0 | 100.0 |" in table
