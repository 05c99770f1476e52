"""What ``eval --data SPEC`` turns into: reasoner prompt rows plus a report of every excluded question.

- A plain ``.jsonl`` (PromptRows from ``build-prompts``) or ``.json`` (official processed prompts)
  already holds the prompts.
- A loader spec (``urbanvideo:PATH`` …, see ``benchmarks.registry``) gives questions; their perception
  text comes from ``--perception FILE`` (Perception jsonl from ``embodied-r perceive``) or is produced
  now by ``--perception-backend`` over ``--keyframes DIR`` (written to ``<out>/perception.jsonl``,
  resumable through the perception cache).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, require_file
from embodied_r.core.records import PromptRow, QARecord
from embodied_r.core.validity import row_problem
from embodied_r.evaluation.benchmarks.common import LoadReport, check_records, read_records
from embodied_r.evaluation.benchmarks.registry import (
    load_qa,
    parse_spec,
    perception_row_method,
    prompt_rows_from_perception,
    read_perceptions,
)
from embodied_r.methods import Method

logger = logging.getLogger(__name__)


@dataclass
class PerceptionSource:
    """Where perception text comes from: a finished file, or a backend to run now over key frames."""

    file: str | None = None
    backend: str | None = None
    keyframes: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def given(self) -> bool:
        return bool(self.file or self.backend)

    def describe(self) -> dict[str, Any]:
        return {"file": self.file, "backend": self.backend, "keyframes": self.keyframes}


def load_prompt_rows_jsonl(path: str | Path) -> tuple[list[PromptRow], LoadReport]:
    """PromptRow jsonl (what ``build-prompts`` writes); unusable rows are reported, not scored."""
    report = LoadReport()
    rows = check_records(read_records(path, PromptRow, report), report, problem_of=row_problem)
    return rows, report


# An official processed file is the official pipeline's text: by default it is sent with the official
# system prompt, byte for byte (Embodied-R's ``Method.system_prompt``); prompts built here from perception
# default to the building method's ``default_prompt_version``.
PROCESSED_FILE_PROMPT_VERSION = "official"


def load_prompt_file(path: str | Path, prompt_version: str | None = None) -> tuple[list[PromptRow], LoadReport]:
    """Rows from an official processed JSON file (``.json``) or a PromptRow file (``.jsonl``)."""
    from embodied_r.evaluation.benchmarks.embodied_r_json import load_embodied_r_json

    path = require_file(path)
    if path.suffix == ".jsonl":
        return load_prompt_rows_jsonl(path)
    if path.suffix == ".json":
        return load_embodied_r_json(path, prompt_version=prompt_version or PROCESSED_FILE_PROMPT_VERSION)
    raise DataFileError(f"{path}: unsupported data file; give an official processed .json, a prompt-row .jsonl, "
                        "or a loader spec such as urbanvideo:PATH")


def load_prior_rows(path: str | Path) -> list[PromptRow]:
    """The prompt rows the letter and answer priors are fit on (``--prior-from``); a file without one usable
    question is an error, not a prior fit on nothing."""
    rows, report = load_inputs(str(require_file(path, "--prior-from file")))
    if not rows:
        raise DataFileError(f"{path}: no usable question to fit the priors on ({report.reason_counts() or 'empty'})")
    return rows


def load_inputs(data: str | Path, prompt_version: str | None = None, perception: PerceptionSource | None = None,
                out_dir: str | Path | None = None) -> tuple[list[PromptRow], LoadReport]:
    """Prompt rows for ``data`` (a plain file or a loader spec) and the report of exclusions.
    ``prompt_version`` None: ``official`` for an official processed file, the default template otherwise."""
    spec = parse_spec(str(data))
    if spec.loader is None:
        if perception is not None and perception.given:
            raise DataFileError(f"{data}: already holds prompts; --perception/--perception-backend apply only to "
                                "loader specs such as urbanvideo:PATH")
        return load_prompt_file(spec.path, prompt_version)
    records, report = load_qa(spec)
    if perception is None or not perception.given:
        raise DataFileError(
            f"{data}: these are questions about videos; the reasoner reads perception text. Give --perception "
            "FILE (from `embodied-r perceive`) or --perception-backend NAME with --keyframes DIR"
        )
    # The method whose prompt version the rows will record builds them (the default method without one), and
    # its perception stage describes the videos: checked before any perception is run.
    method = perception_row_method(prompt_version)
    if perception.file:
        perceptions = read_perceptions(perception.file)
    else:
        if out_dir is None:
            raise DataFileError("--perception-backend needs an output folder for perception.jsonl")
        base = Path(spec.path.partition("#")[0])
        qa_dir = base if base.is_dir() else base.parent  # relative videos are relative to the question file
        perceptions = read_perceptions(run_perception(records, perception, Path(out_dir), report, qa_dir, method))
    rows = prompt_rows_from_perception(records, perceptions, report, prompt_version or method.default_version())
    return rows, report


PROMPT_INPUTS = ("auto", "image", "text")


def resolve_input(rows: list[PromptRow], requested: str, data: str | Path) -> str:
    """``image`` or ``text``: what ``rows`` hold (``requested`` ``auto``), or ``requested`` when the rows
    hold it; a mismatch is a ``DataFileError`` naming the file to use instead. Rows with an image part
    make the set an image set (a text row among them is answered by the same vision-language model)."""
    from embodied_r.core.chat import has_image

    if requested not in PROMPT_INPUTS:
        raise DataFileError(f"input {requested!r} not known; choose one of {', '.join(PROMPT_INPUTS)}")
    held = "image" if any(has_image(row) for row in rows) else "text"
    if requested == "image" and held == "text":
        raise DataFileError(f"--input image: {data} holds text rows (no image parts); give the image rows instead "
                            "(Robot-R1: prompts_vl.jsonl is the image path, prompts.jsonl the text path)")
    if requested == "text" and held == "image":
        raise DataFileError(f"--input text: {data} holds image rows; give the text rows instead (Robot-R1: "
                            "prompts.jsonl is the text path, prompts_vl.jsonl the image path), or --input image")
    return held


def run_perception(records: list[QARecord], source: PerceptionSource, out_dir: Path, report: LoadReport,
                   qa_dir: Path = Path("."), method: Method | None = None) -> Path:
    """Run ``method``'s perception stage (the default method's when None) for ``records`` into
    ``out_dir/perception.jsonl`` (resumable) and return it.

    Questions whose video is missing are not sent; they end up reported as having no perception.
    """
    from embodied_r.methods import DEFAULT_METHOD

    method = method or DEFAULT_METHOD
    if not method.has_perception_stage():
        raise DataFileError(f"--perception-backend: method {method.name} has no perception stage; give its "
                            "perception text as --perception FILE instead")
    if not source.keyframes or not Path(source.keyframes).is_dir():
        raise DataFileError(f"--keyframes {source.keyframes}: not a folder; run `embodied-r keyframes` on the "
                            "benchmark videos first")
    with_video = [r for r in records if r.meta.get("video_found", True)]
    out_path = out_dir / "perception.jsonl"
    backend = method.make_perception_backend(str(source.backend), **source.options)
    summary = method.run_perception_stage(with_video, qa_dir, Path(source.keyframes), backend, out_path,
                                          out_dir / "perception.cache")
    if summary.failed:
        report.warn("*", f"perception failed for {summary.failed} question(s); rerun to retry them: "
                         + "; ".join(summary.errors[:3]))
    logger.info("perception: %d done, %d already done, %d failed", summary.done, summary.already_done, summary.failed)
    return out_path
