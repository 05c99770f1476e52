"""GRPO step time split into generation / rewards / update: embodied-r vs plain TRL, side by side.

- ``plain``: TRL's ``GRPOTrainer`` with only the format and accuracy rewards.
- ``ours``:  ``embodied_r.training`` (our trainer subclass, callbacks, stage schedule) with format,
  accuracy and the consistency reward active (stage-3 weights 0.1:0.7:0.2, reference = frozen copy of
  the policy). By default the correctness gate is off here, so every completion with a think block is
  judged: an upper bound on the judge's cost (with the gate only correct answers are judged).
- ``judge, full batch``: one reference call on every completion of a step with think texts as long as
  ``--max-completion-length``, the worst case for a step, timed directly.

Same model, data, seed and batch geometry for both runs. Goal: consistency adds <= 20% to the step.

With ``--shared-prefix`` the script instead times the policy update alone (log-probabilities, loss and
backward pass, ``trainer.compute_loss`` + ``backward``) of TRL's per-row path against the shared-prefix
path (training/shared_prefix.py), side by side on the same trainer, weights and batch, for each
``--shapes`` entry (PROMPTSxGENERATIONS; ~``--prompt-tokens``-token prompts of different lengths,
completions of up to ``--completion-tokens`` tokens, one truncated per group). A generation batch is
updated in consecutive micro-batches (``--micro-batch`` rows for the stock path, each of
``--shared-micro-batch`` for the shared one; whole groups or equal parts of one, rows shuffled as TRL
does); the summed update is the same for every micro-batch size. Goals: >= 2.5x at 2x4 and >= 4x at
4x8. It also prints the loss and gradient differences between the paths.

With ``--whole-step`` it times whole steps (generation, rewards, update and optimizer) of the demo's GRPO
recipe (format and accuracy rewards, one backward pass per generation batch) for the first ``--shapes``
entry, once with TRL's own sampling and per-row update and once with the shared prefix in both (each
group's prompt encoded once before sampling, training/prefix_generation.py, and in the update), on
``--data`` prompt rows.

With ``--self-check`` it runs the demo's recipe as ``--whole-step`` does, with both shared-prefix settings at
``auto`` (the default): the first step checks each fast path against TRL's and times both
(training/path_choice.py). It prints what that costs as a share of a 30-step run: the check and timing's
measured wall time (``cost_s`` in the run's record) against 30 x the mean time of the steps after the first
(which have no check) plus that cost, and step 1's excess over the later steps as a second estimate.

    python benchmarks/grpo_step.py                       # SmolLM2-135M, 3 steps each, 8 completions x 64 tokens
    python benchmarks/grpo_step.py --model PATH --steps 5 --json out.json
    python benchmarks/grpo_step.py --shared-prefix       # 2x4 and 4x8, 700-token prompts, 96-token completions
    python benchmarks/grpo_step.py --shared-prefix --shapes 2x4 --repeats 1 --prompt-tokens 300
    python benchmarks/grpo_step.py --whole-step --shapes 2x4 --data runs/learning/train.jsonl --steps 4
    python benchmarks/grpo_step.py --self-check --shapes 2x4 --completion-tokens 32 --steps 3

``--record PATH`` also writes what the mode run measured as JSON for the docs (benchmarks/bench_record.py):
the printed table's numbers under ``results``, the mode and its settings under ``settings``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_record import add_record_argument, write_record

RUN_STEPS = 30  # --self-check sets the check's cost against a run of this many steps


def plain_trl(model_path: str, dataset: Any, args: argparse.Namespace, out: Path) -> list[dict[str, float]]:
    from trl import GRPOConfig, GRPOTrainer

    from embodied_r.methods.accuracy import accuracy_reward
    from embodied_r.methods.format import format_reward
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
            # This measures what the judge costs, not what it is worth: no judge this CPU has passes the
            # probe (docs/consistency.md), and a weak judge costs the same forward passes.
            "judge": {"allow_weak": True},
        },
        source="benchmark",
    )
    trainer, context = build_trainer(recipe)
    trainer.train()
    judge = trainer.reward_funcs[2].judge
    return context["timer"].steps, judge


def parse_shape(shape: str) -> tuple[int, int]:
    """``"2x4"`` -> (prompts, completions per prompt)."""
    prompts, generations = (int(x) for x in shape.lower().split("x"))
    return prompts, generations


def whole_steps(model_path: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Whole GRPO steps of the demo's recipe (generation, rewards, update, optimizer) with TRL's sampling and
    per-row update and with the shared prefix in both, one trainer after the other on the same rows and seed."""
    from embodied_r.demo import DemoSize, training_recipe
    from embodied_r.training.grpo import build_trainer
    from embodied_r.training.recipe import recipe_from_dict

    prompts, generations = parse_shape(args.shapes.split(",")[0])
    results: dict[str, Any] = {}
    for label, shared in (("stock", False), ("shared", True)):
        recipe = training_recipe(out, DemoSize(0, 0, 0, args.steps, 0, args.completion_tokens), model_path)
        recipe.update(
            train_data=args.data or f"toy:{args.rows}", output_dir=str(out / label), dtype=args.dtype,
            format_warmup=None, rewards=["format", "accuracy"], reward_schedule=None, reward_weights=[0.2, 0.8],
            judge={"probe": None, "allow_weak": False}, report_to="none", save_strategy="no", sample_completions=0,
            num_generations=generations, per_device_train_batch_size=prompts * generations,
            shared_prefix_update=shared, shared_prefix_generation=shared,
            # The update is timed even where every reward is equal (a base model's are all 0): the passes cost
            # the same whatever the advantages, and the default `skip` would leave nothing to time.
            zero_variance_groups="update",
        )
        trainer, context = build_trainer(recipe_from_dict(recipe, source="benchmark"))
        trainer.train()
        # Why a batch took TRL's path, if any did (logged once per reason): the shared run should have none.
        results[label] = {**summarise(context["timer"].steps), "steps": context["timer"].steps,
                          "stock_path_reasons": trainer.stock_path_reasons}
        del trainer, context
        gc.collect()
    return results


