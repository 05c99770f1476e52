"""Run by test_grpo_two_processes.py: ``embodied-r train`` in one process (``python``) or two
(``accelerate launch --multi_gpu --num_processes 2`` on a CPU: torchrun starts the ranks, gloo joins them),
recording what each rank saw to RECORD_DIR/rank<N>.json.

    python two_process_grpo.py RECORD_DIR train --recipe R [--set KEY=VALUE ...] [--resume]

Three trainer methods are wrapped here, for the test only (the library runs unchanged):

* ``_generate_single_turn`` generates each completion alone, after seeding torch with the step and the
  completion's *global* row index. TRL seeds every rank differently (``set_seed(seed, device_specific=True)``)
  and samples a whole local batch from one random stream, so stock sampling cannot give one process and two
  processes the same completions; generated alone and seeded by its global row, a completion is the same in
  both layouts (no padding either), and everything after it, from the rewards to the optimizer step, is
  TRL's and this project's real code.
* ``_clip_grad_norm`` (the Trainer's, before each optimizer step) saves this rank's gradients as the
  optimizer gets them (all-reduced and clipped) to RECORD_DIR/grads-rank<N>-step<S>.pt.
* ``_generate_and_score_completions`` records, per step, the gathered rewards per function and advantages
  (TRL keeps them for logging), this rank's share of the advantages, the completion ids, and once per run
  this rank's consistency judge: where it was loaded from, its parameter count next to the policy's, a
  digest of its weights, and its letter scores on fixed questions.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import torch

from embodied_r.training.trainer import ReasonerGRPOTrainer

SEED_BASE = 1234
# Fixed questions every rank's judge answers once: the scores must agree exactly across ranks.
JUDGE_QUESTIONS = ["Where is the chair? Choices: A. left B. right", "Where is the door? Choices: A. left B. right"]
JUDGE_THINKS = ["the chair is on the right of the table", "the door is behind me on the left"]
JUDGE_OPTIONS = [["A. left", "B. right"], ["A. left", "B. right"]]


def weights_digest(named: list[tuple[str, torch.Tensor]]) -> str:
    """SHA-256 over the tensors' names and bytes in name order: equal digests mean identical weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(named, key=lambda item: item[0]):
        digest.update(name.encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


def _plain(value: float) -> float | None:
    return None if math.isnan(value) else value  # a reward function's None arrives as NaN


def judge_report(trainer: Any) -> dict[str, Any] | None:
    """This rank's consistency judge: source, size next to the policy's, weights digest, fixed answers."""
    from embodied_r.methods.embodied_r.consistency import ConsistencyReward

    rewards = [f for f in trainer.reward_funcs if isinstance(f, ConsistencyReward)]
    if not rewards:
        return None
    judge = rewards[0].judge
    policy = trainer.accelerator.unwrap_model(trainer.model)
    return {
        "source": judge.name,
        "judge_numel": sum(p.numel() for p in judge.model.parameters()),
        "policy_numel": sum(p.numel() for p in policy.parameters()),
        "digest": weights_digest(list(judge.model.named_parameters())),  # tied weights once, as saved
        "scores": judge.letter_scores(JUDGE_QUESTIONS, JUDGE_THINKS, JUDGE_OPTIONS),
    }


def install_recorders(record: dict[str, Any], record_dir: Path) -> None:
    """Wrap the three trainer methods described in the module docstring."""
    generate_original = ReasonerGRPOTrainer._generate_single_turn
    score_original = ReasonerGRPOTrainer._generate_and_score_completions
    clip_original = ReasonerGRPOTrainer._clip_grad_norm

    def generate_per_row(self: Any, prompt_ids: list, images: Any, multimodal_fields: dict,
                         num_generations: int, *args: Any, **kwargs: Any) -> tuple[list, Any]:
        if images is not None or multimodal_fields:
            raise ValueError("this test driver generates text-only prompts")
        # TRL's layout: rank r holds global rows r*len(prompt_ids) ... (r+1)*len(prompt_ids)-1.
        first = self.accelerator.process_index * len(prompt_ids)
        completion_ids: list = []
        for offset, ids in enumerate(prompt_ids):
            torch.manual_seed(SEED_BASE + 1000 * int(self.state.global_step) + first + offset)
            ids_out, logprobs = generate_original(self, [ids], None, {}, num_generations, *args, **kwargs)
            if logprobs is not None:
                raise ValueError("this test driver expects transformers generation (no sampling logprobs)")
            completion_ids.extend(ids_out)
        return completion_ids, None

    def score_and_record(self: Any, inputs: list) -> dict[str, Any]:
        step = int(self.state.global_step) + 1
        output = score_original(self, inputs)
        batch = int(self.args.generation_batch_size)
        mask = output["completion_mask"].bool()
        record["steps"][str(step)] = {
            "rewards": {name: [_plain(v) for v in list(self._logs["rewards"][name])[-batch:]]
                        for name in self.reward_func_names},
            "advantages": list(self._logs["advantages"])[-batch:],
            "local_advantages": output["advantages"].tolist(),
            "completion_ids": [row[keep].tolist() for row, keep in zip(output["completion_ids"], mask, strict=True)],
        }
        if "judge" not in record:
            record["judge"] = judge_report(self)
        return output

    def clip_and_save(self: Any, model: Any) -> Any:
        norm = clip_original(self, model)
        step, rank = int(self.state.global_step) + 1, self.accelerator.process_index
        # DDP names its parameters "module.<name>": saved under the unwrapped names, as one process has them.
        grads = {name.removeprefix("module."): p.grad.detach().clone()
                 for name, p in model.named_parameters() if p.grad is not None}
        torch.save(grads, record_dir / f"grads-rank{rank}-step{step}.pt")
        return norm

    ReasonerGRPOTrainer._clip_grad_norm = clip_and_save
    ReasonerGRPOTrainer._generate_single_turn = generate_per_row
    ReasonerGRPOTrainer._generate_and_score_completions = score_and_record


def main() -> int:
    from accelerate import PartialState

    from conftest import length_reward  # tests/training/conftest.py: a reward that varies in every group
    from embodied_r.cli.main import main as cli_main
    from embodied_r.methods.rewards import register_reward

    torch.set_num_threads(1)  # two ranks on a 2-core machine: one thread each
    record_dir, cli_args = Path(sys.argv[1]), sys.argv[2:]
    register_reward("test_length", length_reward, replace=True)
    record: dict[str, Any] = {"steps": {}}
    install_recorders(record, record_dir)
    code = cli_main(cli_args)
    state = PartialState()
    record.update(world=state.num_processes, rank=state.process_index, exit_code=code)
    (record_dir / f"rank{state.process_index}.json").write_text(json.dumps(record), encoding="utf-8")
    if state.num_processes > 1:
        # Leave together and tear the gloo group down: a rank that exits while the group's threads still
        # run can abort at interpreter shutdown ("terminate called without an active exception").
        state.wait_for_everyone()
        state.destroy_process_group()
    return code


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
