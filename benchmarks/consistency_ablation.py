"""The paper's consistency ablation in miniature: GRPO with and without the logical-consistency reward.

Two training runs that differ only in the consistency term (same rows, seed, warm-up, steps and
schedule; the "accuracy" arm has the consistency weight at 0 in every stage), then both final models
are evaluated on held-out questions with an evaluation judge that is not the reward's. The reward's
judge is the warmed-up policy (``judge.model: policy``); the default evaluation judge is the
shipped model, probed on the held-out questions first. Printed: each arm's accuracy and consistency
rate with 95 % intervals, and the paired difference (consistency arm minus accuracy arm) on the same
questions with its interval and the p-value of an exact paired test, whose verdict it is.

Everything runs through the CLI (``embodied-r train`` / ``embodied-r eval``), so what is measured is what
a user runs; a finished arm is reused when the script is run again.

    python benchmarks/consistency_ablation.py --train runs/demo/prompts/train.jsonl \
        --test runs/demo/prompts/test.jsonl --out runs/ablation --steps 12
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from embodied_r.core.intervals import format_comparison, format_interval, paired_difference, score_interval
from embodied_r.core.io import read_json, read_jsonl
from embodied_r.demo import DemoSize, training_recipe

ARMS = ("accuracy", "consistency")


def arm_recipe(arm: str, train: Path, out: Path, steps: int, model: str) -> dict[str, Any]:
    """The demo's CPU recipe on ``train`` for ``steps`` GRPO steps; the accuracy arm drops the
    consistency term (its weight is 0 in every stage, so both arms see the same schedule)."""
    size = DemoSize(scenes=0, seconds=0, per_task=0, train_steps=steps, eval_limit=0, max_new_tokens=96)
    recipe = training_recipe(out, size, model)
    recipe.update(train_data=str(train), output_dir=str(out / "train"), save_steps=steps)
    # The demo's three stages (7:3:0, 3:7:0, then the paper's 1:7:2), compressed so that two thirds of a
    # short run have the consistency term: a difference needs steps that optimise it.
    stages = recipe["reward_schedule"]["stages"]
    for stage, start in zip(stages, (1, 1 + steps // 6, 1 + steps // 3), strict=True):
        stage["start"] = start
    if arm == "accuracy":
        recipe["rewards"] = ["format", "accuracy"]
        for stage in recipe["reward_schedule"]["stages"]:
            stage["weights"].pop("consistency")
    return recipe


def run(command: list[str], log: Path) -> None:
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as handle:
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, check=False)
    print(f"  {' '.join(command[:2])} ... exit {done.returncode} in {time.perf_counter() - started:.0f} s (log {log})")
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed; see {log}")


def run_arm(arm: str, args: argparse.Namespace) -> dict[str, Any]:
    out = args.out / arm
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "train" / "final").is_dir():
        recipe = out / "recipe.yaml"
        recipe.write_text(yaml.safe_dump(arm_recipe(arm, args.train, out, args.steps, args.model), sort_keys=False))
        run(["embodied-r", "train", "--recipe", str(recipe), *(["--resume"] if (out / "train").is_dir() else [])],
            out / "train.log")
    if not (out / "eval" / "metrics.json").is_file():
        run(["embodied-r", "eval", "--data", str(args.test), "--model", str(out / "train" / "final"),
             "--out", str(out / "eval"), "--batch-size", "8", "--max-new-tokens", "96", "--baselines",
             "random,prior", "--judge", args.judge, "--no-report"], out / "eval.log")
    return read_json(out / "eval" / "metrics.json")


def consistent_by_question(judgements: list[dict[str, Any]], choice_ids: set[str]) -> dict[str, float]:
    """1.0 when the judge reached the model's answer, else 0.0 (no reasoning or no answer counts as not
    consistent: the paper's share of logically consistent outputs), for every choice question."""
    by_id = {j["id"]: j for j in judgements}
    return {i: float(bool(by_id.get(i, {}).get("consistent"))) for i in choice_ids}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=Path, required=True, help="training prompt rows (.jsonl)")
    parser.add_argument("--test", type=Path, required=True, help="held-out prompt rows (other scenes)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=12, help="GRPO steps per arm (default: %(default)s)")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--judge", default="smollm2-135m-instruct",
                        help="evaluation judge (default: the shipped model, not the reward's warmed-up copy)")
    args = parser.parse_args()
    started = time.perf_counter()
    metrics = {}
    for arm in ARMS:
        print(f"arm {arm}:")
        metrics[arm] = run_arm(arm, args)
    predictions = {arm: {p["id"]: p for p in read_jsonl(args.out / arm / "eval" / "predictions.jsonl")} for arm in ARMS}
    choice_ids = {i for i, p in predictions["accuracy"].items() if p.get("answer_type") == "choice"}
    judgements = {arm: read_jsonl(args.out / arm / "eval" / "judgements.jsonl") for arm in ARMS}
    consistent = {arm: consistent_by_question(judgements[arm], choice_ids) for arm in ARMS}
    scores = {arm: {i: float(p.get("score") or 0.0) for i, p in predictions[arm].items()} for arm in ARMS}
    result: dict[str, Any] = {"steps": args.steps, "judge": args.judge, "questions": len(scores["accuracy"]),
                              "choice_questions": len(choice_ids), "arms": {}}
    print(f"\nheld-out questions: {len(scores['accuracy'])} ({len(choice_ids)} multiple choice); "
          f"evaluation judge {args.judge}")
    for arm in ARMS:
        c = metrics[arm].get("consistency") or {}
        probe = c.get("probe") or {}
        rate_all = list(consistent[arm].values())
        judged = [float(bool(j.get("consistent"))) for j in judgements[arm] if j.get("judged")]
        row = {
            "accuracy": metrics[arm]["overall"]["micro"], "accuracy_ci95": metrics[arm]["overall"].get("ci95"),
            "consistency_rate_all": sum(rate_all) / len(rate_all) if rate_all else None,
            "consistency_rate_all_ci95": score_interval(rate_all),
            "consistency_rate_judged": sum(judged) / len(judged) if judged else None,
            "consistency_rate_judged_ci95": score_interval(judged), "judged": len(judged),
            "probe": probe.get("message"), "flags": c.get("flags"),
        }
        result["arms"][arm] = row
        print(f"  {arm:12s} accuracy {format_interval(row['accuracy'], row['accuracy_ci95'])}; consistent "
              f"(all choice answers) {format_interval(row['consistency_rate_all'], row['consistency_rate_all_ci95'])}; "
              f"(of {len(judged)} judged) "
              f"{format_interval(row['consistency_rate_judged'], row['consistency_rate_judged_ci95'])}")
    baselines = metrics["accuracy"].get("baselines") or {}
    result["baselines"] = {name: b["overall"]["micro"] for name, b in baselines.items() if b.get("overall")}
    print("  baselines (choice questions): " + ", ".join(
        f"{name} {format_interval(b['overall']['micro'], b['overall'].get('ci95'))}"
        for name, b in baselines.items() if b.get("overall")))
    answered = {arm: {p.get("parsed_answer") for p in predictions[arm].values() if p.get("answer_type") == "choice"}
                for arm in ARMS}
    result["letters_answered"] = {arm: sorted(str(x) for x in letters) for arm, letters in answered.items()}
    print(f"  letters answered on choice questions: {result['letters_answered']}")
    print(f"  evaluation judge probe: {result['arms']['consistency']['probe']}")
    reward_probe = args.out / "consistency" / "train" / "judge_probe.json"
    result["reward_judge_probe"] = read_json(reward_probe).get("message") if reward_probe.is_file() else None
    print(f"  reward judge probe (training rows): {result['reward_judge_probe']}")
    for name, values in (("consistency rate (all choice answers)", consistent), ("accuracy", scores)):
        diff = paired_difference(values["accuracy"], values["consistency"])
        result[f"difference_{name.split()[0]}"] = diff
        test = f" (points; {diff['test']} test)" if diff["test"] else ""
        print(f"  {name}, consistency arm - accuracy arm{test}: {format_comparison(diff)}")
    result["seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "ablation.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {args.out / 'ablation.json'} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
