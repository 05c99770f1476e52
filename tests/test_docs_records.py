"""Numbers the docs quote, read back from the records under docs/records/ that the measuring commands wrote.

A stale number fails here, naming the page, the record and the field, instead of misleading a reader.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "docs" / "records"
# A cell of the solver-ceiling table: "100.0 (79 % of 95)", "- (0 % of 20)", with " copy" after a copy.
_CELL_RE = re.compile(r"^(?P<ceiling>-|\d+\.\d) \((?P<applicable>\d+) % of (?P<n>\d+)\)(?P<copy> copy)?$")


class Record(dict):
    """A record's JSON object that knows its file, so that a field it lacks is named with the file."""

    def __init__(self, data: dict, path: Path) -> None:
        super().__init__(data)
        self.path = path

    def at(self, dotted: str) -> Any:
        """The value at ``dotted`` ("accuracy.sft"); a missing field fails naming the file and the field."""
        value: Any = self
        for key in dotted.split("."):
            if not isinstance(value, dict) or key not in value:
                raise AssertionError(f"{self.path}: no field {dotted!r}")
            value = value[key]
        return value


def load_record(name: str, folder: Path = RECORDS) -> Record:
    path = folder / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AssertionError(f"{path}: cannot read the record ({exc})") from None
    if not isinstance(data, dict):
        raise AssertionError(f"{path}: the record is not a JSON object")
    return Record(data, path)


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
    by_level = record.at("levels")
    for level in levels:
        if level not in by_level:
            problems.append(f"{page.name}: column {level!r} is not in solver_ceiling.json levels")
    for cells in body:
        task = cells[0]
        for level, text in zip(levels, cells[1:]):
            field = f"solver_ceiling.json levels.{level}.{task}"
            row = by_level.get(level, {}).get(task)
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
# percent to one decimal ("a / b / c" for several seeds, in seed order; "–" for none), or one of
# COMPARISON_COLUMNS, a paired comparison across seeds as comparison_cell writes it.
# ---------------------------------------------------------------------------------------------------------

_RECORD_MARK = re.compile(r"^<!-- record: (?P<name>[\w.+-]+\.json) -->$")
# Header -> what the cell holds: ("baseline", field) or (variant, "accuracy" | "blind_accuracy"), or "n".
LADDER_COLUMNS = {
    "n": ("n", None),
    "random": ("baseline", "random"),
    "letter prior": ("baseline", "letter_prior"),
    "answer prior": ("baseline", "answer_prior"),
    "text rule": ("baseline", "text_rule"),
    "solver ceiling": ("baseline", "solver_ceiling"),
    "warm-up": ("warmup", "accuracy"),
    "SFT": ("sft", "accuracy"),
    "GRPO after SFT": ("grpo", "accuracy"),
    "GRPO after SFT (blind)": ("grpo", "blind_accuracy"),
    "random-reward control": ("control", "accuracy"),
    "GRPO alone": ("grpo_alone", "accuracy"),
}


# Header -> the record's comparison (the first run minus the second, per seed on the same questions).
COMPARISON_COLUMNS = {
    "GRPO after SFT − SFT": "grpo_vs_sft",
    "GRPO after SFT − blind": "grpo_vs_blind",
    "GRPO after SFT − control": "grpo_vs_control",
    "GRPO alone − warm-up": "grpo_alone_vs_warmup",
}


def comparison_cell(record: dict, task: str, column: str) -> str:
    """A comparison as a ladder table quotes it, in percentage points: the mean difference over seeds, its 95 %
    interval over seeds and the verdict ("+19.8 [-46.4, +86.0] no measurable change"), or with one seed the
    difference and "1 seed"."""
    name = COMPARISON_COLUMNS[column]
    found = [c for c in record["comparisons"] if c["task"] == task and c["comparison"] == name]
    if len(found) != 1:
        raise KeyError(f"comparisons[task={task}, comparison={name}]: {len(found)} found")
    comparison = found[0]
    mean = f"{100 * comparison['mean_difference']:+.1f}"
    if comparison["ci95"] is None:
        seeds = comparison["n_seeds"]
        return f"{mean} ({seeds} seed{'s' if seeds != 1 else ''})"
    low, high = (100 * bound for bound in comparison["ci95"])
    return f"{mean} [{low:+.1f}, {high:+.1f}] {comparison['verdict']}"


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


def record_types(record: dict) -> set[str]:
    """The task types a ladder record holds (its per-type baselines; ``all`` is their pool, not a type)."""
    return set(record["baselines"]) - {"all"}


