"""The openai backend against a loopback OpenAI-compatible server that injects faults."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
from fake_vlm_server import FakeVLMServer, Fault, first_attempt_faults

from embodied_r.inference.openai_client import OpenAIBackend
from embodied_r.inference.requests import FrameRequest, FrameResult

SECRET = "sk-test-do-not-leak-0123456789"


def make_requests(n: int) -> list[FrameRequest]:
    rng = np.random.default_rng(0)
    requests = []
    for i in range(n):
        images = [rng.integers(0, 255, (24, 32, 3), dtype=np.uint8) for _ in range(1 if i % 4 == 0 else 2)]
        requests.append(FrameRequest(key=f"{i:04x}", qa_id=f"q{i // 4}", frame_index=i % 4,
                                     video=None,  # type: ignore[arg-type]  # the backend never reads it
                                     image_timestamps=(float(i),), prompt=f"describe request {i}",
                                     output="numbered", images=images))
    return requests


def collect(backend: OpenAIBackend, requests: list[FrameRequest]) -> dict[str, FrameResult]:
    results: dict[str, FrameResult] = {}
    lock = threading.Lock()

    def on_result(request: FrameRequest, result: FrameResult) -> None:
        with lock:
            assert request.key not in results, "a request was reported twice"
            results[request.key] = result

    backend.run(requests, on_result)
    return results


def backend_for(server: FakeVLMServer, **overrides) -> OpenAIBackend:
    options = dict(model="fake-vlm", base_url=server.base_url, concurrency=4, timeout=0.5, max_retries=3,
                   backoff=0.01, max_backoff=0.05)
    options.update(overrides)
    return OpenAIBackend(**options)


def test_every_fault_kind_is_survived_with_retries():
    faults = [Fault("status", 500), Fault("status", 503), Fault("status", 429), Fault("hang", delay=3.0),
              Fault("malformed"), Fault("empty"), Fault("drop"), Fault("slow", delay=0.2), Fault()]
    with FakeVLMServer(latency=0.01, faults=first_attempt_faults(faults)) as server:
        results = collect(backend_for(server), make_requests(18))
        stats = server.stats()
    assert len(results) == 18
    assert all(r.ok for r in results.values()), [r.error for r in results.values() if not r.ok]
    # Requests whose first attempt was a hard fault needed exactly one retry; slow/ok ones none.
    attempts = sorted(r.attempts for r in results.values())
    assert attempts.count(1) == 4 and attempts.count(2) == 14
    assert all(count == 1 for count in stats["answered"].values())
    two_image = [r for r in results.values() if r.text.startswith("1. Action")]
    assert len(two_image) == 18 - 5


def test_client_errors_are_not_retried_and_persistent_errors_give_up():
    def plan(fingerprint: str, attempt: int) -> Fault:
        return Fault("status", 400) if "request 0" in seen[fingerprint] else Fault("status", 502)

    seen: dict[str, str] = {}

    def reply_spy(body, fingerprint):  # never reached: every request fails
        raise AssertionError("no request should succeed")

    with FakeVLMServer(faults=plan, reply=reply_spy) as server:
        requests = make_requests(2)
        # Map fingerprints to prompts through the server's own hashing of the payload.
        from fake_vlm_server import request_fingerprint

        backend = backend_for(server, max_retries=2)
        for request in requests:
            seen[request_fingerprint(backend.payload(request))] = request.prompt
        results = collect(backend, requests)
        attempts = server.stats()["attempts"]
    bad_request, server_error = results["0000"], results["0001"]
    assert not bad_request.ok and bad_request.attempts == 1 and "HTTP 400" in bad_request.error
    assert not server_error.ok and server_error.attempts == 3 and "gave up after 3 attempts" in server_error.error
    assert sorted(attempts.values()) == [1, 3]


def test_concurrency_is_bounded_and_used():
    with FakeVLMServer(latency=0.1) as server:
        started = time.perf_counter()
        results = collect(backend_for(server, concurrency=5), make_requests(20))
        elapsed = time.perf_counter() - started
        max_active = server.stats()["max_active"]
    assert len(results) == 20 and all(r.ok for r in results.values())
    assert max_active == 5
    assert elapsed < 20 * 0.1 / 2  # far faster than one-at-a-time (2 s)


def test_api_key_is_sent_but_never_logged(monkeypatch, caplog):
    monkeypatch.setenv("TEST_VLM_KEY", SECRET)
    with caplog.at_level(logging.DEBUG), FakeVLMServer(faults=first_attempt_faults([Fault("status", 500)])) as server:
        backend = backend_for(server, api_key_env="TEST_VLM_KEY")
        results = collect(backend, make_requests(2))
        received = server.stats()["authorization"]
    assert received == {f"Bearer {SECRET}"}
    assert all(r.ok for r in results.values())
    assert SECRET not in caplog.text
    assert SECRET not in repr(backend.settings()) and SECRET not in repr(vars(backend))


def test_missing_api_key_sends_no_authorization(monkeypatch):
    monkeypatch.delenv("TEST_VLM_KEY", raising=False)
    with FakeVLMServer() as server:
        results = collect(backend_for(server, api_key_env="TEST_VLM_KEY"), make_requests(1))
        assert server.stats()["authorization"] == {""}
    assert results["0000"].ok


def test_unreachable_server_fails_at_once_and_a_lost_one_per_request(monkeypatch):
    from embodied_r.inference.openai_client import ServerUnreachableError

    backend = OpenAIBackend(model="m", base_url="http://127.0.0.1:9/v1", timeout=0.5, max_retries=1,
                            backoff=0.01)
    with pytest.raises(ServerUnreachableError, match="cannot reach the VLM server at http://127.0.0.1:9/v1"):
        collect(backend, make_requests(1))
    # A server that goes away after the check: each request fails with its connection error, retried.
    monkeypatch.setattr(backend, "check_reachable", lambda: None)
    results = collect(backend, make_requests(1))
    assert "connection error" in results["0000"].error and results["0000"].attempts == 2


def test_an_error_in_on_result_stops_the_run():
    def on_result(request, result):
        raise OSError("disk full")

    with FakeVLMServer() as server, pytest.raises(OSError, match="disk full"):
        backend_for(server).run(make_requests(8), on_result)


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIBackend(model="m", base_url="http://x/v1", concurrency=0)
    with pytest.raises(ValueError, match="base URL"):
        OpenAIBackend(model="m", base_url="")


def test_each_frame_is_jpeg_encoded_once(monkeypatch):
    import embodied_r.inference.openai_client as client

    calls: list[int] = []
    real = client.jpeg_data_url
    monkeypatch.setattr(client, "jpeg_data_url", lambda image, quality: calls.append(id(image)) or real(image, quality))
    frames = [np.full((8, 8, 3), v, dtype=np.uint8) for v in range(3)]
    backend = OpenAIBackend(model="m", base_url="http://x/v1")
    # Key frames 0,1,2 of one video: request k sends (k-1, k), so frames 1 and 2 appear twice.
    bodies = [backend.payload(FrameRequest("00", "q", k, None, (), "p", "numbered",  # type: ignore[arg-type]
                                           images=frames[max(0, k - 1):k + 1] if k else frames[:1]))
              for k in range(3)]
    assert len(calls) == 3
    urls = [part["image_url"]["url"] for body in bodies for part in body["messages"][0]["content"][:-1]]
    assert urls[0] == urls[1] and urls[2] == urls[3] and len(set(urls)) == 3  # f0, f0 f1, f1 f2
    assert urls[0].startswith("data:image/jpeg;base64,")
