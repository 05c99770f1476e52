"""``embodied-r build-prompts``: questions + perception -> the reasoner prompt rows training and eval read.

Each row is a ``PromptRow`` whose ``prompt`` is the chat (system + user) built by
``embodied_r.methods.embodied_r.prompts.build_reasoner_messages`` — the official Embodied-R text by default —
so GRPO training and evaluation see exactly the same prompt for a question. Questions without a
perception record are listed and skipped, never given an empty video description.

``--input keyframes`` builds the rows of the paper's other arm instead (a vision-language model reading the
key frames themselves, ``methods.embodied_r.keyframe_rows``): the same questions, ids, answers and
metadata, with each key frame as an image after its frame line, at most ``--max-frames`` frames (the
latest) of at most ``--max-pixels`` pixels each, written beside the rows in ``<out stem>.frames/``.

``--span 1|2|any`` keeps only the questions whose needed objects are all shown in one key frame, in two at
the fewest, or in any number (``perception.prompt_rows.question_span``, from the labels oracle perception
records carry); questions that need an object shown in no key frame are dropped and counted apart.

``--method MODULE:ATTR`` builds the rows of another method, a user's own among them: its ``row_builder``
(``fn(questions, perceptions, prompt_version) -> (rows, ids without a row)``) writes them, with one of its
prompt versions (recorded in each row's ``meta.prompt_version``). Embodied-R is the default; a method whose
rows another command writes (``Method.builds_rows``, e.g. Robot-R1's ``embodied-r synth robot``) is refused
with that command's name.
"""

from __future__ import annotations

import argparse
from typing import Any

