"""The shared-prefix fast paths prove themselves on a run's first step, and ``auto`` keeps the faster path.

Why: the shared-prefix update (training/shared_prefix.py) and shared-prefix sampling
(training/prefix_generation.py) are exact rewrites of TRL's per-row paths, tested on tiny models. A model,
kernel or library version the tests never saw could still make them differ, and whether they are faster
depends on the batch (prompt length against completion length, group size) and the device. So on the
first step of a run each fast path is checked against TRL's path on the real batch, and, with ``auto``,
both paths are timed there and the faster one is kept for the rest of the run:

- the update: the first prompt group's per-token log-probabilities both ways, equal within the
  precision's tolerance (:data:`FP32_TOLERANCE`, :data:`LOW_PRECISION_TOLERANCE`);
- sampling: the first group's prompt decoded greedily both ways, :data:`CHECK_NEW_TOKENS` tokens, token
  for token (a greedy call, so that the run's random stream is not touched).

A failed check falls back to TRL's path for the rest of the run, also under ``true``. What was chosen,
both timings and the check's result are the run's record (``fast_paths.json``, ``summary.json``).
The trainer (training/trainer.py) runs the paths; this module holds the settings, the comparisons, the
timing and the record.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

SHARED, PER_ROW = "shared-prefix", "per-row"
KEYS = ("shared_prefix_update", "shared_prefix_generation")
ALLOWED = ("auto", "true", "false")
# Timing reuses the check: its call of each path on the first prompt group is the first timed round (the
# model has run before it: sampling warms it up for the update, and a one-token call for sampling). Further
# rounds, alternating the paths so that a drift in machine load hits both alike, run only while the faster
# path is not clear, that is while the slower median is under CLEAR_RATIO x the faster, up to MAX_ROUNDS.
# Measured first with a warm-up call and three timed calls of each path on the whole batch: 142 s on a
# 7.6 s step (38 % of a 30-step run, benchmarks/grpo_step.py --self-check), hence the group and the reuse.
# 1.15: interleaved repeats of one call on this 2-core CPU differed by 6-9 % (docs/performance.md,
# "Evaluation throughput"), so a larger gap on one round is the paths, not the noise; and each further round
# costs both paths' calls again (at 1.5, sampling's three rounds were 9.8 s of the demo's 13.6 s check).
MAX_ROUNDS = 3
CLEAR_RATIO = 1.15
# Greedy tokens compared in the sampling check. Its calls are timed per forward pass, and the time is
# extrapolated to the run's completion budget (:func:`extrapolate`): the paths differ in encoding the
# prompt (once per group against once per row) and may differ in the per-token step, and which one
# dominates depends on the budget and the device (on an H200 the per-token step does, docs/gpus.md).
CHECK_NEW_TOKENS = 8
# Rows of the first group that the check and the timing use (fewer when the group has fewer). Two rows are
# the least that share a prefix, so the packing is exercised; the per-row paths' cost grows with the rows,
# and on all of a 2 x 4 group the check was 6.9 % of a 30-step CPU run. For the update, two rows are the
# shared path's smallest lead (the prompt is encoded once however many rows share it), so a win on two
# rows holds on the group. For sampling the per-token step may scale differently with the rows (on an H200
# it was the slower part of the shared path, docs/gpus.md); that is not measured yet.
CHECK_ROWS = 2


@dataclass(frozen=True)
class Tolerance:
    """|shared - per-row| <= atol + rtol x |per-row| for every scored token (log-probabilities, nats)."""

    atol: float
    rtol: float
    precision: str


# float32: the tests (tests/training/test_shared_prefix.py) agree to rtol 1e-5 / atol 1e-6 on a 2-layer model;
# a deep model on another kernel sums in another order, so 10-100x that: still far below any layout bug,
# which moves log-probabilities by tenths of a nat or more.
FP32_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-4, precision="float32")
# bf16 / fp16 / TF32: the two layouts round differently (other matmul shapes and attention kernels). The
# 2-layer test model agrees to ~5e-4 (tested at rtol 1e-2 / atol 5e-3); a deep model accumulates more, and
# a false failure only costs speed, so the bound is wide: 0.1 nat plus 2 % of the value.
LOW_PRECISION_TOLERANCE = Tolerance(atol=0.1, rtol=0.02, precision="bf16/fp16/tf32")


def setting_name(value: Any) -> str:
    """``auto`` | ``true`` | ``false`` for a recipe value (YAML gives booleans for true/false)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def setting_problem(key: str, value: Any) -> str | None:
    """What is wrong with a recipe's value for ``key`` (one of :data:`KEYS`), or None when it is allowed.

    >>> setting_problem("shared_prefix_update", "auto") is None
    True
    >>> setting_problem("shared_prefix_update", "yes")
    "'shared_prefix_update' must be one of auto, true, false; got 'yes'"
    """
    if isinstance(value, bool) or value == "auto":
        return None
    return f"{key!r} must be one of {', '.join(ALLOWED)}; got {value!r}"


