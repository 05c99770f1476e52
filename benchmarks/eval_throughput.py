"""Evaluation throughput: the batched runner vs a naive one-question-at-a-time loop, same model.

All sides generate greedily with the same ``max_new_tokens`` and score with the same parser; the
naive loop is what a first script looks like (chat template, ``generate`` on one prompt, decode,
score). The project is ``embodied_r.evaluation.predict.evaluate_rows`` (length-sorted batches, the
shared prefix run once, greedy batches through ``inference.greedy``'s loop); the same runner with the
loop off (each batch through ``model.generate``) shows what the loop adds. Prints questions/s for each
and the ratios (goal: >= 3x over the naive loop).

    .venv/bin/python benchmarks/eval_throughput.py                   # synthetic prompts, default model
    .venv/bin/python benchmarks/eval_throughput.py --real ../shared/data/embodied_r_processed/urban_original_test.json

``--record PATH`` also writes the numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import random
import time

from bench_record import add_record_argument, write_record

from embodied_r.core.chat import render_chat
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.predict import evaluate_rows, score_completion
from embodied_r.evaluation.runner import load_eval_rows
from embodied_r.inference.generation import TransformersEngine
from embodied_r.inference.models import DEFAULT_REASONER, load_reasoner
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages
from embodied_r.prediction import evaluate_with_engine

OBJECTS = ["sofa", "table", "door", "window", "chair", "bed", "lamp", "tv", "stool", "fridge"]
ACTIONS = ["move forward", "turn left", "turn right", "rotate left", "look up"]


def random_frames(rng: random.Random, count: int) -> list[dict]:
    """``count`` described frames of random objects, each after a random action (but the first)."""
    return [{"action": rng.choice(ACTIONS) if k else None,
             "delta": f"A {rng.choice(OBJECTS)} is {rng.choice(['left', 'ahead', 'right'])}, "
                      f"next to a {rng.choice(OBJECTS)}.", "q_related": ""}
            for k in range(count)]


def synthetic_rows(n: int, frames: int, seed: int = 0) -> list[PromptRow]:
    """Official-format prompts with random frame descriptions (lengths vary like real ones)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        described = random_frames(rng, rng.randint(max(1, frames // 2), frames))
        options = [f"{'ABCD'[k]}. {o}" for k, o in enumerate(rng.sample(OBJECTS, 4))]
        messages = build_reasoner_messages(described, f"Which object is closest to the {rng.choice(OBJECTS)}?", options)
        rows.append(PromptRow(id=f"s{i}", task="synthetic", prompt=messages, answer=rng.choice("ABCD"),
                              options=options))
    return rows


def naive_loop(model, tokenizer, rows: list[PromptRow], max_new_tokens: int) -> list:
    import torch

    out = []
    for row in rows:
        text = render_chat(tokenizer, row.prompt)
        encoded = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(model.device)
        with torch.inference_mode():
            generated = model.generate(**encoded, max_new_tokens=max_new_tokens, do_sample=False,
                                       pad_token_id=tokenizer.pad_token_id)
        completion = tokenizer.decode(generated[0, encoded["input_ids"].shape[1]:], skip_special_tokens=True)
        out.append(score_completion(row, completion))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_REASONER)
    parser.add_argument("--real", default=None, help="evaluate real prompts from this .json/.jsonl instead")
    parser.add_argument("--n", type=int, default=32, help="questions (default: 32)")
    parser.add_argument("--frames", type=int, default=6, help="max frames per synthetic prompt (default: 6)")
    parser.add_argument("--batch-size", type=int, default=32, help="the eval command's default (32)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    add_record_argument(parser)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(0)
    if args.real:
        rows, _ = load_eval_rows(args.real)
        rows = (rows * (args.n // max(1, len(rows)) + 1))[: args.n]
    else:
        rows = synthetic_rows(args.n, args.frames)
    model, tokenizer = load_reasoner(args.model, dtype="float32")
    lengths = [len(tokenizer(render_chat(tokenizer, r.prompt), add_special_tokens=False)["input_ids"]) for r in rows]
    naive_loop(model, tokenizer, rows[:1], 4)  # warm-up (first-call allocations) outside both timings

    start = time.perf_counter()
    naive = naive_loop(model, tokenizer, rows, args.max_new_tokens)
    naive_s = time.perf_counter() - start
    print(f"naive loop done: {naive_s:.1f} s", flush=True)
    start = time.perf_counter()
    through_generate = evaluate_with_engine(TransformersEngine(model, tokenizer, greedy_loop=False), rows,
                                            batch_size=args.batch_size, max_new_tokens=args.max_new_tokens)
    generate_s = time.perf_counter() - start
    print(f"batched through model.generate done: {generate_s:.1f} s", flush=True)
    start = time.perf_counter()
    batched = evaluate_rows(model, tokenizer, rows, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens)
    batched_s = time.perf_counter() - start
    loop_used = bool((TransformersEngine(model, tokenizer).greedy_loop_report or {}).get("used"))

    # Both runners return predictions in row order.
    agree = sum(a.parsed_answer == b.parsed_answer for a, b in zip(naive, batched))
    same_text = sum(a.completion == b.completion for a, b in zip(through_generate, batched))
    print(f"model {args.model}; {len(rows)} questions ({'real: ' + args.real if args.real else 'synthetic'}), "
          f"prompt tokens mean {sum(lengths) / len(lengths):.0f} (min {min(lengths)}, max {max(lengths)}); "
          f"greedy, max_new_tokens {args.max_new_tokens}; torch threads {torch.get_num_threads()}")
    runners = [("naive loop (one question a time)", naive_s),
               (f"batch {args.batch_size}, model.generate", generate_s),
               (f"evaluate_rows (batch {args.batch_size})", batched_s)]
    print(f"{'runner':<36}{'seconds':>9}{'questions/s':>13}")
    for name, seconds in runners:
        print(f"{name:<36}{seconds:>9.1f}{len(rows) / seconds:>13.2f}")
    print(f"speed-up: {naive_s / batched_s:.2f}x over the naive loop (parsed answers identical on "
          f"{agree}/{len(rows)}); the greedy loop {'used' if loop_used else 'NOT used'}: "
          f"{generate_s / batched_s:.2f}x over model.generate (completions identical on {same_text}/{len(rows)})")
    if args.record is not None:
        settings = {"model": args.model, "real": args.real, "n": len(rows), "frames": args.frames,
                    "batch_size": args.batch_size, "max_new_tokens": args.max_new_tokens,
                    "torch_threads": torch.get_num_threads(), "prompt_tokens_mean": sum(lengths) / len(lengths),
                    "prompt_tokens_min": min(lengths), "prompt_tokens_max": max(lengths)}
        results = {"runners": [{"runner": "naive loop", "seconds": naive_s, "questions_per_s": len(rows) / naive_s},
                               {"runner": "batched, model.generate", "seconds": generate_s,
                                "questions_per_s": len(rows) / generate_s},
                               {"runner": "evaluate_rows", "seconds": batched_s,
                                "questions_per_s": len(rows) / batched_s}],
                   "speedup": naive_s / batched_s, "answers_identical": agree,
                   "greedy_loop_used": loop_used, "loop_speedup": generate_s / batched_s,
                   "completions_identical_to_generate": same_text}
        write_record(args.record, "eval_throughput", argv, settings, results)

if __name__ == "__main__":
    main()
