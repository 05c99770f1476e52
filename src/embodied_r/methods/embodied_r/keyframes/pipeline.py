"""Overlapping the stages of key-frame extraction on threads.

Decoding (FFmpeg), ORB (OpenCV) and the numpy matching all release the GIL, so a video's frames can
flow through them like an assembly line: the next frames decode while earlier ones get their ORB
features and the current one is matched. Both helpers keep the input order and hand an exception
raised on a worker thread to the consumer.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def prefetched(items: Iterable[T], depth: int) -> Iterator[T]:
    """Iterate ``items`` in a background thread, ``depth`` items ahead; an exception in the producer
    is re-raised here, and stopping early stops the producer."""
    if depth <= 0:
        yield from items
        return
    buffer: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        buffer.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            buffer.put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
            buffer.put(("error", exc))

    worker = threading.Thread(target=produce, name="frame-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = buffer.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue, then let it finish
            try:
                buffer.get_nowait()
            except queue.Empty:
                worker.join(timeout=0.05)


def mapped_ahead(function: Callable[[T], R], items: Iterable[T], threads: int, depth: int) -> Iterator[R]:
    """``map(function, items)`` computed by ``threads`` worker threads, up to ``depth`` items ahead of
    the consumer, results in input order. ``threads <= 0`` maps on the calling thread."""
    if threads <= 0:
        yield from map(function, items)
        return
    pending: deque[Future[R]] = deque()
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="keyframe-features")
    try:
        for item in items:
            pending.append(pool.submit(function, item))
            if len(pending) > max(depth, 1):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        # Early stop or an error: drop what has not started, wait for what has (it holds frames).
        pool.shutdown(wait=True, cancel_futures=True)
