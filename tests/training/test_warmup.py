"""Format warm-up: targets carry the official structure and never the gold answer; GRPO starts from it."""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from embodied_r.core.parsing import parse_answer
from embodied_r.core.records import PromptRow
from embodied_r.methods.format import is_official_format
from embodied_r.training.grpo import train
from embodied_r.training.recipe import RecipeError, load_recipe
from embodied_r.training.warmup import (
    WarmupError,
    WarmupSettings,
    answer_spread,
    warmup_examples,
    warmup_model_dir,
)


def choice_row(i: int, answer: str = "B", robot: bool = False) -> PromptRow:
    options = ["A. left", "B. right", "C. behind", "D. ahead"]
    choices = " ".join(f"[[{o[0]}]] {o[3:]}" for o in options) if robot else " ".join(options)
    # Robot-R1 rows record the prompt version they were built with; that, not the text, names the method.
    meta = {"prompt_version": "robot_r1_mw_v1"} if robot else {}
    return PromptRow(id=f"c{i}", task="direction", answer=answer, options=options, meta=meta,
                     prompt=[{"role": "user", "content": f"Where is object {i}? {choices}"}])


def number_row(i: int, task: str = "count") -> PromptRow:
    return PromptRow(id=f"n{i}", task=task, answer=float(i), answer_type="number",
                     prompt=[{"role": "user", "content": f"How many chairs are in room {i}?"}])


def completion(example: dict) -> str:
    return example["completion"][0]["content"]


def test_targets_have_the_official_structure_and_uniform_non_gold_choices() -> None:
    rows = [choice_row(i) for i in range(8)]
    examples = warmup_examples(rows, steps=200, batch_size=2, seed=0)
    assert len(examples) == 400
    letters = collections.Counter()
    for example in examples:
        text = completion(example)
        assert is_official_format(text), text
        letter = parse_answer(text, rows[0].options, "choice")
        letters[letter] += 1
        # The think sentence names the option it answers, so think and answer agree.
        assert f"option {letter}," in text
    # Uniform over A-D: the gold letter (B) is not favoured (400 draws: each letter 100 +- ~30).
    assert set(letters) == {"A", "B", "C", "D"}
    assert max(letters.values()) - min(letters.values()) < 60, letters
    # Prompts are the rows' own prompts, untouched.
    assert {e["prompt"][0]["content"] for e in examples} == {r.prompt[0]["content"] for r in rows}


def test_each_visited_prompt_is_trained_with_different_answers() -> None:
    # One random letter per prompt made the model answer each prompt deterministically (GRPO groups then
    # all score the same); a visit trains batch_size different letters.
    rows = [choice_row(i) for i in range(5)]
    examples = warmup_examples(rows, steps=5, batch_size=3, seed=2)
    assert len(examples) == 15
    for start in range(0, 15, 3):
        visit = examples[start:start + 3]
        assert len({e["prompt"][0]["content"] for e in visit}) == 1
        assert len({parse_answer(completion(e), rows[0].options, "choice") for e in visit}) == 3


def test_numeric_targets_borrow_another_rows_answer_never_their_own() -> None:
    rows = [number_row(i) for i in range(1, 6)] + [number_row(9, task="size")]
    by_prompt = {r.prompt[0]["content"]: r for r in rows}
    for example in warmup_examples(rows, steps=30, batch_size=2, seed=1):
        row = by_prompt[example["prompt"][0]["content"]]
        value = parse_answer(completion(example), None, "number")
        assert is_official_format(completion(example))
        assert value is not None and value != row.answer
        if row.task == "count":
            assert value in {1.0, 2.0, 3.0, 4.0, 5.0}  # same task first: a plausible magnitude


def test_answers_per_prompt_is_independent_of_the_batch() -> None:
    rows = [choice_row(i) for i in range(4)]
    examples = warmup_examples(rows, steps=8, batch_size=2, seed=3, answers_per_prompt=4)
    assert len(examples) == 16
    for start in range(0, 16, 4):  # four visits of four different letters each
        visit = examples[start:start + 4]
        assert len({e["prompt"][0]["content"] for e in visit}) == 1
        assert {parse_answer(completion(e), rows[0].options, "choice") for e in visit} == {"A", "B", "C", "D"}
    assert WarmupSettings.from_config({"steps": 2, "batch_size": 3}).answers_per_prompt == 3


