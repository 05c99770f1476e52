"""Does ``reference.vsibench`` (and ``reference.mvbench``) equal what lmms-eval computes from the same answers?

Builds a check set in VSI-Bench's format (432 questions over all ten question types) and in MVBench's
(three tasks), with answers written the ways models write them ("B", "(B)", "**B**", "Option B",
"B: left", the option's text, "A or B", "two hundred and thirteen", ".62", "1,234", no answer block
...), scores it through ``embodied-r score`` (``evaluation.score_run``) with the ``vsibench:``, the
``vsibench-merged:`` and the ``mvbench:`` loaders, and prints how many questions our parser and the
reference's rules score differently.

Given lmms-eval's own task files (``--vsibench-utils .../lmms_eval/tasks/vsibench/utils.py``,
``--mvbench-utils .../lmms_eval/tasks/mvbench/utils.py``; lmms-eval need not be installed, only those
modules are imported), it also scores every answer with lmms-eval's functions and compares, per question
and aggregated (to lmms-eval's own rounding, 6 decimals of a fraction; ours is in percent), and checks
that a missing relative-direction level, where lmms-eval stops with an error, makes ours ``complete``
false. Exit status 1 when anything differs.

    pip download lmms-eval==0.7.3 --no-deps -d /tmp/lmms && unzip -q /tmp/lmms/*.whl -d /tmp/lmms/unz
    PYTHONPATH=src python benchmarks/lmms_eval_reference.py \\
        --vsibench-utils /tmp/lmms/unz/lmms_eval/tasks/vsibench/utils.py \\
        --mvbench-utils /tmp/lmms/unz/lmms_eval/tasks/mvbench/utils.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import random
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from embodied_r.evaluation.reference_rules import (
    mvbench_item_score,
    reference_text,
    vsibench_item_score,
)
from embodied_r.evaluation.score_run import score_run

# ---------------------------------------------------------------------------------------------------
# The check set
# ---------------------------------------------------------------------------------------------------

CHOICE_OPTIONS = {
    "object_rel_direction_easy": ["left", "right"],
    "object_rel_direction_medium": ["left", "right", "back"],
    "object_rel_direction_hard": ["front-left", "front-right", "back-left", "back-right"],
    "object_rel_distance": ["chair", "table", "sofa", "tv"],
    "route_planning": ["Turn Left, Turn Right", "Go forward, Turn Left", "Turn Right, Turn Back",
                       "Turn Back, Go forward"],
    "obj_appearance_order": ["chair, table, sofa, tv", "table, chair, tv, sofa", "sofa, tv, chair, table",
                             "tv, sofa, table, chair"],
}
# Gold values drawn per numeric type: counts, metres (1 decimal), centimetres, square metres (1 decimal).
NUMERIC_GOLD = {
    "object_counting": lambda rng: float(rng.randint(2, 12)),
    "object_abs_distance": lambda rng: round(rng.choice([rng.uniform(0.2, 1.0), rng.uniform(1.0, 8.0)]), 1),
    "object_size_estimation": lambda rng: float(rng.randint(20, 1500)),
    "room_size_estimation": lambda rng: round(rng.uniform(5.0, 60.0), 1),
}
CHOICES_PER_TYPE, NUMBERS_PER_TYPE = 42, 45  # 6 * 42 + 4 * 45 = 432

# How models write a choice: {L} the gold letter, {W} another letter, {T} the gold option's text.
CHOICE_FORMS = ["{L}", "{L}.", "{L}. {T}", "({L})", "**{L}**", "Option {L}", "{L}: {T}", "{T}", "{l}",
                "A or B", "The answer is {L}.", "{L})", "[{L}]", "{L}\nbecause it is", "Answer: {L}", "{W}",
                "({W})", "", "{L} ", " {L}", "{L}..", "{l}) {T}"]
NUMBER_FORMS = ["{g}", "{g} meters", "about {g}", "{words}", "{Words}.", "{near}", "{g} or {up}", "{comma}",
                "{dot}", "The answer is {g}.", "", "I cannot tell", "{g}-{up}", "approximately {near} m",
                "{words} chairs", "-{g}", "{g}m²", "two, three", "{far}"]


def number_words(value: int) -> str:
    """English words for 0..9999 ("two hundred and thirteen"), for the answers of the check set."""
    units = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
             "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
    tens = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

    def below_hundred(n: int) -> str:
        return units[n] if n < 20 else tens[n // 10] + ("" if n % 10 == 0 else "-" + units[n % 10])

    parts = []
    if value >= 1000:
        parts.append(f"{below_hundred(value // 1000)} thousand")
    if value % 1000 >= 100:
        parts.append(f"{units[value % 1000 // 100]} hundred")
    if value % 100 or not parts:
        parts.append(("and " if parts else "") + below_hundred(value % 100))
    return " ".join(parts)


def _completion(answer: str | None, rng: random.Random) -> str:
    if answer is None:  # no answer block at all
        return "<think>The chair is left of the table.</think> So B."
    return f"<think>{rng.choice(['Looking at the frames.', 'A. is unlikely.', ''])}</think><answer>{answer}</answer>"


def vsibench_check_set(seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(VSI-Bench rows, completions) of the check set."""
    rng = random.Random(seed)
    rows, completions = [], []
    for qtype, texts in CHOICE_OPTIONS.items():
        for i in range(CHOICES_PER_TYPE):
            letters = "ABCD"[:len(texts)]
            gold = rng.choice(letters)
            wrong = rng.choice([x for x in letters if x != gold])
            form = CHOICE_FORMS[i % len(CHOICE_FORMS)]
            answer = form.format(L=gold, l=gold.lower(), W=wrong, T=texts[letters.index(gold)])
            rows.append({"id": len(rows), "dataset": "scannet", "scene_name": f"scene{i:04d}_00",
                         "question_type": qtype, "question": f"Question {i} of {qtype}?",
                         "options": [f"{x}. {t}" for x, t in zip(letters, texts)], "ground_truth": gold})
            completions.append({"id": str(len(rows) - 1),
                                "completion": _completion(None if i % 29 == 28 else answer, rng)})
    for qtype, draw in NUMERIC_GOLD.items():
        for i in range(NUMBERS_PER_TYPE):
            gold = draw(rng)
            text = f"{gold:g}"
            as_int = int(round(gold))
            fields = {"g": text, "up": f"{gold + 1:g}", "near": f"{gold * rng.uniform(0.7, 1.3):.1f}",
                      "far": f"{gold * rng.uniform(2.0, 4.0):.1f}", "words": number_words(as_int),
                      "Words": number_words(as_int).capitalize(), "comma": f"{gold:,g}",
                      # ".62" for 0.62; above 1 the form is the plain number
                      "dot": text.lstrip("0") if gold < 1 else text}
            answer = NUMBER_FORMS[i % len(NUMBER_FORMS)].format(**fields)
            rows.append({"id": len(rows), "dataset": "arkitscenes", "scene_name": f"{40000000 + i}",
                         "question_type": qtype, "question": f"Question {i} of {qtype}?", "options": None,
                         "ground_truth": text})
            completions.append({"id": str(len(rows) - 1),
                                "completion": _completion(None if i % 31 == 30 else answer, rng)})
    return rows, completions


