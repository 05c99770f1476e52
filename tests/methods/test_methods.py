"""The method task objects know every prompt version the prompt builders write."""

from __future__ import annotations

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
    assert ROBOT_R1.answer_text("C") == "[[C]]" and EMBODIED_R.answer_text("C") == "C"


def test_the_official_embodied_r_parser_is_not_applied_to_robot_r1_answers() -> None:
    from embodied_r.evaluation.reference_names import reference_metrics

    predictions = [{"id": "r", "task": "waypoint", "answer_type": "choice", "answer": "B",
                    "completion": "<answer>[[B]]</answer>", "parsed_answer": "B"},
                   {"id": "e", "task": "dir", "answer_type": "choice", "answer": "B",
                    "completion": "<answer>B</answer>", "parsed_answer": "B"}]
    assert reference_metrics({}, predictions, {"e"})["embodied_r"] == {"dir_accuracy": 100.0,
                                                                       "total_accuracy": 100.0,
                                                                       "parser_disagreements": 0}
    assert "embodied_r" not in reference_metrics({}, predictions[:1], set())  # Robot-R1 rows only: no table
