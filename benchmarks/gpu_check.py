"""The paper recipe's shape on one GPU, with random weights: rollout speed, update time and peak memory.

No weights can be downloaded on a lent GPU machine, so the policy is a Qwen2.5-3B-Instruct architecture
built from its config with random weights (a stand-in for speed and memory, not for answers). Prompts
are synthetic Embodied-R prompts of about ``--prompt-tokens`` tokens. The run uses the paper recipe's
geometry (8 completions per prompt, rewards format + accuracy + consistency with the policy as judge,
bf16) for ``--steps`` steps, once with the shared prefix (in sampling and in the update) and once with
TRL's own sampling and per-row update, and, where vLLM imports, once more with vLLM colocate rollouts.
For each it prints generation tokens/s, update seconds per step and peak GPU memory.

The VL arm (the paper's other arm: a vision-language policy trained on the key frames themselves) then
runs the same geometry with a random-weight Qwen2.5-VL-3B architecture on key-frame rows of ``--vl-frames``
frames of ``--vl-max-pixels`` pixels each (default 4 frames of 448 x 448 = 200,704 pixels, build-prompts'
default budget: 256 image tokens a frame), through TRL's multi-image path with transformers generation.

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
# Qwen2.5-VL-3B-Instruct's architecture: the Qwen2.5-3B decoder with multimodal rotary sections, and its
# 32-block vision tower (window attention, full attention every 8th block) merging 2 x 2 patches of 14 pixels.
QWEN25_VL_3B_VISION = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                       "out_hidden_size": 2048, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}
TINY_VISION = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
               "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 56,
               "fullatt_block_indexes": [0]}


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
    from embodied_r.methods.embodied_r.toy import toy_prompt_rows

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
              "judge": {"model": "policy", "allow_weak": True, "probe": {"cases": 16}},
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


# ---------------------------------------------------------------------------------------------------
# The VL arm: a vision-language policy on key-frame rows
# ---------------------------------------------------------------------------------------------------


def build_vl_model(folder: Path, tiny: bool, max_pixels: int) -> tuple[Path, Any]:
    """A random-weight Qwen2.5-VL(-3B) saved to ``folder``, and its processor (offline tokenizer, PIL image
    processor keeping frames of ``max_pixels`` as they are)."""
    import torch
    from tiny_models import build_tiny_qwen25_vl_processor
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    processor = build_tiny_qwen25_vl_processor()
    processor.image_processor.max_pixels = max_pixels
    processor.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": max_pixels}
    tokenizer = processor.tokenizer
    text = {**(TINY if tiny else QWEN25_3B), "max_position_embeddings": 4096 if tiny else 128000,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3] if tiny else [16, 24, 24]},
            "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    ids = {name: tokenizer.convert_tokens_to_ids(f"<|{token}|>") for name, token in
           (("image_token_id", "image_pad"), ("video_token_id", "video_pad"),
            ("vision_start_token_id", "vision_start"), ("vision_end_token_id", "vision_end"))}
    config = Qwen2_5_VLConfig(text_config=text, vision_config=TINY_VISION if tiny else QWEN25_VL_3B_VISION, **ids,
                              eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                              tie_word_embeddings=True)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration(config).to(torch.float32 if tiny else torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, processor


def write_keyframe_rows(path: Path, rows: int, frames: int, max_pixels: int) -> Path:
    """Key-frame rows as ``build-prompts --input keyframes`` writes them: ``frames`` distinct frames of at most
    ``max_pixels`` pixels (a 4:3 frame fitted to the budget) each after its frame line, and a choice question."""
    import random

    from PIL import Image

    from embodied_r.core.io import write_jsonl
    from embodied_r.methods.embodied_r.keyframe_images import budget_size
    from embodied_r.methods.embodied_r.keyframe_rows import keyframe_user_content
    from embodied_r.methods.embodied_r.prompts import OFFICIAL_SYSTEM_PROMPT

    size = budget_size(640, 480, max_pixels, 28)
    (path.parent / "frames").mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    options = ["A. turn left", "B. turn right", "C. move forward", "D. move backward"]
    out = []
    for row in range(rows):
        shown = []
        for index in range(frames):
            name = f"frames/{row:02d}_{index}.png"
            Image.effect_noise(size, 40 + 10 * index).convert("RGB").save(path.parent / name)
            shown.append({"index": index, "action": None if index == 0 else "Rotate left", "image": name})
        content = keyframe_user_content(shown, "Which action did you take last?", options, "official-v1")
        out.append({"id": f"kf-{row}", "task": "last_action", "answer": "ABCD"[rng.randrange(4)],
                    "answer_type": "choice", "options": options,
                    "meta": {"prompt_version": "official-v1", "input": "keyframes"},
                    "prompt": [{"role": "system", "content": OFFICIAL_SYSTEM_PROMPT},
                               {"role": "user", "content": content}]})
    write_jsonl(path, out)
    return path


def run_vl(model: Path, processor: Any, data: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from embodied_r.core.image_files import ImageSizes
    from embodied_r.core.io import read_jsonl
    from embodied_r.inference.image_context import ImageTokenCounter
    from embodied_r.training.grpo import build_trainer
    from embodied_r.training.recipe import recipe_from_dict

    recipe = {"model": str(model), "dtype": "float32" if args.tiny else "bfloat16", "train_data": str(data),
              "output_dir": str(out), "rewards": ["format", "accuracy", {"consistency": {"gate": False}}],
              "reward_schedule": [{"start": 1, "weights": {"format": 0.1, "accuracy": 0.7, "consistency": 0.2}}],
              "judge": {"model": "policy", "allow_weak": True, "probe": {"cases": 16}},
              "max_steps": args.vl_steps, "num_generations": 8, "per_device_train_batch_size": 8,
              "gradient_accumulation_steps": 1, "max_completion_length": args.completion_tokens,
              "learning_rate": 5e-7, "beta": 0.001, "save_strategy": "no", "logging_steps": 1, "seed": 0,
              "report_to": [], "sample_completions": 0, "temperature": 1.0, "gradient_checkpointing": not args.tiny}
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    trainer, context = build_trainer(recipe_from_dict(recipe, source="gpu_check (VL arm)"), processing_class=processor)
    prompt_tokens = len(ImageTokenCounter(processor, ImageSizes(data.parent)).token_ids(read_jsonl(data)[0]["prompt"]))
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    steps = context["timer"].steps
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    timed = slice(1, None) if len(steps) > 1 else slice(None)  # the first step pays CUDA's warm-up
    generation_s = sum(s["generation_s"] for s in steps[timed])
    return {"arm": "vl", "frames": args.vl_frames, "max_pixels": args.vl_max_pixels, "prompt_tokens": prompt_tokens,
            "steps": len(steps), "wall_s": round(wall, 1), "stock_path": trainer.stock_path_reasons,
            "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h and "rewards/format/mean" in h],
            "generation_tokens_per_s": round(sum(lengths[timed]) * 8 / generation_s, 1) if generation_s else None,
            "update_s_per_step": round(statistics.median(s["update_s"] for s in steps[timed]), 2) if steps else None,
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (checks the script on a CPU)")
    parser.add_argument("--steps", type=int, default=6, help="the first is warm-up, left out of the rates")
    parser.add_argument("--prompt-tokens", type=int, default=1800, help="about the paper's prompt length")
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--vl-steps", type=int, default=3, help="GRPO steps of the VL arm (the first is warm-up)")
    parser.add_argument("--vl-frames", type=int, default=4, help="key frames a row in the VL arm")
    parser.add_argument("--vl-max-pixels", type=int, default=None,
                        help="pixels a frame in the VL arm (default 200704 = 256 tokens, build-prompts' budget; "
                        "12544 with --tiny)")
    parser.add_argument("--no-vl", action="store_true", help="skip the VL arm")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.vl_max_pixels is None:
        args.vl_max_pixels = 112 * 112 if args.tiny else 256 * 28 * 28
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
        vl_results = []
        if not args.no_vl:
            vl_model, processor = build_vl_model(Path(tmp) / "vl_model", args.tiny, args.vl_max_pixels)
            rows = write_keyframe_rows(Path(tmp) / "keyframes" / "rows.jsonl", 16, args.vl_frames, args.vl_max_pixels)
            vl_results.append(run_vl(vl_model, processor, rows, Path(tmp) / "run_vl", args))
            print(json.dumps(vl_results[-1]), flush=True)
    print("\n| rollouts | update | generation tokens/s | update s/step | peak GPU GiB | wall s |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {'vLLM colocate' if r['vllm'] else 'transformers'} | "
              f"{'shared-prefix' if r['shared_prefix'] else 'TRL per-row'} | {r['generation_tokens_per_s']} | "
              f"{r['update_s_per_step']} | {r['peak_gpu_gib']} | {r['wall_s']} |")
    # Per step, both paths: the one GPU run so far had shared-prefix steps 2-3 about 4x slower than the later
    # ones (issue 59); step 1 is CUDA's warm-up. Compare the columns step by step: a slow start on one path
    # only points at compilation or allocator growth on that path, on both at the device.
    print("\n| rollouts | update | generation s per step | update s per step |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {'vLLM colocate' if r['vllm'] else 'transformers'} | "
              f"{'shared-prefix' if r['shared_prefix'] else 'TRL per-row'} | "
              f"{' '.join(str(v) for v in r['generation_s_per_step'])} | "
              f"{' '.join(str(v) for v in r['update_s_per_step_all'])} |")
    if not have_vllm:
        print("\nvLLM is not importable here: colocate rollouts not measured.")
    for r in vl_results:
        print("\n| VL arm | frames x pixels | prompt tokens | generation tokens/s | update s/step | peak GPU GiB "
              "| wall s |")
        print("|---|---|---|---|---|---|---|")
        print(f"| transformers, TRL per-row | {r['frames']} x {r['max_pixels']} | {r['prompt_tokens']} | "
              f"{r['generation_tokens_per_s']} | {r['update_s_per_step']} | {r['peak_gpu_gib']} | {r['wall_s']} |")
        print(f"shared-prefix paths not taken by image rows: {'; '.join(r['stock_path']) or 'none reported'}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": results,
                                         "vl_runs": vl_results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