def test_ladder_tables_are_their_records() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "notes").glob("*.md"))]
    problems, quoted = [], set()
    for page in pages:
        for name, header, body in record_tables(page):
            quoted.add(name)
            record = load_record(name)
            shown = {cells[0].strip("`") for cells in body}
            if shown != record_types(record):
                problems.append(f"{page.name} ({name}): the table's task types {sorted(shown)} are not the record's "
                                f"{sorted(record_types(record))}")
            for column in header[1:]:
                if column not in LADDER_COLUMNS and column not in COMPARISON_COLUMNS:
                    problems.append(f"{page.name} ({name}): column {column!r} is none of "
                                    f"{sorted(LADDER_COLUMNS) + sorted(COMPARISON_COLUMNS)}")
            for cells in body:
                task = cells[0].strip("`")
                for column, text in zip(header[1:], cells[1:]):
                    if column in COMPARISON_COLUMNS:
                        try:
                            want_text = comparison_cell(record, task, column)
                        except KeyError as exc:
                            problems.append(f"{page.name} ({name}): {task}, {column}: no such comparison ({exc})")
                            continue
                        if text != want_text:
                            problems.append(f"{page.name} ({name}): {task}, {column}: says {text!r}, the record "
                                            f"gives {want_text!r}")
                        continue
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
    # Every ladder record under docs/records/ is quoted by some table, the test ladder's by learning.md's.
    unquoted = sorted(path.name for path in RECORDS.glob("ladder_*.json") if path.name not in quoted)
    problems += [f"no page has a table under <!-- record: {name} -->" for name in unquoted]
    if "ladder_spatial.json" not in {name for name, _, _ in record_tables(ROOT / "docs" / "learning.md")}:
        problems.append("learning.md: no table under <!-- record: ladder_spatial.json -->")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------------------
# learning.md's opening ("## Today's answer", down to the table): its claims read from the test ladder's record.
# ---------------------------------------------------------------------------------------------------------

_SEEDS_DONE = re.compile(r"the test ladder at `(?P<detail>\w+)` has finished (?P<done>\d+) of its "
                         r"(?P<planned>\d+) seeds")
_QUESTIONS = re.compile(r"\((?P<n>[\d,]+) questions nobody tuned on")
_OOD_QUESTIONS = re.compile(r"\((?P<n>[\d,]+) questions in larger rooms")
_T_QUANTILE = re.compile(r"t = (?P<t>\d+\.\d+)")
_DECIMAL = re.compile(r"(?<![\w.])(?P<sign>[+−-]?)(?P<value>\d+\.\d+)(?![\d.])")


def opening_problems(text: str, record: Record) -> list[str]:
    """What the opening ``text`` (whitespace collapsed) says that the test ladder's record does not."""
    from embodied_r.core.significance import t_quantile_975

    problems = []
    arms = record.at("arms_evaluated_on_test")
    seeds = {len(record.at(f"arms.{arm}.seeds")) for arm in arms}
    done = _SEEDS_DONE.search(text)
    if done is None:
        problems.append("no 'the test ladder at `DETAIL` has finished N of its M seeds' sentence")
    elif done["detail"] != record.at("detail") or {int(done["done"])} != seeds:
        problems.append(f"says {done[0]!r}; the record is at {record.at('detail')!r} with {sorted(seeds)} seeds")
    for pattern, field in ((_QUESTIONS, "questions"), (_OOD_QUESTIONS, "ood_questions")):
        said = pattern.search(text)
        if said is None or int(said["n"].replace(",", "")) != record.at(field):
            problems.append(f"the number of {field} is not said as the record's {record.at(field)}")
    met = sorted({task for arm in arms for task in record.at(f"goal.arms.{arm}.types_met")})
    if not met and "holds on no type" not in text:
        problems.append("the record's goal holds on no type, and the opening does not say 'holds on no type'")
    if met and ("holds on no type" in text or not all(f"`{task}`" in text for task in met)):
        problems.append(f"the record's goal holds on {met}; the opening must name each (in backticks)")
    ood = {verdict for arm in arms for verdict in record.at(f"ood_goal.{arm}").values()}
    if len(ood) == 1 and f'"{next(iter(ood))}" on every type' not in text:
        problems.append(f'ood_goal is "{next(iter(ood))}" on every type, which the opening does not say')
    if len(ood) > 1 and "on every type" in text:
        problems.append(f"ood_goal's verdicts differ by type ({sorted(ood)}), not one on every type")
    quantiles = {round(t_quantile_975(n - 1), 1) for n in seeds if n > 1}
    quantile = _T_QUANTILE.search(text)
    if quantile is not None and float(quantile["t"]) not in quantiles:
        problems.append(f"t = {quantile['t']} is not the 95 % t quantile at {sorted(seeds)} seeds")
    scores, differences = opening_numbers(record)
    unsigned = scores | {abs(d) for d in differences} | quantiles
    for m in _DECIMAL.finditer(text):
        value = float(m["value"])
        if m["sign"]:  # a signed number is a difference, its sign included
            signed = -value if m["sign"] in "−-" else value
            if signed not in differences:
                problems.append(f"{m[0]} is no difference of the record's comparisons (in points)")
        elif value not in unsigned:
            problems.append(f"{m[0]} is no score, baseline or difference of the record (in percent or points)")
    return problems


