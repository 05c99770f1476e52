"""Can this CPU have a consistency judge that passes the probe? The shipped model vs one fine-tuned here.

SmolLM2-135M-Instruct answers one letter whatever it reads (docs/consistency.md), so it cannot judge
logical consistency. This script tries the cheapest route to a judge that reads content: supervised
fine-tuning of the same model on the judge's own task, built from the *training* split's questions
with reasoning phrasings of its own (not the probe's), and then probes the shipped and the fine-tuned
model side by side on the *held-out* split's questions (other scenes, the probe's phrasings).

A pass here is necessary, not sufficient: the probe's reasoning texts are short and end on one option,
and a judge fine-tuned on texts of that kind can learn to spot the option a conclusion names. Whether it
also reads a policy's free-form reasoning is what the consistency rate in evaluation then shows.

    python benchmarks/judge_finetune.py --train runs/demo/prompts/train.jsonl \
        --test runs/demo/prompts/test.jsonl --out runs/judge_ft --steps 60
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from embodied_r.inference.models import load_reasoner, resolve_model_path
from embodied_r.judge.judges import ReferenceJudge, judge_messages, letters_for, question_for_judge
from embodied_r.judge.letter_mask import mask_option_letters
from embodied_r.judge.probe import build_probe_cases, option_text, run_probe
from embodied_r.training.data import load_prompt_rows

# Phrasings used for training only; the target is sometimes named before a distractor, so "the last
# option mentioned" is not a shortcut that works on them.
TRAIN_TEMPLATES = (
    'Looking at the description, "{target}" is what matches; "{other}" is not supported.',
    '"{other}" can be excluded. The evidence supports "{target}".',
    'My analysis of {topic}: the best fit is "{target}", not "{other}".',
    'Comparing {others} with "{target}", only "{target}" agrees with the observations.',
    'The answer should be "{target}" rather than "{other}", given what I saw.',
    'I considered "{other}" but the frames show "{target}" for {topic}.',
)


def training_examples(rows: list, count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    questions = [
        (question_for_judge(r.prompt, r.options), list(r.options))
        for r in rows
        if r.answer_type == "choice" and r.options and len(r.options) >= 2
    ]
    examples = []
    while len(examples) < count:
        question, options = rng.choice(questions)
        letters = letters_for(options)
        index = rng.randrange(len(options))
        texts = [option_text(o) for o in options]
        others = [t for j, t in enumerate(texts) if j != index]
        rng.shuffle(others)
        think = rng.choice(TRAIN_TEMPLATES).format(
            target=texts[index],
            other=others[0],
            others=", ".join(f'"{t}"' for t in others[:2]),
            topic=question.split("\n", 1)[0][:80].lower(),
        )
        if rng.random() < 0.5:  # a named letter, masked as the judge will see it: content must decide
            think += f" That is option {rng.choice(letters)}."
        think = mask_option_letters(think, letters)
        examples.append(
            {
                "prompt": judge_messages(question, think, letters),
                "completion": [{"role": "assistant", "content": letters[index]}],
            }
        )
    return examples


def finetune(model_path: str, examples: list[dict], out: Path, steps: int, batch: int, lr: float) -> Path:
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from embodied_r.training.host_memory import fix_mmap_threshold

    if not torch.cuda.is_available():
        fix_mmap_threshold()  # as `train` does: without it freed activations page-fault back in every step
    config = SFTConfig(
        output_dir=str(out / "trainer"),
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=lr,
        lr_scheduler_type="constant",
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        seed=0,
        completion_only_loss=True,
        gradient_checkpointing=False,
        use_cpu=not torch.cuda.is_available(),
        model_init_kwargs={"dtype": "float32"},
        bf16=False,
    )  # TRL would autocast to bf16, which this CPU runs in a slow reference GEMM
    trainer = SFTTrainer(model=model_path, args=config, train_dataset=Dataset.from_list(examples))
    trainer.train()
    folder = out / "judge"
    trainer.save_model(str(folder))
    trainer.processing_class.save_pretrained(str(folder))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", required=True, help="PromptRow .jsonl of the training split")
    parser.add_argument(
        "--test", required=True, help="PromptRow .jsonl of the held-out split (probe questions)"
    )
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--cases", type=int, default=64)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = resolve_model_path(args.model)
    cases = build_probe_cases(load_prompt_rows(args.test), n_cases=args.cases)
    started = time.perf_counter()
    folder = finetune(
        base,
        training_examples(load_prompt_rows(args.train), args.steps * args.batch, 0),
        out,
        args.steps,
        args.batch,
        args.lr,
    )
    train_s = time.perf_counter() - started
    results = {}
    for label, path in (("shipped", base), ("fine-tuned", str(folder))):
        model, tokenizer = load_reasoner(path, dtype="float32", device="cpu")
        results[label] = run_probe(ReferenceJudge(model, tokenizer, name=f"{args.model} ({label})"), cases)
    print(
        f"fine-tuning: {args.steps} steps x {args.batch} examples in {train_s:.0f} s; probe on {len(cases)} "
        f"cases from the held-out questions"
    )
    print(
        f"{'judge':<12} {'content':>8} {'named':>8} {'conflict->named':>16} {'top letter':>11} {'s/judgement':>12}"
    )
    for label, r in results.items():
        print(
            f"{label:<12} {r.agreement['content']:>8.3f} {r.agreement['named']:>8.3f} "
            f"{r.follows_named_letter:>16.3f} {r.top_letter + ' ' + format(r.top_letter_share, '.2f'):>11} "
            f"{r.seconds_per_judgement:>12.3f}  {'passes' if r.passed else 'fails'}"
        )
    (out / "comparison.json").write_text(json.dumps({k: v.to_dict() for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
