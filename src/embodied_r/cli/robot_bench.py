"""``embodied-r robot-bench``: the open-ended Robot-R1-Bench-style set, answered and scored 0-3 by a judge."""

from __future__ import annotations

import argparse
from typing import Any

HELP = ("answer an open-ended Robot-R1 set (bench_test_in/out.jsonl from `synth robot`) and score it 0-3 with a "
        "judge that passed a grading probe")
DESCRIPTION = ("Answer the movement / spatial / planning / high-level-action questions of a bench file with a "
               "text reasoner (scene written from simulator state), or with --input image a vision-language "
               "model looking at the frame, and have a judge model score each answer 0-3 against the reference "
               "built from the demonstration. Answers are appended to OUT/answers.jsonl (rerunning resumes); "
               "scores go to OUT/bench_metrics.json.")
JUDGE_MAX_NEW_TOKENS = 32  # "Score: N" on the first line is all that is read


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from embodied_r.cli.common import add_generation_arguments

    parser.add_argument("--data", required=True, metavar="FILE",
                        help="bench_test_in.jsonl or bench_test_out.jsonl written by `embodied-r synth robot`")
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="answering model: built-in name, local folder or hub id (default: %(default)s)")
    parser.add_argument("--judge", required=True,
                        help="judge: an http(s):// OpenAI-compatible endpoint (with --judge-model), or a local "
                        "model name/path")
    parser.add_argument("--judge-model", default=None, help="model name served at the --judge endpoint")
    parser.add_argument("--probe-items", type=int, default=24, metavar="N",
                        help="bench items the judge's grading probe is built from (3 known-grade answers "
                        "each at most; default %(default)s)")
    parser.add_argument("--min-probe-agreement", type=float, default=0.75, metavar="F",
                        help="share of probe answers of each kind the judge must grade in the expected band "
                        "(default %(default)s)")
    parser.add_argument("--allow-weak-judge", action="store_true",
                        help="score with a judge that failed its probe (the scores are marked untrusted)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--input", default="text", choices=["image", "text"],
                        help="what the answering model reads: text (the scene written from simulator state, "
                        "any text model) or image (the front-camera frame, a vision-language --model, local or an "
                        "http(s):// endpoint) (default: %(default)s)")
    add_generation_arguments(parser, "only the first N questions")


def _interval(ci: list[float] | None) -> str:
    return "n/a" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def make_judge(args: argparse.Namespace) -> Any:
    """The bench judge: an endpoint through the client shared with perception and image evaluation
    (retries, timeouts, bounded concurrency), or a local model through evaluation's token-budget
    engine; greedy either way, for reproducible grades (the paper's GPT-4o judge ran at temperature 1)."""
    from embodied_r.cli.common import CLIError

    if args.judge.startswith(("http://", "https://")):
        if not args.judge_model:
            raise CLIError("--judge with an endpoint URL needs --judge-model (the served model's name)")
        from embodied_r.evaluation.vl_endpoint import EndpointVLEngine

        engine: Any = EndpointVLEngine(args.judge, served_model=args.judge_model, concurrency=8)
    else:
        from embodied_r.inference.generation import TransformersEngine
        from embodied_r.inference.models import load_reasoner

        engine = TransformersEngine(*load_reasoner(args.judge, dtype=args.dtype))

    def judge(batch: list[list[dict[str, str]]]) -> list[str]:
        return engine.generate_chats(batch, max_new_tokens=JUDGE_MAX_NEW_TOKENS, batch_size=8)

    return judge


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, check_generation_arguments, console, context_policy, print_table
    from embodied_r.methods.robot_r1.bench import run_bench
    from embodied_r.methods.robot_r1.grading_probe import EXPECTED

    if not Path(args.data).is_file():
        raise CLIError(f"--data {args.data}: file not found; create it with `embodied-r synth robot --out DIR`")
    check_generation_arguments(args)
    if args.probe_items < 1 or not 0.0 < args.min_probe_agreement <= 1.0:
        raise CLIError("--probe-items must be positive and --min-probe-agreement in (0, 1]")
    if args.input == "image":
        from embodied_r.evaluation.vl_generation import require_vision_model

        require_vision_model(args.model)  # before the judge loads: a text model would never see the frame
    judge = make_judge(args)

    def engine_factory() -> Any:
        if args.input == "image":
            from embodied_r.evaluation.vl_generation import make_vl_engine

            # The frames' paths in a bench file are relative to its folder.
            return make_vl_engine(args.model, engine="transformers", dtype=args.dtype,
                                  image_dir=Path(args.data).parent)
        from embodied_r.inference.generation import make_engine

        return make_engine(args.model, engine="transformers", dtype=args.dtype)

    try:
        metrics = run_bench(args.data, engine_factory, judge, args.out, args.model, limit=args.limit,
                            batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
                            context=context_policy(args), path=args.input, probe_items=args.probe_items,
                            min_probe_agreement=args.min_probe_agreement, allow_weak_judge=args.allow_weak_judge)
    except (ValueError, KeyError) as exc:
        raise CLIError(str(exc)) from exc
    probe = metrics["judge_probe"]
    print_table(f"judge grading probe ({'passed' if probe['passed'] else 'FAILED'}; {probe['n_cases']} cases)",
                ["answer kind", "expected grade", "graded as expected"],
                [[kind, "-".join(map(str, band)), f"{probe['agreement'][kind]:.0%}"]
                 for kind, band in EXPECTED.items() if kind in probe["agreement"]])
    rows = [[cat, m["n"], m["mean"], _interval(m.get("ci95")), m["unparsed"], m["judge_failures"]]
            for cat, m in metrics["categories"].items()]
    trust = "" if metrics["scores_trusted"] else " - UNTRUSTED: the judge failed its probe"
    print_table(f"{args.model} on {args.data} (judge {args.judge_model or args.judge}){trust}",
                ["category", "n", "mean score (0-3)", "95% CI", "unparsed (scored 0)", "judge failures (excluded)"],
                rows)
    console().print(f"{metrics['answered_this_run']} answered this run; scores in {args.out}/bench_metrics.json",
                    markup=False)
    return 0