def opening_numbers(record: Record) -> tuple[set[float], set[float]]:
    """What the opening may quote, to one decimal in percent or points: the scores (runs' accuracies and
    blind accuracies, the baselines), and the comparisons' differences (the mean over seeds with its interval's
    bounds, and each seed's)."""
    scores = {round(100 * leaf, 1) for part in ("runs", "ood_runs", "baselines", "ood_baselines")
              for leaf in numeric_leaves(record.get(part)) if 0 <= leaf <= 1}
    differences = set()
    for part in ("comparisons", "ood_comparisons"):
        for comparison in record.get(part) or []:
            differences.add(round(100 * comparison["mean_difference"], 1))
            differences |= {round(100 * bound, 1) for bound in comparison["ci95"] or ()}
            differences |= {round(100 * seed["difference"], 1) for seed in comparison["per_seed"]}
    return scores, differences


def opening_text(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    start = text.find("## Today's answer")
    end = text.find("<!-- record: ladder_spatial.json -->")
    assert 0 <= start < end, f"{page}: no '## Today's answer' section before the test ladder's table"
    return " ".join(text[start:end].split())


def test_learning_opens_with_the_records_answer() -> None:
    page = ROOT / "docs" / "learning.md"
    problems = opening_problems(opening_text(page), load_record("ladder_spatial.json"))
    assert not problems, "\n".join(f"{page.name}, Today's answer: {p}" for p in problems)


def command_flags(text: str) -> dict[str, str | None]:
    """The flags of the first ``python benchmarks/ladder.py`` command in ``text`` (continuation lines joined)
    that trains (has ``--arm``): ``{"--steps": "30", "--sft": None, ...}``."""
    joined = text.replace("\\\n", " ")
    # Shell variables set on a line of their own ("T=a,b") stand for their value ("$T").
    variables = dict(re.findall(r"^\s*([A-Z]\w*)=(\S+)\s*$", joined, flags=re.MULTILINE))
    for line in joined.splitlines():
        words = [variables.get(word[1:], word) if word.startswith("$") else word for word in line.split()]
        if "benchmarks/ladder.py" in words and "--arm" in words:
            flags: dict[str, str | None] = {}
            for word, following in zip(words, [*words[1:], ""]):
                if word.startswith("--"):
                    flags[word] = None if following.startswith("--") or not following else following
            return flags
    raise AssertionError("no `python benchmarks/ladder.py ... --arm ...` command")


def command_problems(flags: dict[str, str | None], record: Record) -> list[str]:
    """Where the test ladder's command (``flags``) differs from what its record says the arm ran."""
    arm = flags.get("--arm")
    compute = record.at(f"arms.{arm}.compute")
    split, _, tasks = record.at("split").partition("+")
    want = {"--detail": record.at("detail"), "--span": record.at("span"), "--split": split,
            "--warmup-steps": compute["warmup_steps"], "--sft-steps": compute["sft"]["steps"],
            "--sft-batch": compute["sft"]["batch_size"], "--steps": compute["grpo"]["steps"],
            "--prompts": compute["grpo"]["prompts"], "--generations": compute["grpo"]["generations"],
            "--max-new-tokens": compute["grpo"]["max_completion_length"]}
    problems = [f"the command says {flag} {flags.get(flag)}; the record gives {value}"
                for flag, value in want.items() if flags.get(flag) != str(value)]
    evaluated = "+".join(sorted((flags.get("--eval-tasks") or "").split(",")))
    if tasks and evaluated != tasks:
        problems.append(f"the command's --eval-tasks {flags.get('--eval-tasks')} are not the record's split "
                        f"{record.at('split')!r}")
    grpo_from = record.at(f"arms.{arm}.grpo_from")
    if ("--grpo-from-sft" in flags) != (grpo_from == "sft"):
        problems.append(f"the command's --grpo-from-sft and the record's grpo_from {grpo_from} differ")
    seeds = [int(seed) for seed in (flags.get("--seeds") or "").split(",") if seed]
    if not set(record.at(f"arms.{arm}.seeds")) <= set(seeds):
        problems.append(f"the command's --seeds {flags.get('--seeds')} lack seeds of the record")
    for variant, flag in (("control", "--control"), ("alone", "--grpo-alone")):
        if (variant in record.at(f"arms.{arm}.variants")) != (flag in flags):
            variants = record.at(f"arms.{arm}.variants")
            problems.append(f"the command's {flag} and the record's variants {variants} differ")
    return problems


def test_learning_gives_the_command_the_record_ran() -> None:
    page = ROOT / "docs" / "learning.md"
    text = page.read_text(encoding="utf-8")
    flags = command_flags(text[text.index("## Today's answer"):text.index("## How it is measured")])
    record = load_record("ladder_spatial.json")
    problems = command_problems(flags, record)
    assert not problems, "\n".join(f"{page.name}: {p}" for p in problems)
    planned = _SEEDS_DONE.search(" ".join(text.split()))
    assert planned is not None and int(planned["planned"]) == len((flags["--seeds"] or "").split(","))
    fewer_tasks = {**flags, "--eval-tasks": ",".join(flags["--eval-tasks"].split(",")[1:])}
    assert "--eval-tasks" in command_problems(fewer_tasks, record)[0]
    steps = record.at(f"arms.{flags['--arm']}.compute.grpo.steps")
    fewer = {**flags, "--steps": str(steps - 10)}
    assert command_problems(fewer, record) == [f"the command says --steps {steps - 10}; the record gives {steps}"]


def test_an_opening_that_differs_from_the_record_is_named(tmp_path: Path) -> None:
    record = load_record("ladder_spatial.json")
    text = opening_text(ROOT / "docs" / "learning.md")
    assert opening_problems(text, record) == []
    arm = record.at("arms_evaluated_on_test")[0]
    seeds = len(record.at(f"arms.{arm}.seeds"))
    more = json.loads(json.dumps(record))
    more["arms"][arm]["seeds"] = list(range(seeds + 1))
    assert any("seeds" in p for p in opening_problems(text, Record(more, tmp_path)))
    met = json.loads(json.dumps(record))
    met["goal"]["arms"][arm]["types_met"] = ["object_rel_direction_easy"]
    assert any("goal holds on" in p for p in opening_problems(text, Record(met, tmp_path)))
    scores, differences = opening_numbers(record)
    quoted = scores | {abs(d) for d in differences}
    stray = next(f"{v / 10:.1f}" for v in range(1000, 0, -1) if v / 10 not in quoted)
    assert opening_problems(text + f" {stray} → 100.0", record) == [
        f"{stray} is no score, baseline or difference of the record (in percent or points)"]
    score = next(iter(sorted(scores - differences - {-d for d in differences})))
    assert opening_problems(text + f" (+{score:.1f} points)", record) == [
        f"+{score:.1f} is no difference of the record's comparisons (in points)"]
    lacking = {k: v for k, v in record.items() if k != "ood_goal"}
    with pytest.raises(AssertionError, match="no field 'ood_goal"):
        opening_problems(text, Record(lacking, tmp_path))


def test_a_ladder_cell_that_differs_from_its_record_is_named(tmp_path: Path) -> None:
    record = {"baselines": {"counting": {"n": 26, "random": None, "solver_ceiling": 1.0}},
              "runs": [{"task": "counting", "variant": "sft", "seed": 0, "accuracy": 0.5, "blind_accuracy": None},
                       {"task": "counting", "variant": "sft", "seed": 1, "accuracy": 0.25, "blind_accuracy": None}]}
    assert ladder_values(record, "counting", "SFT") == [50.0, 25.0]
    assert cell_values("50.0 / 25.0") == [50.0, 25.0] and ladder_values(record, "counting", "random") == [None]
    assert cell_values("50.0 / 26.0") != ladder_values(record, "counting", "SFT")
    record["comparisons"] = [
        {"task": "counting", "comparison": "grpo_vs_sft", "mean_difference": 0.1979, "ci95": [-0.4641, 0.8599],
         "n_seeds": 2, "verdict": "no measurable change"},
        {"task": "counting", "comparison": "grpo_vs_control", "mean_difference": 0.4375, "ci95": None,
         "n_seeds": 1, "verdict": "too few seeds"}]
    assert comparison_cell(record, "counting", "GRPO after SFT − SFT") == "+19.8 [-46.4, +86.0] no measurable change"
    assert comparison_cell(record, "counting", "GRPO after SFT − control") == "+43.8 (1 seed)"
    with pytest.raises(KeyError, match="comparison=grpo_vs_blind"):
        comparison_cell(record, "counting", "GRPO after SFT − blind")


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
                      r"the exact sign test \(p (?:= )?(?P<p>< ?[\d.e−-]+|[\d.e−-]+)\): \*\*(?P<verdict>[^*]+)\*\*")


