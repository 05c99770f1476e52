"""Balanced steps (``balanced_steps``) from option rotations: ``letters`` trains each choice question as its
rotations (the answer at each letter once) in one GRPO step; ``answers`` fills a step with questions of
different gold answers at different letters."""

from __future__ import annotations

from collections import Counter

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import write_jsonl
from embodied_r.core.parsing import option_texts
from embodied_r.core.records import PromptRow
from embodied_r.training.option_rotations import BalancedAnswerSampler, RotationSampler, rotated_rows, rotations
from embodied_r.training.recipe import RecipeError, load_recipe


def choice_row(qid: str, answer: str = "C") -> PromptRow:
    options = ["A. Move backward", "B. Rotate left", "C. Rotate right", "D. Move forward"]
    text = "Frame 0: After Rotate right, Observe: a bed.\nQuestion: which action?\nChoices:\n" + "\n".join(options)
    return PromptRow(id=qid, task="last_action", answer=answer, options=options,
                     prompt=[{"role": "system", "content": "Answer."}, {"role": "user", "content": text}])


def test_each_rotation_puts_the_answer_at_a_new_letter_and_keeps_its_content() -> None:
    row = choice_row("q")
    rotated = rotations(row)
    assert [r.id for r in rotated] == ["q", "q~rot1", "q~rot2", "q~rot3"]
    assert sorted(r.answer for r in rotated) == ["A", "B", "C", "D"]
    assert rotated[0].prompt == row.prompt and rotated[0].answer == "C"
    for r in rotated:
        assert option_texts(r.options)[r.answer] == "Rotate right"  # the gold option's content is unchanged
        assert r.prompt[0] == row.prompt[0]  # the system message is untouched
        content = r.prompt[1]["content"]
        assert content.startswith("Frame 0: After Rotate right")  # the frame text is not rewritten
        assert content.endswith("\n".join(r.options))  # the choice lines follow the new order
        assert r.meta["rotation_of"] == "q"
    assert row.answer == "C" and row.options[0] == "A. Move backward"  # the original row is not mutated


def test_rows_that_cannot_be_rotated_are_refused() -> None:
    number = PromptRow(id="n", task="count", answer=3.0, answer_type="number",
                       prompt=[{"role": "user", "content": "How many?"}])
    with pytest.raises(ValueError, match="row n: balanced_steps needs choice questions"):
        rotations(number)
    two = PromptRow(id="t", task="d", answer="A", options=["A. x", "B. y"],
                    prompt=[{"role": "user", "content": "A. x\nB. y"}])
    with pytest.raises(ValueError, match=r"same number of options; found \[2, 4\]"):
        rotated_rows([choice_row("q"), two])
    wrong = PromptRow(id="w", task="d", answer="E", options=["A. x", "B. y"],
                      prompt=[{"role": "user", "content": "A. x\nB. y"}])
    with pytest.raises(ValueError, match="answer 'E' is not one of its option letters"):
        rotations(wrong)


