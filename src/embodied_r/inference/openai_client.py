"""The ``openai`` perception backend: any OpenAI-compatible chat-completions server.

vLLM or SGLang serving Qwen2.5-VL, or a hosted VLM. The official pipeline sends one request at a time
(the official pipeline); here ``concurrency`` workers on one ``asyncio`` loop, each with its own
keep-alive ``httpx`` connection, keep up to that many requests in flight, so a server with N slots
stays busy (``benchmarks/perception_client.py`` measures it; docs/performance.md has the numbers).

- Images go as base64 JPEG data URLs, previous key frame first (the official order).
- Every request has a timeout. 429, 408, 5xx, timeouts, connection errors and malformed 200 bodies are
  retried with exponential backoff and jitter (``Retry-After`` honoured); other 4xx fail at once (a
  bad request does not get better by repeating it).
- The API key is read from the environment variable named by ``api_key_env`` and is only ever placed
  in the ``Authorization`` header: never logged, never in settings, records or cache keys.
- JPEG encoding and pulling the next request (which may decode video) run in a worker thread, and
  ``on_result`` (which writes the cache with fsync) runs in another, so the event loop only does I/O.

``ChatBackend`` is the same client sending whole chats (``request.context["messages"]``): the one HTTP
client for image-row evaluation (``evaluation.vl_endpoint``) and the consistency judge's endpoint
(``judge.judges.OpenAIJudge``), so all of them share these retries, timeouts and bounded concurrency.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from embodied_r.inference.requests import FrameRequest, FrameResult, OnResult

logger = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 409, 425, 429})
_END = object()
_ENCODED_MEMO = 40  # recently encoded frames kept (a video has at most 32 key frames)


class ServerUnreachableError(ConnectionError):
    """Nothing answers at the backend's base URL."""


def jpeg_data_url(image: np.ndarray, quality: int = 90) -> str:
    """A BGR image as a ``data:image/jpeg;base64,...`` URL."""
    import cv2

    ok, buffer = cv2.imencode(".jpg", image, [int(cv2.IMWRITE_JPEG_QUALITY), int(quality)])
    if not ok:
        raise ValueError(f"could not JPEG-encode an image of shape {getattr(image, 'shape', None)}")
    return "data:image/jpeg;base64," + base64.b64encode(buffer.tobytes()).decode("ascii")


def _response_text(response: Any) -> tuple[str | None, str | None, str | None]:
    """(text, finish_reason, problem) from a 200 response; ``problem`` explains a malformed body."""
    try:
        data = response.json()
    except ValueError:
        return None, None, "body is not JSON"
    try:
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, None, "no choices[0].message.content in the body"
    if isinstance(content, list):  # some servers return content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        return None, None, f"message content is {type(content).__name__}, not text"
    return content, choice.get("finish_reason"), None


