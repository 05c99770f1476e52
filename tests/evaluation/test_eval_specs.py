from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from embodied_r.core.io import DataFileError, read_jsonl
from embodied_r.core.records import Perception, QARecord
from embodied_r.evaluation.inputs import PerceptionSource
from embodied_r.evaluation.runner import load_eval_rows, run_eval
from embodied_r.evaluation.settings import BaselineSettings, EvalSettings, GenerationSettings, JudgeSettings
from embodied_r.inference import generation


def _write_qa(tmp_path: Path, n: int = 4) -> Path:
    records = [QARecord(id=f"q{i}", source="synthetic_world", task="dir" if i % 2 else "count", video="",
                        question="Where is the door?" if i % 2 else "How many chairs?",
                        options=["A. left", "B. right"] if i % 2 else None,
                        answer="B" if i % 2 else 2.0, answer_type="choice" if i % 2 else "number")
               for i in range(n)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


def _write_perception(tmp_path: Path, ids: list[str]) -> Path:
    frames = [{"timestamp": 0.0, "action": None, "delta": "A door on the right.", "q_related": "", "raw": ""},
              {"timestamp": 1.0, "action": "turn left", "delta": "Two chairs.", "q_related": "", "raw": ""}]
    path = tmp_path / "perception.jsonl"
    path.write_text("".join(json.dumps(Perception(qa_id=i, video="", backend="oracle", model="simulator",
                                                  prompt_version="official-v1", frames=frames).to_dict()) + "\n"
                            for i in ids))
    return path


class CharTokenizer:
    """One token per character: enough for the context policy to measure prompts."""

    chat_template = None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


class ScriptedEngine(generation.Engine):
    """Stands in for a model: answers every prompt with ``reply`` (e.g. nothing at all); prompts are
    measured and fitted as a real engine's are."""

    name = "scripted"
    tokenizer = CharTokenizer()

    def __init__(self, reply: str) -> None:
        self.reply, self.prompts = reply, []

    def context_length(self) -> int:
        return 1 << 20

    def generate_fitted(self, fitted, max_new_tokens, batch_size, on_batch=None, context=None, **sampling):
        out = []
        for start in range(0, len(fitted), batch_size):
            indices = list(range(start, min(start + batch_size, len(fitted))))
            self.prompts.extend(fitted[i].messages for i in indices)
            if on_batch:
                on_batch(indices, [self.reply] * len(indices))
            out.extend([self.reply] * len(indices))
        return out


def test_loader_spec_with_perception_file(tmp_path: Path, tiny_lm_dir: Path) -> None:
    qa = _write_qa(tmp_path)
    perception = PerceptionSource(file=str(_write_perception(tmp_path, ["q0", "q1", "q2"])))
    out = tmp_path / "out"
    settings = EvalSettings(perception=perception,
                            generation=GenerationSettings(batch_size=2, max_new_tokens=4, dtype="float32"),
                            baselines=BaselineSettings(names=("random", "prior", "direct", "vlm_only")))
    metrics = run_eval(f"qa:{qa}", str(tiny_lm_dir), out, settings)
    assert metrics["n_questions"] == 3 and metrics["n_skipped"] == 1
    assert metrics["skipped"][0]["id"] == "q3" and metrics["skipped"][0]["reason"].startswith("no perception")
    assert set(metrics["tasks"]) == {"dir", "count"} and metrics["tasks"]["count"]["metric"] == "MRA"
    assert metrics["baselines"]["direct"]["status"] == "ok" and metrics["baselines"]["direct"]["overall"]["n"] == 3
    assert metrics["baselines"]["vlm_only"]["status"] == "not run"
    assert metrics["baselines"]["random"]["overall"]["micro"] == 0.5  # the single choice question has 2 options
    assert metrics["consistency"]["status"] == "not run"
    assert metrics["position_bias"]["overall"]["true"] == {"B": 1}
    rows, _ = load_eval_rows(f"qa:{qa}", perception=perception)
    assert rows[1].prompt[1]["content"].endswith("Choices:\nA. left\nB. right")  # the shared prompt builder
    assert "Frame 1: After turn left, Observe: Two chairs." in rows[1].prompt[1]["content"]
    assert (out / "report.html").is_file() and (out / "tasks.png").is_file()
    assert len(read_jsonl(out / "baselines" / "direct.jsonl")) == 3


def test_loader_spec_without_perception_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="--perception FILE"):
        load_eval_rows(f"qa:{_write_qa(tmp_path)}")
    with pytest.raises(DataFileError, match="already holds prompts"):
        load_eval_rows(str(tmp_path / "x.jsonl"), perception=PerceptionSource(file="p.jsonl"))


