"""Numbers the docs quote, read back from the records under docs/records/ that the measuring commands wrote.

A stale number fails here, naming the page, the record and the field, instead of misleading a reader.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "docs" / "records"
# A cell of the solver-ceiling table: "100.0 (79 % of 95)", "- (0 % of 20)", with " copy" after a copy.
_CELL_RE = re.compile(r"^(?P<ceiling>-|\d+\.\d) \((?P<applicable>\d+) % of (?P<n>\d+)\)(?P<copy> copy)?$")


def load_record(name: str) -> dict:
    path = RECORDS / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AssertionError(f"{path}: cannot read the record ({exc})") from None


def table_rows(page: Path, header_start: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and body rows of the first markdown table whose header row starts with ``header_start``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_start):
            header = [c.strip() for c in line.strip("|").split("|")]
            body = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                body.append([c.strip() for c in row.strip("|").split("|")])
            return header, body
    raise AssertionError(f"{page}: no table whose header starts with {header_start!r}")


def test_the_solver_ceiling_table_is_the_record() -> None:
    page = ROOT / "docs" / "world.md"
    record = load_record("solver_ceiling.json")
    header, body = table_rows(page, "| task type |")
    levels = header[1:]
    problems = []
    for level in levels:
        if level not in record["levels"]:
            problems.append(f"{page.name}: column {level!r} is not in solver_ceiling.json levels")
    for cells in body:
        task = cells[0]
        for level, text in zip(levels, cells[1:]):
            field = f"solver_ceiling.json levels.{level}.{task}"
            row = record["levels"].get(level, {}).get(task)
            if row is None:
                problems.append(f"{page.name}: {task} at {level}: no such field {field}")
                continue
            match = _CELL_RE.match(text)
            if not match:
                problems.append(f"{page.name}: {task} at {level}: cannot read the cell {text!r}")
                continue
            ceiling = None if match["ceiling"] == "-" else float(match["ceiling"])
            want_ceiling = None if row["ceiling"] is None else round(100 * row["ceiling"], 1)
            if ceiling != want_ceiling:
                problems.append(f"{page.name}: {task} at {level}: ceiling {ceiling} but {field}.ceiling gives "
                                f"{want_ceiling}")
            if int(match["applicable"]) != round(100 * row["applicable"]) or int(match["n"]) != row["n"]:
                problems.append(f"{page.name}: {task} at {level}: '{text}' but {field} has applicable "
                                f"{row['applicable']} of n {row['n']}")
            if bool(match["copy"]) != (row["copy"] is True):
                problems.append(f"{page.name}: {task} at {level}: copy mark differs from {field}.copy")
    assert body and not problems, "\n".join(problems) or f"{page}: the table has no rows"


# ---------------------------------------------------------------------------------------------------------
# Ladder tables: a table right under "<!-- record: NAME.json -->" quotes a ladder record (benchmarks/ladder.py
# --record). Its first column names the task type; each other column is one of LADDER_COLUMNS, a number in
# percent to one decimal ("a / b / c" for several seeds, in seed order; "–" for none).
# ---------------------------------------------------------------------------------------------------------

_RECORD_MARK = re.compile(r"^<!-- record: (?P<name>[\w.+-]+\.json) -->$")
# Header -> what the cell holds: ("baseline", field) or (variant, "accuracy" | "blind_accuracy"), or "n".
LADDER_COLUMNS = {
    "n": ("n", None),
    "random": ("baseline", "random"),
    "letter prior": ("baseline", "letter_prior"),
    "answer prior": ("baseline", "answer_prior"),
    "solver ceiling": ("baseline", "solver_ceiling"),
    "warm-up": ("warmup", "accuracy"),
    "SFT": ("sft", "accuracy"),
    "GRPO after SFT": ("grpo", "accuracy"),
    "GRPO after SFT (blind)": ("grpo", "blind_accuracy"),
    "random-reward control": ("control", "accuracy"),
    "GRPO alone": ("grpo_alone", "accuracy"),
}


def record_tables(page: Path) -> list[tuple[str, list[str], list[list[str]]]]:
    """Every (record name, header, body rows) of a page's record-marked tables."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        mark = _RECORD_MARK.match(line.strip())
        if not mark:
            continue
        start = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
        assert start is not None and lines[start].startswith("|"), f"{page.name}: no table under {line.strip()}"
        header = [c.strip() for c in lines[start].strip("|").split("|")]
        body = []
        for row in lines[start + 2:]:
            if not row.startswith("|"):
                break
            body.append([c.strip() for c in row.strip("|").split("|")])
        found.append((mark["name"], header, body))
    return found


def ladder_values(record: dict, task: str, column: str) -> list[float | None]:
    """The numbers a ladder table's cell must show (one per seed for runs), from the record."""
    kind, field = LADDER_COLUMNS[column]
    base = record["baselines"].get(task)
    if base is None:
        raise KeyError(f"baselines.{task}")
    if kind == "n":
        return [base["n"]]
    if kind == "baseline":
        return [None if base[field] is None else round(100 * base[field], 1)]
    runs = sorted((r for r in record["runs"] if r["task"] == task and r["variant"] == kind),
                  key=lambda r: -1 if r["seed"] is None else r["seed"])
    return [None if r[field] is None else round(100 * r[field], 1) for r in runs]


def cell_values(text: str) -> list[float | None]:
    return [None if part.strip() in ("–", "-") else float(part) for part in text.split(" / ")]