_STOPPED_AT = re.compile(r"stopped GRPO at (?P<steps>\d+) of \d+ steps")
_TEXT_RULE = re.compile(r"near the text rule \((?P<rule>[\d.]+) %\)")
_LADDER_COMPUTE = re.compile(r"after a (?P<warm>\d+)-step format primer that alone took (?P<minutes>\d+) minutes "
                             r"of wall time here, then (?P<sft>\d+) SFT steps \(the ladder's record, "
                             r"`arms\.(?P<arm>[\w-]+)\.compute`\)")


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def p_value_problem(written: str, p_value: float) -> str | None:
    """Why the p-value as the docs write it ("0.0005", "< 1e-5", "1.2e-05") is not ``p_value``, or None."""
    text = written.replace("−", "-").strip()
    if text.startswith("<"):
        return None if p_value < float(text[1:]) else f"p {written} but the record's p is {p_value:.3g}"
    if "e" in text:
        value = float(text)
        return None if abs(value - p_value) <= 0.05 * value else f"p {written} but the record's p is {p_value:.3g}"
    decimals = len(text.partition(".")[2])
    return None if shows(float(text), decimals, p_value) else f"p {written} but the record's p is {p_value:.3g}"


def machine_problem(written: str, machine: dict) -> str | None:
    """Why the CPU as the README describes it ("a 2-core AMD EPYC with AVX-512 bf16") is not the record's."""
    said_bf16 = "with AVX-512 bf16" in written
    if f"{machine['cores']}-core" not in written or str(machine["cpu"]) not in written or said_bf16 != bool(
            machine["avx512_bf16"]):
        return f"the run line's CPU {written!r} is not demo.json machine {machine}"
    return None


