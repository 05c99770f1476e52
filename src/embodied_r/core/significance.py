"""Exact paired tests for a before/after comparison, and the seed as the unit across training runs.

A bootstrap interval of a paired difference says nothing honest when only a handful of questions
changed: one question improved out of one resamples to [100, 100]. The verdict therefore comes from an
exact test on the pairs that differ, at the 5 % level:

* 0/1 scores (accuracy): the two-sided sign test on the discordant pairs, which is the exact McNemar
  test — under "no change" each discordant pair is an improvement with probability 1/2.
* Any other scores (mean relative accuracy): the sign-flip permutation test of the mean paired
  difference — under "no change" each non-zero difference is as likely to have the other sign. All
  2^m sign patterns are enumerated for m <= ``EXACT_FLIP_LIMIT``; above that a fixed-seed Monte Carlo.

A test that cannot reach p < 0.05 with so few differing pairs (the smallest possible p is 2 / 2^d, so
d <= 5) gives no verdict at all rather than a "no measurable change" that reads like evidence.

Questions within one run are not the whole story: a training run's gain can depend on its seed. Across
runs, each seed's mean difference is one sample (``across_seeds``), and runs are pooled that way only
when their settings differ in nothing but the seed (``check_poolable``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ALPHA = 0.05
EXACT_FLIP_LIMIT = 20  # 2^20 sign patterns (8 MB of sums) is still quick to enumerate
MONTE_CARLO_FLIPS = 20_000
MONTE_CARLO_SEED = 0
TOO_FEW = "too few differing answers"

# Two-sided 95 % quantiles of Student's t, df = 1..30 (t_{0.975, df}); above 30 ``t_quantile_975`` uses
# the Cornish-Fisher expansion, which is within 1e-6 of the exact value there.
T_975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
Z_975 = 1.959963984540054


# ---------------------------------------------------------------------------------------------------
# Exact tests on paired differences
# ---------------------------------------------------------------------------------------------------


def sign_test(improved: int, worsened: int) -> float:
    """Two-sided exact sign test (exact McNemar) p-value for ``improved`` vs ``worsened`` discordant pairs:
    ``min(1, 2 * P(X <= min(improved, worsened)))`` with X ~ Binomial(improved + worsened, 1/2).

    >>> sign_test(4, 0)
    0.125
    >>> sign_test(3, 3)
    1.0
    >>> round(sign_test(20, 2), 6)
    0.000121
    """
    discordant = improved + worsened
    tail = sum(math.comb(discordant, k) for k in range(min(improved, worsened) + 1))
    # Integer arithmetic until the one division: exact for any number of pairs.
    return min(1.0, 2 * tail / 2 ** discordant)


def sign_flip_test(differences: Sequence[float], flips: int = MONTE_CARLO_FLIPS,
                   seed: int = MONTE_CARLO_SEED) -> tuple[float, str]:
    """Two-sided sign-flip permutation p-value of the mean of ``differences``, and how it was found:
    ``"exact"`` (every sign pattern of the non-zero differences) or ``"monte carlo (N flips, seed S)"``.

    Zeros are left out: flipping them changes nothing. The observed pattern counts among the flips, so
    the Monte Carlo p is (1 + hits) / (1 + flips) and never 0.

    >>> sign_flip_test([0.5, 0.25, -0.125])  # sums of the 8 patterns: |s| >= 0.625 in 4 of them
    (0.5, 'exact')
    >>> sign_flip_test([0.0, 0.0])
    (1.0, 'exact')
    """
    import numpy as np

    values = np.asarray([d for d in differences if d != 0], dtype=float)
    if values.size == 0:
        return 1.0, "exact"
    observed = abs(float(values.sum()))  # the sum orders patterns as the mean does (same n)
    tolerance = 1e-9 * float(np.abs(values).sum())  # equal sums computed in another order
    if values.size <= EXACT_FLIP_LIMIT:
        sums = np.zeros(1)
        for value in values:
            sums = np.concatenate([sums + value, sums - value])
        return float(np.mean(np.abs(sums) >= observed - tolerance)), "exact"
    rng = np.random.default_rng(seed)
    rows = max(1, 2_000_000 // values.size)  # bounded memory for long question lists
    hits, done = 0, 0
    while done < flips:
        count = min(rows, flips - done)
        signs = rng.integers(0, 2, size=(count, values.size)) * 2 - 1
        hits += int(np.sum(np.abs(signs @ values) >= observed - tolerance))
        done += count
    return (1 + hits) / (1 + flips), f"monte carlo ({flips} flips, seed {seed})"


def paired_test(before: Sequence[float], after: Sequence[float]) -> dict[str, Any]:
    """The exact test of ``after`` against ``before`` (same questions, same order) and its verdict.

    Keys: ``test`` ("sign" when every score is 0 or 1, else "sign-flip"), ``method``, ``p_value``,
    ``improved`` / ``worsened`` (pairs with after > before / after < before) and ``verdict``.

    >>> paired_test([0.0] * 160, [1.0] * 4 + [0.0] * 156)["verdict"]
    'too few differing answers'
    >>> result = paired_test([0.0] * 160, [1.0] * 20 + [0.0] * 140)
    >>> result["verdict"], result["p_value"] < 0.05
    ('better', True)
    """
    pairs = list(zip(before, after, strict=True))
    improved = sum(a > b for b, a in pairs)
    worsened = sum(a < b for b, a in pairs)
    binary = all(b in (0.0, 1.0) and a in (0.0, 1.0) for b, a in pairs)
    if binary:
        test, method, p_value = "sign", "exact", sign_test(improved, worsened)
    else:
        p_value, method = sign_flip_test([a - b for b, a in pairs])
        test = "sign-flip"
    differing = improved + worsened
    mean = sum(a - b for b, a in pairs) / len(pairs) if pairs else 0.0
    if 2 * 0.5 ** differing >= ALPHA:  # even all differences one way could not reach p < 0.05
        verdict = TOO_FEW
    elif p_value < ALPHA:
        verdict = "better" if mean > 0 else "worse"
    else:
        verdict = "no measurable change"
    return {"test": test, "method": method, "p_value": p_value, "improved": improved, "worsened": worsened,
            "verdict": verdict}


# ---------------------------------------------------------------------------------------------------
# Seeds as the unit
# ---------------------------------------------------------------------------------------------------


def t_quantile_975(df: int) -> float:
    """Student t quantile at 0.975 for ``df`` degrees of freedom (a two-sided 95 % interval).

    >>> t_quantile_975(4)
    2.7764
    >>> round(t_quantile_975(60), 4)
    2.0003
    """
    if df < 1:
        raise ValueError(f"a t quantile needs df >= 1, got {df}")
    if df <= len(T_975):
        return T_975[df - 1]
    # Cornish-Fisher expansion of t in powers of 1/df (Abramowitz & Stegun 26.7.5).
    z, v = Z_975, float(df)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3)
            + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / (92160 * v ** 4))


def across_seeds(differences: Sequence[float], seed_verdicts: Sequence[str] | None = None) -> dict[str, Any]:
    """Pool per-seed mean differences (one number per seed) with the seed as the sample: their mean, a
    95 % t-interval, how many seeds went each way, and a verdict from the interval.

    Seeds that all differ by exactly the same amount (one question better in each, say: scores are
    discrete) give a zero-width interval, which says nothing about how much seeds vary. Such an interval
    decides nothing: the verdict is "better" or "worse" only where every seed's own test
    (``seed_verdicts``, e.g. the exact paired test on that seed's questions) says so, and ``degenerate``
    marks it.

    >>> result = across_seeds([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> result["mean"], [round(x, 3) for x in result["ci95"]], result["verdict"]
    (3.0, [1.037, 4.963], 'better')
    >>> across_seeds([0.2])["verdict"]
    'too few seeds'
    >>> across_seeds([-0.023, -0.023], ["no measurable change"] * 2)["verdict"]
    'no measurable change'
    >>> across_seeds([0.25, 0.25], ["better", "better"])["verdict"]
    'better'
    """
    values = [float(d) for d in differences]
    n = len(values)
    better_in = sum(d > 0 for d in values)
    worse_in = sum(d < 0 for d in values)
    result: dict[str, Any] = {"n_seeds": n, "mean": sum(values) / n if n else None, "ci95": None,
                              "better_in": better_in, "worse_in": worse_in, "verdict": "too few seeds"}
    if n < 2:
        return result
    mean = result["mean"]
    sd = math.sqrt(sum((d - mean) ** 2 for d in values) / (n - 1))
    half = t_quantile_975(n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    result["ci95"] = [low, high]
    result["verdict"] = "better" if low > 0 else "worse" if high < 0 else "no measurable change"
    if max(values) - min(values) <= 1e-12 and mean != 0:  # equal up to float summation (sd may not be 0.0)
        result["degenerate"] = True
        verdicts = list(seed_verdicts or ())
        if len(verdicts) != n or any(v != result["verdict"] for v in verdicts):
            result["verdict"] = "no measurable change"
    return result


def _flatten(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out


def check_poolable(settings: Mapping[str, Mapping[str, Any]], ignore: Iterable[str] = ("seed",)) -> None:
    """Raise ValueError when runs (name -> settings) differ in anything but ``ignore``d keys.

    Nested settings are compared key by key (``grpo.learning_rate``); a key in ``ignore`` is skipped at
    any depth or by its dotted path, and a key one run lacks counts as a difference.

    >>> check_poolable({"s0": {"lr": 1e-5, "seed": 0}, "s1": {"lr": 1e-5, "seed": 1}})
    >>> check_poolable({"s0": {"lr": 1e-5, "seed": 0}, "s1": {"lr": 2e-5, "seed": 1}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: runs differ in more than seed, ...: s1 vs s0: lr (2e-05 vs 1e-05); pool only runs that differ ...
    """
    skipped = set(ignore)
    flat = {name: {k: v for k, v in _flatten(s).items() if k not in skipped and k.split(".")[-1] not in skipped}
            for name, s in settings.items()}
    if len(flat) < 2:
        return
    first, *others = flat

    def shown(run: str, key: str) -> str:
        return repr(flat[run][key]) if key in flat[run] else "missing"

    problems = []
    for name in others:
        keys = sorted(set(flat[first]) | set(flat[name]))
        differing = [f"{k} ({shown(name, k)} vs {shown(first, k)})" for k in keys
                     if k not in flat[name] or k not in flat[first] or flat[name][k] != flat[first][k]]
        if differing:
            problems.append(f"{name} vs {first}: " + ", ".join(differing))
    if problems:
        allowed = ", ".join(sorted(skipped)) or "nothing"
        raise ValueError(f"runs differ in more than {allowed}, so they are not seeds of one setting: "
                         + "; ".join(problems) + f"; pool only runs that differ in {allowed}, "
                         "or report them as separate arms")
