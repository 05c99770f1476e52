"""The perception runner: caching, resume, failures, dedupe, leak counting, and a real kill -9."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from fake_vlm_server import FakeVLMServer

from embodied_r.core.io import read_jsonl
from embodied_r.core.records import Perception
from embodied_r.inference.requests import FrameRequest, FrameResult
from embodied_r.methods.embodied_r.perception.cache import PerceptionCache
from embodied_r.methods.embodied_r.perception.runner import perceive

REPO_ROOT = Path(__file__).resolve().parents[4]


class ScriptedBackend:
    """A backend that answers from a function and remembers what it was asked."""

    name = "scripted"
    needs_images = True
    per_question = False

    def __init__(self, answer=None, model: str = "scripted-vlm", temperature: float = 0.0) -> None:
        self.model = model
        self.temperature = temperature
        self.answer = answer or (lambda r: "A sofa." if r.frame_index == 0 else "1. Move left\n2. A lamp.\n3. No door.")
        self.calls: list[FrameRequest] = []

    def settings(self) -> dict:
        return {"temperature": self.temperature}

    def run(self, requests, on_result) -> None:
        for request in requests:
            assert request.images is not None and len(request.images) == len(request.image_timestamps)
            assert request.images[0].ndim == 3
            self.calls.append(request)
            answer = self.answer(request)
            result = FrameResult(error=answer.removeprefix("ERROR ")) if answer.startswith("ERROR") else \
                FrameResult(text=answer)
            on_result(request, result)


def run_once(dataset, tmp_path, backend, force=False, version="official-v1"):
    cache = PerceptionCache(tmp_path / "cache", force=force)
    out = tmp_path / "perception.jsonl"
    summary = perceive(dataset.questions, dataset.root, dataset.keyframes, backend, cache, out,
                       prompt_version=version)
    return summary, [Perception.from_dict(r) for r in read_jsonl(out)]


def test_first_run_sends_all_then_rerun_and_new_settings(dataset, tmp_path):
    backend = ScriptedBackend()
    summary, records = run_once(dataset, tmp_path, backend)
    assert (summary.done, summary.requested, summary.cached, summary.failed) == (6, 24, 0, 0)
    assert len(backend.calls) == 24
    assert [f["action"] for f in records[0].frames] == [None, "Move left", "Move left", "Move left"]
    assert [f["timestamp"] for f in records[0].frames] == dataset.timestamps
    assert records[0].backend == "scripted" and records[0].prompt_version == "official-v1"

    again = ScriptedBackend()
    summary, _ = run_once(dataset, tmp_path, again)
    assert (summary.done, summary.already_done, summary.requested) == (0, 6, 0) and not again.calls

    # Same output, changed generation setting: the output is done, but --force recomputes everything.
    hotter = ScriptedBackend(temperature=0.7)
    summary, records = run_once(dataset, tmp_path, hotter, force=True)
    assert (summary.done, summary.requested, summary.cached) == (6, 24, 0)
    assert len(records) == 6


def test_cache_serves_a_fresh_output_file(dataset, tmp_path):
    run_once(dataset, tmp_path, ScriptedBackend())
    (tmp_path / "perception.jsonl").unlink()
    backend = ScriptedBackend()
    summary, records = run_once(dataset, tmp_path, backend)
    assert (summary.done, summary.cached, summary.requested) == (6, 24, 0) and not backend.calls
    assert len(records) == 6


def test_failed_requests_skip_the_question_and_are_retried(dataset, tmp_path):
    flaky = ScriptedBackend(answer=lambda r: "ERROR HTTP 503" if r.qa_id == "v1q2" and r.frame_index == 2 else
                            ("A sofa." if r.frame_index == 0 else "1. Move left\n2. A lamp.\n3. No door."))
    summary, records = run_once(dataset, tmp_path, flaky)
    assert summary.failed == 1 and summary.done == 5
    assert "v1q2" in summary.errors[0] and "HTTP 503" in summary.errors[0]
    assert "v1q2" not in {r.qa_id for r in records}

    healthy = ScriptedBackend()
    summary, records = run_once(dataset, tmp_path, healthy)
    assert [(c.qa_id, c.frame_index) for c in healthy.calls] == [("v1q2", 2)]
    assert summary.done == 1 and summary.cached == 3 and sorted(r.qa_id for r in records)[-1] == "v1q2"


def test_json_prompts_share_identical_requests_and_parse(dataset, tmp_path):
    # The three questions of a video name the same entities, so json-v1 asks each frame once.
    backend = ScriptedBackend(answer=lambda r: json.dumps(
        {"delta": "a lamp", "q_related": "door on the right"} if r.frame_index == 0 else
        {"action": "move left", "delta": "a lamp", "q_related": "door on the right"}))
    summary, records = run_once(dataset, tmp_path, backend, version="json-v1")
    assert summary.requested == 8 and summary.done == 6
    assert all("B. right" not in c.prompt and "chair, table, door" in c.prompt for c in backend.calls)
    assert records[3].frames[1]["action"] == "Move left" and records[3].meta["entities"] == ["chair", "table", "door"]


def test_parse_errors_and_leaks_are_recorded_and_counted(dataset, tmp_path):
    backend = ScriptedBackend(answer=lambda r: "The door is on the right, so Option B." if r.frame_index == 3
                              else "no structure here")
    summary, records = run_once(dataset, tmp_path, backend)
    assert summary.leaked == 6 and summary.leak_flags == 6
    assert summary.parse_errors == 6 * 3  # frames 1-3 lack the numbered points (frame 0 is free text)
    meta = records[0].meta
    assert meta["leaks"] == [{"frame": 3, "kind": "option_letter", "match": "Option B"}] and meta["leaked"]
    assert records[0].frames[3]["delta"] == "The door is on the right, so Option B."


def test_missing_key_frames_and_videos_fail_clearly(dataset, tmp_path):
    (dataset.keyframes / "clip1.keyframes.json").unlink()
    (dataset.root / "videos" / "clip0.mp4").unlink()
    summary, records = run_once(dataset, tmp_path, ScriptedBackend())
    assert summary.failed == 6 and records == []
    assert any("clip1.keyframes.json" in e and "embodied-r keyframes" in e for e in summary.errors)
    assert any("clip0.mp4: video file not found" in e for e in summary.errors)


# ---------------------------------------------------------------------------------------------------
# kill -9 in the middle of a run, then rerun: exactly one record per question, one answer per request
# ---------------------------------------------------------------------------------------------------


def test_killed_run_resumes_without_losing_or_repeating_work(tmp_path, dataset_factory):
    dataset = dataset_factory(tmp_path / "data", videos=3, per_video=3)  # 9 questions, 36 requests
    out, cache_dir = tmp_path / "p.jsonl", tmp_path / "cache"
    with FakeVLMServer(latency=0.15, slots=2) as server:
        argv = ["perceive", "--qa", str(dataset.qa), "--keyframes", str(dataset.keyframes), "--backend", "openai",
                "--base-url", server.base_url, "--model", "fake-vlm", "--concurrency", "2",
                "--out", str(out), "--cache-dir", str(cache_dir)]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
        child = subprocess.Popen([sys.executable, "-m", "embodied_r.cli.main", *argv], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(list(cache_dir.glob("??/*.json"))) < 10 and time.time() < deadline and child.poll() is None:
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL, "the run finished before it could be killed"
        cached_before = {re.search(r"\[([0-9a-f]{16})\]", json.loads(p.read_text())["text"]).group(1)
                         for p in cache_dir.glob("??/*.json")}
        records_before = len(read_jsonl(out)) if out.exists() else 0
        assert 10 <= len(cached_before) < 36 and records_before < 9

        from embodied_r.cli.main import main

        assert main(argv) == 0
        stats = server.stats()

    records = read_jsonl(out)
    assert sorted(r["qa_id"] for r in records) == sorted(q.id for q in dataset.questions)
    assert len(list(cache_dir.glob("??/*.json"))) == 36
    # Nothing finished before the kill was asked again; everything was answered.
    assert all(stats["attempts"][fp] == 1 for fp in cached_before)
    assert len(stats["attempts"]) == 36