def demo_problems(text: str, record: Record, header: list[str], body: list[list[str]]) -> list[str]:
    """What README's demo table (``header``, ``body``) and lines (``text``, whitespace collapsed) say that
    differs from the demo record."""
    problems = []
    if f"(n = {record.at('n')})" not in header[0]:
        problems.append(f"README: the demo table says {header[0]!r}; demo.json n is {record.at('n')}")
    rows = {cells[0]: cells[1] for cells in body}
    for label, fields in DEMO_ROWS.items():
        values = [record.at(f"accuracy.{field}") for field in fields]
        want = [None if value is None else round(100 * value, 1) for value in values]
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
        said = {"date": run["date"], "dtype": run["dtype"], "seconds": 60 * int(run["minutes"]) + int(run["seconds"]),
                "peak": float(run["peak"]), "steps": int(run["steps"])}
        want = {"date": record.at("measured"), "dtype": record.at("dtype"), "seconds": round(record.at("stages_s")),
                "peak": record.at("peak_rss_gib"), "steps": record.at("grpo_steps")}
        problems += [f"README: the run line says {k} {said[k]!r}; demo.json gives {want[k]!r}"
                     for k in said if said[k] != want[k]]
        machine = machine_problem(run["cpu"], record.at("machine"))
        problems += [f"README: {machine}"] if machine else []
    verdict = _VERDICT.search(text)
    comparison = record.at("comparisons.grpo_vs_sft")
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
        p_problem = p_value_problem(verdict["p"], comparison["p_value"])
        problems += [f"README: GRPO − SFT: {p_problem}"] if p_problem else []
    stopped = _STOPPED_AT.search(text)
    if stopped is None:
        problems.append("README: no 'stopped GRPO at N of M steps' sentence")
    elif int(stopped["steps"]) != record.at("grpo_steps"):
        problems.append(f"README: GRPO stopped at {stopped['steps']} steps; demo.json grpo_steps "
                        f"{record.at('grpo_steps')}")
    rule = _TEXT_RULE.search(text)
    if rule is None:
        problems.append("README: no 'near the text rule (X %)' sentence")
    elif float(rule["rule"]) != round(100 * record.at("accuracy.text_rule"), 1):
        problems.append(f"README: the text rule ({rule['rule']} %) is not demo.json accuracy.text_rule")
    return problems


def ladder_compute_problems(text: str, record: Record) -> list[str]:
    """What README's sentence on the ladder's compute (why the demo's task is the last action) says that the
    test ladder's record (``arms.ARM.compute``) does not."""
    said = _LADDER_COMPUTE.search(text)
    if said is None:
        return ["README: no 'after a N-step format primer that alone took M minutes of wall time here, then K SFT "
                "steps (the ladder's record, `arms.ARM.compute`)' sentence"]
    compute = record.at(f"arms.{said['arm']}.compute")
    want = {"warm": compute["warmup_steps"], "minutes": round(compute["stage_seconds"]["warmup"] / 60),
            "sft": compute["sft"]["steps"]}
    return [f"README: the ladder's compute says {key} {said[key]}; {record.path.name} arms.{said['arm']}.compute "
            f"gives {want[key]}" for key in want if int(said[key]) != want[key]]


def test_the_readme_quotes_the_ladders_compute() -> None:
    readme = ROOT / "README.md"
    text = " ".join(readme.read_text(encoding="utf-8").split())
    record = load_record("ladder_spatial.json")
    assert ladder_compute_problems(text, record) == []
    arm = re.search(r"`arms\.([\w-]+)\.compute`", text)[1]
    slower = json.loads(json.dumps(record))
    slower["arms"][arm]["compute"]["stage_seconds"]["warmup"] += 600
    assert "minutes" in ladder_compute_problems(text, Record(slower, record.path))[0]


# README's demo probe on another task type (why the demo stays on the last action), read from its record.
_PROBE = re.compile(r"record `docs/records/(?P<file>[\w.]+)`\), its (?P<sft_steps>\d+) SFT steps from the base model "
                    r"already answered (?P<sft>[\d.]+) % of (?P<n>\d+) held-out questions \(blind (?P<blind>[\d.]+) "
                    r"%\), and in (?P<signal>none|\d+) of its (?P<steps>\d+) GRPO steps did a group's four completions "
                    r"earn different rewards, so no update ran and (?P<changed>no|\d+) answers?'s? scores? changed")


