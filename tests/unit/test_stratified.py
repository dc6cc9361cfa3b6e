"""The suite-level stratified statistics, cross-checked against statsmodels and scipy on random tables.

statsmodels' ``StratifiedTable`` gives the Mantel–Haenszel common odds ratio and its
Robins–Breslow–Greenland interval; scipy's ``fisher_exact`` is the exact conditional test with one
stratum, and an enumeration of every table the margins allow with scipy's hypergeometric pmf is
the exact test with several (statsmodels has only the asymptotic one).
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from scipy.stats import fisher_exact, hypergeom
from statsmodels.stats.contingency_tables import StratifiedTable

from pytest_atlante.report import stratified
from pytest_atlante.report.stratified import Stratum

TABLES = 1200


def random_strata(rng: random.Random) -> list[Stratum]:
    strata = []
    for _ in range(rng.randint(1, 6)):
        n1, n0 = rng.randint(1, 10), rng.randint(1, 10)
        # Rates near 0 and 1 as often as in between: that is where eval suites are.
        p1, p0 = rng.choice([0.0, 1.0, rng.random()]), rng.choice([0.0, 1.0, rng.random()])
        strata.append(Stratum(sum(rng.random() < p1 for _ in range(n1)), n1,
                              sum(rng.random() < p0 for _ in range(n0)), n0))
    return strata


def as_tables(strata: list[Stratum]) -> np.ndarray:
    return np.array([[[s.passed, s.trials - s.passed], [s.control_passed, s.control_trials - s.control_passed]]
                     for s in strata], dtype=float).transpose(1, 2, 0)


def enumerated_p(strata: list[Stratum]) -> float:
    """The exact conditional p-value by listing every combination of tables with the observed margins."""
    supports = []
    for s in strata:
        total = s.passed + s.control_passed
        xs = range(max(0, total - s.control_trials), min(total, s.trials) + 1)
        supports.append([(x, hypergeom.pmf(x, s.trials + s.control_trials, total, s.trials)) for x in xs])
    totals: dict[int, float] = {}
    for combo in itertools.product(*supports):
        key = sum(x for x, _ in combo)
        totals[key] = totals.get(key, 0.0) + math.prod(p for _, p in combo)
    observed = totals[sum(s.passed for s in strata)]
    return min(1.0, sum(p for p in totals.values() if p <= observed * (1 + 1e-7)))


def test_against_statsmodels_and_scipy_on_random_tables() -> None:
    rng = random.Random(20261206)
    compared = {"odds ratio": 0, "interval": 0, "fisher": 0, "enumerated": 0}
    for _ in range(TABLES):
        strata = random_strata(rng)
        table = StratifiedTable(as_tables(strata))
        with np.errstate(divide="ignore", invalid="ignore"):
            expected = float(table.oddsratio_pooled)
            expected_ci = table.oddsratio_pooled_confint()
        ours = stratified.mantel_haenszel(strata)
        if math.isnan(expected):
            assert ours is None
        elif math.isinf(expected):
            assert ours == math.inf
        else:
            assert ours == pytest.approx(expected, rel=1e-9)
        compared["odds ratio"] += 1
        interval = stratified.rbg_interval(strata)
        if interval is None:
            assert ours is None or ours == 0 or math.isinf(ours)
        else:
            assert (interval.low, interval.high) == pytest.approx(tuple(expected_ci), rel=1e-7)
            compared["interval"] += 1
        p = stratified.exact_conditional_p(strata)
        assert p is not None
        if len(strata) == 1:
            s = strata[0]
            _, fisher = fisher_exact([[s.passed, s.trials - s.passed], [s.control_passed, s.control_trials - s.control_passed]])
            assert p == pytest.approx(fisher, rel=1e-9, abs=1e-12)
            compared["fisher"] += 1
        if math.prod(min(s.trials, s.control_trials) + 1 for s in strata) <= 20_000:
            assert p == pytest.approx(enumerated_p(strata), rel=1e-8, abs=1e-12)
            compared["enumerated"] += 1
    assert compared["odds ratio"] == TABLES and min(compared.values()) >= 100, compared
    assert compared["interval"] + compared["enumerated"] >= 1000, compared


def test_strata_without_a_side_and_the_degenerate_cases() -> None:
    assert stratified.exact_conditional_p([Stratum(0, 0, 3, 4)]) is None
    assert stratified.mantel_haenszel([Stratum(0, 0, 3, 4)]) is None
    # Every scenario passes (or fails) on both sides: nothing is discordant, nothing to estimate.
    assert stratified.mantel_haenszel([Stratum(4, 4, 4, 4), Stratum(0, 4, 0, 4)]) is None
    assert stratified.exact_conditional_p([Stratum(4, 4, 4, 4), Stratum(0, 4, 0, 4)]) == 1.0
    assert stratified.mantel_haenszel([Stratum(4, 4, 0, 4)]) == math.inf
    assert stratified.rbg_interval([Stratum(4, 4, 0, 4)]) is None
    assert stratified.mantel_haenszel([Stratum(0, 4, 4, 4)]) == 0
    assert stratified.direction([Stratum(0, 4, 4, 4)]) == -1 and stratified.direction([Stratum(2, 4, 2, 4)]) == 0
    assert stratified.mean_difference([Stratum(0, 4, 4, 4), Stratum(3, 4, 2, 4), Stratum(1, 1, 0, 0)]) == pytest.approx(-0.375)


def test_the_documented_example_is_decided_at_the_suite_level() -> None:
    """docs/statistics.md: 4/4 -> 0/4 on one of four scenarios is inconclusive scenario by scenario
    (Holm 0.114); the stratified test over the suite gives Fisher's p for that scenario (the other
    strata carry no discordant evidence), with one test instead of four."""
    strata = [Stratum(4, 4, 4, 4), Stratum(0, 4, 4, 4), Stratum(0, 4, 0, 4), Stratum(3, 3, 3, 3)]
    assert stratified.exact_conditional_p(strata) == pytest.approx(2 / 70)
    assert stratified.direction(strata) == -1 and stratified.mean_difference(strata) == -0.25


def test_trials_needed_reaches_the_power_it_promises() -> None:
    """At the figure, the exact test on simulated suites rejects about 80% of the time (the normal
    approximation is a planning figure: within a few points)."""
    rates = [(0.9, 0.5), (0.6, 0.4), (1.0, 1.0)]
    n = stratified.trials_needed(rates)
    assert n is not None and stratified.trials_needed(rates, alpha=0.01) > n
    assert stratified.cmh_power(rates, n) >= 0.8 > stratified.cmh_power(rates, n - 1)
    rng = random.Random(7)
    rejections = 0
    runs = 400
    for _ in range(runs):
        strata = [Stratum(sum(rng.random() < p1 for _ in range(n)), n, sum(rng.random() < p0 for _ in range(n)), n)
                  for p1, p0 in rates]
        p = stratified.exact_conditional_p(strata)
        rejections += p is not None and p <= 0.05
    assert 0.7 <= rejections / runs <= 0.95, (n, rejections)
    assert stratified.trials_needed([(0.5, 0.5), (0.7, 0.7)]) is None
    # Deterministic rates: 4/4 against 0/4 is the first Fisher table below 0.05 (p = 2/70), 3/3 gives 0.1.
    assert stratified.trials_needed([(1.0, 0.0)]) == 4
    assert stratified.trials_needed([(1.0, 1.0), (0.0, 1.0), (1.0, 1.0)]) == 4
    assert stratified.trials_needed([(1.0, 0.0)], alpha=0.05 / 4) == 5
    assert stratified.trials_needed([(0.51, 0.5)]) is None   # more than 1,000 per arm
