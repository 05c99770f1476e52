"""``embodied-r judge-probe``: check that a judge follows the content of a reasoning before trusting it."""

from __future__ import annotations

import argparse

HELP = "probe a consistency judge: does it follow what a reasoning argues, or answer one letter?"
DESCRIPTION = ("Build cases from the questions of prompt rows (a reasoning that reaches each option in turn by "
               "its content; the same ending with the letter named; and ending with a contradicting letter), ask "
               "the judge about each exactly as the consistency reward does, and write judge_probe.json. Exits 1 "
               "when the judge fails (content agreement below --min-agreement, or one letter on more than "
               "--max-letter-share of its answers).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge", required=True,
                        help="built-in model name, local folder or hub id, or an http(s):// OpenAI-compatible "
                        "endpoint (with --judge-model)")
    parser.add_argument("--judge-model", default=None, help="model name served at an endpoint --judge")
    parser.add_argument("--data", required=True, metavar="SPEC",
                        help="prompt rows whose questions the cases are built from (.jsonl from build-prompts, an "
                        "official processed .json, or a loader spec as `eval --data` takes)")
    parser.add_argument("--out", default=None, metavar="PATH",
                        help="where to write judge_probe.json (a folder or a .json path; default: print only)")
    parser.add_argument("--cases", type=int, default=64,
                        help="content cases (as many named and conflict cases are added; default: %(default)s, "
                        "at least 16)")
    parser.add_argument("--sees-letters", action="store_true",
                        help="let the judge read option letters in the reasoning (the official rule); default: "
                        "letters are masked, as the consistency reward does by default")
    parser.add_argument("--scoring", choices=("option-text", "letter"), default=None,
                        help="how a local judge answers: option-text (each option's text scored after the "
                        "reasoning, calibrated by the same with an empty reasoning; default) or letter (the "
                        "official next-token letter)")
    parser.add_argument("--min-agreement", type=float, default=0.8, help="content agreement needed (default: 0.8)")
    parser.add_argument("--max-letter-share", type=float, default=0.5,
                        help="largest share one letter may take of the answers (default: 0.5)")
    parser.add_argument("--dtype", default="auto", help="auto | bfloat16 | float32 (default: auto)")
    parser.add_argument("--seed", type=int, default=0, help="which questions and phrasings (default: 0)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.core.io import atomic_write_json
    from embodied_r.evaluation.judge import make_judge
    from embodied_r.evaluation.runner import load_eval_rows
    from embodied_r.inference.judge_probe import ProbeError, build_probe_cases, run_probe
    from embodied_r.inference.judges import JudgeError

    if args.cases < 16:
        raise CLIError(f"--cases must be at least 16, got {args.cases}")
    if not 0 < args.min_agreement <= 1 or not 0 < args.max_letter_share <= 1:
        raise CLIError("--min-agreement and --max-letter-share must be in (0, 1]")
    if args.judge == "policy":
        raise CLIError("--judge policy means the evaluated or trained model; name that model or folder here")
    rows, _ = load_eval_rows(args.data)
    try:
        cases = build_probe_cases(rows, n_cases=args.cases, seed=args.seed)
    except ProbeError as exc:
        raise CLIError(f"{args.data}: {exc}") from exc
    try:
        judge = make_judge(args.judge, args.judge, judge_model=args.judge_model, dtype=args.dtype,
                           sees_letters=args.sees_letters, scoring=args.scoring)
        result = run_probe(judge, cases, min_agreement=args.min_agreement, max_letter_share=args.max_letter_share)
    except (JudgeError, ValueError) as exc:  # ValueError: a scoring rule the judge cannot use
        raise CLIError(str(exc)) from exc
    rows_out = [
        ["content only: answers its option", result.agreement.get("content")],
        ["content + its letter named: answers its option", result.agreement.get("named")],
        ["content + another letter named: answers the content's option", result.agreement.get("conflict")],
        ["content + another letter named: answers the named letter", result.follows_named_letter],
    ]
    rows_out.append([f"most frequent letter ({result.top_letter})", result.top_letter_share])
    rows_out.append(["seconds per judgement", result.seconds_per_judgement])
    print_table(
        f"judge probe: {result.judge} ({result.cases} cases, {result.questions} questions, letters "
        f"{'visible' if result.sees_letters else 'masked'}, {result.scoring} scoring)",
        ["", "value"],
        rows_out,
    )
    if args.out:
        path = Path(args.out)
        path = path if path.suffix == ".json" else path / "judge_probe.json"
        atomic_write_json(path, {**result.to_dict(), "data": str(args.data)})
        console().print(f"wrote {path}", markup=False)
    console().print(("PASS: " if result.passed else "FAIL: ") + result.summary(), markup=False)
    return 0 if result.passed else 1
