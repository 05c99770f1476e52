"""``embodied-r perceive``: describe every question's key frames with a VLM (or the simulator oracle)."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "describe key frames as text with a VLM (openai-compatible server, local model) or the oracle"
DESCRIPTION = ("For each question, send every key frame of its video to a VLM and write one Perception record "
               "per question (JSON Lines). Answers are cached on disk per request, so rerunning the same command "
               "after a crash or Ctrl-C resumes without repeating finished requests.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--qa", required=True, help="questions (QARecord .jsonl); videos are relative to it")
    parser.add_argument("--keyframes", required=True, metavar="DIR",
                        help="folder of <video stem>.keyframes.json from `embodied-r keyframes`")
    parser.add_argument("--backend", required=True, choices=["oracle", "openai", "transformers"])
    parser.add_argument("--out", required=True, help="output Perception .jsonl")
    parser.add_argument("--prompt-version", default="official-v1", choices=["official-v1", "json-v1"],
                        help="perception prompt: official-v1 (shows the choices, as the paper) or json-v1 "
                        "(JSON answers, only the entity names) (default: %(default)s)")
    parser.add_argument("--cache-dir", default=None, help="request cache folder (default: <out>.cache)")
    parser.add_argument("--force", action="store_true", help="ignore the cache and the output; recompute all")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--max-side", type=int, default=768,
                        help="downscale frames so the longer side is at most this (default: %(default)s)")
    add_backend_arguments(parser)
    add_detail_arguments(parser)


def add_detail_arguments(parser: argparse.ArgumentParser) -> None:
    """``--detail`` and ``--detail-noise``: the oracle's detail levels (checked in ``_detail_options``, so a
    bad value is a CLIError naming the allowed ones)."""
    from embodied_r.sim.world.detail_levels import DETAIL_LEVELS  # plain names, no world code

    levels = ", ".join(DETAIL_LEVELS)
    detail = parser.add_argument_group("oracle detail levels (--backend oracle)")
    detail.add_argument("--detail", default="words", metavar="LEVEL",
                        help=f"what the oracle writes, one of {levels}: words (as a VLM writes), bearings "
                             "(motion amounts, instance names, bearings, distances, sizes, walls), map (a "
                             "cognitive map in the first key frame's frame), relations (the map plus the facts "
                             "the question needs), facts (the names in view and those facts, no map) "
                             "(default: %(default)s)")
    detail.add_argument("--detail-noise", type=float, default=0.0, metavar="SIGMA",
                        help="noise sigma on the numbers the levels above words write (default: 0); at words, "
                             "--oracle-noise covers distances")


def _detail_options(args: argparse.Namespace, chosen: str) -> dict[str, Any]:
    """The oracle's ``detail``/``detail_noise`` from ``--detail``/``--detail-noise`` (absent for a command
    without them, such as ``answer``); every wrong combination is a CLIError, raised before any work."""
    import math

    from embodied_r.cli.common import CLIError
    from embodied_r.sim.world.detail_levels import DETAIL_LEVELS

    detail, noise = getattr(args, "detail", "words"), getattr(args, "detail_noise", 0.0)
    if detail not in DETAIL_LEVELS:
        raise CLIError(f"--detail {detail!r} is not a detail level; choose one of {', '.join(DETAIL_LEVELS)}")
    if not math.isfinite(noise) or noise < 0:
        raise CLIError(f"--detail-noise must be a finite number >= 0, not {noise}")
    if args.backend != "oracle":
        if detail != "words" or noise:
            raise CLIError(f"--detail/--detail-noise: detail levels are the oracle's, not {chosen}'s; use "
                           "--backend oracle, or leave --detail and --detail-noise out")
        return {}
    if noise and detail == "words":
        raise CLIError(f"--detail-noise applies at --detail {', '.join(DETAIL_LEVELS[1:])}; at --detail words "
                       "use --oracle-noise MISS,WRONG,SIGMA (SIGMA is the distance noise)")
    if detail == "words" and not noise:
        return {}  # the backend's defaults: its settings, and so its cache keys, stay as before detail levels
    return {"detail": detail, "detail_noise": noise}


def add_backend_arguments(parser: argparse.ArgumentParser,
                          dataset_default: str = "the --qa file's folder") -> None:
    """Options of the perception backends (shared with `embodied-r answer`)."""
    vlm = parser.add_argument_group("VLM backends (openai, transformers)")
    vlm.add_argument("--model", default=None, help="model name served at --base-url, or local id/path")
    vlm.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default: 0)")
    vlm.add_argument("--max-tokens", type=int, default=512, help="answer length cap (default: 512)")
    api = parser.add_argument_group("openai backend")
    api.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    api.add_argument("--api-key-env", default="OPENAI_API_KEY",
                     help="environment variable holding the API key (default: %(default)s)")
    api.add_argument("--concurrency", type=int, default=16, help="requests in flight (default: %(default)s)")
    api.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default: %(default)s)")
    api.add_argument("--max-retries", type=int, default=5, help="retries per request (default: %(default)s)")
    local = parser.add_argument_group("transformers backend")
    local.add_argument("--batch-size", type=int, default=4, help="requests per generate() (default: 4)")
    local.add_argument("--device", default="auto", help="auto | cpu | cuda (default: auto)")
    local.add_argument("--dtype", default="auto", help="auto | bfloat16 | float16 | float32 (default: auto)")
    oracle = parser.add_argument_group("oracle backend")
    oracle.add_argument("--dataset-dir", default=None,
                        help=f"synthetic dataset folder (default: {dataset_default})")
    oracle.add_argument("--oracle-noise", default=None, metavar="MISS,WRONG,SIGMA",
                        help="perception errors: miss probability, wrong-label probability, distance sigma")
    oracle.add_argument("--seed", type=int, default=0, help="oracle noise seed (default: 0)")


def _backend_options(args: argparse.Namespace, qa_dir: Any, chosen_by: str | None = None) -> dict[str, Any]:
    """Backend keyword arguments from the shared options; ``chosen_by`` names the option that chose the
    backend in error messages (``--backend openai`` here, ``--vlm openai/MODEL`` for ``answer``)."""
    from embodied_r.cli.common import CLIError

    chosen = chosen_by or f"--backend {args.backend}"
    model_hint = "--model (the VLM to ask)" if chosen_by is None else f"a model: {chosen_by}/MODEL"
    detail = _detail_options(args, chosen)
    if args.backend == "oracle":
        noise = None
        if args.oracle_noise:
            from embodied_r.sim.world.oracle import OracleNoise

            try:
                miss, wrong, sigma = (float(v) for v in args.oracle_noise.split(","))
                noise = OracleNoise(miss, wrong, sigma)
            except ValueError as exc:
                raise CLIError(f"--oracle-noise must be three numbers MISS,WRONG,SIGMA ({exc})") from None
        return {"dataset_dir": args.dataset_dir or qa_dir, "noise": noise, "seed": args.seed, **detail}
    if not args.model:
        raise CLIError(f"{chosen} needs {model_hint}")
    if args.backend == "openai":
        if not args.base_url:
            raise CLIError(f"{chosen} needs --base-url, e.g. http://localhost:8000/v1 for a vLLM server")
        if args.concurrency < 1:
            raise CLIError("--concurrency must be at least 1")
        return {"model": args.model, "base_url": args.base_url, "api_key_env": args.api_key_env,
                "concurrency": args.concurrency, "timeout": args.timeout, "max_retries": args.max_retries,
                "temperature": args.temperature, "max_tokens": args.max_tokens}
    if args.batch_size < 1:
        raise CLIError("--batch-size must be at least 1")
    return {"model": args.model, "batch_size": args.batch_size, "max_new_tokens": args.max_tokens,
            "temperature": args.temperature, "device": args.device, "dtype": args.dtype}


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.methods.embodied_r.perception.cache import PerceptionCache
    from embodied_r.methods.embodied_r.perception.factory import make_backend
    from embodied_r.methods.embodied_r.perception.runner import load_questions, perceive

    qa_path, keyframes_dir, out = Path(args.qa), Path(args.keyframes), Path(args.out)
    if not keyframes_dir.is_dir():
        raise CLIError(f"--keyframes {keyframes_dir}: not a folder; run `embodied-r keyframes` first")
    if args.limit is not None and args.limit <= 0:
        raise CLIError("--limit must be a positive number")
    options = _backend_options(args, qa_path.parent)  # every refusal of the options before any work
    questions = load_questions(qa_path)
    if args.limit:
        questions = questions[:args.limit]
    backend = make_backend(args.backend, **options)
    cache = PerceptionCache(args.cache_dir or f"{out}.cache", force=args.force)
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console()) as bar:
        task = bar.add_task(f"perceiving ({backend.name})", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        summary = perceive(questions, qa_path.parent, keyframes_dir, backend, cache, out,
                           prompt_version=args.prompt_version, max_side=args.max_side, progress=progress)
    level = getattr(backend, "detail", "words")
    shown_level = "" if level == "words" else f", detail {level}"
    print_table(f"perception ({backend.name}, {backend.model}, {args.prompt_version}{shown_level}) -> {out}",
                ["questions", "done", "already done", "requests cached", "requests sent", "failed", "leaked",
                 "runaway", "parse errors", "seconds"],
                [[summary.questions, summary.done, summary.already_done, summary.cached, summary.requested,
                  summary.failed, summary.leaked, summary.runaway, summary.parse_errors, round(summary.seconds, 1)]])
    if summary.runaway:
        console().print(f"{summary.runaway} question(s) have a frame description that ran away (the VLM repeated "
                        "itself; meta.runaway names the frame); the reasoner's context policy drops or cuts such "
                        "frames, and the perception may be worth redoing", markup=False)
    if summary.errors:
        console().print(f"{summary.failed} question(s) failed; rerun the same command to retry them. First errors:")
        for line in summary.errors[:10]:
            console().print(f"  {line}", markup=False)
    return 1 if summary.failed else 0
