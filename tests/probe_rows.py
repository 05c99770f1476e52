"""Prompt rows for judge-probe tests: multiple-choice questions with distinct option texts."""

from __future__ import annotations

import re

from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

OPTION_SETS = [
    ["A. left", "B. right", "C. behind", "D. front"],
    ["A. sofa", "B. table", "C. lamp", "D. door"],
    ["A. 1.5 meters", "B. 3.0 meters", "C. 4.5 meters", "D. 6.0 meters"],
]


def probe_rows(n: int = 20) -> list[dict]:
    rows = []
    for i in range(n):
        options = OPTION_SETS[i % len(OPTION_SETS)]
        prompt = build_reasoner_messages(
            [{"delta": f"frame {i}: a chair and a sofa."}],
            f"Which option fits object {i} in room {i}?",
            options,
        )
        rows.append(
            {
                "id": f"p{i}",
                "task": "object_rel_direction",
                "prompt": prompt,
                "answer": "A",
                "answer_type": "choice",
                "options": options,
            }
        )
    return rows


class OracleJudge:
    """Knows the expected answer of every case of one probe: what a judge that passes it looks like."""

    name = "oracle-stub"
    sees_letters = False

    def __init__(self, cases) -> None:
        from embodied_r.judge.judges import visible_thinks

        seen = visible_thinks(self, [c.think for c in cases], [c.options for c in cases])
        self.answers = {(c.question, think): c.target for c, think in zip(cases, seen)}

    def judge(self, questions, thinks, options):
        return [self.answers[(q, t)] for q, t in zip(questions, thinks)]


class LetterJudge:
    """Reads the letter a reasoning names, else answers A: what a letter-following judge does."""

    name = "letter-stub"
    sees_letters = True

    def judge(self, questions, thinks, options):
        return [(re.findall(r"option ([A-H])\b", t) or ["A"])[-1] for t in thinks]


class ConstantJudge:
    name = "constant-stub"
    sees_letters = False

    def judge(self, questions, thinks, options):
        return ["A"] * len(questions)


def quick_eval_argv(data, model, out, *extra: str) -> list[str]:
    """``embodied-r eval`` argv for a fast tiny-model run (no baselines, 2 new tokens, fp32)."""
    return ["eval", "--data", str(data), "--model", str(model), "--out", str(out), "--baselines", "none",
            "--max-new-tokens", "2", "--dtype", "float32", *extra]
