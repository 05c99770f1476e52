"""The method task objects: prompt versions, row builders, rewards, recipes and the one scorer."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from embodied_r.methods import EMBODIED_R, METHODS, ROBOT_R1, method_for_row
from embodied_r.methods.embodied_r.prompts import TEMPLATES


def test_every_prompt_version_belongs_to_one_method() -> None:
    from embodied_r.methods.robot_r1.prompts import PROMPT_VERSION

    assert set(EMBODIED_R.prompt_versions) == set(TEMPLATES)
    assert ROBOT_R1.prompt_versions == (PROMPT_VERSION,)
    versions = [v for m in METHODS for v in m.prompt_versions]
    assert len(versions) == len(set(versions))


def test_rows_are_told_apart_by_their_recorded_version_not_their_text() -> None:
    assert method_for_row({"prompt_version": "robot_r1_mw_v1"}) is ROBOT_R1
    assert method_for_row({"prompt_version": "official"}) is EMBODIED_R
    assert method_for_row(None) is EMBODIED_R          # a user's own rows: the default method
    assert method_for_row({"id": "q"}) is EMBODIED_R   # no recorded version: the default method too
    assert ROBOT_R1.answer_text("C") == "[[C]]" and EMBODIED_R.answer_text("C") == "C"


def test_a_recorded_version_no_method_writes_is_an_error_naming_the_known_ones() -> None:
    """Following the default method there would score another method's rows by Embodied-R's rules, silently."""
    from embodied_r.core.records import RecordError
    from embodied_r.methods.accuracy import accuracy_reward

    with pytest.raises(RecordError) as error:
        method_for_row({"prompt_version": "robot_r1_v0"})
    message = str(error.value)
    assert "'robot_r1_v0' is written by no known method" in message
    assert all(v in message for m in METHODS for v in (m.name, *m.prompt_versions))
    with pytest.raises(RecordError, match="no known method"):  # in training, through the data set's column
        accuracy_reward(["<answer>B</answer>"], answer=["B"], options=[["A. x", "B. y"]], prompt_version=["v0"])
    assert accuracy_reward(["<answer>B</answer>"], answer=["B"], options=[["A. x", "B. y"]],
                           prompt_version=[None]) == [1.0]


def test_the_methods_say_which_reference_parser_reads_their_answers() -> None:
    """``assemble_metrics`` reports the official Embodied-R script's parser for the answers written in its
    format, which the method says (``embodied_r_script_format``), not for Embodied-R rows by identity."""
    from embodied_r.core.records import PromptRow
    from embodied_r.evaluation.analysis import assemble_metrics
    from embodied_r.evaluation.benchmarks.common import LoadReport
    from embodied_r.evaluation.predict import score_completion

    assert EMBODIED_R.embodied_r_script_format and not ROBOT_R1.embodied_r_script_format
    rows = [PromptRow("e", "dir", [], "B", "choice", ["A. x", "B. y"], meta={"prompt_version": "official-v1"}),
            PromptRow("r", "waypoint", [], "B", "choice", ["A. x", "B. y"], meta={"prompt_version": "robot_r1_mw_v1"})]
    predictions = [score_completion(rows[0], "<answer>B</answer>").to_dict(),
                   score_completion(rows[1], "<answer>[[B]]</answer>").to_dict()]
    reference = assemble_metrics(predictions, rows, {}, {}, LoadReport())["reference"]
    assert reference["embodied_r"] == {"dir_accuracy": 100.0, "total_accuracy": 100.0, "parser_disagreements": 0}
    robot_only = assemble_metrics(predictions[1:], rows[1:], {}, {}, LoadReport())["reference"]
    assert "embodied_r" not in robot_only


def test_the_official_embodied_r_parser_is_not_applied_to_robot_r1_answers() -> None:
    from embodied_r.evaluation.reference_names import reference_metrics

    predictions = [{"id": "r", "task": "waypoint", "answer_type": "choice", "answer": "B",
                    "completion": "<answer>[[B]]</answer>", "parsed_answer": "B"},
                   {"id": "e", "task": "dir", "answer_type": "choice", "answer": "B",
                    "completion": "<answer>B</answer>", "parsed_answer": "B"}]
    assert reference_metrics(predictions, {"e"})["embodied_r"] == {"dir_accuracy": 100.0,
                                                                       "total_accuracy": 100.0,
                                                                       "parser_disagreements": 0}
    assert "embodied_r" not in reference_metrics(predictions[:1], set())  # Robot-R1 rows only: no table


def _repository_root() -> Path:
    return Path(__file__).resolve().parents[2]


def test_each_task_object_names_a_real_command_builder_rewards_and_recipe() -> None:
    from embodied_r.cli.main import build_parser
    from embodied_r.methods.rewards import reward_spec, reward_table

    for method in METHODS:
        program, *words = method.builds_rows.split()
        assert program == "embodied-r"
        parser = build_parser()
        for word in words:  # a command and its sub-commands, e.g. `synth robot`
            commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
            assert word in commands, method.builds_rows
            parser = commands[word]
        builder = method.row_builder_function()
        assert callable(builder)
        assert builder.__module__.startswith(f"embodied_r.methods.{method.name}."), builder.__module__
        assert set(method.rewards) <= set(reward_table())
        recipe = yaml.safe_load((_repository_root() / method.paper_recipe).read_text())
        assert [reward_spec(r)[0] for r in recipe["rewards"]] == list(method.rewards)
        assert recipe.get("reward_schedule") == method.reward_schedule  # the paper's weights, as its recipe writes them


def test_train_help_lists_each_methods_paper_recipe() -> None:
    from embodied_r.cli.main import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    recipe_help = next(a.help for a in commands["train"]._actions if a.dest == "recipe")
    for method in METHODS:
        assert f"{method.name}: {method.paper_recipe}" in recipe_help


def test_embodied_r_rows_from_the_named_builder_are_recognised_and_scored_by_their_method() -> None:
    from embodied_r.core.records import Perception, QARecord

    question = QARecord(id="q", source="s", task="relative_direction", video="v.mp4", question="Where is the door?",
                        options=["A. left", "B. right"], answer="B", answer_type="choice")
    frames = [{"index": 0, "action": None, "description": "A door on the right."}]
    perception = Perception(qa_id="q", video="v.mp4", backend="oracle", model="m", prompt_version="official-v1",
                            frames=frames)
    rows, missing = EMBODIED_R.row_builder_function()([question], {"q": perception}, "official-v1")
    assert not missing and method_for_row(rows[0].meta) is EMBODIED_R
    assert EMBODIED_R.score(rows[0], "<think>.</think><answer>B</answer>") == ("B", 1.0)
    assert EMBODIED_R.score(rows[0], "<think>.</think><answer>A</answer>").score == 0.0


@pytest.mark.parametrize(("answer_type", "answer", "options", "completion", "expected"), [
    ("choice", "B", ["A. left", "B. right"], "<answer>B</answer>", 1.0),
    ("choice", "B", ["A. left", "B. right"], "<answer>[[B]]</answer>", 1.0),
    ("number", 2.0, None, "<answer>2.5</answer>", 0.6),  # relative error 0.25: 6 of the 10 MRA thresholds
    ("open", "move left", None, "<answer>Move  left</answer>", 1.0),
    ("position", [0.1, 0.2, 0.3], None, "<answer>[0.1, 0.2, 0.3]</answer>", 1.0),
])
def test_training_and_evaluation_score_through_the_task_object(answer_type: str, answer: Any, options: Any,
                                                               completion: str, expected: float) -> None:
    from embodied_r.core.records import PromptRow
    from embodied_r.evaluation.predict import score_completion
    from embodied_r.methods.accuracy import accuracy_reward

    row = PromptRow(id="r", task="t", prompt=[], answer=answer, answer_type=answer_type, options=options)
    method_score = EMBODIED_R.score(row, completion).score
    assert score_completion(row, completion).score == method_score
    reward = accuracy_reward([completion], answer=[answer], answer_type=[answer_type], options=[options])
    assert reward == [method_score]
    assert method_score == expected