def logp_tolerance(model: Any, autocast_16bit: bool) -> Tolerance:
    """The tolerance for the precision the log-probabilities are computed in: the weights' dtype, a bf16/fp16
    autocast, or TF32 matmuls on CUDA."""
    weights = getattr(model, "dtype", torch.float32)
    tf32 = torch.cuda.is_available() and torch.backends.cuda.matmul.allow_tf32
    if autocast_16bit or tf32 or weights in (torch.bfloat16, torch.float16):
        return LOW_PRECISION_TOLERANCE
    return FP32_TOLERANCE


def compare_logps(shared: torch.Tensor, stock: torch.Tensor, mask: torch.Tensor,
                  tolerance: Tolerance) -> dict[str, Any]:
    """The update check's result on the tokens where ``mask`` is 1 (the scored completion tokens).

    >>> t = FP32_TOLERANCE
    >>> compare_logps(torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.0, -2.5]]), torch.tensor([[1, 1]]), t)["passed"]
    False
    """
    keep = mask.bool()
    a, b = shared.detach().float()[keep].cpu(), stock.detach().float()[keep].cpu()
    difference = (a - b).abs()
    bound = tolerance.atol + tolerance.rtol * b.abs()
    worst = int(difference.argmax()) if difference.numel() else 0
    return {
        "passed": bool((difference <= bound).all()) and bool(torch.isfinite(a).all()),
        "tokens": int(difference.numel()),
        "max_abs_difference": float(difference.max()) if difference.numel() else 0.0,
        "mean_abs_difference": float(difference.mean()) if difference.numel() else 0.0,
        "at_max_per_row_value": float(b[worst]) if difference.numel() else None,
        "tolerance": asdict(tolerance),
    }


def compare_tokens(shared: list[list[int]], stock: list[list[int]]) -> dict[str, Any]:
    """The sampling check's result: greedy tokens equal row for row, or where they first differ.

    >>> compare_tokens([[5, 2]], [[5, 2]])["passed"]
    True
    >>> compare_tokens([[5, 2], [5, 7]], [[5, 2], [5, 2]])["first_mismatch"]
    {'row': 1, 'position': 1}
    """
    mismatch = None
    for row, (a, b) in enumerate(zip(shared, stock)):
        if a != b:
            position = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            mismatch = {"row": row, "position": position}
            break
    if mismatch is None and len(shared) != len(stock):
        mismatch = {"row": min(len(shared), len(stock)), "position": 0}
    return {"passed": mismatch is None, "rows": len(stock), "tokens": sum(map(len, stock)),
            "first_mismatch": mismatch}


def timed(run: Callable[[], Any], sync: Callable[[], None] | None = None) -> tuple[Any, float]:
    """(what ``run`` returns, its wall seconds); ``sync`` waits for queued device work (CUDA)."""
    sync = sync or (lambda: None)
    sync()
    start = time.perf_counter()
    out = run()
    sync()
    return out, time.perf_counter() - start


class ForwardClock:
    """Start times of a module's forward calls (a pre-hook on the input embeddings: one per model forward)."""

    def __init__(self, module: torch.nn.Module, sync: Callable[[], None] | None = None) -> None:
        self.module, self.sync, self.starts = module, sync or (lambda: None), []
        self._handle: Any = None

    def __enter__(self) -> ForwardClock:
        def record(*_: Any) -> None:
            self.sync()
            self.starts.append(time.perf_counter())

        self._handle = self.module.register_forward_pre_hook(record)
        return self

    def __exit__(self, *_: Any) -> None:
        self._handle.remove()


def extrapolate(start: float, forward_starts: list[float], end: float, new_tokens: int, budget: int) -> float:
    """Seconds a generation call would take for ``budget`` new tokens, from one that wrote ``new_tokens``:
    its last ``new_tokens - 1`` forwards are decoding steps, everything before them encodes the prompt.

    >>> extrapolate(0.0, [0.0, 2.0, 4.0, 5.0, 6.0], 7.0, new_tokens=4, budget=10)  # 4 s prompt, 1 s a token
    13.0
    """
    if new_tokens <= 1 or len(forward_starts) < new_tokens:
        return end - start
    first_step = forward_starts[len(forward_starts) - (new_tokens - 1)]
    per_token = (end - first_step) / (new_tokens - 1)
    return (first_step - start) + (max(budget, new_tokens) - 1) * per_token


