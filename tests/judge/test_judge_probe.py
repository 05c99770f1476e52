"""The judge probe tells a content reader from a constant judge, a letter reader and a string matcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from probe_rows import ConstantJudge, LetterJudge, OracleJudge, probe_rows

from embodied_r.cli.main import main
from embodied_r.core.io import write_jsonl
from embodied_r.judge.judges import NO_OPTION, build_judge
from embodied_r.judge.letter_mask import MASK, mask_option_letters
from embodied_r.judge.probe import KINDS, ProbeError, build_probe_cases, calibrate_no_basis, run_probe
from embodied_r.judge.probe_phrasings import free_of, option_words
from embodied_r.judge.reference_judges import MentionedLastJudge


def _text(case, letter: str) -> str:
    return next(o for o in case.options if o.startswith(letter)).split(". ", 1)[1]


def test_cases_reach_every_option_by_content_never_by_letter() -> None:
    cases = build_probe_cases(probe_rows(20), n_cases=64)
    assert {c.kind for c in cases} == set(KINDS)
    content = [c for c in cases if c.kind == "content"]
    assert len(content) >= 64
    for case in content:
        assert MASK not in mask_option_letters(case.think, "ABCD"), case.think  # no letter in the content
        assert _text(case, case.target) in case.think
    by_question: dict[str, set[str]] = {}
    for case in content:
        by_question.setdefault(case.question, set()).add(case.target)
    assert all(targets == {"A", "B", "C", "D"} for targets in by_question.values())  # every option in turn
    conflict = [c for c in cases if c.kind == "conflict"]
    assert all(c.named != c.target and f"option {c.named}" in c.think for c in conflict)
    assert build_probe_cases(probe_rows(20), seed=0) == build_probe_cases(probe_rows(20), seed=0)
    assert build_probe_cases(probe_rows(20), seed=0) != build_probe_cases(probe_rows(20), seed=1)


def test_the_new_kinds_cannot_be_passed_by_string_matching() -> None:
    cases = build_probe_cases(probe_rows(20), n_cases=64)
    for case in (c for c in cases if c.kind == "target-first"):
        target = _text(case, case.target)
        assert case.think.index(f'"{target}"') < min(  # the target is named first...
            case.think.index(f'"{_text(case, x)}"') for x in "ABCD" if x != case.target and _text(case, x) in case.think
        )
        assert MentionedLastJudge.pick(case.think, case.options) not in (case.target, NO_OPTION)  # ...a wrong one last
    paraphrases = [c for c in cases if c.kind == "paraphrase"]
    assert len(paraphrases) == 64 and not any(c.builtin for c in paraphrases)
    for case in paraphrases:
        assert free_of(case.think, option_words(case.options)), case.think  # no word of any option
    no_basis = [c for c in cases if c.kind == "no-basis"]
    assert len(no_basis) == 64 and all(c.target == NO_OPTION for c in no_basis)
    assert any(_text(c, "A") in c.think or _text(c, "B") in c.think for c in no_basis)  # some name options


def test_mentioned_last_and_always_a_fail_and_a_judge_passes_only_when_every_kind_passes() -> None:
    cases = build_probe_cases(probe_rows(20))
    last = run_probe(build_judge("mentioned-last", "unused"), cases)
    # It is perfect on reasoning that ends on its target, and that is no longer enough.
    assert last.agreement["content"] == last.agreement["named"] == last.agreement["conflict"] == 1.0
    assert last.agreement["target-first"] == 0.0 and last.agreement["paraphrase"] == 0.0
    assert last.agreement["no-basis"] < 0.8 and not last.passed
    assert {f.split(" agreement")[0] for f in last.failures} == {"target-first", "paraphrase", "no-basis"}
    first = run_probe(build_judge("always-a", "unused"), cases)
    assert not first.passed and first.top_letter == "A" and first.top_letter_share == 1.0
    assert first.agreement["content"] == pytest.approx(0.25) and first.agreement["no-basis"] == 0.0
    assert any("below 80%" in f for f in first.failures) and any("answers A on 100.0%" in f for f in first.failures)
    good = run_probe(OracleJudge(cases), cases)
    assert good.passed and all(good.agreement[k] == 1.0 for k in KINDS) and good.counts["no-basis"] == 64
    assert good.top_letter_share == pytest.approx(0.25)

    class NeverNone(OracleJudge):  # right on every reasoning that supports an option, never answers none
        def judge(self, questions, thinks, options):
            return [a if a != NO_OPTION else "A" for a in super().judge(questions, thinks, options)]

    always_picks = run_probe(NeverNone(cases), cases)
    assert not always_picks.passed and always_picks.failures == ["no-basis agreement 0.0% is below 80%"]


def test_a_letter_reader_is_caught_by_the_content_and_conflict_cases() -> None:
    result = run_probe(LetterJudge(), build_probe_cases(probe_rows(20)))
    assert result.agreement["named"] == 1.0  # it agrees whenever the letter is named...
    assert result.follows_named_letter == 1.0  # ...follows a contradicting letter...
    assert not result.passed and result.agreement["content"] < 0.8  # ...and fails on content alone


def test_too_few_questions_is_a_clear_error() -> None:
    with pytest.raises(ProbeError, match="at least 16"):
        build_probe_cases(probe_rows(2))


def test_options_outside_the_paraphrase_table_get_builtin_paraphrase_questions() -> None:
    rows = probe_rows(20)
    for i, row in enumerate(rows):
        row["options"] = [f"{x}. the drone flies over building {i}{x} and lands" for x in "ABCD"]
    cases = build_probe_cases(rows)
    paraphrases = [c for c in cases if c.kind == "paraphrase"]
    assert paraphrases and all(c.builtin for c in paraphrases)
    assert all(free_of(c.think, option_words(c.options)) for c in paraphrases)
    result = run_probe(ConstantJudge(), cases)
    assert result.builtin_cases == len(paraphrases) and result.counts["paraphrase"] == len(paraphrases)


class _ScoringStub(OracleJudge):
    """An option-text judge whose best score is high where the reasoning supports an option and low
    where it supports none, with the ``no_basis`` rule of ``ReferenceJudge``."""

    scoring = "option-text"
    no_basis = None

    def option_scores(self, questions, thinks, options):
        out = []
        for target, opts in zip(OracleJudge.judge(self, questions, thinks, options), options):
            letters = [o[0] for o in opts]
            out.append({x: (2.0 if x == target else 0.0) if target != NO_OPTION else (0.5 if x == "B" else 0.0)
                        for x in letters})
        return out

    def judge(self, questions, thinks, options):
        scores = self.option_scores(questions, thinks, options)
        best = [max(s, key=s.get) for s in scores]
        return [NO_OPTION if self.no_basis is not None and s[b] < self.no_basis else b for s, b in zip(scores, best)]


def test_the_no_basis_threshold_is_calibrated_on_other_cases_and_then_answers_none() -> None:
    calibration = build_probe_cases(probe_rows(20), seed=1)
    cases = build_probe_cases(probe_rows(20), seed=0)
    judge = _ScoringStub([*calibration, *cases])
    assert not run_probe(judge, cases).passed  # without a threshold it always picks an option
    judge.no_basis = calibrate_no_basis(judge, calibration)
    assert 0.5 < judge.no_basis < 2.0
    result = run_probe(judge, cases)
    assert result.passed and result.agreement["no-basis"] == 1.0 and result.no_basis == judge.no_basis
    with pytest.raises(ValueError, match="option-text"):
        calibrate_no_basis(build_judge("mentioned-last", "unused"), calibration)


def _probe_argv(data: Path, judge: str, *extra: str) -> list[str]:
    return ["judge-probe", "--judge", judge, "--data", str(data), "--cases", "16", "--dtype", "float32", *extra]


def test_cli_judge_probe_writes_its_numbers(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(20))
    code = main(_probe_argv(data, str(tiny_lm_dir), "--out", str(tmp_path / "p")))
    result = json.loads((tmp_path / "p" / "judge_probe.json").read_text())
    assert code == (0 if result["passed"] else 1)
    assert result["counts"] == {kind: 16 for kind in KINDS} and result["cases"] == 6 * 16
    assert set(result["agreement"]) == set(KINDS) and result["calibration"] is None
    assert result["judge"] == str(tiny_lm_dir) and result["sees_letters"] is False
    assert ("PASS: " if result["passed"] else "FAIL: ") in capsys.readouterr().out
    assert main(["judge-probe", "--judge", str(tiny_lm_dir), "--data", str(data), "--cases", "4"]) == 2


def test_cli_reference_judges_fail_and_no_basis_is_calibrated(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(20))
    for name in ("mentioned-last", "always-a"):
        assert main(_probe_argv(data, name)) == 1
        assert f"FAIL: judge {name}" in capsys.readouterr().out
    out = tmp_path / "calibrated.json"
    main(_probe_argv(data, str(tiny_lm_dir), "--no-basis", "calibrate", "--out", str(out)))
    record = json.loads(out.read_text())
    assert record["calibration"]["no_basis"] == record["no_basis"] and record["calibration"]["seed"] == 1
    assert record["calibration"]["cases"] == 6 * 16
    # Settings a judge cannot use are refused before any model loads.
    assert main(_probe_argv(data, "mentioned-last", "--no-basis", "1.0")) == 2
    assert main(_probe_argv(data, str(tiny_lm_dir), "--no-basis", "high")) == 2
    assert main(_probe_argv(data, str(tmp_path / "no-such-model"), "--refusal")) == 2
    assert "refusal is for judges that answer by letter" in capsys.readouterr().err
