"""consistency_rule: shuffled-options: the reader re-reads a think with the options shuffled and relabelled."""

from __future__ import annotations

import random

import pytest
from probe_rows import LetterJudge, probe_rows

from embodied_r.judge.judges import NO_OPTION
from embodied_r.judge.probe import KINDS, build_probe_cases, run_probe
from embodied_r.judge.reference_judges import AlwaysFirstJudge, MentionedLastJudge
from embodied_r.judge.shuffled_options import ShuffledOptionsJudge, derangement, relabelled
from embodied_r.methods.rewards import get_reward

OPTIONS = ["A. left", "B. right", "C. behind", "D. front"]
QUESTION = "Question: Where is the chair?\nChoices:\n" + "\n".join(OPTIONS) + "\nAnswer with the letter."


def _texts(options):
    return {o.split(". ", 1)[0]: o.split(". ", 1)[1] for o in options}


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_every_option_moves_and_the_map_back_follows_the_text(n) -> None:
    for seed in range(20):
        order = derangement(n, random.Random(seed))
        assert sorted(order) == list(range(n)) and all(order[i] != i for i in range(n))
    options = OPTIONS[:n] if n <= 4 else [f"{chr(65 + i)}. option text {i}" for i in range(n)]
    question = "Question: which?\nChoices:\n" + "\n".join(options)
    rewritten, new, back = relabelled(question, options, seed="x")
    before, after = _texts(options), _texts(new)
    assert all(after[letter] == before[original] for letter, original in back.items())  # same text, new letter
    assert all(letter != original for letter, original in back.items())
    assert rewritten == "Question: which?\nChoices:\n" + "\n".join(new)


def test_the_choice_list_is_rewritten_where_it_stands_or_appended() -> None:
    rewritten, new, _ = relabelled(QUESTION, OPTIONS, seed=0)
    assert rewritten.startswith("Question: Where is the chair?\nChoices:\n" + "\n".join(new))
    assert rewritten.endswith("\nAnswer with the letter.")
    appended, new, _ = relabelled("Question: Where is the chair?", OPTIONS, seed=0)
    assert appended == "Question: Where is the chair?\nChoices:\n" + "\n".join(new)


class TextReader:
    """Reads content perfectly: knows, per think, the text of the option it leads to (or none), and
    answers whatever letter that text has in the options it is shown."""

    name = "text-reader"
    sees_letters = False

    def __init__(self, cases) -> None:
        from embodied_r.judge.judges import visible_thinks

        seen = visible_thinks(self, [c.think for c in cases], [c.options for c in cases])
        self.texts = {think: (_texts(c.options)[c.target] if c.target != NO_OPTION else NO_OPTION)
                      for c, think in zip(cases, seen)}

    def judge(self, questions, thinks, options):
        out = []
        for think, opts in zip(thinks, options):
            text = self.texts[think]
            out.append(text if text == NO_OPTION else next(x for x, t in _texts(opts).items() if t == text))
        return out


def test_it_is_probed_like_any_judge() -> None:
    cases = build_probe_cases(probe_rows(20))
    reader = TextReader(cases)
    shuffled = run_probe(ShuffledOptionsJudge(reader), cases)
    assert shuffled.passed and all(shuffled.agreement[kind] == 1.0 for kind in KINDS)
    assert shuffled.judge == "shuffled-options:text-reader"
    # String matching reads texts, which shuffling keeps: the same answers, and the same failure.
    plain = run_probe(MentionedLastJudge(), cases)
    wrapped = run_probe(ShuffledOptionsJudge(MentionedLastJudge()), cases)
    assert wrapped.agreement == plain.agreement and not wrapped.passed
    # A constant letter now lands on whichever text was moved there: still no reading, still a failure.
    constant = run_probe(ShuffledOptionsJudge(AlwaysFirstJudge()), cases)
    assert not constant.passed and constant.top_letter_share < 0.5 and constant.agreement["no-basis"] == 0.0


def test_a_letter_it_reads_points_to_another_option_after_the_shuffle() -> None:
    cases = [c for c in build_probe_cases(probe_rows(20)) if c.kind == "named"]
    assert run_probe(LetterJudge(), cases).agreement["named"] == 1.0
    assert run_probe(ShuffledOptionsJudge(LetterJudge()), cases).agreement["named"] == 0.0


def test_rows_without_options_are_not_judged_and_counted() -> None:
    judge = ShuffledOptionsJudge(MentionedLastJudge())
    assert judge.judge([QUESTION, "Question: how many?"], ['it is "right"', "three"], [OPTIONS, None]) == ["B", None]
    assert judge.last_report.rows == 2 and judge.last_report.not_judged == 1


def test_the_reward_uses_the_rule_and_refuses_an_unknown_one_before_building_a_judge(tmp_path) -> None:
    reward = get_reward("consistency", judge=MentionedLastJudge(), consistency_rule="shuffled-options")
    assert isinstance(reward.judge, ShuffledOptionsJudge)
    prompt = [{"role": "user", "content": QUESTION}]
    paid = reward(prompts=[prompt] * 2, completions=['<think>it is "right"</think><answer>B</answer>',
                                                   "<think>no idea</think><answer>B</answer>"],
                  answer=["B", "B"], answer_type=["choice"] * 2, options=[OPTIONS] * 2)
    assert paid == [1.0, 0.0]  # the second think supports no option: none, which earns nothing
    with pytest.raises(ValueError, match="consistency_rule 'shuffle' does not exist"):
        get_reward("consistency", reference_model=str(tmp_path / "no-such-model"), policy_model="p",
                   consistency_rule="shuffle")


def test_a_real_reader_answers_in_the_original_letters(tiny_lm_dir) -> None:
    from embodied_r.judge.judges import ReferenceJudge

    reader = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu")
    judge = ShuffledOptionsJudge(reader)
    thinks = ['it is "right"', "it is behind me", "no idea"]
    answers = judge.judge([QUESTION] * 3, thinks, [OPTIONS] * 3)
    assert all(a in "ABCD" for a in answers) and judge.last_report.rows == 3


def test_cli_probes_a_judge_under_the_rule(tmp_path, capsys) -> None:
    from embodied_r.cli.main import main
    from embodied_r.core.io import write_jsonl

    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(20))
    argv = ["judge-probe", "--judge", "mentioned-last", "--data", str(data), "--cases", "16",
            "--consistency-rule", "shuffled-options"]
    assert main(argv) == 1
    assert "FAIL: judge shuffled-options:mentioned-last" in capsys.readouterr().out