def measure(estimates: dict[str, Callable[[], float]], first: dict[str, float],
            rounds: int = MAX_ROUNDS) -> dict[str, float]:
    """Median seconds of each path: ``first`` (from the check's calls) is the first round; each later round
    calls every ``estimates[path]()`` (which runs the path and returns its seconds) while the faster path is
    not clear (see :data:`CLEAR_RATIO`), up to ``rounds``.

    >>> measure({"a": lambda: 1.0, "b": lambda: 3.0}, first={"a": 1.0, "b": 3.0})  # clear: no more calls
    {'a': 1.0, 'b': 3.0}
    >>> measure({"a": lambda: 1.0, "b": lambda: 1.0}, first={"a": 1.0, "b": 1.1})  # unclear: two more rounds
    {'a': 1.0, 'b': 1.0}
    """
    seconds = {name: [first[name]] for name in estimates}

    def clear() -> bool:
        medians = sorted(statistics.median(values) for values in seconds.values())
        return medians[-1] >= CLEAR_RATIO * medians[0]

    while len(next(iter(seconds.values()))) < rounds and not clear():
        for name, estimate in estimates.items():
            seconds[name].append(estimate())
    return {name: statistics.median(values) for name, values in seconds.items()}


@dataclass
class PathRecord:
    """What the run decided for one fast path, as written to ``fast_paths.json``."""

    setting: str  # auto | true | false (the recipe's value)
    path: str | None = None  # shared-prefix | per-row; None while no batch has decided it
    check: dict[str, Any] | None = None  # the self-check's result (None: not run)
    timings_s: dict[str, float] | None = None  # median seconds per path on the first prompt group (auto only)
    timing_rounds: int | None = None  # rounds of both paths the medians are of (the check's calls are the first)
    # Gap between the two medians within which the paths count as equally fast (CLEAR_RATIO - 1): more rounds
    # ran while the first ones were within it, so a pick that is slower is so by about this much at most.
    timing_noise: float | None = None
    reason: str = ""
    cost_s: float = 0.0  # wall time the check and the timing took
    step: int | None = None  # the optimizer step (1-based) whose batch decided it
    kept_from_earlier_start: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Measurement:
    """One process's check and timings on its batch (None where its batch could not take the fast path)."""

    check: dict[str, Any] | None = None
    timings_s: dict[str, float] | None = None
    cost_s: float = 0.0
    rounds: int | None = None  # timing rounds, the check's included
    unavailable: str | None = None  # why this process's batch could not take the fast path


def combine(measurements: list[Measurement]) -> Measurement | None:
    """One result for all processes, so that every rank takes the same path: the check fails if it failed on
    any rank; the timings are summed over the ranks that measured. None when no rank could measure."""
    measured = [m for m in measurements if m.check is not None]
    if not measured:
        return None
    failed = [m.check for m in measured if not m.check["passed"]]
    check = dict(failed[0] if failed else measured[0].check)
    if len(measurements) > 1:
        check["processes_checked"] = len(measured)
    timings = None
    if all(m.timings_s is not None for m in measured):
        timings = {name: sum(m.timings_s[name] for m in measured) for name in measured[0].timings_s}
    rounds = max((m.rounds for m in measured if m.rounds is not None), default=None)
    return Measurement(check=check, timings_s=timings, cost_s=max(m.cost_s for m in measurements), rounds=rounds)


def decide(setting: str, result: Measurement) -> tuple[str, str]:
    """(path, reason) from the setting and a combined measurement."""
    check = result.check or {}
    if not check.get("passed", False):
        return PER_ROW, ("self-check failed: the shared-prefix path disagrees with TRL's per-row path "
                         f"({describe_check(check)}); the per-row path is used for the rest of the run")
    if setting == "true":
        return SHARED, "forced (true); self-check passed"
    timings = result.timings_s or {}
    shared, per_row = timings.get(SHARED), timings.get(PER_ROW)
    if shared is None or per_row is None:
        return SHARED, "auto without timings; self-check passed"
    path = SHARED if shared <= per_row else PER_ROW
    return path, f"auto: faster on the first group (shared-prefix {shared:.4g} s, per-row {per_row:.4g} s)"


def describe_check(check: dict[str, Any] | None) -> str:
    """One line for a check's result."""
    if not check:
        return "not run"
    if "max_abs_difference" in check:
        tol = check["tolerance"]
        return (f"{'passed' if check['passed'] else 'FAILED'}: max |difference| {check['max_abs_difference']:.3g} "
                f"nats over {check['tokens']} tokens; tolerance {tol['atol']:g} + {tol['rtol']:g} x |value| "
                f"({tol['precision']})")
    where = check.get("first_mismatch")
    if where is None:
        return f"passed: {check['tokens']} greedy tokens in {check['rows']} rows equal"
    return f"FAILED: greedy tokens differ at row {where['row']}, position {where['position']}"


def describe(name: str, record: PathRecord) -> str:
    """The log line for a decision (an ``auto`` reason carries both timings)."""
    return (f"shared_prefix_{name}: {record.setting} -> {record.path} ({record.reason}); check "
            f"{describe_check(record.check)}; the check and timing took {record.cost_s:.2f} s")


__all__ = [
    "FP32_TOLERANCE", "LOW_PRECISION_TOLERANCE", "PER_ROW", "SHARED", "ForwardClock", "Measurement", "PathRecord",
    "Tolerance", "combine", "compare_logps", "compare_tokens", "decide", "describe", "extrapolate", "logp_tolerance",
    "measure", "setting_name", "setting_problem", "timed",
]
