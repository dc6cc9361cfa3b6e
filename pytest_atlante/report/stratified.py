"""Suite-level comparison of two arms, stratified by scenario (docs/statistics.md, "Comparing variants").

Each scenario is one stratum: a 2×2 table of passed / not passed × this arm / the control.
Scenarios differ in difficulty far more than arms usually differ from each other, so pooling the
trials of all scenarios into one table would compare mostly the mix of scenarios; a stratified
test compares the arms *within* each scenario and combines those comparisons.

- ``mantel_haenszel``: the Mantel–Haenszel (Cochran–Mantel–Haenszel) common odds ratio,
  Σ a·d/n ÷ Σ b·c/n over the strata (a, b: this arm's passes and failures; c, d: the control's).
- ``rbg_interval``: its 95% interval on the odds-ratio scale, from the Robins–Breslow–Greenland
  variance of its logarithm (the one statsmodels' ``StratifiedTable`` reports).
- ``exact_conditional_p``: the exact conditional test of a common odds ratio of 1: given every
  stratum's margins, the sum of this arm's passes has the distribution of a sum of independent
  hypergeometric variables (their convolution); the two-sided p-value sums the probability of
  every total no more likely than the observed one (R's ``mantelhaen.test(exact = TRUE)``; with
  one stratum it is Fisher's exact test, ``stats.fisher_two_sided``).
- ``trials_needed``: trials per arm and scenario for 80% power, from the normal approximation to
  the Mantel–Haenszel statistic.

Pure functions on counts; cross-checked against statsmodels and scipy in
``tests/unit/test_stratified.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_atlante.report.stats import (
    ALPHA,
    FISHER_TIE_TOLERANCE,
    MAX_TRIALS_NEEDED,
    POWER,
    Z_95,
    Interval,
    _check_counts,
    _hypergeom_pmf,
    z_two_sided,
)

# Up to this many trials per arm and scenario the planning figure also asks the exact test (below).
EXACT_FLOOR_LIMIT = 200


@dataclass(frozen=True)
class Stratum:
    """One scenario: passes and trials that ran in this arm and in the control."""

    passed: int
    trials: int
    control_passed: int
    control_trials: int

    def __post_init__(self) -> None:
        _check_counts(self.passed, self.trials)
        _check_counts(self.control_passed, self.control_trials)

    @property
    def informative(self) -> bool:
        """A scenario with no trial on one side says nothing about the difference."""
        return self.trials > 0 and self.control_trials > 0


def _informative(strata: Sequence[Stratum]) -> list[Stratum]:
    return [s for s in strata if s.informative]


def mantel_haenszel(strata: Sequence[Stratum]) -> float | None:
    """The Mantel–Haenszel common odds ratio (``math.inf`` when only this arm ever wins a
    discordant comparison); ``None`` when no stratum compares anything (0/0)."""
    numerator = denominator = 0.0
    for s in _informative(strata):
        n = s.trials + s.control_trials
        numerator += s.passed * (s.control_trials - s.control_passed) / n
        denominator += (s.trials - s.passed) * s.control_passed / n
    if denominator == 0:
        return None if numerator == 0 else math.inf
    return numerator / denominator


def rbg_interval(strata: Sequence[Stratum]) -> Interval | None:
    """95% interval of the common odds ratio: exp(log OR_MH ± z·SE), SE² the Robins–Breslow–
    Greenland variance.  ``None`` when the estimate is 0, infinite or undefined (no finite
    logarithm to put an interval around)."""
    estimate = mantel_haenszel(strata)
    if estimate is None or estimate == 0 or math.isinf(estimate):
        return None
    sum_r = sum_s = term_pr = term_mixed = term_qs = 0.0
    for s in _informative(strata):
        a, b = s.passed, s.trials - s.passed
        c, d = s.control_passed, s.control_trials - s.control_passed
        n = a + b + c + d
        p, q, r, t = (a + d) / n, (b + c) / n, a * d / n, b * c / n
        sum_r += r
        sum_s += t
        term_pr += p * r
        term_mixed += p * t + q * r
        term_qs += q * t
    variance = term_pr / (2 * sum_r**2) + term_mixed / (2 * sum_r * sum_s) + term_qs / (2 * sum_s**2)
    half = Z_95 * math.sqrt(variance)
    return Interval(math.exp(math.log(estimate) - half), math.exp(math.log(estimate) + half))


def _total_distribution(strata: Sequence[Stratum]) -> tuple[int, list[float]]:
    """The conditional distribution of this arm's total passes given every stratum's margins:
    ``(lowest total, probabilities from it upwards)``, the convolution of the hypergeometrics."""
    low, dist = 0, [1.0]
    for s in strata:
        pmf = _hypergeom_pmf(s.trials, s.control_trials, s.passed + s.control_passed)
        first = pmf[0][0]
        merged = [0.0] * (len(dist) + len(pmf) - 1)
        for i, p in enumerate(dist):
            for j, (_x, q) in enumerate(pmf):
                merged[i + j] += p * q
        low, dist = low + first, merged
    return low, dist


def exact_conditional_p(strata: Sequence[Stratum]) -> float | None:
    """Two-sided p-value of the exact conditional test of a common odds ratio of 1; ``None``
    without an informative stratum."""
    used = _informative(strata)
    if not used:
        return None
    low, dist = _total_distribution(used)
    observed = dist[sum(s.passed for s in used) - low]
    return min(1.0, sum(p for p in dist if p <= observed * FISHER_TIE_TOLERANCE))


def direction(strata: Sequence[Stratum]) -> int:
    """+1 when this arm passed more than the margins lead one to expect, −1 when fewer, else 0:
    the side of the null the exact test found the observation on."""
    used = _informative(strata)
    excess = sum(s.passed - s.trials * (s.passed + s.control_passed) / (s.trials + s.control_trials) for s in used)
    return 0 if abs(excess) < 1e-12 else (1 if excess > 0 else -1)


def mean_difference(strata: Sequence[Stratum]) -> float | None:
    """The suite-level difference of pass rates: the mean over scenarios of (this arm's pass rate −
    the control's), every scenario weighing the same (as ``meanPassRate`` does)."""
    used = _informative(strata)
    if not used:
        return None
    return sum(s.passed / s.trials - s.control_passed / s.control_trials for s in used) / len(used)


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def cmh_power(rates: Sequence[tuple[float, float]], n: int, alpha: float = ALPHA) -> float:
    """Approximate power of the two-sided Mantel–Haenszel test with ``n`` trials per arm in each
    scenario, if the true rates were ``(this arm, control)`` per scenario.

    The statistic S = Σ(a_k − E₀a_k) = Σ(a_k − c_k)/2 with equal arms; under the alternative its mean
    is n·Σ(p₁ₖ − p₀ₖ)/2 and its variance n·Σ(p₁ₖq₁ₖ + p₀ₖq₀ₖ)/4, under the null its (conditional)
    variance about n·Σp̄ₖq̄ₖ/2 (p̄ₖ the pooled rate).  The normal approximation then gives the power.
    """
    shift = n * sum(p1 - p0 for p1, p0 in rates) / 2
    null_var = n * sum(((p1 + p0) / 2) * (1 - (p1 + p0) / 2) for p1, p0 in rates) / 2
    alt_var = n * sum(p1 * (1 - p1) + p0 * (1 - p0) for p1, p0 in rates) / 4
    if alt_var == 0:   # every scenario deterministic on both sides: the test rejects iff they differ
        return 1.0 if shift != 0 and null_var > 0 else 0.0
    z = z_two_sided(alpha)
    return _normal_cdf((abs(shift) - z * math.sqrt(null_var)) / math.sqrt(alt_var))


def trials_needed(rates: Sequence[tuple[float, float]], *, alpha: float = ALPHA,
                  limit: int = MAX_TRIALS_NEEDED) -> int | None:
    """Smallest trials per arm and scenario at which the stratified test at ``alpha`` detects the
    observed rates with 80% power; ``None`` when nothing differs on average or more than ``limit``
    would be needed.  A planning figure: the observed rates are themselves uncertain."""
    if not rates or abs(sum(p1 - p0 for p1, p0 in rates)) < 1e-12:
        return None
    low, high = 1, limit
    if cmh_power(rates, high, alpha) < POWER:
        return None
    while low < high:   # the approximate power grows with n, so bisection finds the first n
        mid = (low + high) // 2
        if cmh_power(rates, mid, alpha) >= POWER:
            high = mid
        else:
            low = mid + 1
    # Near 0 and 1 the normal approximation promises power the discrete test cannot have (at
    # rates 1 and 0 its variance is nil): the suite the rates predict must itself be significant.
    n = low
    while n <= min(limit, EXACT_FLOOR_LIMIT):
        expected = [Stratum(round(n * p1), n, round(n * p0), n) for p1, p0 in rates]
        p = exact_conditional_p(expected)
        if p is not None and p <= alpha:
            return n
        n += 1
    return n if n <= limit else None