def test_ladder_tables_are_their_records() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems, tables = [], 0
    for page in pages:
        for name, header, body in record_tables(page):
            tables += 1
            record = load_record(name)
            for column in header[1:]:
                if column not in LADDER_COLUMNS:
                    problems.append(f"{page.name} ({name}): column {column!r} is none of {sorted(LADDER_COLUMNS)}")
            for cells in body:
                task = cells[0].strip("`")
                for column, text in zip(header[1:], cells[1:]):
                    if column not in LADDER_COLUMNS:
                        continue
                    try:
                        want = ladder_values(record, task, column)
                        have = cell_values(text)
                    except (KeyError, ValueError) as exc:
                        problems.append(f"{page.name} ({name}): {task}, {column}: cannot read {text!r} ({exc})")
                        continue
                    if have != want:
                        problems.append(f"{page.name} ({name}): {task}, {column}: says {text!r}, the record gives "
                                        f"{' / '.join('–' if v is None else f'{v:g}' for v in want)}")
    assert tables and not problems, "\n".join(problems) or "no page quotes a ladder record"


def test_a_ladder_cell_that_differs_from_its_record_is_named(tmp_path: Path) -> None:
    record = {"baselines": {"counting": {"n": 26, "random": None, "solver_ceiling": 1.0}},
              "runs": [{"task": "counting", "variant": "sft", "seed": 0, "accuracy": 0.5, "blind_accuracy": None},
                       {"task": "counting", "variant": "sft", "seed": 1, "accuracy": 0.25, "blind_accuracy": None}]}
    assert ladder_values(record, "counting", "SFT") == [50.0, 25.0]
    assert cell_values("50.0 / 25.0") == [50.0, 25.0] and ladder_values(record, "counting", "random") == [None]
    assert cell_values("50.0 / 26.0") != ladder_values(record, "counting", "SFT")


# ---------------------------------------------------------------------------------------------------------
# The demo's measured run in README: its table and its lines, read from docs/records/demo.json
# (``embodied-r demo --record``).
# ---------------------------------------------------------------------------------------------------------

# README row label -> the record's accuracy fields its cell lists ("a / b / c").
DEMO_ROWS = {
    "after SFT": ("sft",),
    "after GRPO": ("grpo",),
    "the GRPO model blind (no video text)": ("blind",),
    "exact solver: its ceiling": ("solver_ceiling",),
    "text rule": ("text_rule",),
    "random / letter prior / answer prior": ("random", "letter_prior", "answer_prior"),
}
_RUN_LINE = re.compile(r"Latest measured run \((?P<date>\d{4}-\d{2}-\d{2}), `--dtype (?P<dtype>\w+)`, "
                       r"(?P<cpu>[^,]+), (?P<minutes>\d+) min (?P<seconds>\d+) s, peak (?P<peak>[\d.]+) GiB, "
                       r"(?P<steps>\d+) GRPO steps\)")
_VERDICT = re.compile(r"GRPO − SFT: (?P<diff>[+−-][\d.]+) points, (?P<better>\d+) better and (?P<worse>\d+) worse by "
                      r"the exact sign test \(p (?:= )?(?P<p>[<\d.e−-]+)\): \*\*(?P<verdict>[^*]+)\*\*")


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def test_the_readme_demo_run_is_the_record() -> None:
    record = load_record("demo.json")
    readme = ROOT / "README.md"
    text = " ".join(readme.read_text(encoding="utf-8").split())
    problems = []
    header, body = table_rows(readme, "| held-out questions")
    if f"(n = {record['n']})" not in header[0]:
        problems.append(f"README: the demo table says {header[0]!r}; demo.json n is {record['n']}")
    rows = {cells[0]: cells[1] for cells in body}
    for label, fields in DEMO_ROWS.items():
        want = [None if record["accuracy"][f] is None else round(100 * record["accuracy"][f], 1) for f in fields]
        have = rows.get(label)
        if have is None:
            problems.append(f"README: the demo table has no row {label!r}")
        elif cell_values(have) != want:
            problems.append(f"README: {label}: says {have!r}; demo.json accuracy.{'/'.join(fields)} gives {want}")
    run = _RUN_LINE.search(text)
    if run is None:
        problems.append("README: no 'Latest measured run (DATE, `--dtype D`, CPU, M min S s, peak G GiB, N GRPO "
                        "steps)' line")
    else:
        stages_s = round(record["stages_s"])
        said = {"date": run["date"], "dtype": run["dtype"], "seconds": 60 * int(run["minutes"]) + int(run["seconds"]),
                "peak": float(run["peak"]), "steps": int(run["steps"])}
        want = {"date": record["measured"], "dtype": record["dtype"], "seconds": stages_s,
                "peak": record["peak_rss_gib"], "steps": record["grpo_steps"]}
        problems += [f"README: the run line says {k} {said[k]!r}; demo.json gives {want[k]!r}"
                     for k in said if said[k] != want[k]]
    verdict = _VERDICT.search(text)
    comparison = record["comparisons"]["grpo_vs_sft"]
    if verdict is None:
        problems.append("README: no 'GRPO − SFT: D points, B better and W worse by the exact sign test (p = P): "
                        "**verdict**' sentence")
    else:
        if round(_number(verdict["diff"]), 1) != round(100 * comparison["difference"], 1):
            problems.append(f"README: GRPO − SFT {verdict['diff']}; demo.json {100 * comparison['difference']:+.1f}")
        if (int(verdict["better"]), int(verdict["worse"])) != (comparison["improved"], comparison["worsened"]):
            problems.append("README: better/worse counts differ from demo.json comparisons.grpo_vs_sft")
        if verdict["verdict"] != comparison["verdict"]:
            problems.append(f"README: verdict {verdict['verdict']!r}; demo.json {comparison['verdict']!r}")
    assert not problems, "\n".join(problems)
