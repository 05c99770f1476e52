"""The endpoint judge (``OpenAIJudge``) through the shared OpenAI-compatible client, against the loopback
fake server: the request it sends, the letter it reads back, retries on every fault kind, and failures
that stay failures (an error naming the endpoint, a counted reward failure), never a reward of 0."""

from __future__ import annotations

import socket
import time

import pytest
from fake_vlm_server import FakeVLMServer, Fault, first_attempt_faults, request_fingerprint

from embodied_r.core.parsing import DEFAULT_LETTERS
from embodied_r.judge.judges import CUT_MARK, MAX_THINK_CHARS, JudgeError, OpenAIJudge, judge_messages
from embodied_r.methods.embodied_r.consistency import ConsistencyReward
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

OPTIONS = ["A. left", "B. right", "C. behind"]
QUESTION = "Question: Where is the chair?\nChoices:\n" + "\n".join(OPTIONS)


def pick_reply(body: dict, fingerprint: str) -> str:
    """The letter the think names after "pick", written loosely (lower case, a full stop), else "?"."""
    user = body["messages"][-1]["content"]
    think = user.split("Thinking process: ", 1)[1]
    return f" {think.split('pick ', 1)[1][0].lower()}." if "pick " in think else "?"


def judge_for(server: FakeVLMServer, **overrides) -> OpenAIJudge:
    options = dict(base_url=server.base_url, model="fake-vlm", timeout=1.0, max_retries=2)
    options.update(overrides)
    return OpenAIJudge(**options)


def closed_port_url() -> str:
    with socket.socket() as sock:  # a local port with nothing listening once closed
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_requests_are_the_judge_prompt_greedy_and_constrained_and_replies_are_read(monkeypatch) -> None:
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-judge-test")
    bodies: list[dict] = []

    def reply(body: dict, fingerprint: str) -> str:
        bodies.append(body)
        return pick_reply(body, fingerprint)

    long_think = "x" * (MAX_THINK_CHARS + 50) + " pick B"
    thinks = ["so pick C", "no idea", long_think]
    with FakeVLMServer(reply=reply) as server:
        judge = judge_for(server, api_key_env="JUDGE_TEST_KEY")
        letters = judge.judge([QUESTION, QUESTION, "Question: which?"], thinks, [OPTIONS, OPTIONS, None])
        authorization = server.stats()["authorization"]
        unconstrained = judge_for(server, constrain=False)
        assert unconstrained.judge([QUESTION], ["pick A"], [OPTIONS]) == ["A"]
    assert letters == ["C", None, "B"]
    assert judge.last_report.rows == 3 and judge.last_report.thinks_cut == 1
    assert authorization == {"Bearer sk-judge-test"}
    by_think = {b["messages"][-1]["content"].split("Thinking process: ", 1)[1]: b for b in bodies}
    first = by_think[next(k for k in by_think if k.startswith("so pick C"))]
    assert first["messages"] == judge_messages(QUESTION, "so pick C", ("A", "B", "C"))
    assert first["model"] == "fake-vlm" and first["temperature"] == 0.0 and first["max_tokens"] == 4
    assert first["structured_outputs"] == {"choice": ["A", "B", "C"]}
    cut = next(b for k, b in by_think.items() if k.startswith(CUT_MARK))
    assert cut["messages"] == judge_messages("Question: which?", CUT_MARK + long_think[-MAX_THINK_CHARS:],
                                             DEFAULT_LETTERS)  # no options: any letter A-H
    assert "structured_outputs" not in bodies[-1]  # the unconstrained judge's one request


def test_every_fault_kind_is_retried_by_the_shared_client() -> None:
    faults = [Fault("status", 500), Fault("status", 503), Fault("status", 429), Fault("malformed"),
              Fault("empty"), Fault("drop"), Fault("hang", delay=3.0)]
    thinks = [f"row {i}: pick {'ABC'[i % 3]}" for i in range(len(faults))]
    with FakeVLMServer(faults=first_attempt_faults(faults), reply=pick_reply) as server:
        letters = judge_for(server).judge([QUESTION] * len(thinks), thinks, [OPTIONS] * len(thinks))
        stats = server.stats()
    assert letters == ["ABC"[i % 3] for i in range(len(faults))]
    # Each request failed once, was retried once, and was answered once.
    assert sorted(stats["attempts"].values()) == [2] * len(faults)
    assert sorted(stats["answered"].values()) == [1] * len(faults)