def probe_problems(text: str, folder: Path = RECORDS) -> list[str]:
    """What README's sentence on the demo probe (``text``, whitespace collapsed) says that its record does not."""
    said = _PROBE.search(text)
    if said is None:
        return ["README: no 'record `docs/records/F`), its N SFT steps from the base model already answered X % of "
                "N held-out questions (blind X %), and in K of its N GRPO steps did a group's four completions earn "
                "different rewards, so no update ran and no answer's score changed' sentence"]
    record = load_record(said["file"], folder)
    vs_sft = record.at("comparisons.grpo_vs_sft")
    want = {"sft_steps": record.at("sft_steps"), "sft": round(100 * record.at("accuracy.sft"), 1),
            "n": record.at("n"), "blind": round(100 * record.at("accuracy.blind"), 1),
            "signal": record.at("grpo_steps_with_signal"), "steps": record.at("grpo_steps"),
            "changed": vs_sft["improved"] + vs_sft["worsened"]}
    have = {key: (0 if said[key] in ("none", "no") else float(said[key])) for key in want}
    return [f"README: the demo probe says {key} {said[key]}; {said['file']} gives {want[key]}"
            for key in want if have[key] != want[key]]


def test_the_readme_demo_probe_is_its_record(tmp_path: Path) -> None:
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert probe_problems(text) == []
    name = _PROBE.search(text)["file"]
    changed = json.loads((RECORDS / name).read_text(encoding="utf-8"))
    changed["grpo_steps_with_signal"] = 3
    changed["comparisons"]["grpo_vs_sft"]["improved"] += 2
    (tmp_path / name).write_text(json.dumps(changed), encoding="utf-8")
    problems = probe_problems(text, tmp_path)
    assert len(problems) == 2 and "signal none" in problems[0] and "changed no" in problems[1], problems


def test_the_readme_demo_run_is_the_record() -> None:
    readme = ROOT / "README.md"
    text = " ".join(readme.read_text(encoding="utf-8").split())
    header, body = table_rows(readme, "| held-out questions")
    problems = demo_problems(text, load_record("demo.json"), header, body)
    assert not problems, "\n".join(problems)


def test_a_demo_record_without_a_field_fails_naming_file_and_field(tmp_path: Path) -> None:
    readme = ROOT / "README.md"
    text = " ".join(readme.read_text(encoding="utf-8").split())
    header, body = table_rows(readme, "| held-out questions")
    whole = load_record("demo.json")
    assert demo_problems(text, whole, header, body) == []
    lacking = {**whole, "accuracy": {k: v for k, v in whole["accuracy"].items() if k != "sft"}}
    (tmp_path / "demo.json").write_text(json.dumps(lacking), encoding="utf-8")
    with pytest.raises(AssertionError, match=re.escape(f"{tmp_path / 'demo.json'}: no field 'accuracy.sft'")):
        demo_problems(text, load_record("demo.json", tmp_path), header, body)
    (tmp_path / "demo.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(AssertionError, match="not a JSON object"):
        load_record("demo.json", tmp_path)
    # A p-value or a CPU that is not the record's is named.
    other_p = {**whole, "comparisons": {**whole["comparisons"], "grpo_vs_sft": {
        **whole["comparisons"]["grpo_vs_sft"], "p_value": 0.2}}}
    assert any("record's p is 0.2" in p for p in demo_problems(text, Record(other_p, tmp_path), header, body))
    other_cpu = {**whole, "machine": {**whole["machine"], "avx512_bf16": not whole["machine"]["avx512_bf16"]}}
    assert any("CPU" in p for p in demo_problems(text, Record(other_cpu, tmp_path), header, body))


def test_p_values_are_read_as_the_docs_write_them() -> None:
    assert p_value_problem("0.0005", 0.00048828125) is None
    assert p_value_problem("0.001", 0.00048828125) is not None
    assert p_value_problem("< 1e-5", 3e-6) is None and p_value_problem("< 1e-5", 3e-5) is not None
    assert p_value_problem("1.2e-05", 1.21e-5) is None and p_value_problem("1.2e-05", 2e-5) is not None


# ---------------------------------------------------------------------------------------------------------
# The summary table of docs/performance.md ("## The answer"): its `record` column names the record each
# row's numbers come from (a benchmark's ``--record``, benchmarks/bench_record.py; several are comma-separated)
# or says `not yet recorded`. Every number of a recorded row's `project against baseline` and `by` cells must
# be a number of its record's settings or results, as the doc rounds it; a date there must be the record's.
# ---------------------------------------------------------------------------------------------------------

NOT_RECORDED = "not yet recorded"
QUOTING_COLUMNS = ("project against baseline", "by")
# A number as the docs write it: "108.3", "1,474", "9.7x", "94.3 %", each side of "2 × 4" and "2.95–6.44x".
# Not a digit inside a name or a code ("SmolLM2-135M", "float32", "H.264", "mp4v", "AVX-512", "2x4"): no
# letter, digit, "." or "," right before it, nor a letter and "-", and no letter right after it but the "x" of
# a ratio.
_QUOTED_NUMBER = re.compile(r"(?<![\w.,])(?<![A-Za-z]-)(?P<whole>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<decimals>\d+))?"
                            r"(?!\.\d|,\d|[^\Wx]|x\w)")
_DATE = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}(?![\w-])")


