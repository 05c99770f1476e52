"""GRPO sampling: shared-prefix generation against TRL's left-padded ``generate``, side by side.

A GRPO generation batch is P prompts, each repeated G times. TRL's transformers path left-pads all P x G
rows into one ``generate`` call, so every prompt is encoded G times before the first new token.
``training/prefix_generation.py`` encodes the P distinct prompts once (one left-padded batch of P rows),
copies each prompt's cache to its rows, and decodes all rows together.

Both paths decode greedily for exactly ``--tokens`` new tokens (end-of-sequence suppressed until then),
so they do the same work and must write the same tokens; the script times each ``--repeats`` times,
alternating, and prints the medians, the ratio and how many rows differ (0 expected).

    python benchmarks/sampling.py --data runs/learning/train.jsonl --shapes 2x4,2x8 --tokens 64

``--record PATH`` also writes the numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from bench_record import add_record_argument, write_record


def left_padded_generate(model: Any, prompt_ids: list[list[int]], config: Any, pad_id: int) -> list[list[int]]:
    """The baseline: every row left-padded into one batch and generated at once (TRL's layout)."""
    from embodied_r.inference.generation import prefix_layout

    ids, mask = prefix_layout(prompt_ids, 0, pad_id, model.device)
    return model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, ids.shape[1]:].tolist()


def shape_rows(tokenizer: Any, rows: list[Any], prompts: int, generations: int) -> list[list[int]]:
    """``prompts`` rows' chat-templated prompt ids, each repeated ``generations`` times (TRL's layout)."""
    if len(rows) < prompts:
        raise SystemExit(f"--data has {len(rows)} rows; shape needs {prompts} prompts")
    encoded = [list(tokenizer.apply_chat_template(row.prompt, add_generation_prompt=True, tokenize=True,
                                                  return_dict=True)["input_ids"]) for row in rows[:prompts]]
    return [ids for ids in encoded for _ in range(generations)]


def compare(model: Any, tokenizer: Any, prompt_ids: list[list[int]], tokens: int, repeats: int) -> dict[str, Any]:
    from transformers import GenerationConfig

    from embodied_r.training.prefix_generation import generate_sharing_prompts

    pad_id = tokenizer.pad_token_id
    config = GenerationConfig(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=pad_id,
                              eos_token_id=[tokenizer.eos_token_id])
    paths = {"stock": lambda: left_padded_generate(model, prompt_ids, config, pad_id),
             # min_new_tokens keeps end tokens out, so no row is cut: the two outputs line up token by token.
             "shared": lambda: generate_sharing_prompts(model, prompt_ids, config, [tokenizer.eos_token_id])}
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    outputs: dict[str, list[list[int]]] = {}
    for _ in range(repeats):
        for name, run in paths.items():
            started = time.perf_counter()
            with torch.no_grad():
                outputs[name] = run()
            seconds[name].append(time.perf_counter() - started)
    stock, shared = (statistics.median(seconds[name]) for name in paths)
    return {"rows": len(prompt_ids), "prompt_tokens": sorted({len(p) for p in prompt_ids}),
            "stock_s": round(stock, 2), "shared_s": round(shared, 2), "speedup": round(stock / shared, 2),
            "rows_differing": sum(a != b for a, b in zip(outputs["stock"], outputs["shared"]))}


def main(argv: list[str] | None = None) -> None:
    from embodied_r.inference.models import load_reasoner
    from embodied_r.training.data import load_prompt_rows

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="PromptRow .jsonl (or toy:N)")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--shapes", default="2x4,2x8", help="PROMPTSxGENERATIONS, comma-separated")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per row")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads; 0 = torch default")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_reasoner(args.model, dtype=args.dtype, device="cpu")
    rows = load_prompt_rows(args.data)
    print(f"sampling {args.tokens} tokens per row, greedy, {args.model} ({model.dtype}), "
          f"{torch.get_num_threads()} threads, medians of {args.repeats}")
    print(f"{'shape':>6s} {'rows':>5s} {'prompt tokens':>16s} {'TRL s':>8s} {'shared s':>9s} {'speed-up':>9s} "
          f"{'rows differing':>15s}")
    results = []
    for shape in args.shapes.split(","):
        prompts, generations = (int(x) for x in shape.lower().split("x"))
        result = compare(model, tokenizer, shape_rows(tokenizer, rows, prompts, generations), args.tokens,
                         args.repeats)
        span = f"{result['prompt_tokens'][0]}-{result['prompt_tokens'][-1]}"
        print(f"{shape:>6s} {result['rows']:5d} {span:>16s} {result['stock_s']:8.2f} {result['shared_s']:9.2f} "
              f"{result['speedup']:8.2f}x {result['rows_differing']:15d}")
        # The printed line: the prompt lengths as their span, not every distinct length.
        tokens = result["prompt_tokens"]
        results.append({"shape": shape, "prompts": prompts, "generations": generations, "rows": result["rows"],
                        "prompt_tokens_min": tokens[0], "prompt_tokens_max": tokens[-1],
                        **{key: result[key] for key in ("stock_s", "shared_s", "speedup", "rows_differing")}})
    if args.record is not None:
        settings = {"data": args.data, "model": args.model, "dtype": str(model.dtype).removeprefix("torch."),
                    "tokens": args.tokens, "repeats": args.repeats, "torch_threads": torch.get_num_threads()}
        write_record(args.record, "sampling", argv, settings, {"shapes": results})


if __name__ == "__main__":
    main()