def test_concurrency_is_bounded_by_max_concurrency() -> None:
    with FakeVLMServer(latency=0.1, reply=pick_reply) as server:
        letters = judge_for(server, max_concurrency=3).judge([QUESTION] * 9, ["pick A"] * 9, [OPTIONS] * 9)
        max_active = server.stats()["max_active"]
    assert letters == ["A"] * 9 and max_active == 3


def test_a_request_that_keeps_failing_fails_the_call_and_the_reward_counts_it_not_a_zero() -> None:
    failing: set[str] = set()

    def plan(fingerprint: str, attempt: int) -> Fault:
        return Fault("status", 502) if fingerprint in failing or "every request" in failing else Fault()

    thinks = ["pick A", "pick B", "pick C"]
    with FakeVLMServer(faults=plan, reply=pick_reply) as server:
        judge = judge_for(server, max_retries=1)
        body = {"messages": judge_messages(QUESTION, thinks[1], ("A", "B", "C"))}
        failing.add(request_fingerprint(body))
        with pytest.raises(JudgeError, match=r"reference endpoint http://127\.0\.0\.1:\d+/v1 failed on 1 of 3 "
                                             r"request\(s\) \(row 1: HTTP 502.*gave up after 2 attempts"):
            judge.judge([QUESTION] * 3, thinks, [OPTIONS] * 3)
        assert server.stats()["attempts"][request_fingerprint(body)] == 2  # retried once, as configured

        # Through the reward (which masks the letters in what the judge reads, so other requests): a step
        # whose judge requests fail is dropped (None) and counted, not scored 0.
        failing.add("every request")
        reward = ConsistencyReward(judge, max_consecutive_failures=2)
        prompt = build_reasoner_messages([{"delta": "A chair is on the right."}], "Where is the chair?", OPTIONS)
        metrics: dict[str, list[float]] = {}
        rewards = reward(prompts=[prompt] * 3, completions=[f"<think>{t}</think><answer>B</answer>" for t in thinks],
                         answer=["B"] * 3, answer_type=["choice"] * 3, options=[OPTIONS] * 3,
                         log_metric=lambda name, value: metrics.setdefault(name, []).append(value))
    assert rewards == [None, None, None]
    assert reward.failures == 1 and metrics["consistency/judge_failures"] == [1.0]


def test_a_bad_request_is_not_retried() -> None:
    with FakeVLMServer(faults=lambda fingerprint, attempt: Fault("status", 400), reply=pick_reply) as server:
        with pytest.raises(JudgeError, match="HTTP 400"):
            judge_for(server).judge([QUESTION], ["pick A"], [OPTIONS])
        assert list(server.stats()["attempts"].values()) == [1]


def test_unreachable_endpoint_is_a_clear_error_naming_the_url_at_once() -> None:
    url = closed_port_url()
    judge = OpenAIJudge(url, "ref", timeout=30.0, max_retries=5)  # the retries must not be waited out
    started = time.perf_counter()
    with pytest.raises(JudgeError, match=f"reference endpoint {url} failed: .*cannot reach the VLM server at {url}"):
        judge.judge(["q"], ["t"], [OPTIONS])
    with pytest.raises(JudgeError, match=f"reference endpoint {url} is not reachable"):
        judge.check()
    assert time.perf_counter() - started < 5.0


def test_check_names_the_served_models_when_the_judge_model_is_not_one() -> None:
    with FakeVLMServer() as server:
        judge_for(server).check()  # serves fake-vlm: passes
        with pytest.raises(JudgeError, match=r"serves \['fake-vlm'\], not 'ref'"):
            judge_for(server, model="ref").check()
