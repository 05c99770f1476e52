"""GRPO under two real processes (accelerate launch, gloo on this CPU) against one process with the same
global batch and seed, a two-process checkpoint resumed under two processes, and the consistency judge
replicated on every rank after a format warm-up. The runs are driven by two_process_grpo.py.

What is compared, and why that way:

* Completions. TRL seeds each rank differently and samples a local batch from one random stream, so the
  driver generates every completion alone, seeded by its step and global row index: the same completions
  in both layouts, by construction. The rest of the step is the real code path (TRL and this project).
* Rewards per function and advantages: exactly equal. They are computed from the same completions, and
  TRL normalises them after gathering every rank's rows, so a group split across the two ranks (here
  every group: 4 generations, 2 rows per rank) must give the one-process advantages.
* Gradients of step 1, as the optimizer gets them: bit-identical on the two ranks (DDP's replicas), and
  equal to the one-process gradient within ``GRAD_ATOL`` times its largest entry. The sum is the same in
  another order: one process sums all rows inside its backward, two processes each sum their half (with
  other padding widths) and gloo's all-reduce adds the halves, so float32 rounding differs (measured:
  3.4e-7 of the largest entry). Unlike the parameters, this also catches a gradient of the wrong scale
  (an unreduced or doubly counted one), which AdamW's scale invariance would hide.
* Parameters after steps 1 and 2: equal within ``PARAM_ATOL``. AdamW's first step, ``lr * g / (|g| + eps)``,
  has slope ``lr / eps`` where ``|g|`` is near ``eps`` (1e-8; this model has such entries), so a rounding
  difference of 1e-10 there moves a weight by up to lr x 1e-10 / 1e-8 = 1e-5 at lr 1e-3 (measured: 7.8e-6
  at worst, while 99.9 % of the weights agree to 4e-9). ``PARAM_ATOL``, 5 % of the learning rate, leaves a
  margin over that and stays well below the update itself (about ``lr`` per weight), which is checked too.
* Resume: the two-process run's checkpoint-2 is moved away (a run killed before it), ``--resume``
  continues from checkpoint-1 under two processes; step 1 is not redone, and step 2 gives the same
  completions and advantages and bit-identical weights to the uninterrupted run (same layout, same
  arithmetic).
* Judge: ``judge.model: policy`` after ``format_warmup`` is a full copy of the warmed-up model on each
  rank (same parameter count as the policy, same weights as the warm-up's output, not the base model's),
  and every rank's judge gives the same letter scores on fixed questions.

``loss_type`` is TRL's default ``dapo`` (normalised by the global token count). ``bnpo``, which the
paper recipe uses, normalises by each rank's own tokens, so it is not expected to match across layouts.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from two_process_grpo import weights_digest  # the driver beside this file (pytest puts its folder on the path)

from embodied_r.core.io import write_jsonl
from embodied_r.core.records import PromptRow

DRIVER = Path(__file__).with_name("two_process_grpo.py")
LEARNING_RATE = 1e-3
GRAD_ATOL = 1e-5  # times the largest gradient entry; see the module docstring (float32 summation order)
PARAM_ATOL = 5e-5  # 5 % of LEARNING_RATE; see the module docstring (AdamW near |g| = eps)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rows() -> list[dict[str, Any]]:
    """Four short prompts (two multiple-choice for the judge, two numeric); one prompt per GRPO step."""
    choice = [PromptRow(id=f"c{i}", task="direction", answer="B", options=["A. left", "B. right"],
                        prompt=[{"role": "user", "content": f"Frame 0: chair {i} right. Question: where? "
                                 "Choices: A. left B. right"}]) for i in range(2)]
    number = [PromptRow(id=f"n{i}", task="count", answer=float(i + 2), answer_type="number",
                        prompt=[{"role": "user", "content": f"Question: how many? {i}"}]) for i in range(2)]
    return [row.to_dict() for row in choice + number]


def _recipe(path: Path, **values: Any) -> Path:
    base = {
        "dtype": "float32",
        "num_generations": 4,
        "max_steps": 2,
        "save_steps": 1,
        "max_completion_length": 12,
        "learning_rate": LEARNING_RATE,
        "logging_steps": 1,
        "seed": 0,
        "sample_completions": 2,
        "rewards": ["format", "accuracy", "test_length", "consistency"],
        "judge": {"model": "policy", "allow_weak": True},  # 2 choice rows cannot make a probe's 16 cases
        "reward_schedule": None,
        "report_to": "none",
        # Both layouts on the shared-prefix paths: under auto each run would keep whichever its first step
        # timed faster, and the comparison is of process layouts, not of paths.
        "shared_prefix_update": True,
        "shared_prefix_generation": True,
    }
    path.write_text(yaml.safe_dump({**base, **values}), encoding="utf-8")
    return path


def _drive(records: Path, train_args: list[str], processes: int) -> list[dict[str, Any]]:
    """Run the driver with ``processes`` ranks; returns each rank's record."""
    records.mkdir(parents=True)
    if processes == 1:
        launch = [sys.executable]
    else:
        launch = [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes",
                  str(processes), "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                  "--main_process_port", str(_free_port())]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [*launch, str(DRIVER), str(records), "train", *train_args]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=400, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return [json.loads((records / f"rank{r}.json").read_text(encoding="utf-8")) for r in range(processes)]


@pytest.fixture(scope="module")
def runs(tiny_lm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two processes (warm-up, then 2 GRPO steps), one process from the same warmed-up model, then the
    two-process run resumed from its checkpoint-1."""
    root = tmp_path_factory.mktemp("two_processes")
    write_jsonl(root / "train.jsonl", _rows())
    two_dir, one_dir = root / "two", root / "one"
    two = _recipe(root / "two.yaml", model=str(tiny_lm_dir), train_data=str(root / "train.jsonl"),
                  output_dir=str(two_dir), per_device_train_batch_size=2,
                  format_warmup={"steps": 2, "batch_size": 2, "learning_rate": LEARNING_RATE})
    two_records = _drive(root / "records-two", ["--recipe", str(two)], processes=2)
    warmed = two_dir / "warmup" / "model"
    # The same global batch (4 completions) in one process, from the model the two processes warmed up.
    one = _recipe(root / "one.yaml", model=str(warmed), train_data=str(root / "train.jsonl"),
                  output_dir=str(one_dir), per_device_train_batch_size=4)
    one_records = _drive(root / "records-one", ["--recipe", str(one)], processes=1)
    # A kill after checkpoint-1: checkpoint-2 (kept aside for the comparison) and the final model are gone.
    uninterrupted = root / "uninterrupted-checkpoint-2"
    shutil.move(two_dir / "checkpoint-2", uninterrupted)
    shutil.rmtree(two_dir / "final")
    resumed_records = _drive(root / "records-resumed", ["--recipe", str(two), "--resume"], processes=2)
    return {"two": two_records, "one": one_records[0], "resumed": resumed_records, "two_dir": two_dir,
            "records": {name: root / f"records-{name}" for name in ("two", "one", "resumed")},
            "one_dir": one_dir, "uninterrupted": uninterrupted, "warmed": warmed, "base": tiny_lm_dir}


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _max_difference(a: dict[str, Any], b: dict[str, Any]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _gradients(records: Path, rank: int, step: int) -> dict[str, Any]:
    import torch

    return torch.load(records / f"grads-rank{rank}-step{step}.pt")


@pytest.mark.slow
def test_two_processes_see_the_one_process_completions_rewards_and_advantages(runs) -> None:
    assert runs["one"]["world"] == 1 and runs["one"]["exit_code"] == 0
    one = runs["one"]["steps"]
    assert sorted(one) == ["1", "2"]
    for rank, record in enumerate(runs["two"]):
        assert record["world"] == 2 and record["rank"] == rank and record["exit_code"] == 0
        assert sorted(record["steps"]) == ["1", "2"]
        for step, seen in record["steps"].items():
            # Rank r holds global rows 2r and 2r+1 of the step's single group of 4.
            assert seen["completion_ids"] == one[step]["completion_ids"][2 * rank: 2 * rank + 2]
            assert seen["rewards"] == one[step]["rewards"]  # gathered: every rank has all 4 rows
            assert seen["advantages"] == one[step]["advantages"]
            assert seen["local_advantages"] == one[step]["advantages"][2 * rank: 2 * rank + 2]
    # The check has teeth: completions differ within the group, so the advantages are not all zero.
    assert any(abs(a) > 0.1 for step in one.values() for a in step["advantages"])
    assert len({tuple(ids) for ids in one["1"]["completion_ids"]}) == 4


@pytest.mark.slow
def test_the_reduced_gradient_is_the_one_process_gradient(runs) -> None:
    import torch

    records = runs["records"]
    one = _gradients(records["one"], 0, 1)
    ranks = [_gradients(records["two"], rank, 1) for rank in (0, 1)]
    assert ranks[0].keys() == ranks[1].keys() == one.keys()
    assert all(torch.equal(ranks[0][name], ranks[1][name]) for name in one)  # DDP: the same on every rank
    largest = max(float(g.abs().max()) for g in one.values())
    assert _max_difference(ranks[0], one) <= GRAD_ATOL * largest


@pytest.mark.slow
def test_parameters_after_each_step_match_one_process(runs) -> None:
    import torch

    base, one_dir, two_dir = _weights(runs["warmed"]), runs["one_dir"], runs["two_dir"]
    one_step1, one_step2 = _weights(one_dir / "checkpoint-1"), _weights(one_dir / "checkpoint-2")
    assert _max_difference(_weights(two_dir / "checkpoint-1"), one_step1) <= PARAM_ATOL
    assert _max_difference(_weights(runs["uninterrupted"]), one_step2) <= PARAM_ATOL
    # The tolerance is well below the step it compares: AdamW moves most weights by about the learning rate.
    moved = torch.cat([(one_step1[k] - base[k]).abs().flatten() for k in base])
    assert float(moved.median()) > 10 * PARAM_ATOL


@pytest.mark.slow
def test_a_two_process_checkpoint_resumes_under_two_processes(runs) -> None:
    two_step2 = {rank: record["steps"]["2"] for rank, record in enumerate(runs["two"])}
    for rank, record in enumerate(runs["resumed"]):
        assert record["world"] == 2 and record["exit_code"] == 0
        assert sorted(record["steps"]) == ["2"]  # continued after checkpoint-1: step 1 was not redone
        assert record["steps"]["2"] == two_step2[rank]  # same prompt, completions, rewards, advantages
    two_dir = runs["two_dir"]
    # Bit-identical to the uninterrupted run: weights, optimizer state and schedule came back whole.
    assert _max_difference(_weights(two_dir / "checkpoint-2"), _weights(runs["uninterrupted"])) == 0.0
    assert _max_difference(_weights(two_dir / "final"), _weights(runs["uninterrupted"])) == 0.0
    state = json.loads((two_dir / "checkpoint-2" / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["global_step"] == 2


@pytest.mark.slow
def test_the_judge_is_a_full_copy_of_the_warmed_up_model_on_every_rank(runs) -> None:
    warmed = weights_digest(list(_weights(runs["warmed"]).items()))
    assert warmed != weights_digest(list(_weights(runs["base"]).items()))  # the warm-up changed the model
    judges = [record["judge"] for record in runs["two"] + runs["resumed"]] + [runs["one"]["judge"]]
    for judge in judges:
        assert Path(judge["source"]) == runs["warmed"]
        assert judge["judge_numel"] == judge["policy_numel"] > 0  # unsharded: the whole model on this rank
        assert judge["digest"] == warmed
    # Every rank's judge answers the fixed questions with the same scores, and the same as one process.
    assert all(judge["scores"] == judges[0]["scores"] for judge in judges)
    assert all(set(scores) == {"A", "B"} for scores in judges[0]["scores"])
