"""Reader for the official Embodied-R processed JSON (``results/inter/processed_*.json``).

Each item's ``question`` field already holds the whole reasoner prompt (role sentence, frame
descriptions, question and choices), produced by the official perception step. The reader keeps that
text as the user message, adds the official system prompt, and recovers the option list from the text
so that answers can be parsed and scored. It accepts the pipeline's artefacts as they are: runs of
spaces from a line continuation, ``choose:`` instead of ``Choices:``, trailing spaces, a ``<video>``
tag, and ids that are numbers or strings.
"""

from __future__ import annotations

import re
from pathlib import Path

from embodied_r.core.io import DataFileError, read_json
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.benchmarks.common import LoadReport
from embodied_r.methods import method_for_version

__all__ = ["LoadReport", "load_embodied_r_json", "parse_options_from_text"]

SOURCE = "embodied_r_processed"
CHOICES_HEADER_RE = re.compile(r"(?:Choices?|choose|Options?)\s*:", re.IGNORECASE)
_OPTION_LINE_RE = re.compile(r"^\s*([A-H])\s*[.)]\s*(.+?)\s*$")


def parse_options_from_text(text: str) -> list[str]:
    """Option lines (``"A. left"``) after the last ``Choices:``/``choose:`` header; [] when none.

    >>> parse_options_from_text("Question: where?\\nchoose:  \\nA. left  \\nB. right")
    ['A. left', 'B. right']
    """
    headers = list(CHOICES_HEADER_RE.finditer(text))
    if not headers:
        return []
    options: list[str] = []
    for line in text[headers[-1].end():].splitlines():
        match = _OPTION_LINE_RE.match(line)
        if match:
            options.append(f"{match.group(1)}. {match.group(2)}")
        elif options and line.strip():
            # A wrapped option: continue the previous one rather than dropping text.
            options[-1] += " " + line.strip()
    letters = [o[0] for o in options]
    # Options must run A, B, C... without gaps; anything else is not an option list we can trust.
    if letters != [chr(ord("A") + i) for i in range(len(letters))]:
        return []
    return options


def load_embodied_r_json(path: str | Path, prompt_version: str = "official") -> tuple[list[PromptRow], LoadReport]:
    """Prompt rows from an official processed JSON file, with a report of skipped items."""
    path = Path(path)
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise DataFileError(f"{path}: expected a JSON list of question objects, got {type(data).__name__}")
    # The system prompt is the one of the method that writes ``prompt_version`` (Embodied-R's official text for
    # ``official``): the files hold only the user text.
    method = method_for_version(prompt_version)
    if method.system_prompt is None:
        raise DataFileError(f"{path}: prompt version {prompt_version!r} is method {method.name}'s, which has no "
                            "system prompt to send these prompts with")
    system = method.system_message(prompt_version)
    rows: list[PromptRow] = []
    report = LoadReport()
    seen: set[str] = set()
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            report.skip(f"#{position}", "not a JSON object")
            continue
        item_id = str(item.get("Question_id", item.get("id", f"#{position}")))
        text = str(item.get("question") or "").replace("<video>", "").strip()
        answer = str(item.get("answer") or "").strip().upper()
        problem = _problem(item_id, text, answer, seen)
        options = parse_options_from_text(text) if not problem else []
        if not problem and not options:
            problem = "no options found after 'Choices:'/'choose:'"
        if not problem and answer not in {o[0] for o in options}:
            problem = f"answer {answer!r} is not one of the option letters {[o[0] for o in options]}"
        if problem:
            report.skip(item_id, problem)
            continue
        seen.add(item_id)
        rows.append(PromptRow(
            id=item_id,
            task=str(item.get("question_category") or "unknown"),
            prompt=[{"role": "system", "content": system}, {"role": "user", "content": text}],
            answer=answer,
            answer_type="choice",
            options=options,
            meta={"source": SOURCE, "video": item.get("video_id"), "prompt_version": prompt_version,
                  "file": path.name},
        ))
    report.kept = len(rows)
    return rows, report


def _problem(item_id: str, text: str, answer: str, seen: set[str]) -> str | None:
    if item_id in seen:
        return "duplicated id (first occurrence kept)"
    if not text:
        return "empty question/prompt"
    if not answer:
        return "no answer"
    return None