def test_gold_answers_train_each_row_on_its_own_answer_once_per_visit() -> None:
    # The supervised arm of the RL-versus-SFT comparison: same template, the right answer.
    rows = [choice_row(i) for i in range(3)] + [number_row(i) for i in range(1, 4)]
    by_prompt = {r.prompt[0]["content"]: r for r in rows}
    examples = warmup_examples(rows, steps=6, batch_size=2, seed=0, answers="gold")
    assert len(examples) == 12
    assert collections.Counter(e["prompt"][0]["content"] for e in examples) == {p: 2 for p in by_prompt}
    for example in examples:
        row, text = by_prompt[example["prompt"][0]["content"]], completion(example)
        assert is_official_format(text)
        assert parse_answer(text, row.options, row.answer_type) == row.answer
    settings = WarmupSettings.from_config({"steps": 2, "batch_size": 4, "answers": "gold"})
    assert settings.answers_per_prompt == 1
    with pytest.raises(WarmupError, match="answers_per_prompt must be 1"):
        WarmupSettings.from_config({"steps": 2, "answers": "gold", "answers_per_prompt": 2})
    with pytest.raises(WarmupError, match="answers must be one of"):
        WarmupSettings.from_config({"steps": 2, "answers": "best"})


def test_a_short_warm_up_visits_every_task_first() -> None:
    # A plain shuffle left the numeric template to chance: four visited prompts, all multiple choice.
    rows = [choice_row(i) for i in range(20)] + [number_row(i, task="size") for i in range(1, 3)]
    for seed in range(5):
        examples = warmup_examples(rows, steps=2, batch_size=2, seed=seed, answers_per_prompt=2)
        kinds = {"answer>" + ("numeric" if "estimate" in completion(e) else "letter") for e in examples}
        assert kinds == {"answer>numeric", "answer>letter"}, seed


def test_robot_rows_answer_as_double_bracketed_letters() -> None:
    example = warmup_examples([choice_row(0, robot=True)], steps=1, batch_size=1, seed=0)[0]
    assert "<answer>[[" in completion(example)


def test_settings_are_checked() -> None:
    assert WarmupSettings.from_config(None) is None
    assert WarmupSettings.from_config({"steps": 0}) is None
    assert WarmupSettings.from_config({"steps": 3}).steps == 3
    with pytest.raises(WarmupError, match="unknown key"):
        WarmupSettings.from_config({"step": 3})
    with pytest.raises(WarmupError, match="batch_size"):
        WarmupSettings.from_config({"steps": 3, "batch_size": 0})
    assert WarmupSettings.from_config({"steps": 3, "batch_size": 4}).micro_batch_size == 4
    with pytest.raises(WarmupError, match="multiple of micro_batch_size 3"):
        WarmupSettings.from_config({"steps": 3, "batch_size": 4, "micro_batch_size": 3})
    with pytest.raises(WarmupError, match="text prompts only"):
        image_row = PromptRow(id="i", task="t", answer="A", options=["A. x", "B. y"],
                              prompt=[{"role": "user", "content": [{"type": "image", "image": "a.png"}]}])  # type: ignore[list-item]
        warmup_examples([image_row], steps=1, batch_size=1, seed=0)


def test_answer_spread_tells_a_collapsed_letter_choice_from_a_spread_one(tiny_lm_dir: Path) -> None:
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    letter_ids = [tokenizer(" " + letter, add_special_tokens=False)["input_ids"][0] for letter in "ABCD"]

    class Logits:  # a stand-in policy whose next-token logits favour the given letters
        device = torch.device("cpu")

        def __init__(self, boost: list[float]) -> None:
            self.boost = boost

        def __call__(self, input_ids: torch.Tensor, **_: object) -> SimpleNamespace:
            logits = torch.zeros(1, input_ids.size(1), len(tokenizer))
            logits[0, :, letter_ids] = torch.tensor(self.boost)
            return SimpleNamespace(logits=logits)

    rows = [choice_row(i) for i in range(3)] + [number_row(1)]
    collapsed = answer_spread(Logits([30.0, 0.0, 0.0, 0.0]), tokenizer, rows)
    assert collapsed == {"rows": 3, "entropy": 0.0, "top": {"A": 3}}
    uniform = answer_spread(Logits([1.0, 1.0, 1.0, 1.0]), tokenizer, rows)
    assert uniform is not None and uniform["entropy"] == pytest.approx(1.0)
    assert answer_spread(Logits([1.0] * 4), tokenizer, [number_row(1)]) is None  # nothing to read


