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

``--write-table PATH`` instead writes the answer table that ``tests/evaluation/test_reference_answer_table.py``
reads (``tests/data/lmms_eval_vsibench_answers.jsonl``): VSI-Bench questions of every type, each answered
in a list of fixed forms and in forms drawn at random from a small grammar of prefixes, letters, wrappers
and trailing text, each scored by lmms-eval itself: its task's ``process_results`` (which strips the
response) and ``vsibench_process_results``. This needs ``import lmms_eval.api.task`` to work, i.e. lmms-eval
installed, in a throwaway environment, never in the project's:

    python -m venv /tmp/lmms-venv && /tmp/lmms-venv/bin/pip install lmms-eval==0.7.3
    PYTHONPATH=src /tmp/lmms-venv/bin/python benchmarks/lmms_eval_reference.py \\
        --write-table tests/data/lmms_eval_vsibench_answers.jsonl
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
# The answer table (tests/data/lmms_eval_vsibench_answers.jsonl)
# ---------------------------------------------------------------------------------------------------

TABLE_QUESTIONS_PER_TYPE = 2
# Every question of the table is answered in each of these forms: {L} the gold letter, {l} in lower case,
# {W} another letter, {T} the gold option's text, {U} another option's text.
TABLE_CHOICE_FORMS = [
    "{L}", "{l}", "{L}.", "{l}.", "{W}", "The answer is {L}", "The answer is {L}.", "Answer: {L}", "Option {L}",
    "{T}", "({L})", "[{L}]", "**{L}**", "*{L}*", "`{L}`", "{L}, {W}", "{W}, {L}", "{L} and {W}", "{L}/{W}",
    "{L}. {T} because it is closer", "{L} because it is closer", "{L}: {T}", "{L}) {T}", "{l}. {T}", "{L}.{T}",
    "{L}\n{T}", "{L}.\n{T}", "{W}. {U}", "", "   ", " {L} ", "\n{L}\n",
]
# {g} the gold number as written in the data, {f2} with two decimals, {up} one more, {near}/{far} a value
# drawn near it / two to four times it, {words}/{Words} the rounded value in words, {comma} with a
# thousands separator, {dot} without the leading zero below 1, {sci} in exponent notation.
TABLE_NUMBER_FORMS = [
    "{g}", "{f2}", "{g} meters", "about {g}", "{words}", "{Words}.", "{g} or {up}", "{comma}", "{dot}", "{sci}",
    "The answer is {g}.", "**{g}**", "{g}-{up}", "approximately {near} m", "{words} chairs", "-{g}", "{g}m²",
    "{near}", "{far}", "two, three", "a dozen", "I cannot tell", "", "   ",
]
TABLE_RANDOM_CHOICE_ANSWERS, TABLE_RANDOM_NUMBER_ANSWERS = 5, 4


def random_choice_answer(rng: random.Random, gold: str, wrong: str, text: str, other: str) -> str:
    """A choice answer put together at random: a prefix, a letter (the gold one seven times in ten) in
    either case, something after it, and whitespace around it."""
    letter = gold if rng.random() < 0.7 else wrong
    letter = letter.lower() if rng.random() < 0.3 else letter
    prefix = rng.choice(["", "", "", "Answer: ", "The answer is ", "Option ", "I think ", "(", "**", "[", "answer "])
    suffix = rng.choice(["", "", ".", ")", ":", ",", "**", "]", "...", f". {text}", f" {text}", f"\n{text}",
                         f", {wrong}", f" ({text})", ". It is", f"\t{other}"])
    return rng.choice(["", "", " ", "\n"]) + prefix + letter + suffix + rng.choice(["", "", " ", "\n", "."])


def random_number_answer(rng: random.Random, gold: float) -> str:
    """A numeric answer put together at random: a prefix, a value near the gold one in digits or words,
    a unit or trailing text."""
    value = gold * rng.uniform(0.3, 2.5)
    if rng.random() < 0.25 and value < 9999.5:
        written = number_words(int(round(value)))
    else:
        written = f"{value:.{rng.choice([0, 1, 2])}f}"
    prefix = rng.choice(["", "", "about ", "~", "The answer is ", "Approximately ", "roughly ", "maybe "])
    suffix = rng.choice(["", "", " m", " meters", ".", " square meters", " cm", " items", "m", " or so"])
    return prefix + written + suffix


