"""``embodied-r judge-probe``: check that a judge follows the content of a reasoning before trusting it."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "probe a consistency judge: does it follow what a reasoning argues, or answer one letter?"
DESCRIPTION = ("Build cases from the questions of prompt rows (for each option in turn, reasoning that reaches it "
               "and ends on it, the same with its letter or a contradicting letter named, reasoning that names it "
               "first and a ruled-out option last, reasoning that says it without any option's words; and "
               "reasoning that supports no option, where the answer is none), ask the judge about each exactly as "
               "the consistency reward does, and write judge_probe.json. Exits 1 when the judge fails (any kind's "
               "agreement below --min-agreement, or one letter on more than --max-letter-share of its answers). "
               "The reference judges mentioned-last and always-a fail it by design.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge", required=True,
                        help="built-in model name, local folder or hub id, an http(s):// OpenAI-compatible "
                        "endpoint (with --judge-model), or a reference judge: mentioned-last (the option whose "
                        "text comes last) or always-a")
    parser.add_argument("--judge-model", default=None, help="model name served at an endpoint --judge")
    parser.add_argument("--data", required=True, metavar="SPEC",
                        help="prompt rows whose questions the cases are built from (.jsonl from build-prompts, an "
                        "official processed .json, or a loader spec as `eval --data` takes)")
    parser.add_argument("--out", default=None, metavar="PATH",
                        help="where to write judge_probe.json (a folder or a .json path; default: print only)")
    parser.add_argument("--cases", type=int, default=64,
                        help="cases of each kind (default: %(default)s, at least 16)")
    parser.add_argument("--sees-letters", action="store_true",
                        help="let the judge read option letters in the reasoning (the official rule); default: "
                        "letters are masked, as the consistency reward does by default")
    parser.add_argument("--scoring", choices=("option-text", "letter"), default=None,
                        help="how a local judge answers: option-text (each option's text scored after the "
                        "reasoning, calibrated by the same with an empty reasoning; default) or letter (the "
                        "official next-token letter)")
    parser.add_argument("--no-basis", default=None, metavar="T|calibrate",
                        help="option-text judge: answer none when no option's calibrated score reaches T; "
                        "`calibrate` picks T on probe cases from --calibration-data (default: --data with "
                        "another seed) and reports it, for `judge: {model: {model: NAME, no_basis: T}}`")
    parser.add_argument("--calibration-data", default=None, metavar="SPEC",
                        help="rows to calibrate --no-basis on (best: other questions than --data)")
    parser.add_argument("--consistency-rule", choices=("judge", "shuffled-options"), default="judge",
                        help="judge: the judge reads the reasoning as the reward's judge does (default); "
                        "shuffled-options: it re-reads it with the options shuffled and relabelled, and its pick "
                        "is mapped back by option text (`judge.rule: shuffled-options`)")
    parser.add_argument("--refusal", action="store_true",
                        help="letter judge or endpoint: offer none as a reply (`refusal: true` in a recipe)")
    parser.add_argument("--min-agreement", type=float, default=0.8,
                        help="agreement each kind needs (default: 0.8)")
    parser.add_argument("--max-letter-share", type=float, default=0.5,
                        help="largest share one letter may take of the answers (default: 0.5)")
    parser.add_argument("--dtype", default="auto", help="auto | bfloat16 | float32 (default: auto)")
    parser.add_argument("--seed", type=int, default=0, help="which questions and phrasings (default: 0)")


def _no_basis(value: str | None, judge: str) -> float | str | None:
    """``--no-basis`` as a number or ``calibrate``; refused for judges without option-text scores."""
    from embodied_r.cli.common import CLIError
    from embodied_r.judge.reference_judges import REFERENCE_JUDGES

    if value is None:
        return None
    if judge.startswith(("http://", "https://")) or judge in REFERENCE_JUDGES:
        raise CLIError(f"--no-basis is a threshold on a local model's option-text scores; {judge} has none "
                       "(an endpoint answers none with --refusal)")
    if value == "calibrate":
        return value
    try:
        return float(value)
    except ValueError:
        raise CLIError(f"--no-basis takes a number or `calibrate`, got {value!r}") from None


def _judge_spec(args: argparse.Namespace, threshold: float | None) -> Any:
    """What ``build_judge`` takes for these arguments."""
    extra: dict[str, Any] = {"refusal": True} if args.refusal else {}
    if args.judge.startswith(("http://", "https://")):
        return {"base_url": args.judge, "model": args.judge_model or args.judge, **extra}
    if threshold is not None:
        extra["no_basis"] = threshold
    return {"model": args.judge, **extra} if extra else args.judge


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.core.io import atomic_write_json
    from embodied_r.evaluation.runner import load_eval_rows
    from embodied_r.judge.judges import JudgeError, build_judge
    from embodied_r.judge.probe import KINDS, ProbeError, build_probe_cases, calibrate_no_basis, run_probe

    if args.cases < 16:
        raise CLIError(f"--cases must be at least 16, got {args.cases}")
    if not 0 < args.min_agreement <= 1 or not 0 < args.max_letter_share <= 1:
        raise CLIError("--min-agreement and --max-letter-share must be in (0, 1]")
    if args.judge == "policy":
        raise CLIError("--judge policy means the evaluated or trained model; name that model or folder here")
    no_basis = _no_basis(args.no_basis, args.judge)
    if args.calibration_data and no_basis != "calibrate":
        raise CLIError("--calibration-data is for --no-basis calibrate")
    rows, _ = load_eval_rows(args.data)
    try:
        cases = build_probe_cases(rows, n_cases=args.cases, seed=args.seed)
        calibration_cases = None
        if no_basis == "calibrate":
            calibration_rows = load_eval_rows(args.calibration_data)[0] if args.calibration_data else rows
            # Another seed: other phrasings, targets and (where the rows have more) questions than the probe's.
            calibration_cases = build_probe_cases(calibration_rows, n_cases=args.cases, seed=args.seed + 1)
    except ProbeError as exc:
        raise CLIError(f"{args.data}: {exc}") from exc
    calibration: dict[str, Any] | None = None
    try:
        spec = _judge_spec(args, no_basis if isinstance(no_basis, float) else None)
        judge = build_judge(spec, args.judge, dtype=args.dtype, sees_letters=args.sees_letters, scoring=args.scoring)
        if calibration_cases is not None:
            threshold = calibrate_no_basis(judge, calibration_cases)
            judge.no_basis = threshold  # type: ignore[attr-defined]  # a ReferenceJudge (checked by calibrate)
            calibration = {"data": str(args.calibration_data or args.data), "seed": args.seed + 1,
                           "cases": len(calibration_cases), "no_basis": threshold}
            console().print(f"no-basis threshold {threshold:.4f}, calibrated on {len(calibration_cases)} cases "
                            f"of {calibration['data']} (seed {args.seed + 1})", markup=False)
        if args.consistency_rule == "shuffled-options":
            from embodied_r.judge.shuffled_options import ShuffledOptionsJudge

            judge = ShuffledOptionsJudge(judge)
        result = run_probe(judge, cases, min_agreement=args.min_agreement, max_letter_share=args.max_letter_share)
    except (JudgeError, ValueError) as exc:  # ValueError: a scoring or "none" rule the judge cannot use
        raise CLIError(str(exc)) from exc
    rows_out: list[list[Any]] = [[f"{kind}: answers as expected (n={result.counts[kind]})", result.agreement[kind]]
                                 for kind in KINDS if result.counts.get(kind)]
    if result.counts.get("conflict"):
        rows_out.append(["conflict: answers the named letter", result.follows_named_letter])
    rows_out += [
        [f"most frequent letter ({result.top_letter})", result.top_letter_share],
        ["none answered where an option is supported", result.none_answers],
        ["seconds per judgement", result.seconds_per_judgement],
    ]
    print_table(
        f"judge probe: {result.judge} ({result.cases} cases, {result.questions} questions, letters "
        f"{'visible' if result.sees_letters else 'masked'}, {result.scoring} scoring)",
        ["", "value"],
        rows_out,
    )
    if args.out:
        path = Path(args.out)
        path = path if path.suffix == ".json" else path / "judge_probe.json"
        atomic_write_json(path, {**result.to_dict(), "data": str(args.data), "calibration": calibration})
        console().print(f"wrote {path}", markup=False)
    console().print(("PASS: " if result.passed else "FAIL: ") + result.summary(), markup=False)
    return 0 if result.passed else 1
