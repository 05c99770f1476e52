"""Pure selection rules shared by the decoders and the key-frame selector (no video I/O here).

Frames are chosen by *time*, never by frame counts, so variable-frame-rate videos and rates such as
29.97 fps sample correctly: for every target time the decoder keeps the frame nearest to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def uniform_targets(sample_fps: float, start: float = 0.0) -> Iterator[float]:
    """Endless target times ``start, start + 1/fps, ...`` (computed by multiplication: no drift).

    >>> from itertools import islice
    >>> list(islice(uniform_targets(2.0), 4))
    [0.0, 0.5, 1.0, 1.5]
    """
    if not sample_fps > 0:
        raise ValueError(f"sample_fps must be > 0, got {sample_fps}")
    step = 1.0 / sample_fps
    k = 0
    while True:
        yield start + k * step
        k += 1


def pick_nearest(items: Iterable[tuple[float, T]], targets: Iterable[float], *,
                 tail_tolerance: float = float("inf")) -> Iterator[tuple[float, T]]:
    """Stream ``(time, item)`` pairs (ascending time) and yield, for each ascending target time, the
    item nearest to it; ties go to the earlier item and an item is yielded at most once.

    Needs one item of look-ahead only, so it works on a live decoder. Targets after the last item
    are matched to the last item when they are within ``tail_tolerance`` seconds of it.

    >>> items = [(0.0, "a"), (0.4, "b"), (0.9, "c"), (1.6, "d")]
    >>> [x for _, x in pick_nearest(items, [0.0, 1.0, 2.0])]
    ['a', 'c', 'd']
    >>> [x for _, x in pick_nearest(items, [0.5, 0.6])]  # both nearest to 'b': yielded once
    ['b']
    """
    target_iter = iter(targets)
    target = next(target_iter, None)
    previous: tuple[float, T] | None = None
    last_time: float | None = None
    for time, item in items:
        while target is not None and time >= target:
            if previous is not None and target - previous[0] <= time - target:
                chosen = previous
            else:
                chosen = (time, item)
            if chosen[0] != last_time:
                last_time = chosen[0]
                yield chosen
            target = next(target_iter, None)
        if target is None:
            return
        previous = (time, item)
    if target is not None and previous is not None and previous[0] != last_time:
        if target - previous[0] <= tail_tolerance:
            yield previous


def select_indices(times: Sequence[float], targets: Iterable[float], *, include_last: bool) -> list[int]:
    """Indices into ascending ``times`` picked by :func:`pick_nearest`, plus the last one if asked.

    >>> select_indices([0.0, 0.5, 1.0, 1.5, 1.7], uniform_targets(1.0), include_last=True)
    [0, 2, 4]
    """
    if not times:
        return []
    gap = _largest_gap(times)
    bounded = _until(targets, times[-1] + gap)
    # A target just past the last frame (e.g. a rounded timestamp) still gets it, as nearest frame.
    chosen = [index for _, index in pick_nearest(((t, i) for i, t in enumerate(times)), bounded,
                                                  tail_tolerance=max(gap / 2, 1e-6))]
    if include_last and (not chosen or chosen[-1] != len(times) - 1):
        chosen.append(len(times) - 1)
    return chosen


def _largest_gap(times: Sequence[float]) -> float:
    return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def _until(targets: Iterable[float], stop: float) -> Iterator[float]:
    # Uniform targets are endless; stop once they pass the video's end.
    for target in targets:
        if target > stop:
            return
        yield target


def constrained_sampling(items: Sequence[T], count: int) -> list[T]:
    """``count`` items spread over ``items``, always keeping the first and the last.

    Interior picks sit at ``round(i * (n - 2) / (count - 2)) + 1`` for ``i < count - 2`` (the official
    Embodied-R resampling rule, reproduced so that clamping agrees with it; it leans towards the
    start). Returns everything when there are no more than ``count`` items.

    >>> constrained_sampling(list(range(10)), 4)
    [0, 1, 5, 9]
    >>> constrained_sampling([1, 2], 4)
    [1, 2]
    """
    def positions(n: int) -> list[int]:
        interior = [round(i * (n - 2) / (count - 2)) + 1 for i in range(count - 2)]
        return [0] + interior + [n - 1]

    return _pick_positions(items, count, positions)


def evenly_spaced(items: Sequence[T], count: int) -> list[T]:
    """``count`` items at evenly spaced positions ``round(k * (n - 1) / (count - 1))``, first and last
    included; everything when there are no more than ``count`` (the uniform baseline's rule).

    >>> evenly_spaced(list(range(13)), 5)
    [0, 3, 6, 9, 12]
    """
    return _pick_positions(items, count, lambda n: [round(k * (n - 1) / (count - 1)) for k in range(count)])


def _pick_positions(items: Sequence[T], count: int, positions: Callable[[int], list[int]]) -> list[T]:
    # Shared edge cases: nothing to drop, a single pick, or just the two ends.
    if count <= 0:
        raise ValueError(f"count must be positive, got {count}")
    if len(items) <= count:
        return list(items)
    if count <= 2:
        return [items[0], items[-1]][:count]
    return [items[i] for i in positions(len(items))]