def answer_table_questions(seed: int = 1) -> list[dict[str, Any]]:
    """The table's questions and answers: the first ``TABLE_QUESTIONS_PER_TYPE`` questions of each type
    of the check set (drawn with ``seed``), each in every fixed form and in random ones."""
    rng = random.Random(seed)
    rows, _ = vsibench_check_set(seed)
    taken: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    for row in rows:
        qtype = row["question_type"]
        if taken.get(qtype, 0) >= TABLE_QUESTIONS_PER_TYPE:
            continue
        taken[qtype] = taken.get(qtype, 0) + 1
        base = {"question_type": qtype, "ground_truth": row["ground_truth"]}
        if row["options"] is not None:
            base["options"] = row["options"]
            letters = [option.split(". ", 1)[0] for option in row["options"]]
            texts = [option.split(". ", 1)[1] for option in row["options"]]
            gold = row["ground_truth"]
            wrong = rng.choice([x for x in letters if x != gold])
            fields = {"L": gold, "l": gold.lower(), "W": wrong, "T": texts[letters.index(gold)],
                      "U": texts[letters.index(wrong)]}
            answers = [(form, form.format(**fields)) for form in TABLE_CHOICE_FORMS]
            answers += [("random", random_choice_answer(rng, gold, wrong, fields["T"], fields["U"]))
                        for _ in range(TABLE_RANDOM_CHOICE_ANSWERS)]
        else:
            gold_value = float(row["ground_truth"])
            text = row["ground_truth"]
            fields = {"g": text, "f2": f"{gold_value:.2f}", "up": f"{gold_value + 1:g}",
                      "near": f"{gold_value * rng.uniform(0.7, 1.3):.1f}",
                      "far": f"{gold_value * rng.uniform(2.0, 4.0):.1f}",
                      "words": number_words(int(round(gold_value))),
                      "Words": number_words(int(round(gold_value))).capitalize(), "comma": f"{gold_value:,g}",
                      "dot": text.lstrip("0") if gold_value < 1 else text, "sci": f"{gold_value:.2e}"}
            answers = [(form, form.format(**fields)) for form in TABLE_NUMBER_FORMS]
            answers += [("random", random_number_answer(rng, gold_value)) for _ in range(TABLE_RANDOM_NUMBER_ANSWERS)]
        out += [{**base, "form": form, "answer": answer} for form, answer in answers]
    return out


def lmms_eval_vsibench_scorer() -> tuple[str, types.ModuleType, Any]:
    """(lmms-eval's version, its vsibench ``utils`` module, a function (question, answer) -> (its score, the
    scored doc)) from an installed lmms-eval: the answer goes through the task's ``process_results`` (as
    lmms-eval's evaluator hands it a response) into ``vsibench_process_results``."""
    try:
        import lmms_eval
        from lmms_eval.api.task import ConfigurableTask
    except ImportError as exc:
        raise SystemExit(f"--write-table needs lmms-eval installed (in a throwaway environment): {exc}") from exc
    from importlib.metadata import version

    utils = load_task_utils(Path(lmms_eval.__file__).parent / "tasks" / "vsibench" / "utils.py", "lmms_vsibench_utils")
    # The task object of a generate_until task with vsibench's process_results, as its YAML configures it.
    task = types.SimpleNamespace(OUTPUT_TYPE="generate_until",
                                 config=types.SimpleNamespace(process_results=utils.vsibench_process_results))

    def score(question: dict[str, Any], answer: str) -> tuple[float, dict[str, Any]]:
        doc = {k: v for k, v in question.items() if k in ("question_type", "ground_truth", "options")}
        scored = ConfigurableTask.process_results(task, doc, [answer])["vsibench_overall"]
        return float(scored["accuracy"] if "accuracy" in scored else scored["MRA:.5:.95:.05"]), scored

    return version("lmms_eval"), utils, score


def write_answer_table(path: Path) -> list[str]:
    """Score the table's answers with lmms-eval, write the table (its first line says how it was made),
    and return the answers our rule scores differently."""
    lmms_version, utils, score = lmms_eval_vsibench_scorer()
    rows, docs, differing = [], [], []
    for question in answer_table_questions():
        value, doc = score(question, question["answer"])
        rows.append({**question, "lmms_eval": value})
        docs.append(doc)
        numeric = "options" not in question
        if vsibench_item_score(question["answer"].strip(), question["ground_truth"], numeric) != value:
            differing.append(f"{question['question_type']} {question['answer']!r}: lmms-eval {value}")
    aggregates = {("vsibench_overall" if name == "overall" else name):
                  getattr(utils, f"vsibench_aggregate_{name}")(docs) for name in VSIBENCH_AGGREGATES}
    header = {"about": "VSI-Bench answers in the forms models write them, each scored by lmms-eval's own vsibench "
                       "functions (task process_results, then vsibench_process_results); answer is the text "
                       "inside <answer>, lmms_eval its score (accuracy, or MRA for numeric types)",
              "lmms_eval": lmms_version,
              "command": f"PYTHONPATH=src python benchmarks/lmms_eval_reference.py --write-table {path.as_posix()}",
              "rows": len(rows), "aggregates": aggregates}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [header, *rows]), encoding="utf-8")
    print(f"{path}: {len(rows)} answers scored by lmms-eval {lmms_version}; our rule scores {len(differing)} "
          "of them differently")
    return differing


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
    parser.add_argument("--write-table", type=Path, default=None,
                        help="write the answer table scored by an installed lmms-eval here, and nothing else")
    args = parser.parse_args()
    if args.write_table is not None:
        differing = write_answer_table(args.write_table)
        for problem in differing:
            print("DIFFERS:", problem)
        return 1 if differing else 0
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
