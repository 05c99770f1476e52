"""Data specs: ``NAME:PATH`` names a benchmark loader, a plain path is a prompt-row or processed file.

=================================  ==================================================================
spec                               what it reads
=================================  ==================================================================
``urbanvideo:DIR|MCQ.parquet``     UrbanVideo-Bench (options parsed from the question text)
``vsibench:DIR|FILE``              VSI-Bench parquet/jsonl (``vsibench-merged:`` merges rel-direction)
``egoschema:DIR``                  EgoSchema public subset (questions.json + subset_answers.json)
``mvbench:DIR``                    MVBench ``json/<task>.json`` (``mvbench:DIR#task1,task2`` for a few)
``synthetic:DIR``                  our ``synth world`` / ``synth robot`` folders (questions.jsonl)
``qa:FILE.jsonl``                  any QARecord jsonl (e.g. a split written by ``data split``)
``MODULE:FUNCTION:PATH``           a loader of your own package, e.g. ``my_pkg.loaders:load_mine:DIR``
``FILE.json`` / ``FILE.jsonl``     official Embodied-R processed JSON / PromptRow jsonl (ready prompts)
=================================  ==================================================================

A loader is ``fn(path: str) -> (list[QARecord], LoadReport)``: it reads the questions under ``path``, skips
the ones it cannot use with a reason (``LoadReport.skip``) and raises ``DataFileError`` only for a file it
cannot read at all. A loader of your own is named by ``MODULE:FUNCTION:PATH``: exactly the first two colons
split it, ``MODULE`` a dotted Python module name (importable: its folder on ``PYTHONPATH``) that is not one
of the built-in names above and ``FUNCTION`` a name in it; the rest, colons included, is the path. A spec
with one colon stays ``NAME:PATH``, so the two cannot be confused. Its records are checked like every
loader's (``common.check_records``: duplicates and unscorable questions skipped with a reason).

QA specs give questions only; the reasoner also needs the perception text of each question's video,
which ``prompt_rows_from_perception`` joins in with the shared prompt builder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embodied_r.core.io import DataFileError, iter_jsonl
from embodied_r.core.records import Perception, PromptRow, QARecord, RecordError
from embodied_r.evaluation.benchmarks.common import LoadReport, check_records, read_records

if TYPE_CHECKING:
    from embodied_r.methods import Method

QALoader = Callable[[str], tuple[list[QARecord], LoadReport]]


def _urbanvideo(path: str) -> tuple[list[QARecord], LoadReport]:
    from embodied_r.evaluation.benchmarks.urbanvideo import load_urbanvideo

    return load_urbanvideo(path)


def _vsibench(path: str, merge: bool = False) -> tuple[list[QARecord], LoadReport]:
    from embodied_r.evaluation.benchmarks.vsibench import load_vsibench

    return load_vsibench(path, merge_rel_direction=merge)


def _egoschema(path: str) -> tuple[list[QARecord], LoadReport]:
    from embodied_r.evaluation.benchmarks.egoschema import load_egoschema

    return load_egoschema(path)


def _mvbench(path: str) -> tuple[list[QARecord], LoadReport]:
    from embodied_r.evaluation.benchmarks.mvbench import load_mvbench

    root, _, tasks = path.partition("#")
    return load_mvbench(root, tasks=[t for t in tasks.split(",") if t] or None)


def _synthetic(path: str) -> tuple[list[QARecord], LoadReport]:
    from embodied_r.evaluation.benchmarks.synthetic import load_synthetic

    return load_synthetic(path)


def load_qa_jsonl(path: str | Path) -> tuple[list[QARecord], LoadReport]:
    """A plain QARecord jsonl file, checked like every loader's output."""
    report = LoadReport()
    return check_records(read_records(path, QARecord, report), report), report


LOADERS: dict[str, QALoader] = {
    "urbanvideo": _urbanvideo,
    "vsibench": _vsibench,
    "vsibench-merged": lambda path: _vsibench(path, merge=True),
    "egoschema": _egoschema,
    "mvbench": _mvbench,
    "synthetic": _synthetic,
    "qa": load_qa_jsonl,
}


@dataclass(frozen=True)
class DataSpec:
    """A parsed ``--data`` value: ``loader`` is None for plain prompt/processed files, a built-in name, or the
    ``"module:function"`` path of a loader of your own."""

    loader: str | None
    path: str


# MODULE:FUNCTION:PATH, a loader of the user's own package: a dotted module name, a name in it, a path.
_LOADER_PATH = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<function>[A-Za-z_]\w*):(?P<path>.*)",
                          re.DOTALL)


def parse_spec(spec: str) -> DataSpec:
    """Split ``NAME:PATH`` or ``MODULE:FUNCTION:PATH``; a path without a loader prefix is a plain file.

    >>> parse_spec("urbanvideo:data/MCQ.parquet")
    DataSpec(loader='urbanvideo', path='data/MCQ.parquet')
    >>> parse_spec("runs/prompts.jsonl")
    DataSpec(loader=None, path='runs/prompts.jsonl')
    >>> parse_spec("my_pkg.loaders:load_mine:data/questions.csv")
    DataSpec(loader='my_pkg.loaders:load_mine', path='data/questions.csv')
    >>> parse_spec("qa:odd:name.jsonl")  # a built-in name comes first: the rest is its path
    DataSpec(loader='qa', path='odd:name.jsonl')
    """
    name, sep, rest = str(spec).partition(":")
    if sep and name in LOADERS:
        if not rest:
            raise DataFileError(f"data spec {spec!r} has no path after '{name}:'")
        return DataSpec(name, rest)
    own = _LOADER_PATH.fullmatch(str(spec))
    if own and not Path(spec).exists():
        if not own["path"]:
            raise DataFileError(f"data spec {spec!r} has no path after '{own['module']}:{own['function']}:'")
        return DataSpec(f"{own['module']}:{own['function']}", own["path"])
    if sep and len(name) > 1 and "/" not in name and "\\" not in name and not Path(spec).exists():
        raise DataFileError(f"unknown data loader {name!r} in {spec!r}; choose one of {sorted(LOADERS)}, give "
                            "MODULE:FUNCTION:PATH for a loader of your own (e.g. my_pkg.loaders:load_mine:DIR), "
                            "or give a .json/.jsonl file")
    return DataSpec(None, str(spec))


