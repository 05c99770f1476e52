"""The judge probe tells a content reader from a constant judge and from a letter reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from probe_rows import ConstantJudge, ContentJudge, LetterJudge, probe_rows

from embodied_r.cli.main import main
from embodied_r.core.io import write_jsonl
from embodied_r.inference.judge_probe import ProbeError, build_probe_cases, run_probe
from embodied_r.inference.letter_mask import MASK, mask_option_letters


def test_cases_reach_every_option_by_content_never_by_letter() -> None:
    cases = build_probe_cases(probe_rows(20), n_cases=64)
    content = [c for c in cases if c.kind == "content"]
    assert len(content) >= 64 and {c.kind for c in cases} == {"content", "named", "conflict"}
    for case in content:
        assert MASK not in mask_option_letters(case.think, "ABCD"), case.think  # no letter in the content
        target_text = next(o for o in case.options if o.startswith(case.target)).split(". ", 1)[1]
        assert target_text in case.think
    by_question: dict[str, set[str]] = {}
    for case in content:
        by_question.setdefault(case.question, set()).add(case.target)
    assert all(targets == {"A", "B", "C", "D"} for targets in by_question.values())  # every option in turn
    conflict = [c for c in cases if c.kind == "conflict"]
    assert all(c.named != c.target and f"option {c.named}" in c.think for c in conflict)
    assert build_probe_cases(probe_rows(20), seed=0) == build_probe_cases(probe_rows(20), seed=0)


def test_a_content_reader_passes_and_a_constant_judge_fails() -> None:
    cases = build_probe_cases(probe_rows(20))
    good = run_probe(ContentJudge(), cases)
    assert good.passed and good.agreement["content"] == 1.0 and good.top_letter_share == pytest.approx(0.25)
    bad = run_probe(ConstantJudge(), cases)
    assert not bad.passed and bad.top_letter == "A" and bad.top_letter_share == 1.0
    assert bad.agreement["content"] == pytest.approx(0.25)
    assert any("below 80%" in f for f in bad.failures) and any(
        "answers A on 100.0%" in f for f in bad.failures
    )


def test_a_letter_reader_is_caught_by_the_content_and_conflict_cases() -> None:
    result = run_probe(LetterJudge(), build_probe_cases(probe_rows(20)))
    assert result.agreement["named"] == 1.0  # it agrees whenever the letter is named...
    assert result.follows_named_letter == 1.0  # ...follows a contradicting letter...
    assert not result.passed and result.agreement["content"] < 0.8  # ...and fails on content alone


def test_too_few_questions_is_a_clear_error() -> None:
    with pytest.raises(ProbeError, match="at least 16"):
        build_probe_cases(probe_rows(2))


def test_cli_judge_probe_writes_its_numbers(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(20))
    code = main(
        [
            "judge-probe",
            "--judge",
            str(tiny_lm_dir),
            "--data",
            str(data),
            "--out",
            str(tmp_path / "p"),
            "--cases",
            "16",
            "--dtype",
            "float32",
        ]
    )
    result = json.loads((tmp_path / "p" / "judge_probe.json").read_text())
    assert code == (0 if result["passed"] else 1)
    assert result["cases"] == 3 * 16 and set(result["agreement"]) == {"content", "named", "conflict"}
    assert result["judge"] == str(tiny_lm_dir) and result["sees_letters"] is False
    assert ("PASS: " if result["passed"] else "FAIL: ") in capsys.readouterr().out
    assert main(["judge-probe", "--judge", str(tiny_lm_dir), "--data", str(data), "--cases", "4"]) == 2
