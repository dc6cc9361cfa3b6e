"""The statistics of an eval run: intervals, pass@k, exact tests and trial planning.

Pure functions on counts, no pytest, no scipy (runtime dependencies are fixed): every formula is
written out here and cross-checked against scipy and statsmodels in ``tests/unit/test_evalstats.py``.
``docs/statistics.md`` says what each number means and which assumptions it rests on.

Conventions: ``n`` is the number of trials that ran (skipped trials never count), ``c`` the number
that passed.  Confidence is fixed at 95% and power at 80%, so the two normal quantiles are
constants rather than an inverse-CDF implementation.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
POWER = 0.8
Z_95 = 1.959963984540054     # standard normal quantile at 0.975 (two-sided 95%)
Z_POWER = 0.8416212335729143  # standard normal quantile at 0.80
# scipy's fisher_exact counts a table as "at least as extreme" when its probability is within this
# relative tolerance of the observed one, so ties lost to rounding still count.  Same rule here.
FISHER_TIE_TOLERANCE = 1 + 1e-7
# A difference that needs more trials per side than this is reported as "more than" the cap.
MAX_TRIALS_NEEDED = 1000
# Up to this many trials per side the answer comes from Fisher's exact power (discreteness matters
# there); beyond it from the continuity-corrected normal formula, which is then within a few
# percent of exact (0.9 vs 0.8: 219 against an exact 214) at a fraction of the O(n² log n) cost.
EXACT_SEARCH_LIMIT = 100


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def _check_counts(c: int, n: int) -> None:
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"counts must satisfy 0 <= c <= n (got c={c}, n={n})")


def wilson(c: int, n: int) -> Interval | None:
    """Wilson score 95% interval for a binomial proportion c/n; ``None`` when n is 0.

    Unlike the normal ("Wald") interval it stays inside [0, 1] and does not collapse to a point at
    c = 0 or c = n, which is where small eval runs usually are.
    """
    _check_counts(c, n)
    if n == 0:
        return None
    p = c / n
    z2 = Z_95 * Z_95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z_95 / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # At c = 0 (c = n) the exact bound is 0 (1); the formula lands a rounding error away from it.
    return Interval(0.0 if c == 0 else centre - half, 1.0 if c == n else centre + half)


def pass_at_k(c: int, n: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k trials passes): 1 − C(n−c, k) / C(n, k)."""
    _check_counts(c, n)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..n (got k={k}, n={n})")
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(c: int, n: int, k: int) -> float:
    """Unbiased estimate of P(all of k trials pass) ("pass^k"): C(c, k) / C(n, k)."""
    _check_counts(c, n)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..n (got k={k}, n={n})")
    return math.comb(c, k) / math.comb(n, k)


@dataclass(frozen=True)
class SuiteEstimate:
    mean: float
    interval: Interval | None


def clustered_mean(counts: Sequence[tuple[int, int]]) -> SuiteEstimate | None:
    """Mean of scenario pass rates with a cluster-robust 95% interval (trials clustered in scenarios).

    ``counts`` holds ``(c, n)`` per scenario; scenarios with no trial that ran are left out.  Each
    scenario weighs the same.  The standard error is the cluster-robust (sandwich) one of Miller
    (2024), with the usual small-sample factor S/(S−1): SE² = Σ(p_s − p̄)² / (S(S−1)).  Trials of one
    scenario are not independent draws (they share a task), so the spread *between* scenarios,
    not the number of trials, sets the uncertainty.  With fewer than two scenarios there is no
    spread to measure and the interval is ``None``.
    """
    for c, n in counts:
        _check_counts(c, n)
    rates = [c / n for c, n in counts if n > 0]
    if not rates:
        return None
    s = len(rates)
    mean = sum(rates) / s
    if s < 2:
        return SuiteEstimate(mean, None)
    se = math.sqrt(sum((r - mean) ** 2 for r in rates) / (s * (s - 1)))
    return SuiteEstimate(mean, Interval(max(0.0, mean - Z_95 * se), min(1.0, mean + Z_95 * se)))


