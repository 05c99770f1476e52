"""Does a GRPO group carry a learning signal? Official prompt + format reward vs the warm start.

Samples G completions per prompt from the starting policy exactly as GRPO's first step would (the
recipe's temperature/top_p/top_k), once with the paper's plain generation prompt and once with the
assistant turn prefilled with ``<think>``, and scores every completion with the project's rewards. A
group whose rewards are all equal has zero advantage for every completion (no gradient); the share of
such groups is TRL's ``frac_reward_zero_std`` for a single reward.

    OMP_NUM_THREADS=2 python benchmarks/grpo_warmstart_signal.py --rows PROMPTS.jsonl --prompts 8 --generations 4
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from embodied_r.core.chat import render_chat
from embodied_r.inference.generation import generate_batch
from embodied_r.inference.models import load_reasoner
from embodied_r.methods.accuracy import accuracy_reward
from embodied_r.methods.format import format_reward, soft_format_reward
from embodied_r.training.data import load_prompt_rows


def zero_std_share(values: list[float], generations: int) -> float:
    groups = [values[i:i + generations] for i in range(0, len(values), generations)]
    return sum(max(g) == min(g) for g in groups) / len(groups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", required=True, help="PromptRow .jsonl (or toy:N)")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model, tokenizer = load_reasoner(args.model, dtype="float32")
    rows = load_prompt_rows(args.rows, limit=args.prompts)
    columns = {
        "answer": [str(r.answer) for r in rows for _ in range(args.generations)],
        "answer_type": [r.answer_type for r in rows for _ in range(args.generations)],
        "options": [r.options for r in rows for _ in range(args.generations)],
    }
    for name, prefix in (("official prompt", ""), ("prefill <think>", "<think>")):
        torch.manual_seed(args.seed)
        started = time.perf_counter()
        completions: list[str] = []
        for row in rows:  # one group per call: G samples of the same prompt, as a GRPO group
            text = render_chat(tokenizer, row.prompt, prefix)
            generated = generate_batch(model, tokenizer, [text] * args.generations, args.max_new_tokens,
                                       do_sample=True, temperature=1.0, top_p=0.9, share_prefix=False)
            completions.extend(prefix + g for g in generated)
        rewards = {
            "format": format_reward(completions),
            "format_soft": soft_format_reward(completions),
            "accuracy": accuracy_reward(completions, **columns),
        }
        report = {
            "setting": name, "completions": len(completions), "seconds": round(time.perf_counter() - started, 1),
            **{f"{k}/mean": round(sum(v) / len(v), 3) for k, v in rewards.items()},
            **{f"{k}/zero_std_groups": zero_std_share(v, args.generations) for k, v in rewards.items()},
            "has </think>": sum("</think>" in c for c in completions),
            "has <answer>...</answer>": sum("<answer>" in c and "</answer>" in c for c in completions),
        }
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
