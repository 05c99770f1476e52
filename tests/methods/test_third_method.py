"""A third method from outside the package: a tiny package written in a temporary folder and registered with
one call runs rows -> reward -> score through the seam, with no change to training or evaluation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from embodied_r.core.records import QARecord, RecordError
from embodied_r.methods import Method, all_methods, method_for_row, register_method, unregister_method

# The whole method: a row builder, its own reward and its own scorer. Its answers are written <<X>>, and its
# scorer reads nothing else, so a bare letter (which the core scorer would accept) is wrong here.
PACKAGE = {
    "__init__.py": "",
    "rows.py": '''
from embodied_r.core.records import PromptRow


def build_row(record):
    prompt = [{"role": "system", "content": "Think in <think></think>, then answer <answer><<X>></answer>."},
              {"role": "user", "content": record.question + " Options: " + "; ".join(record.options)}]
    return PromptRow(id=record.id, task=record.task, prompt=prompt, answer=record.answer,
                     answer_type=record.answer_type, options=record.options, meta={"prompt_version": "third_v1"})
''',
    "scoring.py": '''
import re

from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE, Scored


def score(completion, answer, answer_type, options, rule=DEFAULT_ACCURACY_RULE):
    found = re.findall(r"<<([A-Z])>>", completion)
    parsed = found[-1] if found else None
    return Scored(parsed, float(parsed == answer))
''',
    "rewards.py": '''
def brevity(completions, **columns):
    return [1.0 if len(c) < 60 else 0.0 for c in completions]
''',
    # Its parts of evaluation's baselines: a text rule, and the prompts of the blind and direct baselines.
    "baselines.py": '''
def _red_rule(row):
    return ("B", None) if "red" in row.prompt[-1]["content"] else (None, "no colour named")


TEXT_RULES = {"pick": ("the red one is B", _red_rule)}


def blind(row):
    question = row.prompt[-1]["content"]
    return [row.prompt[0], {"role": "user", "content": question[question.index("Options:"):]}], 1


def direct(row):
    return [{"role": "user", "content": row.prompt[-1]["content"] + " Answer <<X>> only."}]
''',
}


@pytest.fixture
def third_method(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    package = tmp_path / "third_method_pkg"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    method = Method(
        name="third", builds_rows="python -m third_method_pkg", row_builder="third_method_pkg.rows:build_row",
        prompt_versions=("third_v1",), choice_form="<<{letter}>>", rewards=("format", "accuracy", "brevity"),
        paper_recipe="recipes/third/paper.yaml", own_rewards={"brevity": "third_method_pkg.rewards:brevity"},
        scorer="third_method_pkg.scoring:score", text_rules="third_method_pkg.baselines:TEXT_RULES",
        blind_prompt="third_method_pkg.baselines:blind", direct_prompt="third_method_pkg.baselines:direct",
    )
    register_method(method)  # the one registry line
    yield method
    unregister_method("third")


def test_a_registered_method_runs_rows_to_reward_to_score(third_method: Method) -> None:
    from embodied_r.evaluation.predict import score_completion
    from embodied_r.methods.rewards import get_reward
    from embodied_r.training.data import rows_to_dataset
    from embodied_r.training.recipe import recipe_from_dict
    from embodied_r.training.warmup import choice_parts

    record = QARecord(id="q1", source="third", task="pick", video="", question="Which cup is red?",
                      options=["A. left cup", "B. right cup"], answer="B", answer_type="choice")
    row = third_method.row_builder_function()(record)
    assert method_for_row(row.meta) is third_method

    # Rows -> rewards, as GRPO calls them: the data set's columns carry the row's prompt version, so the
    # accuracy reward pays what the method's scorer says.
    good, bare, wrong = ("<think>red is right</think><answer><<B>></answer>", "<think>.</think><answer>B</answer>",
                         "<think>.</think><answer><<A>></answer>")
    dataset = rows_to_dataset([row] * 3)
    columns = {name: dataset[name] for name in dataset.column_names if name != "prompt"}
    assert get_reward("accuracy")([good, bare, wrong], **columns) == [1.0, 0.0, 0.0]
    assert get_reward("format")([good, bare, wrong], **columns) == [1.0, 1.0, 1.0]
    assert get_reward("brevity")([good, "x" * 80, wrong], **columns) == [1.0, 0.0, 1.0]  # its own reward, by name

    # -> score: evaluation reads the same rows with the same scorer.
    scored = [score_completion(row, c) for c in (good, bare, wrong)]
    assert [(p.parsed_answer, p.correct) for p in scored] == [("B", True), (None, False), ("A", False)]

    # A recipe may name the method's reward; the format warm-up writes the method's answer form.
    assert recipe_from_dict({"train_data": "toy:2", "rewards": ["format", "accuracy", "brevity"]}).reward_names[-1] \
        == "brevity"
    assert choice_parts(row, "A", "option-first")[-1].endswith("<answer><<A>></answer>")


def test_a_method_is_registered_once_and_its_rewards_leave_with_it(third_method: Method) -> None:
    from embodied_r.methods.rewards import reward_table
    from embodied_r.training.recipe import RecipeError, recipe_from_dict

    register_method(third_method)  # the same method again (a second command in one process): nothing happens
    assert [m for m in all_methods() if m.name == "third"] == [third_method]
    with pytest.raises(ValueError, match="a different method named 'third' is already registered"):
        register_method(dataclasses.replace(third_method, choice_form="[{letter}]"))
    with pytest.raises(ValueError, match="already belong to"):
        register_method(Method(name="fourth", builds_rows="", row_builder="m:f", prompt_versions=("official",),
                               choice_form="{letter}", rewards=(), paper_recipe=""))
    assert "brevity" in reward_table()
    unregister_method("third")
    assert "brevity" not in reward_table()
    with pytest.raises(RecipeError, match="unknown reward 'brevity'"):
        recipe_from_dict({"train_data": "toy:2", "rewards": ["brevity"]})


def test_evaluation_baselines_take_the_methods_own_parts(third_method: Method) -> None:
    """The text-rule, blind and direct baselines reach the method's own parts through the row's method; the
    official Embodied-R parser is not applied to its answers; unregistered, its rows are an error."""
    from embodied_r.evaluation.analysis import assemble_metrics
    from embodied_r.evaluation.baselines import blind_rows, direct_answer_rows
    from embodied_r.evaluation.benchmarks.common import LoadReport
    from embodied_r.evaluation.predict import score_completion
    from embodied_r.evaluation.text_rule_baseline import text_rule_predictions, text_rule_table

    record = QARecord(id="q1", source="third", task="pick", video="", question="Which cup is red?",
                      options=["A. left cup", "B. right cup"], answer="B", answer_type="choice")
    row = third_method.row_builder_function()(record)
    rule = text_rule_predictions([row])[0]
    assert (rule["rule"], rule["parsed_answer"], rule["applies"], rule["exact"]) == ("the red one is B", "B", True,
                                                                                     True)
    assert text_rule_table([row])["rules"] == {"pick": "the red one is B"}
    blind = blind_rows([row])[0]
    assert blind.prompt[-1]["content"] == "Options: A. left cup; B. right cup"
    assert blind.meta["blind_removed_frames"] == 1
    assert direct_answer_rows([row])[0].prompt == [{"role": "user", "content": row.prompt[-1]["content"]
                                                    + " Answer <<X>> only."}]
    metrics = assemble_metrics([score_completion(row, "<answer><<B>></answer>").to_dict()], [row], {}, {}, LoadReport())
    assert metrics["tasks"]["pick"]["score"] == 1.0 and "embodied_r" not in metrics["reference"]

    unregister_method("third")
    with pytest.raises(RecordError, match="'third_v1' is written by no known method"):
        text_rule_predictions([row])
