"""A loopback OpenAI-compatible chat server for tests, benchmarks and offline dry runs.

It answers ``POST /v1/chat/completions`` with deterministic perception-style text (numbered points
for two-image requests, JSON when the prompt asks for JSON), serves at most ``slots`` requests at a
time with a fixed ``latency`` each — so its capacity is exactly ``slots / latency`` requests per
second — and can inject faults per request: HTTP errors, hangs past the client's timeout, malformed
bodies, slow answers and dropped connections.

``python tests/fake_vlm_server.py --latency 0.5 --slots 32`` runs it in its own process
(it prints ``PORT <n>`` and serves until killed; ``GET /v1/stats`` returns ``stats()``), which keeps
its CPU use out of a client being measured.

It is a minimal HTTP/1.1 server on ``asyncio`` (keep-alive, ``Content-Length`` bodies only) running
in a background thread, so a test or benchmark can start it in-process:

>>> with FakeVLMServer(latency=0.0) as server:
...     server.base_url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass(frozen=True)
class Fault:
    """What to do with one request: ``ok``, ``status`` (reply ``status``), ``hang`` (sleep ``delay``
    before answering, to trip the client's timeout), ``slow`` (sleep ``delay`` then answer normally),
    ``malformed`` (200 with a broken body), ``empty`` (200 with no choices), ``drop`` (close the
    connection without answering), ``repeat`` (200 with the usual answer followed by one sentence 200
    times: a VLM that looped)."""

    kind: str = "ok"
    status: int = 500
    delay: float = 0.0


FaultPlan = Callable[[str, int], Fault]  # (request fingerprint, attempt number from 1) -> Fault


def first_attempt_faults(faults: list[Fault]) -> FaultPlan:
    """A plan that gives the first attempt of the i-th distinct request ``faults[i % len(faults)]``
    and lets every retry succeed — every fault type is hit, and a correct client finishes all work."""
    order: dict[str, int] = {}
    lock = threading.Lock()

    def plan(fingerprint: str, attempt: int) -> Fault:
        with lock:
            index = order.setdefault(fingerprint, len(order))
        return faults[index % len(faults)] if attempt == 1 else Fault()

    return plan


def request_fingerprint(body: dict[str, Any]) -> str:
    """A short hash of a request's messages (what identifies "the same request" across retries)."""
    blob = json.dumps(body.get("messages", []), sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def perception_reply(body: dict[str, Any], fingerprint: str) -> str:
    """Deterministic perception-style text that embeds the request's fingerprint."""
    content = (body.get("messages") or [{}])[-1].get("content", "")
    parts = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
    images = sum(1 for p in parts if isinstance(p, dict) and p.get("type") == "image_url")
    text = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
    wants_json = "JSON object" in text
    if images <= 1:
        scene = f"A grey wall ahead and a brown table to the left [{fingerprint}]."
        return json.dumps({"delta": scene, "q_related": "No asked object is visible."}) if wants_json else scene
    if wants_json:
        return json.dumps({"action": "rotate left", "delta": f"A white door on the right [{fingerprint}].",
                           "q_related": "The table is ahead-left."})
    return (f"1. Action: Rotate left\n2. ΔInformation: A white door on the right [{fingerprint}].\n"
            "3. q-related content: The table is ahead-left.")


class FakeVLMServer:
    """See the module docstring. ``stats()`` reports what was received and answered."""

    def __init__(self, latency: float = 0.0, slots: int | None = None, faults: FaultPlan | None = None,
                 reply: Callable[[dict[str, Any], str], str] = perception_reply) -> None:
        self.latency = latency
        self.slots = slots
        self.faults = faults or (lambda fingerprint, attempt: Fault())
        self.reply = reply
        self._lock = threading.Lock()
        self._attempts: Counter[str] = Counter()
        self._answered: Counter[str] = Counter()
        self._authorization: set[str] = set()
        self._active = 0
        self._max_active = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeVLMServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            self._slots = asyncio.Semaphore(self.slots) if self.slots else None
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()

        def main() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name="fake-vlm-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake VLM server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        loop = self._loop

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FakeVLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> dict[str, Any]:
        """``attempts``/``answered``: per-fingerprint counts of requests received / answered with 200
        and a valid body; ``max_active``: the most requests being served at once; ``authorization``:
        the distinct Authorization headers received ("" when none)."""
        with self._lock:
            return {"attempts": dict(self._attempts), "answered": dict(self._answered),
                    "max_active": self._max_active, "authorization": set(self._authorization)}

    # -- HTTP ----------------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                with self._lock:
                    self._authorization.add(headers.get("authorization", ""))
                if not await self._respond(method, path, body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass  # the client went away (killed, timed out) or sent garbage: drop the connection
        except asyncio.CancelledError:
            pass  # server shutdown while a request was hanging on purpose
        finally:
            writer.close()

    async def _respond(self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter) -> bool:
        if method == "GET" and path.rstrip("/").endswith("/stats"):
            stats = self.stats()
            stats["authorization"] = sorted(stats["authorization"])
            await self._send(writer, 200, json.dumps(stats))
            return True
        if method == "GET" and path.rstrip("/").endswith("/models"):
            await self._send(writer, 200, json.dumps({"object": "list", "data": [{"id": "fake-vlm"}]}))
            return True
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            await self._send(writer, 404, json.dumps({"error": {"message": f"no route {method} {path}"}}))
            return True
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            await self._send(writer, 400, json.dumps({"error": {"message": "body is not JSON"}}))
            return True
        fingerprint = request_fingerprint(body)
        with self._lock:
            self._attempts[fingerprint] += 1
            fault = self.faults(fingerprint, self._attempts[fingerprint])
        if self._slots is not None:
            async with self._slots:
                return await self._serve(body, fingerprint, fault, writer)
        return await self._serve(body, fingerprint, fault, writer)

    async def _serve(self, body: dict[str, Any], fingerprint: str, fault: Fault,
                     writer: asyncio.StreamWriter) -> bool:
        with self._lock:
            self._active += 1
            self._max_active = max(self._max_active, self._active)
        try:
            await asyncio.sleep(self.latency + (fault.delay if fault.kind in ("slow", "hang") else 0.0))
        finally:
            with self._lock:
                self._active -= 1
        if fault.kind == "drop":
            return False
        if fault.kind == "status":
            await self._send(writer, fault.status, json.dumps({"error": {"message": "injected fault"}}))
            return True
        if fault.kind == "malformed":
            await self._send(writer, 200, '{"id": "x", "choices": [{"message": {"content": "trunc')
            return True
        if fault.kind == "empty":
            await self._send(writer, 200, json.dumps({"id": "x", "object": "chat.completion", "choices": []}))
            return True
        text = self.reply(body, fingerprint)
        if fault.kind == "repeat":
            text += " The same grey wall fills the view again." * 200
        payload = {"id": f"chatcmpl-{fingerprint}", "object": "chat.completion", "model": body.get("model"),
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text}}]}
        await self._send(writer, 200, json.dumps(payload))
        with self._lock:
            self._answered[fingerprint] += 1
        return True

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: int, text: str) -> None:
        data = text.encode("utf-8")
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n")
        writer.write(head.encode("latin-1") + data)
        await writer.drain()


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(description="loopback OpenAI-compatible fake VLM server")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--slots", type=int, default=None, help="requests served at once (default: unlimited)")
    args = parser.parse_args(argv)
    server = FakeVLMServer(latency=args.latency, slots=args.slots).start()
    print(f"PORT {server.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
