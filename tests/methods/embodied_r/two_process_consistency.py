"""Run by test_consistency_two_processes.py under ``accelerate launch --multi_gpu --num_processes 2`` on a
CPU (torchrun starts two processes; ``PartialState(cpu=True)`` joins them with gloo).

Each rank holds 6 completions; groups have 4 (TRL's layout: rank 0 holds global rows 0-5, rank 1 rows
6-11), so group 1 spans both ranks. Writes what each rank's reward returned to OUT/rank<N>.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from accelerate import PartialState

from embodied_r.judge.judges import JudgeError, ReferenceJudge
from embodied_r.methods.embodied_r.consistency import ConsistencyReward
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

OPTIONS = ["A. left", "B. right", "C. behind"]


def call(reward, prompts):
    n = len(prompts)
    return reward(
        prompts=prompts,
        completions=["<think>it is on the right</think><answer>B</answer>"] * n,
        answer=["B"] * n,
        answer_type=["choice"] * n,
        options=[OPTIONS] * n,
    )


def main() -> None:
    state = PartialState(cpu=True)  # gloo process group: torchrun set the ranks, there is no GPU
    rank = state.process_index
    out, tiny = Path(sys.argv[1]), sys.argv[2]
    prompt = build_reasoner_messages([{"delta": "a chair"}], "Where is the chair?", OPTIONS)
    results: dict = {"world": state.num_processes}

    class FailsOnRankOne:
        name, sees_letters = "fails-on-rank-1", False

        def judge(self, questions, thinks, options):
            if rank == 1:
                raise JudgeError("endpoint down (rank 1 only)")
            return ["B"] * len(questions)

    reward = ConsistencyReward(FailsOnRankOne(), max_consecutive_failures=2, num_generations=4)
    results["first"] = call(reward, [prompt] * 6)
    try:
        call(reward, [prompt] * 6)
        results["second"] = "no error"
    except JudgeError as exc:
        results["second"] = f"JudgeError: {exc}"

    # A real (tiny) judge whose context cannot hold one question, on rank 1's first row (global row 6).
    judge = ReferenceJudge.from_pretrained(tiny, dtype="float32", device="cpu", max_prompt_tokens=330)
    prompts = [prompt] * 6
    if rank == 1:
        prompts[0] = build_reasoner_messages([{"delta": "a chair"}], "Where is the chair? " * 100, OPTIONS)
    results["groups"] = call(ConsistencyReward(judge, num_generations=4), prompts)
    (out / f"rank{rank}.json").write_text(json.dumps(results), encoding="utf-8")
    # Leave together and tear the gloo group down: a rank that exits while the group's threads still
    # run can abort at interpreter shutdown ("terminate called without an active exception").
    state.wait_for_everyone()
    state.destroy_process_group()


if __name__ == "__main__":
    main()
