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