HELP = "build reasoner prompt rows (official Embodied-R format, or --method's) from questions and perception"
DESCRIPTION = ("Join questions with their perception records and write one prompt row per question (JSON Lines) "
               "for `embodied-r train` and `embodied-r eval`: frame descriptions for the reasoner (the cascade), or "
               "with --input keyframes the key frames themselves as images for a vision-language policy (the "
               "paper's VLM arm), for the same questions. With --method, that method's row builder writes the "
               "rows.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from embodied_r.cli.common import add_method_argument
    from embodied_r.methods.embodied_r.keyframe_images import DEFAULT_MAX_FRAMES, DEFAULT_MAX_PIXELS, PIXEL_MULTIPLE
    from embodied_r.methods.embodied_r.prompts import DEFAULT_PROMPT_VERSION, TEMPLATES
    from embodied_r.sim.world.detail_levels import SPANS  # plain names, no world code

    parser.add_argument("--qa", required=True, help="questions (QARecord .jsonl; `embodied-r data check SPEC --out` "
                        "writes one from any loader spec)")
    parser.add_argument("--perception", default=None,
                        help="Perception .jsonl from `embodied-r perceive` (required for Embodied-R rows; a --method "
                        "of your own gets its records, or none without this flag)")
    parser.add_argument("--out", required=True, help="output prompt rows (.jsonl)")
    parser.add_argument("--prompt-version", default=None, metavar="VERSION",
                        help=f"reasoner prompt template, one of the method's prompt versions; Embodied-R's: "
                             f"{', '.join(sorted(TEMPLATES))} (default: {DEFAULT_PROMPT_VERSION}, the official words "
                             "with whitespace normalised; official: the official bytes, including the source's "
                             "question text; compact-v1: the same frame lines under a short instruction, for CPU "
                             "training); another method's default: its first")
    add_method_argument(parser, "; its row builder writes the rows (default: embodied_r)")
    parser.add_argument("--input", default="text", choices=["text", "keyframes"],
                        help="text: frame descriptions for the reasoner (the cascade, default); keyframes: the key "
                             "frames as images after their frame lines, for a vision-language policy (the paper's "
                             "VLM arm), same questions and ids")
    parser.add_argument("--span", default=None, choices=SPANS,
                        help="keep only questions whose needed objects are shown in 1 key frame, in 2 at the "
                             "fewest, or in any number (questions needing an object shown in no key frame are "
                             "dropped); needs oracle perception (default: keep every question)")
    frames = parser.add_argument_group("key frames (--input keyframes)")
    frames.add_argument("--keyframes", default=None, metavar="DIR",
                        help="key frames from `embodied-r keyframes --save-images` (the folder perception read)")
    frames.add_argument("--max-frames", type=int, default=DEFAULT_MAX_FRAMES,
                        help="at most this many key frames a row, the latest (default: %(default)s, the paper's "
                             "clamp)")
    frames.add_argument("--max-pixels", type=int, default=DEFAULT_MAX_PIXELS,
                        help="pixel budget of each frame; frames are resized to fit it, both sides multiples of "
                             "--pixel-multiple (default: %(default)s = 256 Qwen2.5-VL tokens a frame)")
    frames.add_argument("--pixel-multiple", type=int, default=PIXEL_MULTIPLE,
                        help="frame sides are multiples of this (default: %(default)s, Qwen2.5-VL's 14-pixel "
                             "patches merged 2 x 2)")


def split_invalid_answers(rows: list[Any]) -> tuple[list[Any], list[str]]:
    """Rows whose choice answer is one of their option letters, and a reason for each other row."""
    from embodied_r.core.parsing import option_letters

    kept, invalid = [], []
    for row in rows:
        if row.answer_type == "choice" and row.options:
            letters = option_letters(row.options)
            if str(row.answer).strip().upper() not in letters:
                invalid.append(f"{row.id}: answer {row.answer!r} is not one of {', '.join(letters)}")
                continue
        kept.append(row)
    return kept, invalid


def select_span(questions: list[Any], perceptions: dict[str, Any], wanted: str,
                error: type[Exception]) -> tuple[list[Any], list[str], list[str]]:
    """The questions whose span is ``wanted`` ("1", "2" or "any"), the ids of those needing an object shown
    in no key frame, and the ids of those of another span. Questions without perception are kept (they are
    reported as such later); perception without ground-truth labels is an ``error``."""
    from embodied_r.methods.embodied_r.perception.prompt_rows import SPAN_UNKNOWN, perception_span

    kept, uncovered, other, unknown = [], [], [], []
    for qa in questions:
        if qa.id not in perceptions:
            kept.append(qa)
            continue
        span = perception_span(perceptions[qa.id])
        if span == SPAN_UNKNOWN:
            unknown.append(qa.id)
        elif span is None:
            uncovered.append(qa.id)
        elif wanted == "any" or span == int(wanted):
            kept.append(qa)
        else:
            other.append(qa.id)
    if unknown:
        raise error(f"--span needs oracle perception made by this version (it records the labels each key frame "
                    f"shows, meta.seen and meta.needs); {len(unknown)} question(s) have perception without them "
                    f"(e.g. {unknown[0]}); rerun `embodied-r perceive --backend oracle --force`, or leave --span out")
    return kept, uncovered, other


def row_method(args: argparse.Namespace, error: type[Exception]) -> tuple[Any, str]:
    """The method whose rows are built (``--method``, default Embodied-R) and the prompt version they are
    built with; a method whose rows another command writes, or a version it does not write, is an ``error``."""
    from embodied_r.cli.common import method_from_args
    from embodied_r.methods import BUILD_PROMPTS, DEFAULT_METHOD, EMBODIED_R

    method = method_from_args(args) or DEFAULT_METHOD
    if method.builds_rows != BUILD_PROMPTS:
        raise error(f"method {method.name}: its rows are written by `{method.builds_rows}`, not by build-prompts "
                    "(Method.builds_rows)")
    if args.input == "keyframes" and method is not EMBODIED_R:
        raise error(f"--input keyframes writes Embodied-R's key-frame rows; method {method.name} builds its rows "
                    "with its own row builder (leave --input out)")
    if not method.prompt_versions:
        raise error(f"method {method.name} lists no prompt_versions, so its rows could not say whose they are")
    version = args.prompt_version or method.default_version()
    if version not in method.prompt_versions:
        raise error(f"--prompt-version {version!r}: method {method.name} writes "
                    f"{', '.join(sorted(method.prompt_versions))}")
    return method, version


def build_method_rows(method: Any, questions: list[Any], perceptions: dict[str, Any], version: str,
                      error: type[Exception]) -> tuple[list[Any], list[str]]:
    """``method``'s row builder over the questions; what it returns is checked: prompt rows that record one
    of the method's prompt versions, and the ids it made no row for."""
    from embodied_r.core.records import PromptRow

    built = method.row_builder_function()(questions, perceptions, version)
    where = f"method {method.name}'s row builder {method.row_builder}"
    if not (isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], list)):
        raise error(f"{where} returned {type(built).__name__}; it must return (rows, ids without a row) "
                    "for build-prompts")
    rows, missing = built
    for row in rows:
        if not isinstance(row, PromptRow):
            raise error(f"{where} returned a {type(row).__name__} among its rows; rows are "
                        "embodied_r.core.records.PromptRow")
        recorded = (row.meta or {}).get("prompt_version")
        if recorded not in method.prompt_versions:
            raise error(f"{where}: row {row.id} records prompt version {recorded!r}, not one of the method's "
                        f"{list(method.prompt_versions)}; set meta['prompt_version'] (evaluation and training find "
                        "a row's method by it)")
    return rows, [str(qid) for qid in missing]