def test_the_sampler_keeps_a_questions_rotations_in_one_batch_and_repeats_like_trl() -> None:
    sampler = RotationSampler(num_rows=24, group_size=4, batch_size=8, mini_repeat_count=2, seed=3)
    order = list(sampler)
    assert len(order) == len(sampler) == 48
    assert order[0::2] == order[1::2]  # each prompt index repeated mini_repeat_count times in a row
    prompts = order[0::2]
    batches = [prompts[i:i + 8] for i in range(0, len(prompts), 8)]
    for batch in batches:
        assert Counter(i // 4 for i in batch) == {q: 4 for q in {i // 4 for i in batch}}  # whole questions
    assert sorted(prompts) == list(range(24))  # every rotation once per epoch
    assert list(RotationSampler(24, 4, 8, 2, seed=3)) == order  # same seed, same order on every process
    assert list(RotationSampler(24, 4, 8, 2, seed=4)) != order
    with pytest.raises(ValueError, match="multiple of 4"):
        RotationSampler(24, 4, 6, 2)


def test_training_samples_every_rotation_of_a_question_in_the_same_step(tiny_recipe, tmp_path, id_recorder) -> None:
    write_jsonl(tmp_path / "rotations.jsonl", [choice_row(f"q{i}").to_dict() for i in range(3)])
    recipe = tiny_recipe(train_data=str(tmp_path / "rotations.jsonl"), balanced_steps="letters",
                         rewards=["format", "test_record_ids"], num_generations=2, per_device_train_batch_size=8,
                         max_completion_length=4, max_steps=2)
    assert main(["train", "--recipe", str(recipe)]) == 0
    assert len(id_recorder) == 2
    for step in id_recorder:
        # 8 completions = 4 prompts x 2: the four rotations of one question, each twice.
        base = {i.split("~")[0] for i in step}
        assert len(base) == 1, step
        assert sorted(Counter(step).values()) == [2, 2, 2, 2]


def test_a_step_that_cannot_hold_whole_questions_stops_before_training(tiny_recipe, tmp_path, capsys) -> None:
    write_jsonl(tmp_path / "rotations.jsonl", [choice_row(f"q{i}").to_dict() for i in range(3)])
    recipe = tiny_recipe(train_data=str(tmp_path / "rotations.jsonl"), balanced_steps="letters",
                         num_generations=2, per_device_train_batch_size=4)
    assert main(["train", "--recipe", str(recipe)]) != 0
    assert "a step samples 2 prompts, which cannot hold whole blocks of 4" in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    with pytest.raises(RecipeError, match="'balanced_steps' must be one of none, letters, answers"):
        load_recipe(tiny_recipe(balanced_steps="yes"))


def answer_rows(answers: str) -> list[PromptRow]:
    """One question per letter of ``answers`` (the letter is its gold answer in the original order)."""
    return [choice_row(f"q{i}", letter) for i, letter in enumerate(answers)]


def test_an_answers_step_holds_different_answers_at_different_letters() -> None:
    # 9 questions answered "Rotate left" (B), 2 each of the other three: a skew a policy could exploit.
    rows, n = rotated_rows(answer_rows("BBBBBBBBBAACCDD"))
    sampler = BalancedAnswerSampler(rows, n, batch_size=8, mini_repeat_count=2, seed=0)
    order = list(sampler)
    assert len(order) == len(sampler) == 8 * 2 * (15 // 8)
    prompts = order[0::2]
    assert prompts == order[1::2]
    for start in range(0, len(prompts), 4):
        block = [rows[i] for i in prompts[start:start + 4]]
        assert sorted(r.answer for r in block) == ["A", "B", "C", "D"]  # every letter right once
        assert len({option_texts(r.options)[r.answer] for r in block}) == 4  # every answer right once
    assert list(BalancedAnswerSampler(rows, n, 8, 2, seed=0)) == order
    with pytest.raises(ValueError, match="answers needs at least 4 different gold answers.*found 2"):
        BalancedAnswerSampler(rotated_rows(answer_rows("BBAA"))[0], 4, 4, 1)


def test_answers_steps_train_through_the_cli_and_refuse_too_few_answers(tiny_recipe, tmp_path, id_recorder,
                                                                       capsys) -> None:
    write_jsonl(tmp_path / "answers.jsonl", [r.to_dict() for r in answer_rows("ABCDBB")])
    recipe = tiny_recipe(train_data=str(tmp_path / "answers.jsonl"), balanced_steps="answers",
                         rewards=["format", "test_record_ids"], num_generations=2, per_device_train_batch_size=8,
                         max_completion_length=4, max_steps=2)
    assert main(["train", "--recipe", str(recipe)]) == 0
    rows = {r.id: r for r in rotated_rows(answer_rows("ABCDBB"))[0]}
    assert len(id_recorder) == 2
    for step in id_recorder:
        block = [rows[i] for i in step[0::2]]
        assert sorted(r.answer for r in block) == ["A", "B", "C", "D"]
        assert len({option_texts(r.options)[r.answer] for r in block}) == 4
    write_jsonl(tmp_path / "skewed.jsonl", [r.to_dict() for r in answer_rows("BBBA")])
    skewed = tiny_recipe(train_data=str(tmp_path / "skewed.jsonl"), balanced_steps="answers",
                         num_generations=2, per_device_train_batch_size=8, output_dir=str(tmp_path / "run2"))
    assert main(["train", "--recipe", str(skewed)]) != 0
    assert "answers needs at least 4 different gold answers" in capsys.readouterr().err
    assert not (tmp_path / "run2" / "metrics.jsonl").exists()