MVBENCH_TASKS = {"action_sequence": ["Took the cup.", "Opened the door.", "Sat on the chair.", "Put down a bag."],
                 "moving_count": ["2", "3", "4"],
                 "egocentric_navigation": ["Turn left.", "Move forward.", "Turn right.", "Stop."]}
MVBENCH_FORMS = ["{L}", "({L})", "{L}. {T}", "{l}", "{T}", "a cup", "The answer is {L}", "", "Option {L}",
                 "{L})", "I think {W}", "**{L}**", "{L}, because 1,000 people", "{L}... sure", "{W}. {T}",
                 "best option: ({L}) {T}", "E", "{L}\n{T}"]


def mvbench_check_set(seed: int = 0) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, str]]]:
    """({task: MVBench items}, completions) of the check set, 30 questions a task."""
    rng = random.Random(seed)
    items: dict[str, list[dict[str, Any]]] = {}
    completions = []
    for task, candidates in MVBENCH_TASKS.items():
        items[task] = []
        for i in range(30):
            letters = "ABCDE"[:len(candidates)]
            gold = rng.randrange(len(candidates))
            wrong = rng.choice([x for x in letters if x != letters[gold]])
            form = MVBENCH_FORMS[i % len(MVBENCH_FORMS)]
            answer = form.format(L=letters[gold], l=letters[gold].lower(), W=wrong, T=candidates[gold])
            items[task].append({"video": f"v{i}.mp4", "question": f"Question {i}?", "candidates": candidates,
                                "answer": candidates[gold]})
            completions.append({"id": f"{task}/{i}", "completion": _completion(answer, rng)})
    return items, completions


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# ---------------------------------------------------------------------------------------------------
# lmms-eval's modules
# ---------------------------------------------------------------------------------------------------