def quoted_numbers(text: str) -> list[tuple[str, float, int]]:
    """(as written, value, decimals shown) of every number in a cell; dates are not numbers here."""
    text = _DATE.sub(" ", text)
    return [(m[0], float(m["whole"].replace(",", "") + "." + (m["decimals"] or "0")), len(m["decimals"] or ""))
            for m in _QUOTED_NUMBER.finditer(text)]


def numeric_leaves(tree: object) -> list[float]:
    """Every number in a record's tree (bools are not numbers)."""
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in numeric_leaves(value)]
    if isinstance(tree, list):
        return [leaf for value in tree for leaf in numeric_leaves(value)]
    if isinstance(tree, int | float) and not isinstance(tree, bool):
        return [float(tree)]
    return []


def shows(value: float, decimals: int, leaf: float) -> bool:
    """Whether ``leaf`` rounded to ``decimals`` decimals is ``value``. Within half a unit of the last shown
    digit, both ends included: a record keeps 4 significant digits and the doc may round the unrounded
    measurement, so a tie can fall either way (1.385 kept, 1.38 or 1.39 printed)."""
    return abs(leaf - value) <= 0.5 * 10.0**-decimals * (1 + 1e-9)


def is_demo_record(record: object) -> bool:
    """The demo's measured run (``embodied-r demo --record``): its numbers stand at the top of the record, not
    under ``settings`` and ``results``, and its date is ``measured``."""
    return isinstance(record, dict) and str(record.get("command", "")).startswith("embodied-r demo")


def record_numbers(record: dict) -> list[float]:
    if is_demo_record(record):
        return numeric_leaves(record)
    return [leaf for part in ("settings", "results") for leaf in numeric_leaves(record.get(part))]


def read_records(names: list[str], folder: Path) -> tuple[list[dict], list[str]]:
    """The records named, and a problem for each that cannot be read or has no ``results`` (but the demo's)."""
    records, problems = [], []
    for name in names:
        path = folder / name
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: cannot read the record ({exc})")
            continue
        if not is_demo_record(record) and not (isinstance(record, dict) and isinstance(record.get("results"), dict)):
            problems.append(f"{path}: the record has no field 'results'")
            continue
        records.append(record)
    return records, problems


def summary_problems(page: str, header: list[str], body: list[list[str]], folder: Path) -> list[str]:
    """What in the summary table (``header`` and ``body`` rows of ``page``) differs from its records in
    ``folder``."""
    missing = [c for c in ("what", *QUOTING_COLUMNS, "record") if c not in header]
    if missing:
        return [f"{page}: the summary table has no column {', '.join(map(repr, missing))}"]
    problems = []
    for cells in body:
        row = dict(zip(header, cells))
        what, cell = row.get("what", ""), row.get("record", "").strip("`")
        if cell == NOT_RECORDED:
            continue
        names = [name.strip().strip("`") for name in cell.split(",")]
        if not cell or not all(name.endswith(".json") for name in names):
            problems.append(f"{page}: {what!r}: the record cell {cell!r} is neither record names (NAME.json) nor "
                            f"{NOT_RECORDED!r}")
            continue
        records, unreadable = read_records(names, folder)
        problems += [f"{page}: {what!r}: {problem}" for problem in unreadable]
        if unreadable:
            continue
        leaves = [leaf for r in records for leaf in record_numbers(r)]
        for column in QUOTING_COLUMNS:
            for written, value, decimals in quoted_numbers(row.get(column, "")):
                if not any(shows(value, decimals, leaf) for leaf in leaves):
                    problems.append(f"{page}: {what!r}: {written} (in {column!r}) is no number of the settings or "
                                    f"results of {', '.join(names)}")
            for date in _DATE.findall(row.get(column, "")):
                if date not in {r.get("date") or r.get("measured") for r in records}:
                    problems.append(f"{page}: {what!r}: the date {date} (in {column!r}) is not that of "
                                    f"{', '.join(names)}")
    return problems


def test_the_performance_summary_quotes_its_records() -> None:
    page = ROOT / "docs" / "performance.md"
    header, body = table_rows(page, "| what |")
    problems = summary_problems(page.name, header, body, RECORDS)
    recorded = [cells for cells in body if dict(zip(header, cells)).get("record") not in (None, NOT_RECORDED)]
    assert body and recorded and not problems, "\n".join(problems) or f"{page}: no row of the summary names a record"


