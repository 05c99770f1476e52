"""``embodied-r answer``: the deployed cascade on one video (key frames -> VLM text -> reasoner)."""

from __future__ import annotations

import argparse
from typing import Any

from embodied_r.cli.perceive import add_backend_arguments

HELP = "answer a question about one video: key frames -> perception -> reasoner, with stage timings"
DESCRIPTION = ("Answer one question about one egocentric video with the Embodied-R cascade. --vlm oracle works "
               "on synthetic videos (from `embodied-r synth world`); --vlm openai/MODEL with --base-url works on "
               "any video through an OpenAI-compatible VLM server (vLLM, SGLang, hosted).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("video", help="video file")
    parser.add_argument("--question", required=True, help="the question text")
    parser.add_argument("--options", nargs="+", default=None, metavar="OPTION",
                        help="answer options, e.g. --options left right back (lettered A, B, C...)")
    parser.add_argument("--answer-type", choices=["choice", "number", "position", "open"], default=None,
                        help="default: choice with --options, open otherwise")
    parser.add_argument("--vlm", default="oracle",
                        help="perception backend: oracle | openai/MODEL | transformers/MODEL (default: oracle)")
    parser.add_argument("--reasoner", default="smollm2-135m-instruct",
                        help="reasoning model: built-in name, local folder or HF id (default: %(default)s)")
    parser.add_argument("--keyframe-strategy", choices=["orb", "uniform"], default="orb")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="reasoner completion cap (default: 512)")
    parser.add_argument("--work-dir", default=None,
                        help="where key frames and the perception cache go (default: <cache>/answer)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_backend_arguments(parser, dataset_default="the synthetic dataset the video belongs to")
    from embodied_r.cli.common import add_context_arguments

    add_context_arguments(parser)


def _backend(args: argparse.Namespace, video_dir: Any) -> Any:
    from embodied_r.cli.common import CLIError
    from embodied_r.cli.perceive import _backend_options
    from embodied_r.methods.embodied_r.perception.factory import make_backend

    name, _, model = args.vlm.partition("/")
    if name not in ("oracle", "openai", "transformers"):
        raise CLIError(f"--vlm {args.vlm!r}: use oracle, openai/MODEL or transformers/MODEL")
    args.backend = name
    if model:
        args.model = model
    if name == "oracle" and not args.dataset_dir:
        # Synthetic datasets keep videos in DATASET/videos/, poses in DATASET/poses/.
        args.dataset_dir = str(video_dir.parent if video_dir.name == "videos" else video_dir)
    return make_backend(name, **_backend_options(args, video_dir, chosen_by=f"--vlm {name}"))


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console, context_policy, print_table
    from embodied_r.inference.models import cache_dir
    from embodied_r.methods.embodied_r.cascade import answer_question

    video = Path(args.video)
    if not video.is_file():
        raise CLIError(f"{video}: {'is a folder, not a video file' if video.is_dir() else 'video file not found'}")
    if args.max_new_tokens <= 0:
        raise CLIError("--max-new-tokens must be positive")
    policy = context_policy(args)
    backend = _backend(args, video.resolve().parent)
    work_dir = Path(args.work_dir) if args.work_dir else cache_dir() / "answer"
    try:
        result = answer_question(video, args.question, args.options, backend=backend, reasoner=args.reasoner,
                                 work_dir=work_dir, answer_type=args.answer_type,
                                 keyframe_strategy=args.keyframe_strategy, max_new_tokens=args.max_new_tokens,
                                 context=policy)
    except RuntimeError as exc:
        raise CLIError(str(exc)) from None
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return 0
    out = console()
    out.print(f"[bold]Question:[/bold] {result.question}", markup=True)
    for option in result.options or []:
        out.print(f"  {option}", markup=False)
    out.print(f"[bold]Key frames:[/bold] {len(result.keyframe_timestamps)} at "
              f"{', '.join(f'{t:.1f}s' for t in result.keyframe_timestamps)}")
    out.print("[bold]Perception:[/bold]")
    for index, frame in enumerate(result.perception):
        action = f"After {frame.get('action')}, " if index and frame.get("action") else ""
        text = " ".join(str(frame.get(k) or "") for k in ("delta", "q_related")).strip() or frame.get("raw", "")
        out.print(f"  Frame {index}: {action}{text}", markup=False)
    if result.context:
        out.print(f"[bold]Context:[/bold] the prompt had {result.context['prompt_tokens']} tokens, over the limit of "
                  f"{result.context['limit']}: {result.context['action']}"
                  + (f" ({result.context['frames_dropped']} oldest frame(s))" if result.context.get("frames_dropped")
                     else ""), markup=True)
    out.print("[bold]Reasoning:[/bold]")
    out.print(f"  {result.reasoning if result.reasoning is not None else '(no <think> block) ' + result.completion}",
              markup=False)
    shown = result.answer if result.answer is not None else "(no well-formed <answer>)"
    out.print(f"[bold]Answer:[/bold] {shown}")
    print_table("time per stage (s)", ["stage", "seconds"],
                [[k.removesuffix("_s"), v] for k, v in result.timings.items()])
    return 0