def test_a_model_that_emits_nothing_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = ScriptedEngine("")
    monkeypatch.setattr(generation, "make_engine", lambda *a, **k: engine)
    qa = _write_qa(tmp_path)
    perception = PerceptionSource(file=str(_write_perception(tmp_path, ["q0", "q1", "q2", "q3"])))
    metrics = run_eval(f"qa:{qa}", "scripted", tmp_path / "out",
                       EvalSettings(perception=perception, generation=GenerationSettings(batch_size=3),
                                    baselines=BaselineSettings(names=("direct",))))
    assert metrics["overall"]["empty_completions"] == 4 and metrics["overall"]["unparsed"] == 4
    assert metrics["overall"]["micro"] == 0.0 and metrics["generation"]["engine"] == "scripted"
    assert metrics["baselines"]["direct"]["overall"]["unparsed"] == 4
    assert len(engine.prompts) == 8  # 4 questions + 4 direct-answer prompts


def test_judge_failure_is_recorded_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = ScriptedEngine("<think>the door is right, B</think><answer>B</answer>")
    monkeypatch.setattr(generation, "make_engine", lambda *a, **k: engine)
    qa = _write_qa(tmp_path)
    perception = PerceptionSource(file=str(_write_perception(tmp_path, ["q1", "q3"])))
    metrics = run_eval(f"qa:{qa}", "scripted", tmp_path / "out",
                       EvalSettings(perception=perception, baselines=BaselineSettings(names=()),
                                    judge=JudgeSettings(spec="http://127.0.0.1:9/v1", model="m")))
    assert metrics["overall"]["micro"] == 1.0
    assert metrics["consistency"]["status"] == "failed" and "not reachable" in metrics["consistency"]["reason"]
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["overall"]["n"] == 2


def test_vllm_engine_plumbing_with_a_stand_in_module(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeLLM:
        def __init__(self, **kwargs):
            self.kwargs, self.calls = kwargs, []

        def get_tokenizer(self):
            return CharTokenizer()

        def generate(self, texts, params, use_tqdm=False):
            self.calls.append((list(texts), params))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"<answer>{len(t)}</answer>")])
                    for t in texts]

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    engine = generation.VLLMEngine("some/model", chunk_size=2)
    seen: list[list[int]] = []
    out = engine.generate_chats([[{"role": "user", "content": "x" * i}] for i in range(1, 6)], max_new_tokens=7,
                                on_batch=lambda idx, comps: seen.append(idx))
    assert seen == [[0, 1], [2, 3], [4]] and len(out) == 5
    assert engine.llm.calls[0][1] == {"max_tokens": 7, "temperature": 0.0, "top_p": 1.0}  # greedy by default


def test_engine_choice_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generation, "vllm_available", lambda: False)
    with pytest.raises(RuntimeError, match="needs the vllm package"):
        generation.make_engine("m", engine="vllm")
    with pytest.raises(ValueError, match="unknown engine"):
        generation.make_engine("m", engine="tgi")


def test_vlm_only_baseline_through_the_perception_backend(tmp_path: Path) -> None:
    from fake_vlm_server import FakeVLMServer

    from embodied_r.core.records import PromptRow
    from embodied_r.evaluation.analysis import vlm_only_baseline

    video, keyframes = _video_with_keyframes(tmp_path)
    prompt = [{"role": "user", "content": "Frame 0: x\nQuestion: Where is the door?\nChoices:\nA. left\nB. right"}]
    rows = [PromptRow(id="v1", task="dir", prompt=prompt, answer="B", options=["A. left", "B. right"],
                      meta={"video": str(video)}),
            PromptRow(id="v2", task="dir", prompt=prompt, answer="A", options=["A. left", "B. right"],
                      meta={"video": str(tmp_path / "missing.mp4")})]
    seen: list[dict] = []

    def reply(body: dict, fingerprint: str) -> str:
        seen.append(body)
        return "<answer>B</answer>"

    server = FakeVLMServer(reply=reply).start()
    try:
        perception = PerceptionSource(backend="openai", keyframes=str(keyframes),
                                      options={"base_url": server.base_url, "model": "fake-vlm"})
        table = vlm_only_baseline(rows, perception, tmp_path / "out")
    finally:
        server.stop()
    assert table["status"] == "ok" and table["overall"]["n"] == 1 and table["overall"]["micro"] == 1.0
    assert table["excluded"][0]["id"] == "v2" and table["excluded"][0]["reason"].startswith("video not found")
    content = seen[0]["messages"][-1]["content"]
    assert sum(1 for part in content if part.get("type") == "image_url") == 2  # both key frames sent
    text = " ".join(part.get("text", "") for part in content if part.get("type") == "text")
    assert "Question: Where is the door?" in text and "Frame 0" not in text


