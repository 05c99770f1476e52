"""The paper recipe's shape on one GPU, with random weights: rollout speed, update time and peak memory.

No weights can be downloaded on a lent GPU machine, so the policy is a Qwen2.5-3B-Instruct architecture
built from its config with random weights (a stand-in for speed and memory, not for answers). Prompts
are synthetic Embodied-R prompts of about ``--prompt-tokens`` tokens. The run uses the paper recipe's
geometry (8 completions per prompt, rewards format + accuracy + consistency with the policy as judge,
bf16) for ``--steps`` steps, once with the shared prefix (in sampling and in the update) and once with
TRL's own sampling and per-row update, and, where vLLM imports, once more with vLLM colocate rollouts.
For each it prints generation tokens/s, update seconds per step and peak GPU memory.

    python benchmarks/gpu_check.py                   # on the GPU machine (benchmarks/gpu_check.sh)
    python benchmarks/gpu_check.py --tiny --steps 1  # the same path with a 2-layer model, on a CPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the offline tokenizer builder

QWEN25_3B = {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 16,
             "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
             "rope_theta": 1000000.0, "tie_word_embeddings": True, "rms_norm_eps": 1e-6}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 4096, "tie_word_embeddings": True}


def build_model(folder: Path, tiny: bool) -> Path:
    """A random-weight Qwen2 model of the chosen shape with an offline byte-level tokenizer."""
    import torch
    from tiny_models import build_tiny_tokenizer
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tiny_tokenizer(vocab_size=400)  # byte-level BPE with a ChatML template: no download
    config = Qwen2Config(**(TINY if tiny else QWEN25_3B), pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    dtype = torch.float32 if tiny else torch.bfloat16
    device = "cuda" if torch.cuda.is_available() else "cpu"  # random init of 3B weights: seconds on a GPU
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(dtype)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_prompts(path: Path, model: Path, rows: int, prompt_tokens: int) -> Path:
    """Embodied-R-shaped prompt rows whose frame descriptions are cut to about ``prompt_tokens`` tokens of
    the model's tokenizer (a byte-level one with a small vocabulary: more tokens per word than Qwen's)."""
    from transformers import AutoTokenizer

    from embodied_r.core.io import write_jsonl
    from embodied_r.training.data import toy_prompt_rows

    tokenizer = AutoTokenizer.from_pretrained(model)
    sentence = "the sofa stays on the left while the camera turns right past the door. "
    ids = tokenizer(sentence * (prompt_tokens // 4 + 1))["input_ids"][:prompt_tokens]
    filler = tokenizer.decode(ids)
    out = []
    for row in toy_prompt_rows(rows):
        row.prompt[-1]["content"] = f"Frame descriptions: {filler}\n{row.prompt[-1]['content']}"
        out.append(row.to_dict())
    write_jsonl(path, out)
    return path


def run(model: Path, data: Path, out: Path, args: argparse.Namespace, shared_prefix: bool,
        use_vllm: bool) -> dict[str, Any]:
    import torch

    from embodied_r.training.grpo import build_trainer
    from embodied_r.training.recipe import recipe_from_dict

    recipe = {"model": str(model), "dtype": "float32" if args.tiny else "bfloat16", "train_data": str(data),
              "output_dir": str(out), "rewards": ["format", "accuracy", {"consistency": {"gate": False}}],
              "reward_schedule": [{"start": 1, "weights": {"format": 0.1, "accuracy": 0.7, "consistency": 0.2}}],
              "reference_model": "policy", "allow_weak_judge": True, "judge_probe": {"cases": 16},
              "shared_prefix_update": shared_prefix, "shared_prefix_generation": shared_prefix,
              "max_steps": args.steps, "num_generations": 8,
              "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1,
              "max_completion_length": args.completion_tokens, "learning_rate": 5e-7, "beta": 0.001,
              "save_strategy": "no", "logging_steps": 1, "seed": 0, "report_to": [], "sample_completions": 0,
              "temperature": 1.0}
    if use_vllm:
        recipe.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.4)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    trainer, context = build_trainer(recipe_from_dict(recipe, source="gpu_check"))
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    steps = context["timer"].steps
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    # The first step pays CUDA's warm-up (allocator, kernel selection): it is left out of both rates.
    timed = slice(1, None) if len(steps) > 1 else slice(None)
    generated = sum(lengths[timed]) * 8  # 8 completions per step
    generation_s = sum(s["generation_s"] for s in steps[timed])
    return {"shared_prefix": shared_prefix, "vllm": use_vllm, "steps": len(steps), "wall_s": round(wall, 1),
            "generation_s_per_step": [round(s["generation_s"], 2) for s in steps],
            "update_s_per_step_all": [round(s["update_s"], 2) for s in steps],
            "generation_tokens_per_s": round(generated / generation_s, 1) if generation_s else None,
            "update_s_per_step": round(statistics.median(s["update_s"] for s in steps[timed]), 2) if steps else None,
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (checks the script on a CPU)")
    parser.add_argument("--steps", type=int, default=6, help="the first is warm-up, left out of the rates")
    parser.add_argument("--prompt-tokens", type=int, default=1800, help="about the paper's prompt length")
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import torch

    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --tiny to check the script on a CPU")
    try:
        import vllm  # noqa: F401
        have_vllm = torch.cuda.is_available()
    except ImportError:
        have_vllm = False
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", args.tiny)
        data = write_prompts(Path(tmp) / "prompts.jsonl", model, 16, 60 if args.tiny else args.prompt_tokens)
        for shared, use_vllm in ((False, False), (True, False), *([(True, True)] if have_vllm else [])):
            results.append(run(model, data, Path(tmp) / f"run_{shared}_{use_vllm}", args, shared, use_vllm))
            print(json.dumps(results[-1]), flush=True)
    print("\n| rollouts | update | generation tokens/s | update s/step | peak GPU GiB | wall s |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {'vLLM colocate' if r['vllm'] else 'transformers'} | "
              f"{'shared-prefix' if r['shared_prefix'] else 'TRL per-row'} | {r['generation_tokens_per_s']} | "
              f"{r['update_s_per_step']} | {r['peak_gpu_gib']} | {r['wall_s']} |")
    if not have_vllm:
        print("\nvLLM is not importable here: colocate rollouts not measured.")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": results},
                                        indent=2) + "\n")


if __name__ == "__main__":
    main()