def self_check_cost(model_path: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The demo's recipe for ``--steps`` steps with both shared-prefix settings at auto: the record of the
    first step's checks and timings, and the step times."""
    from embodied_r.demo import DemoSize, training_recipe
    from embodied_r.training.grpo import build_trainer
    from embodied_r.training.recipe import recipe_from_dict

    if args.steps < 2:
        raise SystemExit("--self-check needs --steps >= 2 (the steps after the first give the step time)")
    prompts, generations = parse_shape(args.shapes.split(",")[0])
    recipe = training_recipe(out, DemoSize(0, 0, 0, args.steps, 0, args.completion_tokens), model_path)
    recipe.update(
        train_data=args.data or f"toy:{args.rows}", output_dir=str(out / "auto"), dtype=args.dtype,
        format_warmup=None, rewards=["format", "accuracy"], reward_schedule=None, reward_weights=[0.2, 0.8],
        judge={"probe": None, "allow_weak": False}, report_to="none", save_strategy="no", sample_completions=0,
        num_generations=generations, per_device_train_batch_size=prompts * generations,
        shared_prefix_update="auto", shared_prefix_generation="auto",
    )
    trainer, context = build_trainer(recipe_from_dict(recipe, source="benchmark"))
    trainer.train()
    steps = context["timer"].steps
    record = trainer.fast_paths
    later = statistics.mean(s["step_s"] for s in steps[1:])
    check_s = sum(entry["cost_s"] for entry in record.values())
    return {"fast_paths": record, "steps": steps, "check_s": check_s, "step_s": later,
            "first_step_excess_s": steps[0]["step_s"] - later,
            "share_of_30_steps": check_s / (RUN_STEPS * later + check_s)}


def print_self_check(results: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"\nfirst-step self-check and timing (auto), shape {args.shapes.split(',')[0]}, data {args.data or 'toy'}, "
          f"dtype {args.dtype}, <= {args.completion_tokens} new tokens")
    from embodied_r.training.path_choice import describe_check

    for name, entry in results["fast_paths"].items():
        timings = entry["timings_s"] or {}
        print(f"shared_prefix_{name}: {entry['path']} (check {describe_check(entry['check'])}; "
              f"shared-prefix {timings.get('shared-prefix', float('nan')):.4f} s, per-row "
              f"{timings.get('per-row', float('nan')):.4f} s, {entry.get('timing_rounds')} round(s); "
              f"check + timing {entry['cost_s']:.2f} s)")
    later, check = results["step_s"], results["check_s"]
    print(f"step time (steps 2..{args.steps}, no check): {later:.2f} s; check + timing: {check:.2f} s "
          f"(step 1 took {results['first_step_excess_s']:+.2f} s more than the later steps)")
    print(f"self-check share of a 30-step run: {100 * results['share_of_30_steps']:.1f}% "
          f"({check:.2f} s of {RUN_STEPS * later + check:.1f} s)")


def print_whole_steps(results: dict[str, Any], args: argparse.Namespace) -> None:
    stock, shared = results["stock"], results["shared"]
    print(f"\nwhole GRPO steps, shape {args.shapes.split(',')[0]}, data {args.data or 'toy'}, dtype {args.dtype}, "
          f"<= {args.completion_tokens} new tokens, mean of steps 2..{args.steps}")
    print(f"{'update':26s} {'step s':>8s} {'generation':>11s} {'rewards':>8s} {'update':>8s}")
    for name, r in (("TRL (stock)", stock), ("shared prefix", shared)):
        print(f"{name:26s} {r['step_s']:8.2f} {r['generation_s']:11.2f} {r['rewards_s']:8.3f} {r['update_s']:8.2f}")
    print(f"speed-up: whole step {stock['step_s'] / shared['step_s']:.2f}x, "
          f"generation {stock['generation_s'] / shared['generation_s']:.2f}x, "
          f"update {stock['update_s'] / shared['update_s']:.2f}x")
    print(f"batches that took TRL's path in the shared run: {shared['stock_path_reasons'] or 'none'}")


def judge_full_batch(judge: Any, args: argparse.Namespace) -> float:
    """Seconds for one reference call on a whole step's completions with maximal think texts."""
    from embodied_r.judge.judges import question_for_judge
    from embodied_r.methods.embodied_r.toy import toy_prompt_rows

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


def update_members(tokenizer: Any, prompts: int, generations: int, args: argparse.Namespace,
                   seed: int = 0) -> tuple[list[tuple[list[int], Any, float]], int]:
    """A generation batch's rows (prompt tokens, completion tokens, advantage) in group order, and the
    prompt width.

    Prompts are toy questions repeated to about ``--prompt-tokens`` tokens (lengths spread by +-7 %, so
    they are left-padded); completions are random tokens of 50-100 % of ``--completion-tokens`` ending in
    EOS, except one full-length completion per group without EOS (truncated)."""
    import torch

    from embodied_r.methods.embodied_r.toy import toy_prompt_rows

    gen = torch.Generator().manual_seed(seed)
    width = args.completion_tokens
    targets = [int(args.prompt_tokens * (0.93 + 0.14 * i / max(1, prompts - 1))) for i in range(prompts)]
    members = []
    for row, target in zip(toy_prompt_rows(prompts, seed=seed), targets):
        text = tokenizer.apply_chat_template(row.prompt, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        tokens = (ids * (target // len(ids) + 1))[-target:]
        for g in range(generations):
            length = width if g == 0 else int(torch.randint(width // 2, width + 1, (1,), generator=gen))
            completion = torch.randint(100, tokenizer.vocab_size, (length,), generator=gen)
            if g != 0:
                completion[-1] = tokenizer.eos_token_id
            members.append((tokens, completion, float(torch.randn(1, generator=gen))))
    return members, max(targets)


def micro_batches(members: list[tuple[list[int], Any, float]], columns: int, size: int, pad_id: int,
                  width: int, seed: int = 0) -> list[dict[str, Any]]:
    """Consecutive slices of ``size`` rows (whole groups, or equal parts of one), each shuffled as TRL
    shuffles a generation batch. ``num_items_in_batch`` counts the whole generation batch, as in TRL, so
    the summed update is the same for every ``size``."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    total = sum(m[1].numel() for m in members)
    batches = []
    for start in range(0, len(members), size):
        chunk = members[start:start + size]
        order = torch.randperm(len(chunk), generator=gen).tolist()
        batches.append(_tensor_batch([chunk[i] for i in order], columns, width, pad_id, total))
    return batches


def _tensor_batch(members: list[tuple[list[int], Any, float]], columns: int, width: int, pad_id: int,
                  total_tokens: int) -> dict[str, Any]:
    import torch

    n = len(members)
    batch = {
        "prompt_ids": torch.full((n, columns), pad_id), "prompt_mask": torch.zeros(n, columns, dtype=torch.long),
        "completion_ids": torch.full((n, width), pad_id), "completion_mask": torch.zeros(n, width, dtype=torch.long),
    }
    for i, (tokens, completion, _) in enumerate(members):
        batch["prompt_ids"][i, columns - len(tokens):] = torch.tensor(tokens)
        batch["prompt_mask"][i, columns - len(tokens):] = 1
        batch["completion_ids"][i, : completion.numel()] = completion
        batch["completion_mask"][i, : completion.numel()] = 1
    batch["advantages"] = torch.tensor([m[2] for m in members])
    batch["num_items_in_batch"] = torch.tensor(total_tokens)
    return batch


def time_update(trainer: Any, batches: list[dict[str, Any]], shared: bool) -> tuple[float, float, list[Any]]:
    """(seconds, summed loss, gradients) of one update over ``batches`` with the chosen path."""
    trainer.shared_prefix_update = shared
    trainer.model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    total = 0.0
    for batch in batches:
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
        total += float(loss.detach())
    seconds = time.perf_counter() - start
    return seconds, total, [p.grad.detach().clone() for p in trainer.model.parameters() if p.grad is not None]


def _relative_difference(grads: list[Any], reference: list[Any]) -> float:
    import torch

    diff = torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(grads, reference)))
    return float(diff / torch.sqrt(sum((b**2).sum() for b in reference)))


def update_trainer(model_path: str, args: argparse.Namespace, out: Path) -> Any:
    """An ReasonerGRPOTrainer on the model (demo settings: beta 0, one iteration), for direct loss calls."""
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from embodied_r.training.data import load_prompt_rows, rows_to_dataset
    from embodied_r.training.trainer import ReasonerGRPOTrainer

    config = GRPOConfig(output_dir=str(out), use_cpu=True, bf16=False, report_to="none", num_generations=2,
                        per_device_train_batch_size=2, max_completion_length=args.completion_tokens,
                        beta=0.0, model_init_kwargs={"dtype": "float32"})
    return ReasonerGRPOTrainer(model=model_path, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                               args=config, train_dataset=rows_to_dataset(load_prompt_rows("toy:2")),
                               processing_class=AutoTokenizer.from_pretrained(model_path))


def shared_prefix_comparison(model_path: str, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    """Stock TRL update (``--micro-batch`` rows per backward) against the shared-prefix update (each of
    ``--shared-micro-batch``), per shape; best of ``--repeats`` each, runs alternating."""
    from embodied_r.training.host_memory import fix_mmap_threshold

    fix_mmap_threshold()  # as train() does on CPUs: freed activations go back to the OS
    trainer = update_trainer(model_path, args, out)
    tok = trainer.processing_class
    shared_sizes = [int(x) for x in str(args.shared_micro_batch or args.micro_batch).split(",")]
    results = []
    for shape in args.shapes.split(","):
        prompts, generations = parse_shape(shape)
        members, columns = update_members(tok, prompts, generations, args)
        runs = [(False, args.micro_batch)] + [(True, size) for size in shared_sizes]
        times: dict[tuple[bool, int], list[float]] = {run: [] for run in runs}
        outcome: dict[tuple[bool, int], tuple[float, list[Any]]] = {}
        for _ in range(args.repeats):
            for run in runs:  # alternating, so drifting machine load hits every path alike
                batches = micro_batches(members, columns, run[1], tok.pad_token_id, args.completion_tokens)
                seconds, loss, grads = time_update(trainer, batches, shared=run[0])
                times[run].append(seconds)
                outcome[run] = (loss, grads)
                del batches
        stock_run = runs[0]
        stock_loss, stock_grads = outcome.pop(stock_run)
        for run in runs[1:]:
            loss, grads = outcome.pop(run)
            results.append({
                "shape": shape, "rows": len(members), "prompt_columns": columns,
                "completion_tokens": args.completion_tokens, "stock_micro_batch": stock_run[1],
                "shared_micro_batch": run[1], "stock_s": min(times[stock_run]), "shared_s": min(times[run]),
                "stock_runs_s": times[stock_run], "shared_runs_s": times[run],
                "speedup": min(times[stock_run]) / min(times[run]),
                "loss_abs_diff": abs(loss - stock_loss), "grad_rel_diff": _relative_difference(grads, stock_grads),
            })
        del stock_grads
    return results


def print_shared_prefix(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nGRPO policy update on {args.model} (log-probs + loss + backward, fp32, {args.threads or 'default'} "
          f"thread(s)), prompts ~{args.prompt_tokens} tokens, completions <= {args.completion_tokens}, "
          f"best of {args.repeats}")
    print(f"{'shape':6s} {'rows':>5s} {'stock rows/pass':>16s} {'shared rows/pass':>17s} {'stock s':>8s} "
          f"{'shared s':>9s} {'speed-up':>9s} {'|loss diff|':>12s} {'grad rel diff':>14s}")
    for r in results:
        print(f"{r['shape']:6s} {r['rows']:5d} {r['stock_micro_batch']:16d} {r['shared_micro_batch']:17d} "
              f"{r['stock_s']:8.2f} {r['shared_s']:9.2f} {r['speedup']:8.2f}x {r['loss_abs_diff']:12.2e} "
              f"{r['grad_rel_diff']:14.2e}")


def summarise(steps: list[dict[str, float]]) -> dict[str, float]:
    # The first step includes one-time warm-up (allocations, lazy init); report the rest when possible.
    measured = steps[1:] if len(steps) > 1 else steps
    return {
        key: statistics.mean(s[key] for s in measured)
        for key in ("step_s", "generation_s", "rewards_s", "update_s")
    }


# ---------------------------------------------------------------------------------------------------------
# The record (--record): each mode's printed numbers and the settings they were measured at
# ---------------------------------------------------------------------------------------------------------

STEP_PARTS = ("step_s", "generation_s", "rewards_s", "update_s")


def shape_settings(shape: str) -> dict[str, Any]:
    prompts, generations = parse_shape(shape)
    return {"shape": shape, "prompts": prompts, "generations": generations}


def record_settings(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """What ``mode`` measured at: the options it reads (a record of one mode names no other mode's)."""
    common = {"mode": mode, "model": args.model, "threads": args.threads}
    if mode == "consistency":
        return {**common, "steps": args.steps, "rows": args.rows, "num_generations": args.num_generations,
                "batch": args.batch, "max_completion_length": args.max_completion_length, "gate": args.gate}
    if mode == "shared_prefix":
        return {**common, "shapes": [shape_settings(shape) for shape in args.shapes.split(",")],
                "prompt_tokens": args.prompt_tokens, "completion_tokens": args.completion_tokens,
                "micro_batch": args.micro_batch, "repeats": args.repeats,
                "shared_micro_batch": [int(x) for x in str(args.shared_micro_batch or args.micro_batch).split(",")]}
    return {**common, **shape_settings(args.shapes.split(",")[0]), "data": args.data or f"toy:{args.rows}",
            "steps": args.steps, "completion_tokens": args.completion_tokens, "dtype": args.dtype}


def record_results(mode: str, results: Any) -> dict[str, Any]:
    """The numbers ``print_*`` shows for the results of ``mode`` (shared_prefix, whole_step or self_check;
    per-step lists and raw repeats left out)."""
    if mode == "shared_prefix":
        keys = ("rows", "stock_micro_batch", "shared_micro_batch", "stock_s", "shared_s", "speedup",
                "loss_abs_diff", "grad_rel_diff")
        return {"shapes": [{**shape_settings(r["shape"]), **{key: r[key] for key in keys}} for r in results]}
    if mode == "whole_step":
        stock, shared = results["stock"], results["shared"]
        return {"runs": [{"run": name, **{key: r[key] for key in STEP_PARTS}}
                         for name, r in (("TRL (stock)", stock), ("shared prefix", shared))],
                "speedup": {part: stock[f"{part}_s"] / shared[f"{part}_s"]
                            for part in ("step", "generation", "update")},
                "stock_path_reasons": [str(reason) for reason in shared["stock_path_reasons"] or []]}
    later, check = results["step_s"], results["check_s"]  # self_check
    paths = [{"name": name, "path": entry["path"], "check": entry["check"],
              "shared_prefix_s": (entry["timings_s"] or {}).get("shared-prefix"),
              "per_row_s": (entry["timings_s"] or {}).get("per-row"), "rounds": entry.get("timing_rounds"),
              "cost_s": entry["cost_s"]} for name, entry in results["fast_paths"].items()]
    return {"fast_paths": paths, "step_s": later, "check_s": check,
            "first_step_excess_s": results["first_step_excess_s"], "run_steps": RUN_STEPS,
            "run_s": RUN_STEPS * later + check,
            "share_of_30_steps_pct": 100 * results["share_of_30_steps"]}


def consistency_results(plain: dict[str, float], mine: dict[str, float], worst: float,
                        overhead: float) -> dict[str, Any]:
    """The default mode's printed numbers: both runs' step parts, the judge's worst case and the shares."""
    return {"runs": [{"run": name, **{key: r[key] for key in STEP_PARTS}}
                     for name, r in (("plain TRL (format+accuracy)", plain), ("embodied-r (+consistency)", mine))],
            "judge_full_batch_s": worst, "consistency_overhead_pct": 100 * overhead,
            "worst_case_pct": 100 * worst / plain["step_s"], "step_ratio": mine["step_s"] / plain["step_s"]}


def main(argv: list[str] | None = None) -> None:
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
    parser.add_argument("--shared-prefix", action="store_true",
                        help="time the stock TRL update against the shared-prefix update instead")
    parser.add_argument("--whole-step", action="store_true",
                        help="time whole steps of the demo's recipe with TRL's sampling and update and with the shared "
                        "prefix in both (the first --shapes entry, --completion-tokens, --data rows)")
    parser.add_argument("--self-check", action="store_true",
                        help="run the demo's recipe with the shared-prefix settings at auto and print the first "
                        "step's self-check and timing cost as a share of a 30-step run")
    parser.add_argument("--data", default=None,
                        help="with --whole-step / --self-check: prompt rows (.jsonl; default: toy rows)")
    parser.add_argument("--dtype", default="float32",
                        help="with --whole-step / --self-check: auto | bfloat16 | float32")
    parser.add_argument("--shapes", default="2x4,4x8", help="PROMPTSxGENERATIONS, comma-separated")
    parser.add_argument("--prompt-tokens", type=int, default=700)
    parser.add_argument("--completion-tokens", type=int, default=96, help="the demo's max_completion_length")
    parser.add_argument("--micro-batch", type=int, default=2,
                        help="rows per backward pass of the stock path (the demo's per_device_train_batch_size; "
                        "4 rows of ~800 tokens outgrow a 12 GiB address-space cap on CPU)")
    parser.add_argument("--shared-micro-batch", default="2,8",
                        help="rows per backward pass of the shared-prefix path, comma-separated (each is timed)")
    parser.add_argument("--repeats", type=int, default=2, help="updates timed per path and shape (best is shown)")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    import torch

    from embodied_r.inference.models import resolve_model_path
    from embodied_r.training.data import load_prompt_rows, rows_to_dataset

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model_path = resolve_model_path(args.model)
    for wanted, key, measure, show in ((args.whole_step, "whole_step", whole_steps, print_whole_steps),
                                       (args.self_check, "self_check", self_check_cost, print_self_check),
                                       (args.shared_prefix, "shared_prefix", shared_prefix_comparison,
                                        print_shared_prefix)):
        if wanted:
            with tempfile.TemporaryDirectory() as tmp:
                results = measure(model_path, args, Path(tmp))
            show(results, args)
            if args.json:
                args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, key: results},
                                                indent=2, default=str))
            if args.record is not None:
                write_record(args.record, "grpo_step", argv, record_settings(key, args), record_results(key, results))
            return
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
    if args.record is not None:
        write_record(args.record, "grpo_step", argv, record_settings("consistency", args),
                     consistency_results(plain, mine, worst, overhead))
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
