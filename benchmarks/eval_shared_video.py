"""Evaluation of several questions per video: each video's description run once per batch, against the
same batches with only the system prompt shared, same model.

Reasoner prompts put the whole video description before the question, so the questions about one video
share most of their tokens, and longest-first batches tend to hold several of them (their lengths are
close). The project (``TransformersEngine``, default) runs each such group's shared prefix once where that
saves prefill (``inference.batch_layout.plan_groups``); the baseline is the same engine with
``group_prefixes=False``, the evaluation path before it. Both decode with the greedy loop; completions
must be identical. Prints seconds, questions/s, the prefill tokens of each layout, and the ratio.

    .venv/bin/python benchmarks/eval_shared_video.py                       # synthetic, 12 videos x 4 questions
    .venv/bin/python benchmarks/eval_shared_video.py --real runs/ladder-facts/data/test+...-eval.jsonl --n 96

``--real`` takes the file's first ``--n`` rows (a row file is written video by video). ``--record PATH``
writes the numbers as JSON (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import random
import time

from bench_record import add_record_argument, write_record
from eval_throughput import OBJECTS, random_frames

from embodied_r.core.records import PromptRow
from embodied_r.evaluation.runner import load_eval_rows
from embodied_r.inference.context_policy import ContextPolicy, token_budget_batches
from embodied_r.inference.generation import TransformersEngine, planned_prefill_tokens
from embodied_r.inference.models import DEFAULT_REASONER, load_reasoner
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages
from embodied_r.prediction import evaluate_with_engine


def synthetic_videos(videos: int, questions: int, frames: int, seed: int = 0) -> list[PromptRow]:
    """``questions`` official-format questions about each of ``videos`` random frame-by-frame descriptions."""
    rng = random.Random(seed)
    rows = []
    for v in range(videos):
        described = random_frames(rng, frames)
        for q in range(questions):
            options = [f"{'ABCD'[k]}. {o}" for k, o in enumerate(rng.sample(OBJECTS, 4))]
            messages = build_reasoner_messages(described, f"Which object is closest to the {rng.choice(OBJECTS)}?",
                                               options)
            rows.append(PromptRow(id=f"v{v}-q{q}", task="synthetic", prompt=messages, answer=rng.choice("ABCD"),
                                  options=options))
    return rows


def planned_tokens(engine: TransformersEngine, rows: list[PromptRow], batch_size: int,
                   max_new_tokens: int) -> tuple[int, int, int]:
    """(prompt tokens, prefill tokens with only the system prompt shared, prefill tokens by video) as the
    engine lays out its batches (the same for both sides)."""
    tokens = [list(f.token_ids) for f in engine.fit([r.prompt for r in rows], max_new_tokens)]
    lengths = [len(t) + max_new_tokens for t in tokens]
    batches = token_budget_batches(lengths, ContextPolicy().max_batch_tokens, batch_size)
    return (sum(map(len, tokens)), planned_prefill_tokens(tokens, batches, grouped=False),
            planned_prefill_tokens(tokens, batches))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_REASONER, help="a built-in name or a model directory")
    parser.add_argument("--real", default=None, help="evaluate real prompt rows from this .json/.jsonl")
    parser.add_argument("--n", type=int, default=96, help="rows taken from --real (default: 96)")
    parser.add_argument("--videos", type=int, default=12, help="synthetic videos (default: 12)")
    parser.add_argument("--questions", type=int, default=4, help="synthetic questions per video (default: 4)")
    parser.add_argument("--frames", type=int, default=8, help="frames per synthetic video (default: 8)")
    parser.add_argument("--batch-size", type=int, default=32, help="the eval command's default (32)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2,
                        help="timed rounds, the order of the two sides alternating (default: 2, AB then BA)")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(0)
    if args.real:
        rows, _ = load_eval_rows(args.real)
        rows = rows[: args.n]
    else:
        rows = synthetic_videos(args.videos, args.questions, args.frames)
    model, tokenizer = load_reasoner(args.model, dtype="float32")
    grouped_engine = TransformersEngine(model, tokenizer)
    flat_engine = TransformersEngine(model, tokenizer, group_prefixes=False)
    evaluate_with_engine(flat_engine, rows[:2], batch_size=2, max_new_tokens=4)  # warm-up, outside both timings

    # This machine's speed drifts between runs by about a tenth; alternating the order and averaging over
    # rounds keeps the drift out of the ratio.
    engines = {"system prompt shared": flat_engine, "each video's description once": grouped_engine}
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    predictions: dict[str, list] = {}
    for number in range(max(1, args.rounds)):
        for name in (list(engines) if number % 2 == 0 else list(engines)[::-1]):
            start = time.perf_counter()
            predictions[name] = evaluate_with_engine(engines[name], rows, batch_size=args.batch_size,
                                                     max_new_tokens=args.max_new_tokens)
            seconds[name].append(time.perf_counter() - start)
            print(f"round {number + 1}, {name}: {seconds[name][-1]:.1f} s", flush=True)
    sides = {name: (sum(times) / len(times), predictions[name]) for name, times in seconds.items()}
    (flat_s, flat), (grouped_s, grouped) = sides.values()
    prompt_tokens, flat_tokens, grouped_tokens = planned_tokens(grouped_engine, rows, args.batch_size,
                                                                args.max_new_tokens)
    same = sum(a.completion == b.completion for a, b in zip(flat, grouped))
    print(f"model {args.model}; {len(rows)} questions ({'real: ' + args.real if args.real else 'synthetic'}), "
          f"{prompt_tokens / len(rows):.0f} prompt tokens each on average; greedy, max_new_tokens "
          f"{args.max_new_tokens}, batch {args.batch_size}; torch threads {torch.get_num_threads()}")
    print(f"{'runner (mean of ' + str(max(1, args.rounds)) + ' rounds)':<40}{'seconds':>9}{'questions/s':>13}"
          f"{'prefill tokens':>16}")
    for (name, (mean_s, _)), tokens in zip(sides.items(), (flat_tokens, grouped_tokens)):
        print(f"{name:<40}{mean_s:>9.1f}{len(rows) / mean_s:>13.2f}{tokens:>16}")
    joined = (grouped_engine.greedy_loop_report or {}).get("joined")
    print(f"speed-up: {flat_s / grouped_s:.2f}x ({flat_tokens / grouped_tokens:.2f}x fewer prefill tokens); "
          f"completions identical on {same}/{len(rows)}; the joined layout's check against model.generate: "
          f"{joined}")
    if args.record is not None:
        settings = {"model": args.model, "real": args.real, "n": len(rows), "videos": args.videos,
                    "questions": args.questions, "frames": args.frames, "batch_size": args.batch_size,
                    "max_new_tokens": args.max_new_tokens, "rounds": max(1, args.rounds),
                    "torch_threads": torch.get_num_threads(),
                    "prompt_tokens_mean": prompt_tokens / len(rows)}
        flat_name, grouped_name = engines
        results = {"runners": [{"runner": "system prompt shared", "seconds": flat_s,
                                "round_seconds": seconds[flat_name], "prefill_tokens": flat_tokens,
                                "questions_per_s": len(rows) / flat_s},
                               {"runner": "description once per video", "seconds": grouped_s,
                                "round_seconds": seconds[grouped_name], "prefill_tokens": grouped_tokens,
                                "questions_per_s": len(rows) / grouped_s}],
                   "speedup": flat_s / grouped_s, "prefill_ratio": flat_tokens / grouped_tokens,
                   "completions_identical": same,
                   # The engine's own check of the joined layout against model.generate (its first grouped batch).
                   "joined_check": (grouped_engine.greedy_loop_report or {}).get("joined")}
        write_record(args.record, "eval_shared_video", argv, settings, results)


if __name__ == "__main__":
    main()