def test_recipe_rejects_a_bad_warmup_key(tiny_recipe) -> None:
    with pytest.raises(RecipeError, match="format_warmup"):
        load_recipe(tiny_recipe(format_warmup={"steps": 2, "lr": 1e-3}))


@pytest.mark.slow
def test_grpo_starts_from_the_warmed_up_model_and_a_rerun_reuses_it(tiny_recipe, tiny_lm_dir: Path) -> None:
    recipe = load_recipe(tiny_recipe(max_steps=1, format_warmup={"steps": 3, "batch_size": 2, "micro_batch_size": 1,
                                                                 "learning_rate": 1e-3}))
    train(recipe)
    warmed = warmup_model_dir(recipe.output_dir)
    assert json.loads((warmed / "warmup.json").read_text())["settings"]["steps"] == 3
    log = json.loads((recipe.output_dir / "warmup" / "log.json").read_text())
    assert len(log["losses"]) == 3 and log["examples"] == 6  # 3 optimizer steps of 2 examples (1 per pass)
    spread = log["answer_spread"]  # how spread the warmed-up letter choice is (collapse would be ~0)
    assert 0.0 <= spread["entropy"] <= 1.0 and sum(spread["top"].values()) == spread["rows"] > 0
    base = load_file(str(tiny_lm_dir / "model.safetensors"))
    after_warmup = load_file(str(warmed / "model.safetensors"))
    assert any(not torch.equal(base[k], after_warmup[k]) for k in base)  # the warm-up trained
    config = json.loads((recipe.output_dir / "grpo_config.json").read_text())
    assert config["model_path"] == str(warmed)  # GRPO started from it
    # A second run into the same folder reuses the finished warm-up (no retraining: same bytes).
    stamp = (warmed / "model.safetensors").stat().st_mtime_ns
    for folder in recipe.output_dir.glob("checkpoint-*"):
        shutil.rmtree(folder)
    train(recipe)
    assert (warmed / "model.safetensors").stat().st_mtime_ns == stamp
    # Other warm-up settings into the same folder are refused rather than silently mixed.
    other = load_recipe(tiny_recipe(max_steps=1, format_warmup={"steps": 4, "batch_size": 2}))
    for folder in other.output_dir.glob("checkpoint-*"):
        shutil.rmtree(folder)
    with pytest.raises(WarmupError, match="new output_dir"):
        train(other)


def frame_row(i: int, last_action: str = "Rotate left", answer: str = "B") -> PromptRow:
    options = ["A. Move forward", "B. Rotate left", "C. Rotate right", "D. Move backward"]
    text = (f"Frame 0: Observe: a sofa {i}.\nFrame 1: After Move forward, Observe: a door.\n"
            f"Frame 2: After {last_action}, Observe: a lamp.\nQuestion: Which action did I take last?\n"
            "Choices:\n" + "\n".join(options))
    return PromptRow(id=f"f{i}", task="last_action", answer=answer, options=options,
                     prompt=[{"role": "user", "content": text}])


def test_gold_rotations_put_each_questions_answer_at_every_letter_in_one_step() -> None:
    from embodied_r.core.parsing import option_texts

    rows = [frame_row(i) for i in range(3)] + [number_row(5)]
    examples = warmup_examples(rows, steps=3, batch_size=4, seed=0, answers="gold", think="evidence",
                               rotations=True)
    assert len(examples) == 12
    choice_steps = [examples[k:k + 4] for k in range(0, 12, 4) if "Choices" in examples[k]["prompt"][0]["content"]]
    assert choice_steps  # numeric rows have no rotations: one example each, as without them
    for step in choice_steps:
        texts = [completion(e) for e in step]
        letters = [parse_answer(t, ["A. a", "B. b", "C. c", "D. d"], "choice") for t in texts]
        assert sorted(letters) == ["A", "B", "C", "D"]  # the gold answer once at each letter
        for example, letter, text in zip(step, letters, texts):
            options = [line for line in example["prompt"][0]["content"].splitlines() if line[:2] in
                       ("A.", "B.", "C.", "D.")]
            assert option_texts(options)[letter] == "Rotate left"  # the letter is where the gold option now is
            assert "choose Rotate left, which is option " + letter in text
    settings = WarmupSettings.from_config({"steps": 2, "batch_size": 4, "answers": "gold", "rotations": True})
    assert settings.rotations is True
    with pytest.raises(WarmupError, match="needs answers: gold"):
        WarmupSettings.from_config({"steps": 2, "batch_size": 4, "rotations": True})
    with pytest.raises(WarmupError, match="rotations is true or false"):
        WarmupSettings.from_config({"steps": 2, "batch_size": 4, "answers": "gold", "rotations": "yes"})


