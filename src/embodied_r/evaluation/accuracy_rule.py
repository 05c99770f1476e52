"""``eval --accuracy-rule``: score the reasoner's answers with the rule a run asks for.

Predictions are scored with the default rule as they are generated (``predict.score_completion``). When
a run asks for another rule (``official``: Embodied-R's released reward, a letter read from the whole
completion), every answer the reasoner wrote is read again from its stored completion: the model's own
predictions, and the ``direct`` and ``blind`` baselines (the same model, so it is compared with them
under one rule). The files are rewritten with the new scores, so ``predictions.jsonl``, the report's
paired tests and ``metrics.json`` agree; each record scored with a rule other than the default says so
in ``meta.accuracy_rule``. Nothing is generated again, and a later run with the default rule turns the
scores back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import read_jsonl, write_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE, score_completion

# Baselines answered by the evaluated reasoner itself, each in OUT/baselines/<name>.jsonl.
REASONER_BASELINES = ("direct", "blind")


def record_rule(record: Mapping[str, Any]) -> str:
    """The accuracy rule a prediction record was scored with (records say so only when not the default)."""
    return str((record.get("meta") or {}).get("accuracy_rule") or DEFAULT_ACCURACY_RULE)


def rescored(record: dict[str, Any], row: PromptRow, rule: str) -> dict[str, Any]:
    """``record`` with ``parsed_answer``, ``score`` and ``correct`` read from its completion under ``rule``."""
    completion = str(record.get("completion") or "")
    if rule == DEFAULT_ACCURACY_RULE:
        from embodied_r.methods import method_for_row

        parsed, score = method_for_row(row.meta).score(row, completion)  # as generation scored it
    else:
        parsed, score = score_completion(completion, row.answer, row.answer_type, row.options, rule=rule)
    meta = {k: v for k, v in (record.get("meta") or {}).items() if k != "accuracy_rule"}
    if rule != DEFAULT_ACCURACY_RULE:
        meta["accuracy_rule"] = rule
    return {**record, "parsed_answer": parsed, "score": score, "correct": score >= 1.0, "meta": meta}


def rescore_records(records: Sequence[dict[str, Any]], rows: Mapping[str, PromptRow],
                    rule: str) -> tuple[list[dict[str, Any]], int]:
    """Every record of a known question scored under ``rule`` (records already under it, and ids no row
    names, are kept as they are); returns the records and how many changed rule."""
    out, changed = [], 0
    for record in records:
        row = rows.get(str(record.get("id")))
        if row is None or record_rule(record) == rule:
            out.append(record)
            continue
        out.append(rescored(record, row, rule))
        changed += 1
    return out, changed


def rescore_file(path: Path, rows: Mapping[str, PromptRow], rule: str) -> list[dict[str, Any]]:
    """The records of a predictions file under ``rule``; the file is rewritten (atomically) when any changed."""
    records, changed = rescore_records(read_jsonl(path), rows, rule)
    if changed:
        write_jsonl(path, records)
    return records


def apply_accuracy_rule(out: Path, rows: Sequence[PromptRow], rule: str, predictions: Sequence[dict[str, Any]],
                        baseline_tables: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's ``predictions`` under ``rule``, with ``out/predictions.jsonl`` and the reasoner's
    baseline files and tables brought to the same rule."""
    from embodied_r.core.task_table import task_table
    from embodied_r.evaluation.predict import first_per_id

    by_id = {row.id: row for row in rows}
    if (out / "predictions.jsonl").is_file():
        rescore_file(out / "predictions.jsonl", by_id, rule)
    for name in REASONER_BASELINES:
        table, path = baseline_tables.get(name), out / "baselines" / f"{name}.jsonl"
        if not table or table.get("status") != "ok" or not path.is_file():
            continue
        kept, _ = first_per_id(r for r in rescore_file(path, by_id, rule) if str(r.get("id")) in by_id)
        table.update(task_table(kept))
        table["accuracy_rule"] = rule
    return rescore_records(list(predictions), by_id, rule)[0]


__all__ = ["REASONER_BASELINES", "apply_accuracy_rule", "record_rule", "rescore_file", "rescore_records", "rescored"]
