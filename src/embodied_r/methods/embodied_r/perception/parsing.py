"""Turn VLM answers into perception frames ``{timestamp, action, delta, q_related, raw}``.

Never raises on model output: a malformed answer keeps its raw text (the reasoner falls back to it)
and a parse error string. Two answer formats:

- ``numbered`` (``official-v1``): "1. <action> 2. <ΔInformation> 3. <q-related>". The official code
  splits on the bare substrings "1."/"2."/"3.", which "1.5 m" fools (a weakness of the official parser);
  here the markers must start a line (optionally after markdown ``#``/``**``), with an in-line search
  that refuses digits around the marker as the fallback.
- ``json`` (``json-v1``): the first JSON object in the answer, tolerating code fences, trailing commas
  and Python-style quotes; a model that ignored the format falls back to the numbered parser.

Answer leakage — an option letter ("Option A") or a long option text inside a description — is
detected by ``detect_leaks`` so that it can be counted and, if wanted, filtered.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from embodied_r.methods.embodied_r.perception.prompts import ACTIONS

# ---------------------------------------------------------------------------------------------------
# Actions
# ---------------------------------------------------------------------------------------------------

_ACTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("Move forward", r"\b(?:mov|go|fl[yi]|flew|advanc|walk)\w*\s+(?:straight\s+)?forwards?\b"),
        ("Move backward", r"\b(?:mov|go|fl[yi]|flew|walk|back)\w*\s+(?:up\s+)?backwards?\b"),
        ("Move upward", r"\b(?:(?:mov|go|fl[yi]|flew)\w*\s+upwards?|(?:mov|go|fl[yi]|flew)\w*\s+up\b|"
                        r"ascend\w*|ris(?:e|es|ing)\b|rose\b)"),
        ("Move downward", r"\b(?:(?:mov|go|fl[yi]|flew)\w*\s+downwards?|(?:mov|go|fl[yi]|flew)\w*\s+down\b|"
                          r"descend\w*)"),
        ("Move left", r"\b(?:mov|go|fl[yi]|flew|shift|strafe|slid)\w*\s+(?:to\s+the\s+)?left\b"),
        ("Move right", r"\b(?:mov|go|fl[yi]|flew|shift|strafe|slid)\w*\s+(?:to\s+the\s+)?right\b"),
        ("Rotate left", r"\b(?:rotat|turn|yaw|pan)\w*\s+(?:to\s+the\s+)?left\b"),
        ("Rotate right", r"\b(?:rotat|turn|yaw|pan)\w*\s+(?:to\s+the\s+)?right\b"),
        ("Tilt downward", r"\b(?:tilt|pitch)\w*\s+(?:the\s+camera\s+)?downwards?\b|\btilt\w*\s+down\b"),
        ("Tilt upward", r"\b(?:tilt|pitch)\w*\s+(?:the\s+camera\s+)?upwards?\b|\btilt\w*\s+up\b"),
    )
)
assert {name for name, _ in _ACTION_PATTERNS} == set(ACTIONS)


def normalize_action(text: str | None) -> str | None:
    """Map free action text to the official vocabulary; the earliest mention wins.

    Text naming no known action is kept (whitespace-collapsed) rather than dropped: the reasoner can
    still read it, and a richer vocabulary stays possible.

    >>> normalize_action("**Move forward** - the buildings grew larger")
    'Move forward'
    >>> normalize_action("The agent turned to the left.")
    'Rotate left'
    >>> normalize_action("hovering") is None, normalize_action("")
    (False, None)
    """
    if not text or not text.strip():
        return None
    best: tuple[int, str] | None = None
    for name, pattern in _ACTION_PATTERNS:
        match = pattern.search(text)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), name)
    if best is not None:
        return best[1]
    return " ".join(text.replace("*", " ").split()).rstrip(".")


# ---------------------------------------------------------------------------------------------------
# Frame parsing
# ---------------------------------------------------------------------------------------------------


@dataclass
class FrameParse:
    """A parsed frame plus what went wrong (``error``) or was unusual (``warnings``)."""

    frame: dict[str, Any]
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


_LINE_MARKER = re.compile(r"(?m)^[ \t>]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*([123])[.):](?!\d)")
_INLINE_MARKER = re.compile(r"(?<![\w.])([123])\.(?!\d)")
_LABEL = re.compile(
    r"^\s*(?:\*\*|__)?\s*(?:action(?:\s+performed)?|Δ\s*information|delta\s*information|"
    r"new(?:ly)?\s+(?:captured\s+)?(?:spatial\s+)?information|q[-\s]?related(?:\s+content)?|"
    r"question[-\s]related(?:\s+content)?)\s*(?:\*\*|__)?\s*[:：\-–]?\s*(?:\*\*|__)?\s*",
    re.IGNORECASE,
)
_JSON_KEYS = {
    "action": ("action", "actions", "motion"),
    "delta": ("delta", "delta_information", "new_information", "scene", "description", "information"),
    "q_related": ("q_related", "q-related", "question_related", "related", "question_objects"),
}


def _clean(text: str) -> str:
    text = _LABEL.sub("", text, count=1)
    return " ".join(text.replace("**", " ").replace("__", " ").split())


def _split_numbered(raw: str) -> tuple[str, str, str] | None:
    for pattern in (_LINE_MARKER, _INLINE_MARKER):
        positions: dict[str, re.Match[str]] = {}
        for match in pattern.finditer(raw):
            number = match.group(1)
            expected = str(len(positions) + 1)
            if number == expected:
                positions[number] = match
            if len(positions) == 3:
                break
        if len(positions) == 3:
            one, two, three = positions["1"], positions["2"], positions["3"]
            return (raw[one.end():two.start()], raw[two.end():three.start()], raw[three.end():])
    return None


def _json_object(raw: str) -> dict[str, Any] | None:
    text = re.sub(r"```(?:json)?", "", raw, flags=re.IGNORECASE)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    body = text[start:end + 1]
    attempts = (body, re.sub(r",\s*([}\]])", r"\1", body))
    for attempt in attempts:
        try:
            value = json.loads(attempt)
        except json.JSONDecodeError:
            try:  # single-quoted, Python-style dicts are a common near-miss
                value = ast.literal_eval(attempt)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
        if isinstance(value, dict):
            return value
    return None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_as_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return " ".join(_as_text(v) for v in value)
    return " ".join(str(value).split())


def _lookup(obj: dict[str, Any], field_name: str) -> Any:
    lowered = {str(k).lower().replace(" ", "_"): v for k, v in obj.items()}
    for alias in _JSON_KEYS[field_name]:
        if alias in lowered:
            return lowered[alias]
    return None


def parse_frame_answer(raw: str | None, frame_index: int, timestamp: float,
                       output: str = "numbered") -> FrameParse:
    """Parse one VLM answer for key frame ``frame_index``; never raises on bad model output.

    >>> p = parse_frame_answer("1. Move forward\\n2. A red door 1.5 m ahead.\\n3. No sofa.", 1, 2.0)
    >>> p.frame["action"], p.frame["delta"], p.frame["q_related"], p.error
    ('Move forward', 'A red door 1.5 m ahead.', 'No sofa.', None)
    >>> parse_frame_answer('```json\\n{"action": "rotate left", "delta": "a bed",}\\n```', 1, 2.0,
    ...                    "json").frame["action"]
    'Rotate left'
    >>> bad = parse_frame_answer("I cannot see anything.", 3, 6.0)
    >>> bad.frame["action"], bad.frame["delta"], bad.error
    (None, 'I cannot see anything.', 'no numbered points 1./2./3. found')
    """
    text = raw if isinstance(raw, str) else ""
    frame: dict[str, Any] = {"timestamp": float(timestamp), "action": None, "delta": "", "q_related": "",
                             "raw": text}
    if not text.strip():
        return FrameParse(frame, error="empty answer")
    result = FrameParse(frame)
    if output == "json":
        obj = _json_object(text)
        if obj is not None:
            frame["delta"] = _as_text(_lookup(obj, "delta"))
            frame["q_related"] = _as_text(_lookup(obj, "q_related"))
            if frame_index > 0:
                frame["action"] = normalize_action(_as_text(_lookup(obj, "action")))
                if frame["action"] is None:
                    result.error = "JSON answer has no action"
            if not frame["delta"] and not frame["q_related"]:
                result.error = "JSON answer has neither delta nor q_related"
                frame["delta"] = _clean(text)
            return result
        result.warnings.append("answer is not JSON; tried the numbered format")
    elif output != "numbered":
        raise ValueError(f"unknown answer format {output!r}; expected 'numbered' or 'json'")
    if frame_index == 0:
        # Official pipeline: the whole first-frame description is the observation (§3.5).
        frame["delta"] = _clean(text)
        return result
    parts = _split_numbered(text)
    if parts is None:
        frame["delta"] = _clean(text)
        result.error = "no numbered points 1./2./3. found" if output == "numbered" else \
            "answer is neither JSON nor numbered points"
        return result
    action, delta, related = (_clean(p) for p in parts)
    frame.update(action=normalize_action(action), delta=delta, q_related=related)
    if frame["action"] is None:
        result.error = "point 1 (action) is empty"
    return result


# ---------------------------------------------------------------------------------------------------
# Answer leakage
# ---------------------------------------------------------------------------------------------------

_LETTER_LEAKS = (
    # "Option A", "the answer is (B)", "Choice: C" — keyword in any case, the letter in capitals.
    re.compile(r"(?i:\b(?:option|choice|answer)s?)\s*(?:(?i:is|would\s+be|should\s+be)\s*)?[:=]?\s*"
               r"\(?([A-H])\)?(?![A-Za-z])"),
    re.compile(r"(?m)^\s*\(?([A-H])[.)]?\s*$"),  # a line that is just a letter
)
MIN_OPTION_WORDS = 3  # shorter option texts ("left", "3") appear in honest descriptions


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def detect_leaks(text: str, options: Sequence[str] | None) -> list[dict[str, str]]:
    """Answer leaks in a frame description: option letters, or an option's text (≥ 3 words) verbatim.

    >>> detect_leaks("The street is empty. Option A", ["A. I turn left", "B. I rise"])
    [{'kind': 'option_letter', 'match': 'Option A'}]
    >>> detect_leaks("The objects in the question/option are not present.", ["A. x", "B. y"])
    []
    >>> detect_leaks("so I turn left next to the building", ["A. I turn left next to the building."])
    [{'kind': 'option_text', 'match': 'A'}]
    """
    leaks: list[dict[str, str]] = []
    if not text or not options:
        return leaks
    letters = {str(o).strip()[:1] for o in options if str(o).strip()}
    for pattern in _LETTER_LEAKS:
        for match in pattern.finditer(text):
            if match.group(1) in letters:
                leaks.append({"kind": "option_letter", "match": " ".join(match.group(0).split())})
    described = f" {_words(text)} "
    for option in options:
        letter, _, body = str(option).strip().partition(".")
        words = _words(body if len(letter) == 1 else str(option))
        if len(words.split()) >= MIN_OPTION_WORDS and f" {words} " in described:
            leaks.append({"kind": "option_text", "match": letter if len(letter) == 1 else str(option)})
    return leaks


# ---------------------------------------------------------------------------------------------------
# Runaway descriptions: a VLM that repeats itself
# ---------------------------------------------------------------------------------------------------

# A frame description from a 512-token VLM answer is at most ~2,500 characters; far beyond that the model
# has looped (one real UrbanVideo record held a 171,286-character prompt that way).
MAX_FRAME_CHARS = 4000
MIN_REPEATS = 4  # the same sentence this many times in one frame
_SENTENCE = re.compile(r"[^.!?\n]{20,}[.!?]")


def runaway_description(text: str | None) -> str | None:
    """Why a frame description looks like a VLM that repeated itself, or None.

    >>> runaway_description("A red sofa stands near the window. " * 5)
    'the sentence "A red sofa stands near the window." appears 5 times'
    >>> runaway_description("A red sofa near the window. A door on the right.") is None
    True
    >>> runaway_description("a b c d e f g h " * 600)
    '9600 characters (over 4000)'
    """
    text = str(text or "")
    counts: dict[str, int] = {}
    for sentence in _SENTENCE.findall(text):
        key = " ".join(sentence.split())
        counts[key] = counts.get(key, 0) + 1
    repeated = max(counts.items(), key=lambda item: item[1], default=("", 0))
    if repeated[1] >= MIN_REPEATS:
        return f'the sentence "{repeated[0][:80]}" appears {repeated[1]} times'
    if len(text) > MAX_FRAME_CHARS:
        return f"{len(text)} characters (over {MAX_FRAME_CHARS})"
    return None


def runaway_frames(frames: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``[{"frame": i, "reason": ...}]`` for the frames whose description (delta, q_related, raw) ran away."""
    flagged = []
    for index, frame in enumerate(frames):
        text = " ".join(str(frame.get(k) or "") for k in ("delta", "q_related")).strip() or str(frame.get("raw") or "")
        reason = runaway_description(text)
        if reason:
            flagged.append({"frame": index, "reason": reason})
    return flagged