def test_listed_thinks_write_each_letter_after_its_words_before_choosing() -> None:
    # The chosen option's letter follows the same words earlier in the think: a copy, not a lookup.
    row = frame_row(0, last_action="Rotate right", answer="C")
    text = completion(warmup_examples([row], steps=1, batch_size=1, seed=0, answers="gold", think="listed")[0])
    assert text == ("<think> The latest frame: After Rotate right. Options: Move forward (A), Rotate left (B), "
                    "Rotate right (C), Move backward (D). I choose Rotate right (C). </think>\n<answer>C</answer>")
    for example in warmup_examples([frame_row(i) for i in range(4)], steps=4, batch_size=4, seed=0, think="listed"):
        written = completion(example)
        letter = parse_answer(written, frame_row(0).options, "choice")
        words = dict(o.split(". ", 1) for o in frame_row(0).options)[letter]
        assert written.endswith(f"I choose {words} ({letter}). </think>\n<answer>{letter}</answer>")
    assert WarmupSettings.from_config({"steps": 1, "think": "listed"}).think == "listed"


def test_option_first_thinks_name_the_options_words_before_its_letter() -> None:
    rows = [frame_row(i) for i in range(4)]
    for example in warmup_examples(rows, steps=8, batch_size=4, seed=0, think="option-first"):
        text = completion(example)
        assert is_official_format(text)
        letter = parse_answer(text, rows[0].options, "choice")
        words = dict(o.split(". ", 1) for o in rows[0].options)[letter]
        assert f"choose {words}, which is option {letter}." in text, text
        assert "latest frame" not in text
    # letter-first is the template measured before (docs/learning.md): the letter, then its words.
    assert completion(warmup_examples(rows[:1], steps=1, batch_size=1, seed=0)[0]).startswith(
        "<think> I compare the observations with each option and choose option ")


def assert_last_action_quoted_and_letters_random(think: str) -> None:
    rows = [frame_row(i, last_action=a) for i, a in enumerate(["Rotate left", "Move backward"] * 4)]
    letters = collections.Counter()
    for example in warmup_examples(rows, steps=16, batch_size=4, seed=1, think=think):
        text, prompt = completion(example), example["prompt"][0]["content"]
        last = "Rotate left" if "After Rotate left, Observe: a lamp" in prompt else "Move backward"
        assert text.startswith(f"<think> The latest frame: After {last}. I compare"), text
        letters[parse_answer(text, rows[0].options, "choice")] += 1
    assert set(letters) == {"A", "B", "C", "D"} and max(letters.values()) - min(letters.values()) <= 8


def test_latest_frame_thinks_quote_the_last_action_and_keep_the_answers_random() -> None:
    assert_last_action_quoted_and_letters_random("latest-frame")
    number = warmup_examples([number_row(1), number_row(2)], steps=1, batch_size=1, seed=0, think="option-first")
    assert completion(number[0]).startswith("<think> I estimate the quantity")
    with pytest.raises(WarmupError, match="latest-frame"):  # nothing to quote: a clear refusal
        warmup_examples([choice_row(0)], steps=1, batch_size=1, seed=0, think="latest-frame")
    with pytest.raises(WarmupError, match="think must be one of"):
        WarmupSettings.from_config({"steps": 2, "think": "backwards"})
    gold = warmup_examples([frame_row(0)], steps=1, batch_size=1, seed=0, answers="gold", think="latest-frame")
    assert completion(gold[0]) == ("<think> The latest frame: After Rotate left. I compare the observations with "
                                   "each option and choose Rotate left, which is option B. </think>\n"
                                   "<answer>B</answer>")


def test_answer_spread_reads_the_options_words_under_option_first(tiny_lm_dir: Path) -> None:
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    favoured = tokenizer(" right", add_special_tokens=False)["input_ids"]

    class Favour:  # a stand-in policy that strongly prefers the tokens of one word everywhere
        device = torch.device("cpu")

        def __call__(self, input_ids: torch.Tensor, **_: object) -> SimpleNamespace:
            logits = torch.zeros(1, input_ids.size(1), len(tokenizer))
            logits[0, :, favoured] = 30.0
            return SimpleNamespace(logits=logits)

    rows = [choice_row(i) for i in range(3)]  # options left / right / behind / ahead: "right" is B
    spread = answer_spread(Favour(), tokenizer, rows, think="option-first")
    assert spread == {"rows": 3, "entropy": 0.0, "top": {"B": 3}}