def test_the_number_reader_reads_the_docs_ways_of_writing_numbers() -> None:
    def values(text: str) -> list[tuple[float, int]]:
        return [(value, decimals) for _, value, decimals in quoted_numbers(text)]

    assert values("108.3 against 11.2 frames/s") == [(108.3, 1), (11.2, 1)]
    assert values("**9.7x** (94.3 % of capacity)") == [(9.7, 1), (94.3, 1)]
    assert values("mp4v 4.5–5.4x, H.264 2.8–3.2x") == [(4.5, 1), (5.4, 1), (2.8, 1), (3.2, 1)]
    assert values("1,474 rows; **2,596x**; 2.95x at 2 × 4") == [(1474.0, 0), (2596.0, 0), (2.95, 2), (2.0, 0), (4.0, 0)]
    assert values("SmolLM2-135M, float32, AVX-512, 2x4, run 2026-12-07, 3.00x") == [(3.0, 2)]
    assert values("a 30-step run on 2-core CPUs") == [(30.0, 0), (2.0, 0)]


def test_a_summary_number_that_differs_from_its_record_is_named(tmp_path: Path) -> None:
    record = {"benchmark": "answer_parse", "date": "2026-12-07", "settings": {"max_old_tags": 8000},
              "results": {"rows": [{"case": "unclosed <answer>", "tags": 8000, "new_ms": 1.384, "old_ms": 3576.0,
                                    "old_over_new": 2584.0, "exact": True}]}}
    (tmp_path / "bench_answer_parse.json").write_text(json.dumps(record), encoding="utf-8")
    header = ["what", "project against baseline", "by", "goal", "section", "record"]

    def problems(against: str, by: str, cell: str = "bench_answer_parse.json") -> list[str]:
        return summary_problems("performance.md", header, [["reading", against, by, "linear", "Reading", cell]],
                                tmp_path)

    assert problems("1.38 ms against 3,576 ms (8,000 tags)", "**2,584x**") == []
    assert problems("1.4 ms against 3,576 ms", "**2,584x**") == []  # fewer decimals shown: still the record's
    assert problems("1.38 ms against 3,576 ms", "**2,584x**", NOT_RECORDED) == []
    wrong = problems("1.38 ms against 3.6 s", "**2,596x**")
    assert wrong == ["performance.md: 'reading': 3.6 (in 'project against baseline') is no number of the settings "
                     "or results of bench_answer_parse.json",
                     "performance.md: 'reading': 2,596 (in 'by') is no number of the settings or results of "
                     "bench_answer_parse.json"]
    assert problems("1.39 ms against 3,576 ms", "2,584x")[0].startswith("performance.md: 'reading': 1.39 ")
    assert "the date 2026-12-06" in problems("1.38 ms (2026-12-06)", "2,584x")[0]
    assert problems("1 against 2", "x", "1 against 2") and "neither record names" in problems("1", "x", "soon")[0]


def test_the_demo_record_is_read_whole(tmp_path: Path) -> None:
    record = {"command": "embodied-r demo --minutes 15 --dtype float32", "measured": "2026-12-07",
              "stages_s": 748.6, "peak_rss_gib": 4.14, "grpo_steps": 36}
    (tmp_path / "demo.json").write_text(json.dumps(record), encoding="utf-8")
    header = ["what", "project against baseline", "by", "goal", "section", "record"]

    def problems(against: str) -> list[str]:
        return summary_problems("performance.md", header, [["demo", against, "", "", "The demo", "demo.json"]],
                                tmp_path)

    assert problems("2026-12-07: 748.6 s of stages, peak 4.14 GiB, 36 GRPO steps") == []
    assert problems("749.0 s of stages, peak 4.14 GiB")[0].startswith("performance.md: 'demo': 749.0 ")
    assert "the date 2026-12-05" in problems("2026-12-05: 748.6 s")[0]


def test_a_missing_record_or_one_without_results_is_named(tmp_path: Path) -> None:
    (tmp_path / "no_results.json").write_text(json.dumps({"benchmark": "x", "settings": {"n": 1}}), encoding="utf-8")
    header = ["what", "project against baseline", "by", "goal", "section", "record"]
    missing = summary_problems("performance.md", header, [["a", "1", "", "", "", "bench_gone.json"]], tmp_path)
    assert len(missing) == 1 and f"{tmp_path / 'bench_gone.json'}: cannot read the record" in missing[0]
    empty = summary_problems("performance.md", header, [["a", "1", "", "", "", "no_results.json"]], tmp_path)
    assert empty == [f"performance.md: 'a': {tmp_path / 'no_results.json'}: the record has no field 'results'"]
    old_table = summary_problems("performance.md", header[:-1], [], tmp_path)
    assert old_table == ["performance.md: the summary table has no column 'record'"]
