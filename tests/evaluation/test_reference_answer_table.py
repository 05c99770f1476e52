"""``reference.vsibench`` against lmms-eval's own scores of answers nobody here scored by hand.

``tests/data/lmms_eval_vsibench_answers.jsonl`` holds VSI-Bench answers of every question type in the forms
models write them (lower-case letters, "The answer is B", the option's text alone, "(B)", "**B**", several
letters, letters with trailing text, empty and blank answers, number words, units, ".62", exponents, ...),
partly fixed forms and partly drawn at random, each with the score lmms-eval 0.7.3 gave it: the answer
went through lmms-eval's task ``process_results`` (which strips the response) and its ``vsibench``
``vsibench_process_results``. Its first line records the lmms-eval version, the command that wrote it
(``benchmarks/lmms_eval_reference.py --write-table``, run in a throwaway environment with lmms-eval
installed) and lmms-eval's nine aggregates of the whole table. The table is checked in, so these tests
run without lmms-eval.

The per-question scores that ``predictions.jsonl`` carries (``reference``) are checked here as well: a
``score`` run writes them, and their means are the reference table of its ``metrics.json``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from embodied_r.cli.main import main
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.benchmarks.vsibench import NUMERIC_TYPES, REL_DIRECTION
from embodied_r.evaluation.reference_names import (
    REL_DIRECTION_LEVELS,
    VSIBENCH_KEYS,
    item_reference,
    vsibench,
    with_item_reference,
)
from embodied_r.evaluation.reference_rules import reference_text, vsibench_item_score

TABLE = Path(__file__).resolve().parents[1] / "data" / "lmms_eval_vsibench_answers.jsonl"


def read_table() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in TABLE.read_text(encoding="utf-8").splitlines()]
    return lines[0], lines[1:]


def completion(answer: str) -> str:
    return f"<think>Frames 3 and 7. B. is unlikely.</think><answer>{answer}</answer>"


def as_predictions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": str(i), "task": row["question_type"], "answer": row["ground_truth"],
             "completion": completion(row["answer"]), "score": 0.0} for i, row in enumerate(rows)]


def test_the_table_covers_every_type_and_the_forms_models_write() -> None:
    header, rows = read_table()
    assert header["lmms_eval"] == "0.7.3" and header["rows"] == len(rows) and "--write-table" in header["command"]
    assert {row["question_type"] for row in rows} == set(VSIBENCH_KEYS) - {REL_DIRECTION} | set(REL_DIRECTION_LEVELS)
    answers = {row["answer"] for row in rows}
    for form in ("b", "The answer is B", "(B)", "**B**", "", "   "):
        assert form in answers or form.replace("B", "A") in answers or form.replace("B", "C") in answers, form
    assert any(row["form"] == "random" for row in rows)
    # Both outcomes occur for choices, and partial MRA for numbers: agreement is not all-zero or all-one.
    choice_scores = {row["lmms_eval"] for row in rows if "options" in row}
    assert choice_scores == {0.0, 1.0}
    assert any(0.0 < row["lmms_eval"] < 1.0 for row in rows if "options" not in row)


def test_every_answer_scores_as_lmms_eval_scored_it() -> None:
    _, rows = read_table()
    differing = []
    for row in rows:
        ours = vsibench_item_score(reference_text(completion(row["answer"])), row["ground_truth"],
                                   row["question_type"] in NUMERIC_TYPES)
        if ours != row["lmms_eval"]:
            differing.append(f"{row['question_type']} gold {row['ground_truth']!r} answer {row['answer']!r}: "
                             f"ours {ours}, lmms-eval {row['lmms_eval']}")
    assert not differing, f"{len(differing)} of {len(rows)} differ:\n" + "\n".join(differing[:40])


def test_per_question_reference_and_the_aggregates_equal_lmms_eval() -> None:
    header, rows = read_table()
    predictions = as_predictions(rows)
    assert [item_reference(p) for p in predictions] == [{"vsibench": row["lmms_eval"]} for row in rows]
    ours = vsibench(predictions)
    assert ours is not None and ours["complete"]
    # lmms-eval reports fractions rounded to 6 decimals; ours are in percent, unrounded.
    assert {key: round(ours[key] / 100, 6) for key in header["aggregates"]} == header["aggregates"]


def test_item_reference_applies_only_where_a_reference_does() -> None:
    mvbench = [{"id": "m1", "task": "action_sequence", "answer": "B", "completion": "<answer>(B)</answer>"},
               {"id": "m2", "task": "action_sequence", "answer": "B", "completion": "no answer block"}]
    assert [item_reference(p) for p in mvbench] == [{"mvbench": 1.0}, {"mvbench": None}]  # empty: left out
    other = {"id": "o", "task": "egoschema_subset", "answer": "B", "completion": "<answer>B</answer>"}
    assert item_reference(other) is None and "reference" not in with_item_reference(other)
    # A merged relative-direction row is scored by its level, given by its row's question type.
    merged = {"id": "r", "task": REL_DIRECTION, "answer": "B", "completion": "<answer>b.</answer>"}
    assert with_item_reference(merged, {"r": "object_rel_direction_hard"})["reference"] == {"vsibench": 1.0}


def write_vsibench(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    questions = [{"id": i, "dataset": "scannet", "scene_name": f"scene{i:04d}_00",
                  "question_type": row["question_type"], "question": "?", "options": row.get("options"),
                  "ground_truth": row["ground_truth"]}
                 for i, row in enumerate(rows)]
    (folder / "test.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return folder


@pytest.mark.parametrize("loader", ["vsibench", "vsibench-merged"])
def test_score_writes_each_rows_reference_and_metrics_average_them(tmp_path: Path, loader: str) -> None:
    _, table = read_table()
    rows = table[::3]  # every type, a third of the answers
    data = write_vsibench(tmp_path / "vsi", rows)
    completions = tmp_path / "completions.jsonl"
    completions.write_text("".join(json.dumps({"id": i, "completion": completion(row["answer"])}) + "\n"
                                   for i, row in enumerate(rows)))
    out = tmp_path / "out"
    assert main(["score", "--data", f"{loader}:{data}", "--completions", str(completions), "--out", str(out),
                 "--no-report"]) == 0
    written = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(written) == len(rows)
    by_type: dict[str, list[float]] = defaultdict(list)
    for prediction in written:
        row = rows[int(prediction["id"])]
        assert prediction["reference"] == {"vsibench": row["lmms_eval"]}
        by_type[row["question_type"]].append(prediction["reference"]["vsibench"])
    table_of_run = json.loads((out / "metrics.json").read_text())["reference"]["vsibench"]
    means = {qtype: math.fsum(scores) / len(scores) for qtype, scores in by_type.items()}
    for qtype, mean in means.items():
        if qtype not in REL_DIRECTION_LEVELS:
            assert table_of_run[VSIBENCH_KEYS[qtype]] == pytest.approx(100 * mean), qtype
    levels = [means[level] for level in REL_DIRECTION_LEVELS]
    assert table_of_run["object_rel_direction_accuracy"] == pytest.approx(100 * sum(levels) / len(levels))


def test_score_writes_mvbench_references_and_none_for_other_rows(tmp_path: Path) -> None:
    items = [{"video": f"v{i}.mp4", "question": f"Q{i}?", "candidates": ["Took the cup.", "Sat down.", "Left."],
              "answer": "Sat down."} for i in range(3)]
    (tmp_path / "mv" / "json").mkdir(parents=True)
    (tmp_path / "mv" / "json" / "action_sequence.json").write_text(json.dumps(items))
    completions = tmp_path / "c.jsonl"
    completions.write_text("".join(json.dumps({"id": f"action_sequence/{i}", "completion": c}) + "\n"
                                   for i, c in enumerate(["<answer>(B)</answer>", "<answer>a cup</answer>", ""])))
    out = tmp_path / "out"
    assert main(["score", "--data", f"mvbench:{tmp_path / 'mv'}", "--completions", str(completions), "--out",
                 str(out), "--no-report"]) == 0
    written = {p["id"]: p for p in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    references = [written[f"action_sequence/{i}"]["reference"] for i in range(3)]
    assert references == [{"mvbench": 1.0}, {"mvbench": 0.0}, {"mvbench": None}]
    reference = json.loads((out / "metrics.json").read_text())["reference"]["mvbench"]
    assert reference["mvbench_action_sequence"] == 50.0 and reference["empty_predictions_excluded"] == 1
    # A prompt-row file of another benchmark: no reference applies, no field.
    row = PromptRow(id="q", task="dir", prompt=[{"role": "user", "content": "Q"}], answer="A", answer_type="choice",
                    options=["A. x", "B. y"])
    (tmp_path / "rows.jsonl").write_text(json.dumps(row.to_dict()) + "\n")
    (tmp_path / "c2.jsonl").write_text(json.dumps({"id": "q", "completion": "<answer>A</answer>"}) + "\n")
    assert main(["score", "--data", str(tmp_path / "rows.jsonl"), "--completions", str(tmp_path / "c2.jsonl"),
                 "--out", str(tmp_path / "o2"), "--no-report"]) == 0
    assert "reference" not in json.loads((tmp_path / "o2" / "predictions.jsonl").read_text())


def test_eval_writes_each_rows_reference(tmp_path: Path) -> None:
    from embodied_r.evaluation.predict import generate_resumable
    from embodied_r.inference import generation

    class CharTokenizer:  # one token per character: enough to fit the prompts
        chat_template = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [ord(c) for c in text]}

        def decode(self, ids):
            return "".join(chr(i) for i in ids)

    class Scripted(generation.Engine):
        name, tokenizer = "scripted", CharTokenizer()

        def context_length(self) -> int:
            return 1 << 20

        def generate_fitted(self, fitted, max_new_tokens, batch_size, on_batch=None, context=None, **sampling):
            replies = ["<answer>(B)</answer>", "<answer>b. right</answer>", "<answer>two hundred</answer>"]
            out = replies[:len(fitted)]
            if on_batch:
                on_batch(list(range(len(fitted))), out)
            return out

    prompt = [{"role": "user", "content": "Q"}]
    rows = [PromptRow(id="0", task="object_rel_direction", prompt=prompt, answer="B", answer_type="choice",
                      options=["A. left", "B. right"], meta={"question_type": "object_rel_direction_easy"}),
            PromptRow(id="1", task="dir", prompt=prompt, answer="B", answer_type="choice", options=["A. l", "B. r"]),
            PromptRow(id="2", task="object_counting", prompt=prompt, answer=200.0, answer_type="number")]
    path = tmp_path / "predictions.jsonl"
    generate_resumable(Scripted, rows, path, batch_size=8, max_new_tokens=8)
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert [p.get("reference") for p in written] == [{"vsibench": 0.0}, None, {"vsibench": 1.0}]