def test_evidence_thinks_quote_what_each_task_s_answer_depends_on_and_keep_the_answers_random() -> None:
    assert_last_action_quoted_and_letters_random("evidence")  # for the last action: latest-frame's quote
    counting = PromptRow(id="c", task="object_counting", answer=2, answer_type="number", prompt=[{
        "role": "user", "content": "Frame 0: Observe: I see a red chair.\nFrame 1: After Rotate left, Observe: "
                                   "Newly visible: a red chair; a blue lamp. The chair is visible: a red chair.\n"
                                   "Question: How many chair(s) are in this room?"}])
    examples = warmup_examples([counting, number_row(5)], steps=2, batch_size=1, seed=0, think="evidence")
    target = next(e for e in examples if "chair(s)" in e["prompt"][0]["content"])
    assert completion(target).startswith("<think> New chair in frames: 0, 1. I estimate the quantity")
    # A task type whose answer the text does not state gets no quote, and nothing is refused.
    plain = warmup_examples([choice_row(0)], steps=1, batch_size=1, seed=0, think="evidence")
    assert completion(plain[0]).startswith("<think> I compare the observations")


def test_train_warmup_only_warms_up_and_stops(tiny_recipe, capsys) -> None:
    from embodied_r.cli.main import main

    path = tiny_recipe(max_steps=1, format_warmup={"steps": 2, "batch_size": 2, "micro_batch_size": 1})
    assert main(["train", "--recipe", str(path), "--warmup-only"]) == 0
    recipe = load_recipe(path)
    assert (warmup_model_dir(recipe.output_dir) / "warmup.json").is_file()
    assert not (recipe.output_dir / "final").exists()  # no GRPO ran
    assert main(["train", "--recipe", str(tiny_recipe(max_steps=1)), "--warmup-only"]) == 2
    assert "has no format_warmup" in capsys.readouterr().err


def test_a_relations_prompt_s_think_quotes_its_facts_sentence() -> None:
    """At the oracle's relations level the last frame states what the question needs; the evidence quote is
    that sentence, numbers and all, for any task type."""
    from embodied_r.core.records import PromptRow
    from embodied_r.methods.embodied_r.evidence import evidence_quote

    text = ("Frame 0: Observe: Camera at (0.00, 0.00), heading 0.0° left. In view: sofa 1.\nFrame 1: After Rotate "
            "left 30.0°, Observe: Camera at (0.00, 0.00), heading 30.0° left. In view: chair 1. Facts: closest-point "
            "distances from the sofa: chair 1.25 m, door 0.40 m.\nQuestion: which is the closest to the sofa?")
    row = PromptRow("q", "object_rel_distance", [{"role": "user", "content": text}], "B", "choice",
                    ["A. chair", "B. door"])
    assert evidence_quote(row) == "Facts: closest-point distances from the sofa: chair 1.25 m, door 0.40 m."


def test_choice_log_probs_on_the_context_s_cache_equal_whole_passes(tiny_lm_dir: Path) -> None:
    from embodied_r.inference.models import load_reasoner
    from embodied_r.training.warmup import _choice_log_probs

    model, tokenizer = load_reasoner(str(tiny_lm_dir), dtype="float32")
    context = "Frame 0: Observe: a red sofa ahead. Frame 1: After rotate left, Observe: a door. I choose"
    choices = [" the chair is to the left", " option B", " Rotate left, which is option C"]
    scores = _choice_log_probs(model, tokenizer, context, choices)
    start = tokenizer(context, add_special_tokens=False)["input_ids"]
    whole = []
    for choice in choices:  # each continuation scored by one pass over the whole text
        ids = tokenizer(context + choice, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        picked = torch.log_softmax(logits[len(start) - 1:len(ids) - 1], dim=-1)
        whole.append(float(picked.gather(1, torch.tensor(ids[len(start):])[:, None]).sum()))
    assert scores == pytest.approx(whole, abs=1e-4)  # the cache is cut back to the context after each choice
    assert len({round(s, 3) for s in whole}) == 3  # three different scores, so a mix-up would show