def newcombe_difference(c_new: int, n_new: int, c_base: int, n_base: int) -> Interval | None:
    """95% interval of p_new − p_base by Newcombe's hybrid score method (his method 10).

    It combines the two Wilson intervals; unlike the Wald difference interval it has close to
    nominal coverage for small n and extreme proportions.  ``None`` when either side has no trial.
    """
    new, base = wilson(c_new, n_new), wilson(c_base, n_base)
    if new is None or base is None:
        return None
    p1, p2 = c_new / n_new, c_base / n_base
    d = p1 - p2
    low = d - math.sqrt((p1 - new.low) ** 2 + (base.high - p2) ** 2)
    high = d + math.sqrt((new.high - p1) ** 2 + (p2 - base.low) ** 2)
    return Interval(max(-1.0, low), min(1.0, high))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _hypergeom_pmf(row1: int, row2: int, col: int) -> list[tuple[int, float]]:
    """P(X = x) for the first row's successes given margins: rows row1, row2 and column total col."""
    low, high = max(0, col - row2), min(col, row1)
    log_total = _log_comb(row1 + row2, col)
    return [(x, math.exp(_log_comb(row1, x) + _log_comb(row2, col - x) - log_total)) for x in range(low, high + 1)]


def fisher_two_sided(c1: int, n1: int, c2: int, n2: int) -> float:
    """Two-sided Fisher exact test p-value for the 2×2 table [[c1, n1−c1], [c2, n2−c2]].

    The p-value sums the probabilities (given both margins) of every table no more likely than the
    observed one — the definition scipy.stats.fisher_exact uses.
    """
    _check_counts(c1, n1)
    _check_counts(c2, n2)
    pmf = _hypergeom_pmf(n1, n2, c1 + c2)
    observed = next(p for x, p in pmf if x == c1)
    return min(1.0, sum(p for _, p in pmf if p <= observed * FISHER_TIE_TOLERANCE))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (family-wise error control), in the input's order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def _binom_pmf(n: int, p: float) -> list[float]:
    if p <= 0.0 or p >= 1.0:
        hit = 0 if p <= 0.0 else n
        return [1.0 if x == hit else 0.0 for x in range(n + 1)]
    lp, lq = math.log(p), math.log1p(-p)
    return [math.exp(_log_comb(n, x) + x * lp + (n - x) * lq) for x in range(n + 1)]


def fisher_power(p1: float, p2: float, n: int, alpha: float = ALPHA) -> float:
    """Exact power of the two-sided Fisher test with n trials per side at true rates p1 and p2.

    Sums, over every table the two binomials can produce, the probability of those the test
    rejects at ``alpha``.  Tables sharing a column total share one hypergeometric distribution, so
    each total's rejection region is found once (sort by probability), O(n² log n) overall.
    """
    b1, b2 = _binom_pmf(n, p1), _binom_pmf(n, p2)
    power = 0.0
    for total in range(2 * n + 1):
        pmf = _hypergeom_pmf(n, n, total)
        ascending = sorted(p for _, p in pmf)
        cumulative = list(itertools.accumulate(ascending))
        for x, p in pmf:
            # p-value: the sum of all table probabilities ≤ this one's (with scipy's tie tolerance)
            p_value = cumulative[bisect.bisect_right(ascending, p * FISHER_TIE_TOLERANCE) - 1]
            if p_value <= alpha:
                power += b1[x] * b2[total - x]
    return power


def z_two_sided(alpha: float) -> float:
    """The normal quantile z with P(|Z| > z) = alpha, by bisection on ``math.erfc`` (no scipy)."""
    low, high = 0.0, 40.0
    for _ in range(200):
        mid = (low + high) / 2
        if math.erfc(mid / math.sqrt(2)) > alpha:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def approximate_trials(p1: float, p2: float, alpha: float = ALPHA) -> float:
    """Per-side trials for 80% power by the normal formula with Fleiss' continuity correction —
    a starting point for the exact search, which this slightly underestimates."""
    d = abs(p1 - p2)
    pbar = (p1 + p2) / 2
    z = z_two_sided(alpha)
    n = (z * math.sqrt(2 * pbar * (1 - pbar)) + Z_POWER * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / d**2
    return n / 4 * (1 + math.sqrt(1 + 4 / (n * d))) ** 2


def trials_needed(p1: float, p2: float, *, alpha: float = ALPHA, limit: int = MAX_TRIALS_NEEDED) -> int | None:
    """Smallest trials per side at which Fisher's test at ``alpha`` detects p1 ≠ p2 with 80% power.

    ``None`` when p1 == p2 (nothing to detect) or when more than ``limit`` trials are needed.  The
    exact power of a discrete test is not monotone in n (it saw-tooths), so the answer is the first
    n that reaches 80%, searched upwards from a little below the normal approximation; past
    ``EXACT_SEARCH_LIMIT`` the approximation itself is the answer.
    """
    if p1 == p2:
        return None
    approx = approximate_trials(p1, p2, alpha)
    if approx > limit:
        return None
    n = max(2, int(approx * 0.75))
    while n <= min(limit, EXACT_SEARCH_LIMIT):
        if fisher_power(p1, p2, n, alpha) >= POWER:
            return n
        n += 1
    return math.ceil(approx)