def run(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import CLIError, console
    from embodied_r.core.io import DataFileError, iter_jsonl, write_jsonl
    from embodied_r.core.records import Perception
    from embodied_r.methods import EMBODIED_R
    from embodied_r.methods.embodied_r.perception.prompt_rows import common_detail
    from embodied_r.methods.embodied_r.perception.runner import load_questions

    method, version = row_method(args, CLIError)  # imported and registered before anything is read
    budget = keyframe_budget(args, CLIError)  # a budget that leaves no frame fails before anything is read
    if args.perception is None and method is EMBODIED_R:
        raise CLIError("--perception FILE is needed: Embodied-R rows hold the frame descriptions `embodied-r "
                       "perceive` writes")
    questions = load_questions(args.qa)
    if not questions:
        raise DataFileError(f"{args.qa}: holds no questions")
    perceptions: dict[str, Perception] = {}
    superseded = 0
    for number, data in enumerate(iter_jsonl(args.perception) if args.perception else [], start=1):
        try:
            record = Perception.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise DataFileError(f"{args.perception}: record {number}: {exc}") from exc
        superseded += int(record.qa_id in perceptions)
        perceptions[record.qa_id] = record  # a later record for the same question supersedes
    if args.perception and not perceptions:
        raise DataFileError(
            f"{args.perception}: holds no perception records; run `embodied-r perceive` first"
        )
    span_note = None
    if args.span:
        common_detail(perceptions[qa.id] for qa in questions if qa.id in perceptions)  # before any is dropped
        questions, uncovered, other = select_span(questions, perceptions, args.span, CLIError)
        if not any(qa.id in perceptions for qa in questions):
            raise CLIError(f"--span {args.span} kept no question: {len(uncovered)} need an object shown in no key "
                           f"frame, {len(other)} have another span")
        span_note = (f"--span {args.span}: dropped {len(uncovered)} question(s) needing an object shown in no key "
                     f"frame and {len(other)} of another span")
    if budget is not None:
        from pathlib import Path

        from embodied_r.methods.embodied_r.keyframe_rows import build_keyframe_rows

        rows, missing = build_keyframe_rows(questions, perceptions, Path(args.keyframes), Path(args.out),
                                            version, budget)
    else:
        rows, missing = build_method_rows(method, questions, perceptions, version, CLIError)
    rows, invalid = split_invalid_answers(rows)
    if not rows:
        raise DataFileError(
            f"no prompt row could be built from {args.qa} and {args.perception} ({len(missing)} without "
            f"perception, {len(invalid)} with an answer not among the options)"
        )
    write_jsonl(args.out, [row.to_dict() for row in rows])
    out = console()
    named = "" if method is EMBODIED_R else f"method {method.name}, "
    out.print(f"wrote {len(rows)} prompt row(s) ({named}{version}, {args.input}) to {args.out}", markup=False)
    if span_note:
        out.print(span_note, markup=False)
    if budget is not None:
        shown = [row.meta["keyframes"]["shown"] for row in rows]
        cut = sum(1 for row in rows if row.meta["keyframes"]["dropped_oldest"])
        out.print(f"key frames: {min(shown)}-{max(shown)} a row (at most {budget.max_frames}, of at most "
                  f"{budget.max_pixels} pixels each); {cut} row(s) lost their oldest frames to --max-frames "
                  "(meta.keyframes.dropped_oldest)", markup=False)
    if superseded:
        out.print(f"{args.perception} holds {superseded} repeated record(s) for a question; the last "
                  "record of each question was used", markup=False)
    if invalid:
        shown = "; ".join(invalid[:5]) + (" ..." if len(invalid) > 5 else "")
        out.print(f"skipped {len(invalid)} question(s) whose answer is not among their options: {shown}",
                  markup=False)
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        if method is EMBODIED_R:
            out.print(f"skipped {len(missing)} question(s) without perception: {shown}; run `embodied-r perceive` "
                      "for them first", markup=False)
        else:
            out.print(f"skipped {len(missing)} question(s) that method {method.name}'s row builder made no row for: "
                      f"{shown}", markup=False)
    if budget is not None:
        return 0  # the frame descriptions below are not part of key-frame rows
    runaway = [row.id for row in rows if (row.meta.get("perception") or {}).get("runaway")]
    if runaway:
        shown = ", ".join(runaway[:10]) + (" ..." if len(runaway) > 10 else "")
        out.print(f"{len(runaway)} row(s) hold a frame description that ran away (a VLM repeating itself; "
                  f"meta.perception.runaway names the frame): {shown}. Training and eval drop or cut such "
                  "frames by their context policy; redoing their perception may be better", markup=False)
    leaked = sum(1 for row in rows if (row.meta.get("perception") or {}).get("leaked"))
    if leaked:
        out.print(f"{leaked} row(s) come from perception flagged for answer leakage (meta.perception.leaked)")
    return 0


def keyframe_budget(args: argparse.Namespace, error: type[Exception]) -> Any:
    """The frame budget for ``--input keyframes`` (None for text rows); bad values are ``error``s."""
    from embodied_r.methods.embodied_r.keyframe_images import KeyframeBudget, KeyframeBudgetError

    if args.input != "keyframes":
        if args.keyframes:
            raise error("--keyframes is read by --input keyframes only; add it, or leave --keyframes out for text rows")
        return None
    if not args.keyframes:
        raise error("--input keyframes needs --keyframes DIR (the folder `embodied-r keyframes --save-images` wrote)")
    try:
        return KeyframeBudget(args.max_frames, args.max_pixels, args.pixel_multiple)
    except KeyframeBudgetError as exc:
        raise error(str(exc)) from None