def load_task_utils(path: Path, name: str) -> types.ModuleType:
    """One of lmms-eval's task ``utils.py`` files as a module, without importing lmms-eval itself."""
    if "loguru" not in sys.modules and importlib.util.find_spec("loguru") is None:
        # The task files log through loguru only; a logging logger answers the same calls.
        stub = types.ModuleType("loguru")
        stub.logger = logging.getLogger("lmms_eval")  # type: ignore[attr-defined]
        sys.modules["loguru"] = stub
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VSIBENCH_AGGREGATES = ("overall", "obj_appearance_order_accuracy", "object_abs_distance_mra", "object_counting_mra",
                       "object_rel_distance_accuracy", "object_size_estimation_mra", "room_size_estimation_mra",
                       "route_planning_accuracy", "object_rel_direction_accuracy")


def lmms_vsibench(utils: types.ModuleType, rows: list[dict[str, Any]],
                  texts: dict[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    """(lmms-eval's per-question score by id, its nine aggregates as our key names)."""
    docs = []
    for row in rows:
        doc = dict(row)
        utils.vsibench_process_results(doc, [texts[str(row["id"])]])
        docs.append(doc)
    per_item = {str(d["id"]): float(d["accuracy"] if "accuracy" in d else d["MRA:.5:.95:.05"]) for d in docs}
    aggregates = {("vsibench_overall" if name == "overall" else name):
                  getattr(utils, f"vsibench_aggregate_{name}")(docs) for name in VSIBENCH_AGGREGATES}
    return per_item, aggregates


# ---------------------------------------------------------------------------------------------------
# The comparisons
# ---------------------------------------------------------------------------------------------------


def compare_aggregates(ours: dict[str, Any], theirs: dict[str, float]) -> list[str]:
    """Keys where ours (percent) differs from lmms-eval's (a fraction rounded to 6 decimals)."""
    return [f"{key}: ours {ours.get(key)} vs lmms-eval {value}" for key, value in theirs.items()
            if ours.get(key) is None or round(ours[key] / 100, 6) != value]


def check_vsibench(utils_path: Path | None, work: Path) -> list[str]:
    rows, completions = vsibench_check_set()
    (work / "vsi").mkdir()
    _write_jsonl(work / "vsi" / "test.jsonl", rows)
    _write_jsonl(work / "completions.jsonl", completions)
    texts = {c["id"]: reference_text(c["completion"]) for c in completions}
    problems: list[str] = []
    tables = {}
    for loader in ("vsibench", "vsibench-merged"):
        metrics = score_run(f"{loader}:{work / 'vsi'}", work / "completions.jsonl", work / f"out-{loader}",
                            baselines=(), report=False)
        tables[loader] = metrics["reference"]["vsibench"]
        table = tables[loader]
        print(f"{loader}: {table['n_items']} questions, {len(metrics['tasks'])} tasks; lmms-eval's rules score "
              f"{table['item_disagreements']} of them differently from ours; complete {table['complete']}")
        if not table["complete"]:
            problems.append(f"{loader}: reference.vsibench not complete: {table['missing']}")
    if tables["vsibench"] != tables["vsibench-merged"]:
        problems.append("the merged loader's reference table differs from the per-level loader's")
    ours = tables["vsibench"]
    for key in [*VSIBENCH_AGGREGATES[1:], "vsibench_overall"]:
        print(f"  {key:32s} {ours.get(key, float('nan')):8.4f} %")
    if utils_path is None:
        return problems
    utils = load_task_utils(utils_path, "lmms_vsibench_utils")
    per_item, aggregates = lmms_vsibench(utils, rows, texts)
    gold = {str(r["id"]): (r["ground_truth"], r["options"] is None) for r in rows}
    differing = [qid for qid, score in per_item.items() if vsibench_item_score(texts[qid], *gold[qid]) != score]
    print(f"lmms-eval per question: {len(differing)} of {len(per_item)} differ from reference_rules")
    problems += [f"question {qid}: {texts[qid]!r}" for qid in differing[:20]]
    mismatched = compare_aggregates(ours, aggregates)
    print(f"lmms-eval aggregates: {len(aggregates) - len(mismatched)} of {len(aggregates)} equal to its rounding")
    problems += mismatched
    problems += check_missing_level(utils, rows, texts, work)
    return problems


def check_missing_level(utils: types.ModuleType, rows: list[dict[str, Any]], texts: dict[str, str],
                        work: Path) -> list[str]:
    """Without the hard level lmms-eval stops with an error; ours must say ``complete`` false."""
    kept = [r for r in rows if r["question_type"] != "object_rel_direction_hard"]
    try:
        lmms_vsibench(utils, kept, texts)
        raised = False
    except KeyError:
        raised = True
    (work / "vsi-no-hard").mkdir()
    _write_jsonl(work / "vsi-no-hard" / "test.jsonl", kept)
    kept_ids = {str(r["id"]) for r in kept}
    _write_jsonl(work / "completions-no-hard.jsonl",
                 [{"id": qid, "completion": f"<answer>{texts[qid]}</answer>"} for qid in sorted(kept_ids)])
    metrics = score_run(f"vsibench:{work / 'vsi-no-hard'}", work / "completions-no-hard.jsonl",
                        work / "out-no-hard", baselines=(), report=False)
    table = metrics["reference"]["vsibench"]
    print(f"without the hard level: lmms-eval raises {raised}; ours complete {table['complete']}, "
          f"missing {table['missing']}")
    ok = raised and not table["complete"] and "object_rel_direction_hard" in table["missing"]
    return [] if ok else ["a missing relative-direction level is not reported as lmms-eval's failure"]


def check_mvbench(utils_path: Path | None, work: Path) -> list[str]:
    items, completions = mvbench_check_set()
    (work / "mvbench" / "json").mkdir(parents=True)
    for task, task_items in items.items():
        (work / "mvbench" / "json" / f"{task}.json").write_text(json.dumps(task_items))
    _write_jsonl(work / "mvbench-completions.jsonl", completions)
    metrics = score_run(f"mvbench:{work / 'mvbench'}", work / "mvbench-completions.jsonl", work / "out-mvbench",
                        baselines=(), report=False)
    ours = metrics["reference"]["mvbench"]
    print(f"mvbench: {ours['n_items']} questions; lmms-eval's rules score {ours['item_disagreements']} of the answered "
          f"differently from ours; {ours['empty_predictions_excluded']} empty left out")
    if utils_path is None:
        return []
    utils = load_task_utils(utils_path, "lmms_mvbench_utils")
    texts = {c["id"]: reference_text(c["completion"]) for c in completions}
    problems = []
    for task, task_items in items.items():
        results = []
        for i, item in enumerate(task_items):
            doc = dict(item)
            results.append(utils.mvbench_process_results(doc, [texts[f"{task}/{i}"]])["mvbench_accuracy"])
            mine = mvbench_item_score(texts[f"{task}/{i}"], results[-1]["gt_answer"])
            theirs = results[-1]["score"] if results[-1]["pred_answer"] != "" else None
            if mine != theirs:
                problems.append(f"mvbench {task}/{i}: {texts[f'{task}/{i}']!r}: ours {mine}, lmms-eval {theirs}")
        expected = utils.mvbench_aggregate_results(results)
        if ours[f"mvbench_{task}"] != expected:
            problems.append(f"mvbench_{task}: ours {ours[f'mvbench_{task}']} vs lmms-eval {expected}")
    print(f"lmms-eval mvbench: {len(problems)} difference(s) per question and per task")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vsibench-utils", type=Path, default=None, help="lmms_eval/tasks/vsibench/utils.py")
    parser.add_argument("--mvbench-utils", type=Path, default=None, help="lmms_eval/tasks/mvbench/utils.py")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        problems = check_vsibench(args.vsibench_utils, Path(folder)) + check_mvbench(args.mvbench_utils, Path(folder))
    for problem in problems:
        print("DIFFERS:", problem)
    compared = [name for name, path in (("vsibench", args.vsibench_utils), ("mvbench", args.mvbench_utils)) if path]
    print(f"{len(problems)} difference(s)" + (f"; compared with lmms-eval's {', '.join(compared)}" if compared
                                              else "; lmms-eval's files not given, nothing compared with it"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
