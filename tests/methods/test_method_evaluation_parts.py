"""The parts of a method that evaluation runs on benchmark questions (its row builder and default prompt version,
the system prompt of ready prompt files, its perception stage and backends, the key frames of the VLM-only
baseline) are ``Method`` fields, and evaluation reads each of them from the method, not from Embodied-R's modules:
a method from outside the package gets its own parts run, and one without them (Robot-R1) is told so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from embodied_r.core.io import DataFileError, read_jsonl
from embodied_r.core.records import PromptRow, QARecord
from embodied_r.methods import (
    BUILD_PROMPTS,
    EMBODIED_R,
    METHODS,
    ROBOT_R1,
    Method,
    import_path,
    register_method,
    unregister_method,
)

# A method with a perception stage of its own: its backend echoes a word, its stage writes one frame per question
# with that word, and its rows say which builder made them.
PACKAGE = {
    "__init__.py": "",
    "parts.py": '''
import json
from types import SimpleNamespace

import numpy as np

from embodied_r.core.records import Perception, PromptRow

CALLS = []


def build_rows(questions, perceptions, prompt_version):
    rows, missing = [], []
    for qa in questions:
        if qa.id not in perceptions:
            missing.append(qa.id)
            continue
        text = " ".join(f["delta"] for f in perceptions[qa.id].frames)
        rows.append(PromptRow(id=qa.id, task=qa.task, prompt=[{"role": "user", "content": f"built: {text}"}],
                              answer=qa.answer, answer_type=qa.answer_type, options=qa.options,
                              meta={"prompt_version": prompt_version, "video": qa.video}))
    return rows, missing


def system(version):
    return f"the system prompt of {version}"


class EchoBackend:
    name, model = "echo", "none"

    def __init__(self, word):
        self.word = word

    def run(self, requests, on_result):
        for request in requests:
            on_result(request, SimpleNamespace(ok=True, text=f"<answer>B</answer> {self.word}", error=None))


def make_backend(name, **options):
    CALLS.append(("backend", name, options))
    return EchoBackend(**options)


def perceive(questions, qa_dir, keyframes_dir, backend, out_path, cache_dir):
    CALLS.append(("stage", [q.id for q in questions], str(keyframes_dir), str(cache_dir)))
    with open(out_path, "a", encoding="utf-8") as out:
        for qa in questions:
            frames = [{"timestamp": 0.0, "action": None, "delta": backend.word, "q_related": "", "raw": ""}]
            record = Perception(qa_id=qa.id, video=qa.video, backend=backend.name, model=backend.model,
                                prompt_version="p", frames=frames)
            out.write(json.dumps(record.to_dict()) + "\\n")
    return SimpleNamespace(done=len(questions), already_done=0, failed=0, errors=[])


def keyframe_images(keyframes_dir, video, max_side):
    CALLS.append(("keyframes", str(keyframes_dir), video.name, max_side))
    return [0.0, 1.0], [np.zeros((4, 4, 3), dtype=np.uint8)] * 2
''',
}


@pytest.fixture
def seeing_method(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    package = tmp_path / "seeing_method_pkg"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    parts = "seeing_method_pkg.parts"
    method = Method(name="seeing", builds_rows=BUILD_PROMPTS, row_builder=f"{parts}:build_rows",
                    prompt_versions=("seeing_v0", "seeing_v1"), choice_form="{letter}", rewards=("format", "accuracy"),
                    default_prompt_version="seeing_v1", system_prompt=f"{parts}:system",
                    perception_backend=f"{parts}:make_backend", perception_stage=f"{parts}:perceive",
                    keyframe_images=f"{parts}:keyframe_images")
    register_method(method)
    yield method
    unregister_method("seeing")
    for name in [n for n in sys.modules if n.split(".")[0] == "seeing_method_pkg"]:
        del sys.modules[name]  # each test imports its own copy, with its own CALLS


def _questions(tmp_path: Path) -> Path:
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"not decoded: the method's own key frames are used")
    records = [QARecord(id=f"q{i}", source="s", task="dir", video=str(video), question="Where is the door?",
                        options=["A. left", "B. right"], answer="B") for i in range(2)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records), encoding="utf-8")
    return path


def test_every_part_a_shipped_method_names_can_be_imported() -> None:
    """A misspelt path would fail only when evaluation reaches the part: every named one is imported here."""
    paths = ("row_builder", "scorer", "toy_rows", "think_quote", "solver", "text_rules", "blind_prompt",
             "direct_prompt", "system_prompt", "perception_backend", "perception_stage", "keyframe_images")
    for method in METHODS:
        for field in paths:
            if getattr(method, field) is not None:
                assert import_path(getattr(method, field)) is not None, (method.name, field)
        for path in method.own_rewards.values():
            assert import_path(path) is not None, (method.name, path)


def test_embodied_r_names_its_templates_default_and_system_prompts() -> None:
    from embodied_r.methods.embodied_r.prompts import DEFAULT_PROMPT_VERSION, TEMPLATES

    assert EMBODIED_R.default_version() == DEFAULT_PROMPT_VERSION
    assert all(EMBODIED_R.system_message(v) == t.system for v, t in TEMPLATES.items())
    assert EMBODIED_R.has_perception_stage() and EMBODIED_R.keyframe_images is not None


def test_a_default_prompt_version_must_be_one_of_the_methods_versions() -> None:
    with pytest.raises(ValueError, match="default_prompt_version 'b' is not one of its prompt_versions"):
        Method(name="x", builds_rows="", row_builder="m:f", prompt_versions=("a",), choice_form="{letter}",
               rewards=(), default_prompt_version="b")


def test_eval_runs_the_methods_own_perception_stage_and_row_builder(seeing_method: Method, tmp_path: Path) -> None:
    import seeing_method_pkg.parts as parts

    from embodied_r.evaluation.inputs import PerceptionSource, load_inputs

    keyframes = tmp_path / "kf"
    keyframes.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    source = PerceptionSource(backend="echo", keyframes=str(keyframes), options={"word": "a-door-right"})
    rows, report = load_inputs(f"qa:{_questions(tmp_path)}", prompt_version="seeing_v0", perception=source,
                               out_dir=out)
    assert [r.prompt[0]["content"] for r in rows] == ["built: a-door-right"] * 2
    assert {r.meta["prompt_version"] for r in rows} == {"seeing_v0"} and report.kept == 2
    assert parts.CALLS == [("backend", "echo", {"word": "a-door-right"}),
                           ("stage", ["q0", "q1"], str(keyframes), str(out / "perception.cache"))]
    assert len(read_jsonl(out / "perception.jsonl")) == 2


def test_the_vlm_only_baseline_takes_the_rows_methods_backend_and_key_frames(seeing_method: Method,
                                                                            tmp_path: Path) -> None:
    import seeing_method_pkg.parts as parts

    from embodied_r.evaluation.analysis import vlm_only_baseline
    from embodied_r.evaluation.inputs import PerceptionSource

    video = tmp_path / "clip.mp4"
    video.write_bytes(b"x")
    rows = [PromptRow(id="v", task="dir", prompt=[{"role": "user", "content": "Where?"}], answer="B",
                      options=["A. left", "B. right"], meta={"prompt_version": "seeing_v1", "video": str(video)})]
    source = PerceptionSource(backend="echo", keyframes=str(tmp_path / "kf"), options={"word": "w"})
    table = vlm_only_baseline(rows, source, tmp_path / "out")
    assert table["status"] == "ok" and table["overall"]["micro"] == 1.0
    assert parts.CALLS == [("backend", "echo", {"word": "w"}), ("keyframes", str(tmp_path / "kf"), "clip.mp4", 768)]


def test_ready_prompt_files_get_the_system_prompt_of_the_method_of_their_version(seeing_method: Method,
                                                                                   tmp_path: Path) -> None:
    from embodied_r.evaluation.benchmarks.embodied_r_json import load_embodied_r_json

    path = tmp_path / "processed.json"
    path.write_text(json.dumps([{"id": 1, "question": "Where?\nChoices:\nA. left\nB. right", "answer": "B"}]))
    rows, _ = load_embodied_r_json(path, prompt_version="seeing_v1")
    assert rows[0].prompt[0] == {"role": "system", "content": "the system prompt of seeing_v1"}
    with pytest.raises(DataFileError, match="method robot_r1's, which has no system prompt"):
        load_embodied_r_json(path, prompt_version="robot_r1_mw_v1")


def test_robot_r1_has_no_perception_stage_and_evaluation_says_so(tmp_path: Path) -> None:
    from embodied_r.evaluation.analysis import vlm_only_baseline
    from embodied_r.evaluation.benchmarks.common import LoadReport
    from embodied_r.evaluation.inputs import PerceptionSource, load_inputs, run_perception

    assert not ROBOT_R1.has_perception_stage() and ROBOT_R1.keyframe_images is None
    source = PerceptionSource(backend="openai", keyframes=str(tmp_path))
    with pytest.raises(DataFileError, match="method robot_r1 has no perception stage"):
        run_perception([], source, tmp_path, LoadReport(), method=ROBOT_R1)
    with pytest.raises(DataFileError, match="build them with `embodied-r synth robot`"):
        load_inputs(f"qa:{_questions(tmp_path)}", prompt_version="robot_r1_mw_v1", perception=source,
                    out_dir=tmp_path)
    rows = [PromptRow(id="r", task="waypoint", prompt=[], answer="A", options=["A. x", "B. y"],
                      meta={"prompt_version": "robot_r1_mw_v1"})]
    table = vlm_only_baseline(rows, source, tmp_path / "out")
    assert table["status"] == "not run" and "without a perception stage (robot_r1)" in table["reason"]
