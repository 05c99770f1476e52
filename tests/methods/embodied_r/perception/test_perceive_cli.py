"""End to end through the CLI: perceive (openai against a loopback server; oracle on a synthetic world)
-> build-prompts -> the prompt rows that evaluation reads."""

from __future__ import annotations

import pytest
from fake_vlm_server import FakeVLMServer

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl
from embodied_r.evaluation.inputs import load_prompt_rows_jsonl
from embodied_r.methods.embodied_r.prompts import OFFICIAL_SYSTEM_PROMPT

SECRET = "sk-cli-secret-should-never-be-written"


def test_perceive_openai_then_build_prompts(dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLI_TEST_KEY", SECRET)
    perception, rows_path = tmp_path / "perception.jsonl", tmp_path / "rows.jsonl"
    with FakeVLMServer(latency=0.01) as server:
        code = main(["perceive", "--qa", str(dataset.qa), "--keyframes", str(dataset.keyframes), "--backend", "openai",
                     "--base-url", server.base_url, "--model", "fake-vlm", "--api-key-env", "CLI_TEST_KEY",
                     "--concurrency", "4", "--out", str(perception)])
        assert server.stats()["authorization"] == {f"Bearer {SECRET}"}
    assert code == 0
    summary = capsys.readouterr().out
    assert "perception (openai, fake-vlm, official-v1)" in summary
    records = read_jsonl(perception)
    assert len(records) == 6 and all(len(r["frames"]) == 4 for r in records)
    written = [perception, *tmp_path.glob("perception.jsonl.cache/??/*.json")]
    assert len(written) == 1 + 24 and not any(SECRET in p.read_text() for p in written)

    # One question has no perception: it is reported and skipped, never given an empty description.
    kept = [line for line in perception.read_text().splitlines() if '"qa_id": "v1q2"' not in line]
    perception.write_text("\n".join(kept) + "\n")
    assert main(["build-prompts", "--qa", str(dataset.qa), "--perception", str(perception),
                 "--out", str(rows_path)]) == 0
    assert "skipped 1 question(s) without perception: v1q2" in capsys.readouterr().out
    rows, report = load_prompt_rows_jsonl(rows_path)
    assert report.skipped == [] and report.kept == 5
    assert len(rows) == 5 and rows[0].id == "v0q0" and rows[0].answer == "B"
    system, user = rows[0].prompt
    assert system == {"role": "system", "content": OFFICIAL_SYSTEM_PROMPT}
    assert "Frame 1: After Rotate left, Observe: A white door on the right" in user["content"]
    assert user["content"].endswith("Choices:\nA. left\nB. right\nC. back")
    assert rows[0].meta["perception"] == {"backend": "openai", "model": "fake-vlm", "prompt_version": "official-v1",
                                          "leaked": False, "runaway": []}

    assert main(["build-prompts", "--qa", str(dataset.qa), "--perception", str(perception),
                 "--out", str(rows_path), "--prompt-version", "structured-v1"]) == 0
    rows, _ = load_prompt_rows_jsonl(rows_path)
    assert "Related to the question: The table is ahead-left." in rows[0].prompt[1]["content"]
    assert rows[0].meta["prompt_version"] == "structured-v1"


def test_user_errors_exit_2_with_a_message(dataset, tmp_path, capsys):
    base = ["perceive", "--qa", str(dataset.qa), "--keyframes", str(dataset.keyframes), "--out", str(tmp_path / "o")]
    assert main([*base, "--backend", "openai", "--model", "m"]) == 2
    assert "--base-url" in capsys.readouterr().err
    assert main([*base, "--backend", "transformers"]) == 2
    assert "needs --model" in capsys.readouterr().err
    assert main(["perceive", "--qa", str(dataset.qa), "--keyframes", str(tmp_path / "nope"), "--backend", "oracle",
                 "--out", str(tmp_path / "o")]) == 2
    assert "run `embodied-r keyframes` first" in capsys.readouterr().err
    assert main([*base, "--backend", "oracle", "--oracle-noise", "0.1,x"]) == 2
    assert "MISS,WRONG,SIGMA" in capsys.readouterr().err
    assert main(["build-prompts", "--qa", str(dataset.qa), "--perception", str(tmp_path / "missing.jsonl"),
                 "--out", str(tmp_path / "r.jsonl")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_failed_requests_give_exit_1_and_are_listed(dataset, tmp_path, capsys):
    from fake_vlm_server import Fault

    with FakeVLMServer(faults=lambda fingerprint, attempt: Fault("status", 400)) as server:
        code = main(["perceive", "--qa", str(dataset.qa), "--keyframes", str(dataset.keyframes), "--backend",
                     "openai", "--base-url", server.base_url, "--model", "m", "--out", str(tmp_path / "p.jsonl")])
    assert code == 1
    out = capsys.readouterr().out
    assert "6 question(s) failed; rerun the same command to retry them" in out and "HTTP 400" in out


def test_synthetic_world_keyframes_oracle_build_prompts(tmp_path, capsys):
    pytest.importorskip("mujoco")
    world = tmp_path / "world"
    assert main(["synth", "world", "--out", str(world), "--scenes", "1", "--seed", "3", "--resolution", "160x120",
                 "--fps", "8", "--seconds", "8"]) == 0
    assert main(["keyframes", str(world / "videos"), "--out", str(world / "kf")]) == 0
    perception, rows_path = world / "perception.jsonl", world / "rows.jsonl"
    assert main(["perceive", "--qa", str(world / "questions.jsonl"), "--keyframes", str(world / "kf"),
                 "--backend", "oracle", "--out", str(perception)]) == 0
    questions = read_jsonl(world / "questions.jsonl")
    records = read_jsonl(perception)
    assert len(records) == len(questions) > 0
    assert all(r["backend"] == "oracle" and r["frames"][0]["action"] is None for r in records)
    assert all(not r["meta"]["parse_errors"] for r in records)
    assert main(["build-prompts", "--qa", str(world / "questions.jsonl"), "--perception", str(perception),
                 "--out", str(rows_path)]) == 0
    rows, report = load_prompt_rows_jsonl(rows_path)
    assert report.skipped == [] and len(rows) == len(questions)
    assert all(row.prompt[1]["content"].count("Frame 0: Observe:") == 1 for row in rows)
    assert {row.answer_type for row in rows} <= {"choice", "number"}


def test_build_prompts_refuses_answers_outside_the_options_and_empty_inputs(dataset, tmp_path, capsys):
    import json

    perception, rows_path = tmp_path / "perception.jsonl", tmp_path / "rows.jsonl"
    with FakeVLMServer(latency=0.0) as server:
        assert main(["perceive", "--qa", str(dataset.qa), "--keyframes", str(dataset.keyframes), "--backend",
                     "openai", "--base-url", server.base_url, "--model", "fake-vlm",
                     "--out", str(perception)]) == 0
    questions = read_jsonl(dataset.qa)
    questions[0]["answer"] = "E"  # options are A-C
    bad_qa = tmp_path / "qa.jsonl"
    bad_qa.write_text("".join(json.dumps(q) + "\n" for q in questions))
    capsys.readouterr()
    build = ["build-prompts", "--out", str(rows_path)]
    assert main([*build, "--qa", str(bad_qa), "--perception", str(perception)]) == 0
    out = capsys.readouterr().out
    assert "skipped 1 question(s) whose answer is not among their options" in out and "'E'" in out
    rows, _ = load_prompt_rows_jsonl(rows_path)
    assert len(rows) == len(questions) - 1 and questions[0]["id"] not in {r.id for r in rows}

    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text(perception.read_text() * 2)  # what two concurrent perceive runs used to leave
    assert main([*build, "--qa", str(dataset.qa), "--perception", str(doubled)]) == 0
    # The console wraps long lines where the temporary path ends, so words are compared, not lines.
    assert f"holds {len(questions)} repeated record(s)" in " ".join(capsys.readouterr().out.split())
    assert len(load_prompt_rows_jsonl(rows_path)[0]) == len(questions)

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main([*build, "--qa", str(empty), "--perception", str(perception)]) == 2
    assert "holds no questions" in capsys.readouterr().err
    assert main([*build, "--qa", str(dataset.qa), "--perception", str(empty)]) == 2
    assert "holds no perception records" in capsys.readouterr().err
    assert main([*build, "--qa", str(tmp_path), "--perception", str(perception)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_a_vlm_that_repeats_itself_is_flagged_by_perceive_and_build_prompts(dataset, tmp_path, capsys):
    from fake_vlm_server import Fault

    perception, rows_path = tmp_path / "perception.jsonl", tmp_path / "rows.jsonl"
    looping: set[str] = set()

    def plan(fingerprint: str, attempt: int) -> Fault:
        if not looping:
            looping.add(fingerprint)  # the first request loops, on every attempt
        return Fault("repeat") if fingerprint in looping else Fault()

    with FakeVLMServer(faults=plan) as server:
        assert main(["perceive", "--qa", str(dataset.qa), "--keyframes", str(dataset.keyframes), "--backend",
                     "openai", "--base-url", server.base_url, "--model", "m", "--concurrency", "1",
                     "--out", str(perception)]) == 0
    out = capsys.readouterr().out
    assert "1 question(s) have a frame description that ran away" in out
    records = read_jsonl(perception)
    flagged = [r for r in records if r["meta"]["runaway"]]
    assert len(flagged) == 1 and "appears" in flagged[0]["meta"]["runaway"][0]["reason"]
    assert main(["build-prompts", "--qa", str(dataset.qa), "--perception", str(perception),
                 "--out", str(rows_path)]) == 0
    out = capsys.readouterr().out
    assert "1 row(s) hold a frame description that ran away" in out and flagged[0]["qa_id"] in out
    rows, _ = load_prompt_rows_jsonl(rows_path)
    assert [r.id for r in rows if r.meta["perception"]["runaway"]] == [flagged[0]["qa_id"]]


def test_an_unreachable_vlm_server_is_one_line_naming_the_url_at_once(dataset, tmp_path, capsys):
    import time

    url = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
    started = time.perf_counter()
    assert main(["perceive", "--qa", str(dataset.qa), "--keyframes", str(dataset.keyframes), "--backend", "openai",
                 "--base-url", url, "--model", "m", "--out", str(tmp_path / "p.jsonl")]) == 2
    assert time.perf_counter() - started < 10  # not every request's retries
    err = capsys.readouterr().err
    assert f"cannot reach the VLM server at {url}" in err and "Traceback" not in err
    assert not (tmp_path / "p.jsonl").exists() or not read_jsonl(tmp_path / "p.jsonl")
