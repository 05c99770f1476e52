"""GRPO step time split into generation / rewards / update: embodied-r vs plain TRL, side by side.

- ``plain``: TRL's ``GRPOTrainer`` with only the format and accuracy rewards.
- ``ours``:  ``embodied_r.training`` (our trainer subclass, callbacks, stage schedule) with format,
  accuracy and the consistency reward active (stage-3 weights 0.1:0.7:0.2, reference = frozen copy of
  the policy). By default the correctness gate is off here, so every completion with a think block is
  judged: an upper bound on the judge's cost (with the gate only correct answers are judged).
- ``judge, full batch``: one reference call on every completion of a step with think texts as long as
  ``--max-completion-length``, the worst case for a step, timed directly.

Same model, data, seed and batch geometry for both runs. Goal: consistency adds <= 20% to the step.

    python benchmarks/grpo_step.py                       # SmolLM2-135M, 3 steps each, 8 completions x 64 tokens
    python benchmarks/grpo_step.py --model PATH --steps 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def plain_trl(model_path: str, dataset: Any, args: argparse.Namespace, out: Path) -> list[dict[str, float]]:
    from trl import GRPOConfig, GRPOTrainer

    from embodied_r.rewards.accuracy import accuracy_reward
    from embodied_r.rewards.format import format_reward
    from embodied_r.training.callbacks import StepTimer

    config = GRPOConfig(
        output_dir=str(out),
        max_steps=args.steps,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.batch,
        max_completion_length=args.max_completion_length,
        learning_rate=1e-6,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
        model_init_kwargs={"dtype": "float32"},
        reward_weights=[0.1, 0.7],
    )
    trainer = GRPOTrainer(
        model=model_path, reward_funcs=[format_reward, accuracy_reward], args=config, train_dataset=dataset
    )
    timer = StepTimer().attach(trainer)
    trainer.train()
    return timer.steps


def ours(model_path: str, args: argparse.Namespace, out: Path) -> tuple[list[dict[str, float]], Any]:
    from embodied_r.training.grpo import build_trainer
    from embodied_r.training.recipe import recipe_from_dict

    recipe = recipe_from_dict(
        {
            "model": model_path,
            "dtype": "float32",
            "train_data": f"toy:{args.rows}",
            "output_dir": str(out),
            "rewards": ["format", "accuracy", {"consistency": {"gate": args.gate}}],
            "reward_schedule": [
                {"start": 1, "weights": {"format": 0.1, "accuracy": 0.7, "consistency": 0.2}}
            ],
            "max_steps": args.steps,
            "num_generations": args.num_generations,
            "per_device_train_batch_size": args.batch,
            "max_completion_length": args.max_completion_length,
            "learning_rate": 1e-6,
            "save_strategy": "no",
            "logging_steps": 1,
            "seed": 0,
            "report_to": "none",
            "sample_completions": 0,
        },
        source="benchmark",
    )
    trainer, context = build_trainer(recipe)
    trainer.train()
    judge = trainer.reward_funcs[2].judge
    return context["timer"].steps, judge


def judge_full_batch(judge: Any, args: argparse.Namespace) -> float:
    """Seconds for one reference call on a whole step's completions with maximal think texts."""
    from embodied_r.inference.judges import question_for_judge
    from embodied_r.training.data import toy_prompt_rows

    rows = [r for r in toy_prompt_rows(args.rows) if r.answer_type == "choice"]
    n = args.batch
    words = " ".join(["the chair was on the left after I turned"] * (args.max_completion_length // 8 + 1))
    think = " ".join(words.split()[: args.max_completion_length])  # about one token per word
    questions = [
        question_for_judge(rows[i % len(rows)].prompt, rows[i % len(rows)].options) for i in range(n)
    ]
    start = time.perf_counter()
    judge.judge(questions, [think] * n, [rows[i % len(rows)].options for i in range(n)])
    return time.perf_counter() - start


def summarise(steps: list[dict[str, float]]) -> dict[str, float]:
    # The first step includes one-time warm-up (allocations, lazy init); report the rest when possible.
    measured = steps[1:] if len(steps) > 1 else steps
    return {
        key: statistics.mean(s[key] for s in measured)
        for key in ("step_s", "generation_s", "rewards_s", "update_s")
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument(
        "--batch", type=int, default=8, help="completions per step (TRL per_device_train_batch_size)"
    )
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument(
        "--gate",
        action="store_true",
        help="keep the official correctness gate (judges only correct answers: cheaper)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1 avoids oversubscription on a shared machine; 0 = torch default)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch

    from embodied_r.reasoning.models import resolve_model_path
    from embodied_r.training.data import load_prompt_rows, rows_to_dataset

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model_path = resolve_model_path(args.model)
    dataset = rows_to_dataset(load_prompt_rows(f"toy:{args.rows}"))
    with tempfile.TemporaryDirectory() as tmp:
        plain = summarise(plain_trl(model_path, dataset, args, Path(tmp) / "plain"))
        mine_steps, judge = ours(model_path, args, Path(tmp) / "ours")
        mine = summarise(mine_steps)
        worst = judge_full_batch(judge, args)

    overhead = (mine["rewards_s"] - plain["rewards_s"]) / plain["step_s"]
    rows = [("plain TRL (format+accuracy)", plain), ("embodied-r (+consistency)", mine)]
    print(
        f"\nGRPO step on {args.model}: {args.batch} completions x <= {args.max_completion_length} tokens, "
        f"mean of steps 2..{args.steps}"
    )
    print(f"{'run':30s} {'step s':>8s} {'generation':>11s} {'rewards':>8s} {'update':>8s}")
    for name, r in rows:
        print(
            f"{name:30s} {r['step_s']:8.2f} {r['generation_s']:11.2f} {r['rewards_s']:8.3f} {r['update_s']:8.2f}"
        )
    print(f"{'judge, full batch (worst case)':30s} {'':8s} {'':11s} {worst:8.3f}")
    print(f"\nconsistency reward cost in training steps: {100 * overhead:+.1f}% of the plain step time")
    print(
        f"worst case (every completion judged, maximal think): {100 * worst / plain['step_s']:.1f}% of the plain step"
    )
    print(
        f"step time ratio ours/plain: {mine['step_s'] / plain['step_s']:.2f} "
        "(generation and update vary with completion lengths, which differ between runs)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": vars(args) | {"json": str(args.json)},
                    "plain": plain,
                    "ours": mine,
                    "judge_full_batch_s": worst,
                    "consistency_overhead": overhead,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