class OpenAIBackend:
    name = "openai"
    needs_images = True
    per_question = False

    def __init__(self, model: str, base_url: str, api_key_env: str = "OPENAI_API_KEY", concurrency: int = 16,
                 timeout: float = 120.0, max_retries: int = 5, backoff: float = 1.0, max_backoff: float = 30.0,
                 temperature: float = 0.0, max_tokens: int = 512, jpeg_quality: int = 90,
                 extra_body: dict[str, Any] | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if not base_url:
            raise ValueError("the openai backend needs a base URL, e.g. http://localhost:8000/v1")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.jpeg_quality = jpeg_quality
        self.extra_body = dict(extra_body or {})
        self._encoded: OrderedDict[int, tuple[np.ndarray, str]] = OrderedDict()

    def settings(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens,
                "jpeg_quality": self.jpeg_quality, "extra_body": self.extra_body}

    # -- payloads ------------------------------------------------------------------------------------

    def payload(self, request: FrameRequest) -> dict[str, Any]:
        if request.images is None:
            raise ValueError(f"request {request.qa_id}/{request.frame_index} has no images attached")
        content: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": self._data_url(image)}} for image in request.images
        ]
        content.append({"type": "text", "text": request.prompt})
        body = {"model": self.model, "messages": [{"role": "user", "content": content}],
                "temperature": self.temperature, "max_tokens": self.max_tokens}
        body.update(self.extra_body)
        return body

    def _data_url(self, image: np.ndarray) -> str:
        # Key frame k is sent twice (as "after" in request k and "before" in request k+1) and is shared
        # by every question on the video; the runner hands over the same array object each time, so
        # encode it once. Holding the array in the memo keeps its id() from being reused.
        memo = self._encoded.get(id(image))
        if memo is not None and memo[0] is image:
            self._encoded.move_to_end(id(image))
            return memo[1]
        url = jpeg_data_url(image, self.jpeg_quality)
        self._encoded[id(image)] = (image, url)
        if len(self._encoded) > _ENCODED_MEMO:
            self._encoded.popitem(last=False)
        return url

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "")
        if not key:
            # Local vLLM/SGLang servers accept any key; hosted APIs answer 401, reported per request.
            logger.info("environment variable %s is not set; sending requests without an API key",
                        self.api_key_env)
            return {}
        return {"Authorization": f"Bearer {key}"}

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(self.max_backoff, max(0.0, float(retry_after)))
            except ValueError:
                pass
        # Exponential backoff with "equal jitter": spreads retries of many clients hit by one outage.
        base = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)

    # -- one request ---------------------------------------------------------------------------------

    async def _call(self, client: Any, body: bytes) -> FrameResult:
        import httpx

        started = time.perf_counter()
        error = "not attempted"
        for attempt in range(1, self.max_retries + 2):
            retry_after = None
            try:
                response = await client.post(f"{self.base_url}/chat/completions", content=body)
            except httpx.TimeoutException:
                error = f"timed out after {self.timeout:g} s"
            except httpx.TransportError as exc:
                error = f"connection error ({type(exc).__name__}: {exc})"
            else:
                status = response.status_code
                if status == 200:
                    text, finish_reason, problem = _response_text(response)
                    if problem is None:
                        return FrameResult(text=text, attempts=attempt, seconds=time.perf_counter() - started,
                                           info={"finish_reason": finish_reason})
                    error = f"malformed response: {problem}"
                else:
                    error = f"HTTP {status}: {response.text[:300]}"
                    if status in (401, 403):
                        error += f" (check the API key in ${self.api_key_env})"
                    if status not in _RETRY_STATUS and status < 500:
                        return FrameResult(error=error, attempts=attempt, seconds=time.perf_counter() - started)
                    retry_after = response.headers.get("retry-after")
            if attempt <= self.max_retries:
                logger.debug("attempt %d failed (%s); retrying", attempt, error)
                await asyncio.sleep(self._delay(attempt, retry_after))
        return FrameResult(error=f"{error} (gave up after {self.max_retries + 1} attempts)",
                           attempts=self.max_retries + 1, seconds=time.perf_counter() - started)

    # -- the pool ------------------------------------------------------------------------------------

    def check_reachable(self, timeout: float = 5.0) -> None:
        """Raise ``ServerUnreachableError`` naming the URL when nothing answers there. Any HTTP reply
        (even 404 or 401) counts as reachable; only a refused, unresolvable or silent host does not, so a
        typo in ``--base-url`` fails in seconds instead of after every request's retries."""
        import httpx

        url = f"{self.base_url}/models"
        try:
            httpx.get(url, headers=self._headers(), timeout=httpx.Timeout(timeout))
        except httpx.TimeoutException:
            raise ServerUnreachableError(f"the VLM server at {self.base_url} did not answer within {timeout:g} s "
                                         f"(GET {url}); check --base-url and that the server is up") from None
        except httpx.TransportError as exc:
            raise ServerUnreachableError(f"cannot reach the VLM server at {self.base_url} ({type(exc).__name__}: "
                                         f"{exc}); check --base-url and that the server is running, e.g. "
                                         "`vllm serve MODEL --port 8000` for http://localhost:8000/v1") from None

    def served_models(self, timeout: float = 30.0) -> list[str]:
        """The model ids the server lists at ``/models``. Raises ``ServerUnreachableError`` when nothing
        answers there, and ``ValueError`` when the answer is not a listing (an HTTP error such as 401, or a
        body without ``data``), so a wrong key or URL is reported as such, not as "serves no model"."""
        import httpx

        self.check_reachable(min(timeout, 5.0))
        url = f"{self.base_url}/models"
        try:
            response = httpx.get(url, headers=self._headers(), timeout=httpx.Timeout(timeout))
        except httpx.HTTPError as exc:  # it answered the check a moment ago: report the URL and the cause
            raise ServerUnreachableError(f"GET {url} failed ({type(exc).__name__}: {exc})") from exc
        if response.status_code != 200:
            hint = f" (check the API key in ${self.api_key_env})" if response.status_code in (401, 403) else ""
            raise ValueError(f"GET {url} answered HTTP {response.status_code}: {response.text[:300]}{hint}")
        try:
            return [str(m["id"]) for m in response.json().get("data", [])]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"GET {url} did not return a model listing ({type(exc).__name__}: {exc})") from exc

    def run(self, requests: Iterable[FrameRequest], on_result: OnResult) -> None:
        self.check_reachable()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._run(iter(requests), on_result))
            return
        # Called from inside an event loop (a notebook): run ours in a thread instead.
        failure: list[BaseException] = []

        def target() -> None:
            try:
                asyncio.run(self._run(iter(requests), on_result))
            except BaseException as exc:  # re-raised in the caller's thread below
                failure.append(exc)

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if failure:
            raise failure[0]

    def _next(self, iterator: Iterator[FrameRequest]) -> Any:
        request = next(iterator, _END)
        if request is _END:
            return _END
        body = json.dumps(self.payload(request), ensure_ascii=False).encode("utf-8")
        request.images = None  # encoded into the body: let the decoded frames go
        return request, body

    async def _run(self, iterator: Iterator[FrameRequest], on_result: OnResult) -> None:
        """``concurrency`` workers, each with its own keep-alive connection, take prepared requests from
        a queue that one feeder thread keeps full. (One shared pool of N connections costs O(N) per
        request in httpcore's connection scan, which alone held throughput at ~40 % of a 32-slot server
        on this machine; single-connection clients make that scan trivial.)"""
        import httpx

        loop = asyncio.get_running_loop()
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0))
        headers = {**self._headers(), "Content-Type": "application/json"}
        # One TLS context for all workers: building one per client re-reads the CA bundle (~90 ms each).
        tls = ssl.create_default_context()
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=self.concurrency)
        stores: set[asyncio.Future[None]] = set()
        failures: list[BaseException] = []

        def stored(future: asyncio.Future[None]) -> None:
            stores.discard(future)
            if not future.cancelled() and future.exception() is not None:
                failures.append(future.exception())  # type: ignore[arg-type]

        async def feed() -> None:
            try:
                while not failures:  # e.g. the cache could not be written: stop sending work
                    item = await loop.run_in_executor(feeder, self._next, iterator)
                    if item is _END:
                        break
                    await queue.put(item)
            finally:
                for _ in range(self.concurrency):
                    await queue.put(_END)

        async def work() -> None:
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            async with httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers, verify=tls) as client:
                while (item := await queue.get()) is not _END:
                    request, body = item
                    result = await self._call(client, body)
                    future = loop.run_in_executor(store, on_result, request, result)
                    stores.add(future)
                    future.add_done_callback(stored)

        with ThreadPoolExecutor(1, thread_name_prefix="perceive-feed") as feeder, \
                ThreadPoolExecutor(1, thread_name_prefix="perceive-store") as store:
            tasks = [asyncio.create_task(feed())] + [asyncio.create_task(work()) for _ in range(self.concurrency)]
            try:
                await asyncio.gather(*tasks)
                if stores:
                    await asyncio.gather(*stores, return_exceptions=True)
            finally:
                for task in tasks:
                    task.cancel()
            if failures:
                raise failures[0]


