"""Peak memory of one GRPO policy update: a whole micro-batch (TRL's row-counted batch) against the same
micro-batch differentiated in token-budget slices (``max_train_batch_tokens``, training/token_budget.py),
and those slices with activation checkpointing (``checkpoint_over_tokens``). ``train`` itself checkpoints
every batch by default, as TRL's GRPOConfig does, so the first two show the update without it.

Each configuration runs in a fresh process (so one's freed memory cannot hide another's peak): load the
model, build one micro-batch of ``--shape`` (PROMPTSxGENERATIONS) with ~``--prompt-tokens``-token prompts
(the CPU recipes' cap, 4,096) and completions of up to ``--completion-tokens``, then one
``compute_loss`` + backward on the shared-prefix path. It prints the peak resident memory of each
process, its rise over the loaded model, the ratio, and the gradient difference between the two.

    python benchmarks/train_memory.py                          # 2x4 at 4,096 prompt tokens: whole, 8192, 8192+ckpt
    python benchmarks/train_memory.py --shape 4x4 --budget 4096

``--record PATH`` also writes the numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_record import add_record_argument, write_record
from grpo_step import micro_batches, parse_shape, update_members, update_trainer


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One update in this process; returns its numbers (and saves the gradients for the comparison)."""
    # An address-space cap, so that a configuration that needs more fails here instead of waking the
    # kernel's OOM killer (which may pick another process).
    cap = int(args.cap_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    import torch

    from embodied_r.inference.models import resolve_model_path
    from embodied_r.training.host_memory import fix_mmap_threshold

    fix_mmap_threshold()  # as train() does on CPUs
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = update_trainer(resolve_model_path(args.model), args, Path(tmp))
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1  # what Trainer sets at the start of a step
        trainer.max_train_batch_tokens = args.child_budget or None
        trainer.checkpoint_over_tokens = args.child_checkpoint or None
        tok = trainer.processing_class
        prompts, generations = (int(x) for x in args.shape.lower().split("x"))
        members, columns = update_members(tok, prompts, generations, args)
        (batch,) = micro_batches(members, columns, len(members), tok.pad_token_id, args.completion_tokens)
        loaded = peak_gib()
        start = time.perf_counter()
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
        seconds = time.perf_counter() - start
    torch.save([p.grad for p in trainer.model.parameters() if p.grad is not None], args.child_grads)
    return {"budget": args.child_budget or None, "checkpoint_over_tokens": args.child_checkpoint or None,
            "rows": len(members), "prompt_columns": columns,
            "loaded_gib": loaded, "peak_gib": peak_gib(), "seconds": seconds, "loss": float(loss)}


def run_child(args: argparse.Namespace, budget: int, grads: Path, checkpoint: int = 0) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child-budget", str(budget), "--child-grads", str(grads),
            "--child-checkpoint", str(checkpoint),
            "--shape", args.shape, "--prompt-tokens", str(args.prompt_tokens),
            "--completion-tokens", str(args.completion_tokens), "--model", args.model]
    argv += ["--cap-gib", str(args.cap_gib)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        if "can't allocate memory" in done.stderr or "MemoryError" in done.stderr:
            return {"budget": budget or None,
                    "failed": f"out of memory under the {args.cap_gib:g} GiB address-space cap"}
        raise SystemExit(f"update with budget {budget or 'none'} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def gradient_difference(path: Path, reference: Path) -> float:
    """Relative L2 difference of two saved gradient lists."""
    import torch

    a, b = torch.load(path), torch.load(reference)
    return float(torch.sqrt(sum(((x - y) ** 2).sum() for x, y in zip(a, b))) / torch.sqrt(sum((y**2).sum() for y in b)))


def run_row(name: str, run: dict[str, Any], whole: dict[str, Any], difference: float | None) -> dict[str, Any]:
    """One printed line of the table as the record holds it: the failure, or the peak, its rise over the
    loaded model and the seconds, and against the whole micro-batch where both ran."""
    if "failed" in run:
        return {"run": name, "failed": run["failed"]}
    row = {"run": name, "peak_gib": run["peak_gib"], "rise_gib": run["peak_gib"] - run["loaded_gib"],
           "seconds": run["seconds"]}
    if difference is not None:
        row.update(peak_lower_x=whole["peak_gib"] / run["peak_gib"], loss_abs_diff=abs(whole["loss"] - run["loss"]),
                   grad_rel_diff=difference)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--shape", default="2x4", help="PROMPTSxGENERATIONS of the micro-batch (the demo's: 2x4)")
    parser.add_argument("--prompt-tokens", type=int, default=4096, help="the CPU recipes' max_prompt_tokens")
    parser.add_argument("--completion-tokens", type=int, default=64)
    parser.add_argument("--budget", type=int, default=8192, help="max_train_batch_tokens of the sliced run")
    parser.add_argument("--checkpoint-over", type=int, default=2048,
                        help="checkpoint_over_tokens of the third run (slices with activation checkpointing)")
    parser.add_argument("--cap-gib", type=float, default=16.0,
                        help="address-space cap of each update's process (a run over it is reported as such)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child-budget", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-grads", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-checkpoint", type=int, default=0, help=argparse.SUPPRESS)
    add_record_argument(parser)
    args = parser.parse_args(argv)
    if args.child_budget is not None:
        print(json.dumps(child(args)))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        whole = run_child(args, 0, Path(tmp) / "whole.pt")
        sliced = run_child(args, args.budget, Path(tmp) / "sliced.pt")
        checkpointed = run_child(args, args.budget, Path(tmp) / "checkpointed.pt", args.checkpoint_over)
        differences = {name: gradient_difference(Path(tmp) / f"{name}.pt", Path(tmp) / "whole.pt")
                       for name, r in (("sliced", sliced), ("checkpointed", checkpointed))
                       if "failed" not in r and "failed" not in whole}
    print(f"\nGRPO policy update, {args.model} fp32, micro-batch {args.shape}, prompts ~{args.prompt_tokens} "
          f"tokens, completions <= {args.completion_tokens}; each in its own process under a {args.cap_gib:g} GiB cap")
    print(f"{'run':44s} {'peak GiB':>9s} {'rise GiB':>9s} {'seconds':>8s}  vs whole")
    runs = (("whole micro-batch (TRL)", whole, None),
            (f"slices of <= {args.budget} tokens", sliced, "sliced"),
            (f"slices + checkpointing over {args.checkpoint_over} tokens", checkpointed, "checkpointed"))
    for name, r, key in runs:
        if "failed" in r:
            print(f"{name:44s} {r['failed']}")
            continue
        line = f"{name:44s} {r['peak_gib']:9.2f} {r['peak_gib'] - r['loaded_gib']:9.2f} {r['seconds']:8.1f}"
        if key in differences:
            line += (f"  peak {whole['peak_gib'] / r['peak_gib']:.2f}x lower, |loss diff| "
                     f"{abs(whole['loss'] - r['loss']):.2e}, gradient rel. diff {differences[key]:.2e}")
        print(line)
    if args.record is not None:
        prompts, generations = parse_shape(args.shape)
        settings = {"model": args.model, "shape": args.shape, "prompts": prompts, "generations": generations,
                    "prompt_tokens": args.prompt_tokens, "completion_tokens": args.completion_tokens,
                    "budget": args.budget, "checkpoint_over": args.checkpoint_over, "cap_gib": args.cap_gib}
        results = {"runs": [run_row(name, r, whole, differences.get(key) if key else None) for name, r, key in runs]}
        write_record(args.record, "train_memory", argv, settings, results)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "whole": whole,
                                         "sliced": sliced, "checkpointed": checkpointed,
                                         "grad_rel_diff": differences}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