def _video_with_keyframes(tmp_path: Path) -> tuple[Path, Path]:
    """A 2 s clip and its key-frame file (two key frames), as `embodied-r keyframes` would leave them."""
    import cv2
    import numpy as np

    from embodied_r.core.records import KeyframeSet

    video = tmp_path / "clip.mp4"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 5.0, (64, 48))
    for k in range(10):
        writer.write(np.full((48, 64, 3), 20 * k, dtype=np.uint8))
    writer.release()
    keyframes = tmp_path / "kf"
    keyframes.mkdir()
    kfs = KeyframeSet(video=str(video), sample_fps=1.0, width=64, height=48,
                      frames=[{"index": 0, "timestamp": 0.0, "overlap": None},
                              {"index": 1, "timestamp": 1.0, "overlap": 0.2}])
    (keyframes / "clip.keyframes.json").write_text(json.dumps(kfs.to_dict()))
    return video, keyframes


def test_perception_backend_runs_inside_eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_vlm_server import FakeVLMServer

    _, keyframes = _video_with_keyframes(tmp_path)
    records = [QARecord(id=f"p{i}", source="synthetic_world", task="dir", video="clip.mp4" if i < 2 else "gone.mp4",
                        question="Where is the door?", options=["A. left", "B. right"], answer="B") for i in range(3)]
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    engine = ScriptedEngine("<think>right</think><answer>B</answer>")
    monkeypatch.setattr(generation, "make_engine", lambda *a, **k: engine)
    server = FakeVLMServer().start()
    try:
        perception = PerceptionSource(backend="openai", keyframes=str(keyframes),
                                      options={"base_url": server.base_url, "model": "fake-vlm"})
        metrics = run_eval(f"qa:{qa}", "scripted", tmp_path / "out",
                           EvalSettings(perception=perception, baselines=BaselineSettings(names=())))
    finally:
        server.stop()
    assert metrics["overall"]["n"] == 2 and metrics["overall"]["micro"] == 1.0
    assert {s["id"] for s in metrics["skipped"]} == {"p2"}  # its video is missing: no perception, reported
    assert len(read_jsonl(tmp_path / "out" / "perception.jsonl")) == 2
    assert "Frame 1: After" in engine.prompts[0][1]["content"]  # the VLM's text reached the reasoner prompt


def test_merged_vsibench_rows_keep_their_level_for_the_reference(tmp_path: Path) -> None:
    from embodied_r.evaluation.analysis import assemble_metrics
    from embodied_r.evaluation.benchmarks.common import LoadReport
    from embodied_r.evaluation.predict import score_completion

    levels = ["object_rel_direction_easy", "object_rel_direction_easy", "object_rel_direction_hard"]
    questions = [{"id": i, "dataset": "scannet", "scene_name": "s", "question_type": level, "question": "Where?",
                  "options": ["A. left", "B. right"], "ground_truth": "A"} for i, level in enumerate(levels)]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    perception = PerceptionSource(file=str(_write_perception(tmp_path, ["0", "1", "2"])))
    rows, _ = load_eval_rows(f"vsibench-merged:{tmp_path / 'test.jsonl'}", perception=perception)
    assert {row.task for row in rows} == {"object_rel_direction"}
    assert [row.meta["question_type"] for row in rows] == levels
    # Both easy questions right, the hard one wrong: 50 % by level (2/3 weighted by question).
    predictions = [score_completion(row, f"<answer>{'A' if row.id != '2' else 'B'}</answer>").to_dict()
                   for row in rows]
    metrics = assemble_metrics(predictions, rows, {}, {"status": "not run"}, LoadReport())
    assert metrics["tasks"]["object_rel_direction"]["score"] == pytest.approx(2 / 3)
    assert metrics["reference"]["vsibench"]["object_rel_direction_accuracy"] == 50.0
