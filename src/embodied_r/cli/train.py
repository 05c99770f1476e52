"""``embodied-r train --recipe FILE [--set key=value ...] [--resume]``: GRPO training of the reasoner."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "train the reasoner with GRPO (format / accuracy / consistency rewards, staged weights)"
DESCRIPTION = ("Train a small LM with GRPO (TRL) on prompt rows. Recipe keys are TRL GRPOConfig fields "
               "(output_dir, max_steps, num_generations, learning_rate, ...) plus method, model, train_data, "
               "eval_data, rewards, reward_schedule, judge, lora, eval_every_steps. See docs/training.md.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from embodied_r.cli.common import add_method_argument
    from embodied_r.methods import METHODS

    papers = "; ".join(f"{m.name}: {m.paper_recipe}" for m in METHODS if m.paper_recipe)
    parser.add_argument("--recipe", required=True,
                        help=f"YAML recipe, e.g. recipes/embodied_r/cpu_smollm2.yaml; each method's paper recipe "
                        f"(Method.paper_recipe): {papers}")
    add_method_argument(parser, "; the same as the recipe key method (--set method=...): its paper rewards and "
                        "reward_schedule are the defaults of a recipe that sets none")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a recipe key (YAML value; dots for nested keys, e.g. lora.r=8); repeatable")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint-* in output_dir (same stage, optimizer, data order)")
    parser.add_argument("--warmup-only", action="store_true",
                        help="run the recipe's format warm-up alone and stop (output_dir/warmup/model); a later "
                        "train with the same recipe reuses it")
    parser.add_argument("--check", action="store_true",
                        help="a dress rehearsal: check every value, the batch geometry for --num-processes and "
                        "TRL's GRPOConfig, print the resolved recipe (YAML) and the global batch; loads no model "
                        "or data")
    parser.add_argument("--check-paths", action="store_true",
                        help="load the model and the first batch, check the shared-prefix update and sampling "
                        "against TRL's per-row paths and time both (as a run's first step does with "
                        "shared_prefix_update / shared_prefix_generation: auto), print the result and stop; "
                        "exit status 1 when a check fails. Trains nothing")
    parser.add_argument("--num-processes", type=int, default=None, metavar="N",
                        help="with --check: the processes (GPUs) the run will have (default: the launcher's, "
                        "else 1)")


def run(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import CLIError, method_from_args, print_table
    from embodied_r.training.recipe import RecipeError, dump_recipe, launcher_processes, load_recipe

    processes = args.num_processes or launcher_processes()
    if processes < 1:
        raise CLIError(f"--num-processes must be positive, got {processes}")
    overrides = list(args.overrides)
    if method_from_args(args) is not None:  # imported and registered here, so its errors name --method
        overrides.append(f"method={args.method}")
    try:
        recipe = load_recipe(args.recipe, overrides, num_processes=processes)
    except RecipeError as exc:
        raise CLIError(str(exc)) from exc
    if args.check:
        import sys

        from embodied_r.training.grpo import rehearse
        from embodied_r.training.recipe import PAPER_GLOBAL_BATCH

        try:
            batch = rehearse(recipe, processes)
        except RecipeError as exc:
            raise CLIError(str(exc)) from exc
        sys.stdout.write(dump_recipe(recipe))  # plain, unwrapped: the output is a valid recipe file
        sys.stdout.write(
            f"# check passed for {processes} process(es): {batch['completions_per_step']} completions "
            f"({batch['prompts_per_step']} prompts) per optimizer step; the paper: {PAPER_GLOBAL_BATCH} "
            f"completions (4 prompts x 8) on 8 GPUs\n"
        )
        return 0

    from embodied_r.judge.judges import JudgeError
    from embodied_r.training.grpo import train, warm_up_only

    if args.check_paths:
        return _check_paths(recipe)

    if args.warmup_only:
        from embodied_r.training.warmup import WarmupError

        try:
            folder = warm_up_only(recipe)
        except (RecipeError, WarmupError) as exc:
            raise CLIError(str(exc)) from exc
        print_table("format warm-up", ["", "value"], [["model", folder]])
        return 0

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
    for name, entry in (summary.get("fast_paths") or {}).items():  # training/path_choice.py
        rows.append([f"shared_prefix_{name}", f"{entry['path'] or 'not decided'} ({entry['setting']})"])
    for result in summary.get("eval", []):
        rows.append([f"held-out score @ step {result['step']}", result["score"]])
    print_table(f"GRPO run in {summary['output_dir']}", ["", "value"], rows)
    return 0


def _check_paths(recipe: Any) -> int:
    """``train --check-paths``: the fast paths' checks and timings on the first batch, as a table."""
    from embodied_r.cli.common import CLIError, print_table
    from embodied_r.judge.judges import JudgeError
    from embodied_r.training.grpo import check_paths
    from embodied_r.training.path_choice import describe_check
    from embodied_r.training.recipe import RecipeError

    try:
        record = check_paths(recipe)
    except (RecipeError, JudgeError) as exc:
        raise CLIError(str(exc)) from exc
    rows = []
    for name, entry in record.items():
        timings = entry.get("timings_s") or {}
        rows.append([f"shared_prefix_{name}", entry["setting"], entry["path"] or "-", describe_check(entry["check"]),
                     *(f"{timings[k]:.4g}" if k in timings else "-" for k in ("shared-prefix", "per-row")),
                     entry["reason"]])
    print_table("fast paths on the first batch", ["key", "setting", "path", "check", "shared-prefix s", "per-row s",
                                                  "why"], rows)
    failed = [name for name, entry in record.items() if entry["check"] and not entry["check"]["passed"]]
    return 1 if failed else 0