def loader_function(name: str) -> QALoader:
    """The loader a spec names: a built-in one, or a ``"module:function"`` path imported now; a DataFileError
    naming the path and what failed (no such module, no such function, not callable) otherwise."""
    from embodied_r.methods import PathImportError, import_object

    if name in LOADERS:
        return LOADERS[name]
    try:
        loader = import_object(name)
    except PathImportError as exc:
        raise DataFileError(f"data loader {name}: {exc}") from None
    if not callable(loader):
        raise DataFileError(f"data loader {name}: is a {type(loader).__name__}, not a function "
                            "fn(path) -> (list[QARecord], LoadReport)")
    return loader


def _checked_load(name: str, result: Any) -> tuple[list[QARecord], LoadReport]:
    """What a loader of the user's own returned, checked like every loader's output (``check_records``)."""
    contract = "it must return (list[QARecord], LoadReport)"
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], LoadReport)):
        raise DataFileError(f"data loader {name} returned {type(result).__name__}; {contract}")
    records, report = result
    if not isinstance(records, list):
        raise DataFileError(f"data loader {name} returned {type(records).__name__} records; {contract}")
    for number, record in enumerate(records):
        if not isinstance(record, QARecord):
            raise DataFileError(f"data loader {name}: record {number} is a {type(record).__name__}; {contract}")
    return check_records(records, report), report


def load_qa(spec: str | DataSpec) -> tuple[list[QARecord], LoadReport]:
    """Questions for a loader spec (``urbanvideo:PATH`` …, ``my_pkg.loaders:load_mine:PATH``)."""
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    if parsed.loader is None:
        raise DataFileError(f"{parsed.path}: a question loader spec is needed here (e.g. urbanvideo:PATH, or "
                            f"MODULE:FUNCTION:PATH for your own); known loaders: {sorted(LOADERS)}")
    loader = loader_function(parsed.loader)
    if parsed.loader in LOADERS:
        return loader(parsed.path)
    return _checked_load(parsed.loader, loader(parsed.path))


# ---------------------------------------------------------------------------------------------------
# Questions + perception -> prompt rows
# ---------------------------------------------------------------------------------------------------


def read_perceptions(path: str | Path) -> dict[str, Perception]:
    """Perception records by question id (the last record of an id wins: reruns append)."""
    out: dict[str, Perception] = {}
    for number, data in enumerate(iter_jsonl(path), start=1):
        try:
            record = Perception.from_dict(data)
        except (RecordError, TypeError) as exc:
            raise DataFileError(f"{path}:{number}: not a Perception record ({exc})") from exc
        out[record.qa_id] = record
    return out


def perception_row_method(prompt_version: str | None) -> Method:
    """The method that builds rows of ``prompt_version`` from questions and perception (the default method for
    None): one whose rows ``build-prompts`` writes, through its ``row_builder``. A version of another method
    (Robot-R1's rows come from ``synth robot``) is a DataFileError naming the command that builds them.

    >>> perception_row_method(None).name, perception_row_method("compact-v1").name
    ('embodied_r', 'embodied_r')
    >>> perception_row_method("robot_r1_mw_v1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    embodied_r.core.io.DataFileError: prompt version 'robot_r1_mw_v1' is method robot_r1's, whose rows ...
    """
    from embodied_r.methods import BUILD_PROMPTS, method_for_version

    method = method_for_version(prompt_version)
    if method.builds_rows != BUILD_PROMPTS:
        raise DataFileError(f"prompt version {prompt_version!r} is method {method.name}'s, whose rows are not built "
                            f"from questions and perception; build them with `{method.builds_rows}` and give that "
                            "file as --data")
    return method


def prompt_rows_from_perception(records: Sequence[QARecord], perceptions: dict[str, Perception],
                                report: LoadReport, prompt_version: str = "official-v1") -> list[PromptRow]:
    """Reasoner prompt rows for the questions that have perception frames; the others are reported.

    Rows are built by the row builder of the method that writes ``prompt_version`` (``Method.row_builder``,
    the function ``build-prompts`` calls), so evaluation sees exactly the prompt text training data has.
    """
    usable = {qid: p for qid, p in perceptions.items() if p.frames}
    build_rows = perception_row_method(prompt_version).row_builder_function()
    rows, missing = build_rows(list(records), usable, prompt_version)
    by_id = {r.id: r for r in records}
    for qid in missing:
        if qid in perceptions:
            report.skip(qid, "no perception: the perception record has no frames")
        else:
            note = "" if by_id[qid].meta.get("video_found", True) else " (its video is missing too)"
            report.skip(qid, f"no perception: the perception file has no record for this question{note}")
    report.kept = len(rows)
    return rows


def summarize_records(records: Sequence[QARecord]) -> dict[str, int]:
    """Questions per task, for tables and split summaries."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.task] = counts.get(record.task, 0) + 1
    return dict(sorted(counts.items()))
