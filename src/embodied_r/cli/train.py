"""``embodied-r train --recipe FILE [--set key=value ...] [--resume]``: GRPO training of the reasoner."""

from __future__ import annotations

import argparse
from typing import Any

ORDER = 40


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "train",
        help="train the reasoner with GRPO (format / accuracy / consistency rewards, staged weights)",
        description="Train a small LM with GRPO (TRL) on prompt rows. Recipe keys are TRL GRPOConfig fields "
        "(output_dir, max_steps, num_generations, learning_rate, ...) plus model, train_data, eval_data, "
        "rewards, reward_schedule, reference_model, lora, eval_every_steps. See docs/training.md.",
    )
    parser.add_argument(
        "--recipe", required=True, help="YAML recipe, e.g. recipes/embodied_r/cpu_smollm2.yaml"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe key (YAML value; dots for nested keys, e.g. lora.r=8); repeatable",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest checkpoint-* in output_dir (same stage, optimizer, data order)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate the recipe and print the resolved keys, without loading models or data",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.training.recipe import RecipeError, dump_recipe, load_recipe

    try:
        recipe = load_recipe(args.recipe, args.overrides)
    except RecipeError as exc:
        raise CLIError(str(exc)) from exc
    if args.check:
        console().print(dump_recipe(recipe))
        return 0

    from embodied_r.inference.judges import JudgeError
    from embodied_r.training.grpo import train

    try:
        summary = train(recipe, resume=args.resume)
    except (RecipeError, JudgeError) as exc:
        raise CLIError(str(exc)) from exc
    last = summary.get("last_log", {})
    rows = [
        ["global step", summary["global_step"]],
        ["epoch", summary["epoch"]],
        ["train rows", summary["train_rows"]],
        ["final model", summary["final_model"]],
    ]
    rows += [
        [key, value]
        for key, value in last.items()
        if key.startswith(("rewards/", "reward", "completions/mean"))
    ]
    for result in summary.get("eval", []):
        rows.append([f"held-out score @ step {result['step']}", result["score"]])
    print_table(f"GRPO run in {summary['output_dir']}", ["", "value"], rows)
    return 0