class ChatBackend(OpenAIBackend):
    """The same client sending whole chats: ``request.context["messages"]`` is the body's messages (the
    perception payload sends one user turn of images and a prompt; eval rows and judges carry a system
    prompt too). ``request.context["extra_body"]``, when present, is merged last: options that differ per
    request, such as a judge's allowed letters (the backend's ``extra_body`` holds those shared by all)."""

    def payload(self, request: FrameRequest) -> dict[str, Any]:
        body = {"model": self.model, "messages": request.context["messages"], "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        body.update(self.extra_body)
        body.update(request.context.get("extra_body") or {})
        return body

    def complete(self, chats: Sequence[tuple[list[dict[str, Any]], dict[str, Any] | None]],
                 ) -> list[FrameResult | None]:
        """Send every (messages, per-request extra body) chat; each one's result in order, None where none
        came back. Failed requests are results with ``ok`` false, for the caller to report."""
        from pathlib import Path

        results: dict[int, FrameResult] = {}
        lock = threading.Lock()

        def keep(request: FrameRequest, result: FrameResult) -> None:  # called from the client's store thread
            with lock:
                results[int(request.key)] = result

        # The request type is the perception one; only ``key`` and ``context`` are read for a chat.
        requests = (FrameRequest(key=str(i), qa_id=str(i), frame_index=0, video=Path(), image_timestamps=(),
                                 prompt="", output="", context={"messages": messages, "extra_body": extra})
                    for i, (messages, extra) in enumerate(chats))
        self.run(requests, keep)
        return [results.get(i) for i in range(len(chats))]
