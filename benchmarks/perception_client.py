"""Perception client throughput against a loopback OpenAI-compatible server with fixed capacity.

The server (``tests/fake_vlm_server.py``, in its own process so that its CPU use does not
slow the client being measured) serves at most ``--slots`` requests at a time, each
taking ``--latency`` seconds, so its capacity is exactly slots / latency requests per second. Two
clients send the same kind of request (``--images`` JPEG frames of ``--size`` plus a perception
prompt) in one run:

- ours: ``OpenAIBackend`` with ``--concurrency`` requests in flight (default: the slot count), every
  answer written to the on-disk cache as in a real run (atomic write + fsync);
- sequential: one request at a time, as the official Embodied-R pipeline does, through a plain
  synchronous ``httpx`` client.

Printed: achieved throughput of each, ours as a fraction of server capacity (goal >= 0.90) and ours
over sequential. Usage::

    .venv/bin/python benchmarks/perception_client.py            # defaults: 32 slots, 500 ms, 640 requests
    .venv/bin/python benchmarks/perception_client.py --slots 16 --latency 0.1 --requests 480

``--record PATH`` also writes the numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_record import add_record_argument, write_record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from embodied_r.inference.openai_client import OpenAIBackend  # noqa: E402
from embodied_r.inference.requests import FrameRequest, FrameResult  # noqa: E402
from embodied_r.methods.embodied_r.perception.cache import PerceptionCache  # noqa: E402
from embodied_r.methods.embodied_r.perception.prompts import build_frame_prompts  # noqa: E402


class ServerProcess:
    """``python tests/fake_vlm_server.py`` in a child process."""

    def __init__(self, latency: float, slots: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
        server = Path(__file__).resolve().parents[1] / "tests" / "fake_vlm_server.py"
        self.process = subprocess.Popen([sys.executable, str(server), "--latency",
                                         str(latency), "--slots", str(slots)], stdout=subprocess.PIPE, text=True,
                                        env=env)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("PORT "):
            self.process.kill()
            raise SystemExit(f"fake server did not start (said {line!r})")
        self.base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def stats(self) -> dict:
        import httpx

        return json.loads(httpx.get(f"{self.base_url}/stats", timeout=10).text)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def make_requests(count: int, images: int, width: int, height: int, seed: int) -> list[FrameRequest]:
    rng = np.random.default_rng(seed)
    # A few distinct frames reused: realistic JPEG sizes without holding `count` images in memory.
    pool = [np.ascontiguousarray(np.repeat(np.repeat(rng.integers(0, 255, (height // 8, width // 8, 3),
                                                                  dtype=np.uint8), 8, 0), 8, 1)) for _ in range(8)]
    prompt = build_frame_prompts("Where is the red chair?", ["A. left", "B. right"], [0.0, 1.0])[1].text
    return [FrameRequest(key=f"{seed:02x}{i:08x}", qa_id=str(i), frame_index=1, video=Path("bench.mp4"),
                         image_timestamps=tuple(float(k) for k in range(images)), prompt=f"{prompt} #{seed}-{i}",
                         output="numbered", images=[pool[(i + k) % len(pool)] for k in range(images)])
            for i in range(count)]


def run_ours(server: ServerProcess, requests: list[FrameRequest], concurrency: int, cache_dir: Path) -> float:
    import httpx  # noqa: F401  (imported before the clock starts, as for the sequential client)

    backend = OpenAIBackend(model="fake-vlm", base_url=server.base_url, concurrency=concurrency, timeout=30)
    cache = PerceptionCache(cache_dir)
    failures: list[str] = []
    lock = threading.Lock()

    def on_result(request: FrameRequest, result: FrameResult) -> None:
        if not result.ok:
            with lock:
                failures.append(str(result.error))
            return
        cache.put(request.key, {"text": result.text})

    started = time.perf_counter()
    backend.run(requests, on_result)
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, e.g. {failures[0]}")
    return elapsed


def run_sequential(server: ServerProcess, requests: list[FrameRequest]) -> float:
    import httpx

    payload_builder = OpenAIBackend(model="fake-vlm", base_url=server.base_url)
    started = time.perf_counter()
    with httpx.Client(timeout=30) as client:
        for request in requests:
            response = client.post(f"{server.base_url}/chat/completions", json=payload_builder.payload(request))
            response.raise_for_status()
            response.json()["choices"][0]["message"]["content"]
    return time.perf_counter() - started


def client_row(client: str, requests: int, seconds: float, capacity: float) -> dict[str, Any]:
    """One printed line of the table, as the record holds it (the share of capacity in percent)."""
    return {"client": client, "requests": requests, "seconds": seconds, "rps": requests / seconds,
            "of_capacity_pct": 100 * requests / seconds / capacity}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=32, help="server concurrent slots (default 32)")
    parser.add_argument("--latency", type=float, default=0.5, help="server seconds per request (default 0.5)")
    parser.add_argument("--requests", type=int, default=640, help="requests for our client (default 640)")
    parser.add_argument("--sequential-requests", type=int, default=10, help="requests for the baseline (10)")
    parser.add_argument("--concurrency", type=int, default=None, help="our in-flight limit (default: --slots)")
    parser.add_argument("--images", type=int, default=2, help="images per request (default 2, as frames k>=1)")
    parser.add_argument("--size", default="320x240", help="image WIDTHxHEIGHT (default 320x240)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.split("x"))
    concurrency = args.concurrency or args.slots
    capacity = args.slots / args.latency

    server = ServerProcess(args.latency, args.slots)
    with contextlib.closing(server), tempfile.TemporaryDirectory() as tmp:
        ours_s = run_ours(server, make_requests(args.requests, args.images, width, height, 1), concurrency,
                          Path(tmp) / "cache")
        seq_s = run_sequential(server, make_requests(args.sequential_requests, args.images, width, height, 2))
        max_active = server.stats()["max_active"]

    ours_rps, seq_rps = args.requests / ours_s, args.sequential_requests / seq_s
    print(f"server: {args.slots} slots x {args.latency * 1000:.0f} ms -> capacity {capacity:.1f} req/s; "
          f"requests carry {args.images} JPEG image(s) of {width}x{height}")
    print(f"{'client':<34}{'requests':>9}{'seconds':>9}{'req/s':>9}{'of capacity':>13}")
    print(f"{'ours (async, concurrency ' + str(concurrency) + ', cached)':<34}{args.requests:>9}{ours_s:>9.2f}"
          f"{ours_rps:>9.1f}{ours_rps / capacity:>13.1%}")
    print(f"{'sequential (official behaviour)':<34}{args.sequential_requests:>9}{seq_s:>9.2f}{seq_rps:>9.1f}"
          f"{seq_rps / capacity:>13.1%}")
    print(f"ours / capacity = {ours_rps / capacity:.3f} (goal >= 0.90); ours / sequential = {ours_rps / seq_rps:.1f}x; "
          f"server saw at most {max_active} requests at once")
    if args.record is not None:
        settings = {"slots": args.slots, "latency_s": args.latency, "capacity_rps": capacity,
                    "requests": args.requests, "sequential_requests": args.sequential_requests,
                    "concurrency": concurrency, "images": args.images, "width": width, "height": height}
        results = {"clients": [client_row("ours", args.requests, ours_s, capacity),
                               client_row("sequential", args.sequential_requests, seq_s, capacity)],
                   "ours_over_sequential": ours_rps / seq_rps, "max_active": max_active}
        write_record(args.record, "perception_client", argv, settings, results)
    return 0 if ours_rps / capacity >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
