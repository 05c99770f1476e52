"""Training rows small enough for the tiny test models."""

from __future__ import annotations

from embodied_r.core.records import PromptRow


def short_rows(n: int, prefix: str) -> list[dict]:
    """Prompt rows with short prompts (the tiny model's byte-level tokenizer makes long ones slow)."""
    rows = []
    for i in range(n):
        if i % 2 == 0:
            rows.append(
                PromptRow(
                    id=f"{prefix}{i}",
                    task="direction",
                    answer="B",
                    options=["A. left", "B. right"],
                    prompt=[
                        {
                            "role": "user",
                            "content": f"Frame 0: chair {i} right. Question: "
                            "where? Choices: A. left B. right",
                        }
                    ],
                )
            )
        else:
            rows.append(
                PromptRow(
                    id=f"{prefix}{i}",
                    task="count",
                    answer=float(i),
                    answer_type="number",
                    prompt=[{"role": "user", "content": f"Question: how many? {i}"}],
                )
            )
    return [r.to_dict() for r in rows]
