"""Typed records passed between pipeline stages (see DESIGN.md "Data flow").

Every record is a dataclass with ``to_dict``/``from_dict`` and a ``schema_version``; stages exchange
them as JSON Lines. ``from_dict`` rejects unknown schema versions and missing required fields with a
message naming the field, so a malformed file fails loudly instead of producing silent garbage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

SCHEMA_VERSION = 1
# "position" is Robot-R1's open-ended waypoint ([x, y, z] in metres, scored by L1 closeness).
ANSWER_TYPES: tuple[str, ...] = ("choice", "number", "position", "open")

R = TypeVar("R", bound="Record")


class RecordError(ValueError):
    """A record dict that cannot be turned into its dataclass (missing field, bad value)."""


@dataclass
class Record:
    """Base class: dict round-trip with schema checks."""

    kind: ClassVar[str] = "record"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["schema_version"] = SCHEMA_VERSION
        return out

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        if not isinstance(data, dict):
            raise RecordError(f"{cls.kind}: expected a JSON object, got {type(data).__name__}")
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise RecordError(
                f"{cls.kind}: schema_version {version} is not supported (this version reads {SCHEMA_VERSION})"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - data.keys())
        if missing:
            raise RecordError(f"{cls.kind}: missing required field(s) {missing}")
        kwargs = {k: v for k, v in data.items() if k in names}
        return cls(**kwargs)


# ---------------------------------------------------------------------------------------------------
# Questions
# ---------------------------------------------------------------------------------------------------


@dataclass
class QARecord(Record):
    """One benchmark question. Options are stored as VSI-Bench does (``"A. left"``); a choice answer is
    the letter. ``video`` is a path or file name relative to the dataset's video folder (may be empty
    for text-only questions)."""

    kind: ClassVar[str] = "QARecord"

    id: str
    source: str
    task: str
    video: str
    question: str
    options: list[str] | None
    answer: str | float
    answer_type: str = "choice"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.id = str(self.id)
        if self.answer_type not in ANSWER_TYPES:
            raise RecordError(f"QARecord {self.id}: answer_type {self.answer_type!r} not in {ANSWER_TYPES}")


# ---------------------------------------------------------------------------------------------------
# Key frames and perception
# ---------------------------------------------------------------------------------------------------


@dataclass
class KeyframeSet(Record):
    """Key frames selected from one video: ``frames`` holds ``{index, timestamp, overlap}`` dicts, where
    ``index`` counts sampled frames and ``overlap`` is the overlap with the previous key frame (None for
    the first frame or when it could not be computed)."""

    kind: ClassVar[str] = "KeyframeSet"

    video: str
    sample_fps: float
    frames: list[dict[str, Any]]
    width: int
    height: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def timestamps(self) -> list[float]:
        return [float(f["timestamp"]) for f in self.frames]


@dataclass
class Perception(Record):
    """What the VLM (or the oracle) wrote about each key frame of a question's video.

    ``frames`` holds ``{timestamp, action, delta, q_related, raw}``; ``action`` is None for the first
    frame. ``meta`` carries parse errors and answer-leak flags."""

    kind: ClassVar[str] = "Perception"

    qa_id: str
    video: str
    backend: str
    model: str
    prompt_version: str
    frames: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.qa_id = str(self.qa_id)


@dataclass
class PromptRow(Record):
    """What GRPO training and evaluation read: a chat prompt and its gold answer."""

    kind: ClassVar[str] = "PromptRow"

    id: str
    task: str
    prompt: list[dict[str, str]]
    answer: str | float
    answer_type: str = "choice"
    options: list[str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.id = str(self.id)
        if self.answer_type not in ANSWER_TYPES:
            raise RecordError(f"PromptRow {self.id}: answer_type {self.answer_type!r} not in {ANSWER_TYPES}")


@dataclass
class Prediction(Record):
    """One model answer, scored. ``score`` is 1/0 for choices and MRA in [0, 1] for numbers;
    ``parsed_answer`` is None when the completion had no well-formed answer (counted as unparsed)."""

    kind: ClassVar[str] = "Prediction"

    id: str
    task: str
    completion: str
    parsed_answer: str | float | list[float] | None
    answer: str | float
    answer_type: str
    correct: bool
    score: float
    consistent: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.id = str(self.id)
