"""evalstats cross-checked against independent implementations (scipy.stats, statsmodels).

Every statistic runs over a grid of counts that includes the edges the formulas are most fragile
at: n = 1, c = 0, c = n and k = n.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.regression.linear_model import WLS
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from pytest_atlante.report import stats as evalstats

COUNTS = [(c, n) for n in (1, 2, 3, 5, 10, 50) for c in range(n + 1)]
PAIRS = [(c1, n1, c2, n2) for c1, n1 in COUNTS[:40:3] for c2, n2 in COUNTS[::5]]


@pytest.mark.parametrize(("c", "n"), COUNTS)
def test_wilson_matches_statsmodels(c: int, n: int) -> None:
    low, high = proportion_confint(c, n, alpha=0.05, method="wilson")
    ours = evalstats.wilson(c, n)
    assert ours is not None
    assert ours.low == pytest.approx(low, abs=1e-12) and ours.high == pytest.approx(high, abs=1e-12)
    assert 0.0 <= ours.low <= c / n <= ours.high <= 1.0


def test_wilson_without_trials_is_none() -> None:
    assert evalstats.wilson(0, 0) is None


@pytest.mark.parametrize(("c", "n"), COUNTS[:30])
def test_pass_at_k_matches_brute_force_over_subsets(c: int, n: int) -> None:
    # The estimators are the exact averages over all k-subsets of the n trials; hypergeometric
    # probabilities from scipy give the same averages independently of math.comb.
    for k in range(1, n + 1):
        none_pass = stats.hypergeom.pmf(0, n, c, k)   # P(a random k-subset holds no pass)
        all_pass = stats.hypergeom.pmf(k, n, c, k)    # P(a random k-subset holds only passes)
        assert evalstats.pass_at_k(c, n, k) == pytest.approx(1 - none_pass, abs=1e-12)
        assert evalstats.pass_hat_k(c, n, k) == pytest.approx(all_pass, abs=1e-12)
    assert evalstats.pass_at_k(c, n, n) == (1.0 if c else 0.0)        # k = n: did any trial pass
    assert evalstats.pass_hat_k(c, n, n) == (1.0 if c == n else 0.0)  # k = n: did every trial pass
    assert evalstats.pass_at_k(c, n, 1) == pytest.approx(c / n)       # k = 1: the pass rate


@pytest.mark.parametrize("bad", [(4, 3, 1), (1, 3, 0), (1, 3, 4), (-1, 3, 1)])
def test_pass_at_k_rejects_impossible_counts(bad: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError):
        evalstats.pass_at_k(*bad)


@pytest.mark.parametrize(("c1", "n1", "c2", "n2"), PAIRS)
def test_newcombe_matches_statsmodels(c1: int, n1: int, c2: int, n2: int) -> None:
    low, high = confint_proportions_2indep(c1, n1, c2, n2, method="newcomb", compare="diff", alpha=0.05)
    ours = evalstats.newcombe_difference(c1, n1, c2, n2)
    assert ours is not None
    assert ours.low == pytest.approx(low, abs=1e-12) and ours.high == pytest.approx(high, abs=1e-12)


@pytest.mark.parametrize(("c1", "n1", "c2", "n2"), PAIRS)
def test_fisher_matches_scipy(c1: int, n1: int, c2: int, n2: int) -> None:
    expected = stats.fisher_exact([[c1, n1 - c1], [c2, n2 - c2]], alternative="two-sided").pvalue
    assert evalstats.fisher_two_sided(c1, n1, c2, n2) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_fisher_at_three_trials_can_never_reach_five_percent() -> None:
    # The documented consequence of choosing an exact conditional test: 3 vs 3 trials decide nothing.
    assert min(evalstats.fisher_two_sided(a, 3, b, 3) for a in range(4) for b in range(4)) == pytest.approx(0.1)


@pytest.mark.parametrize("p_values", [[0.01], [0.04, 0.01, 0.03], [0.5, 0.001, 0.2, 0.02, 0.02], [1.0, 1.0]])
def test_holm_matches_statsmodels(p_values: list[float]) -> None:
    _, expected, _, _ = multipletests(p_values, alpha=0.05, method="holm")
    assert evalstats.holm(p_values) == pytest.approx(list(expected), abs=1e-15)


@pytest.mark.parametrize("counts", [
    [(3, 3), (0, 3), (2, 3)],
    [(1, 1), (0, 1)],
    [(5, 10), (2, 3), (0, 1), (50, 50)],   # unequal trial counts: every scenario still weighs the same
])
def test_clustered_mean_matches_statsmodels_cluster_robust_wls(counts: list[tuple[int, int]]) -> None:
    # One row per trial, weight 1/n_s, so each scenario weighs the same; cluster-robust standard
    # errors without statsmodels' default correction, then the S/(S−1) factor by hand.
    y = np.array([1.0 if i < c else 0.0 for c, n in counts for i in range(n)])
    groups = np.array([s for s, (_, n) in enumerate(counts) for _ in range(n)])
    weights = np.array([1 / n for _, n in counts for _ in range(n)])
    fit = WLS(y, np.ones_like(y), weights=weights).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    s = len(counts)
    se = float(fit.bse[0]) * math.sqrt(s / (s - 1))
    ours = evalstats.clustered_mean(counts)
    assert ours is not None and ours.interval is not None
    assert ours.mean == pytest.approx(float(fit.params[0]), abs=1e-12)
    assert ours.interval.low == pytest.approx(max(0.0, ours.mean - stats.norm.ppf(0.975) * se), abs=1e-9)
    assert ours.interval.high == pytest.approx(min(1.0, ours.mean + stats.norm.ppf(0.975) * se), abs=1e-9)


def test_clustered_mean_edges() -> None:
    assert evalstats.clustered_mean([]) is None
    assert evalstats.clustered_mean([(0, 0)]) is None
    single = evalstats.clustered_mean([(2, 3), (0, 0)])
    assert single is not None and single.interval is None and single.mean == pytest.approx(2 / 3)


def test_normal_quantiles_are_scipys() -> None:
    assert pytest.approx(stats.norm.ppf(0.975), abs=1e-15) == evalstats.Z_95
    assert pytest.approx(stats.norm.ppf(0.8), abs=1e-15) == evalstats.Z_POWER


@pytest.mark.parametrize(("p1", "p2", "n"), [(1.0, 0.0, 3), (1.0, 0.0, 4), (1.0, 1 / 3, 9), (0.7, 0.2, 12), (0.5, 0.5, 6)])
def test_fisher_power_matches_scipy_enumeration(p1: float, p2: float, n: int) -> None:
    expected = sum(
        stats.binom.pmf(a, n, p1) * stats.binom.pmf(b, n, p2)
        for a in range(n + 1) for b in range(n + 1)
        if stats.fisher_exact([[a, n - a], [b, n - b]]).pvalue <= 0.05
    )
    assert evalstats.fisher_power(p1, p2, n) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("p1", "p2"), [(1.0, 0.0), (1.0, 1 / 3), (2 / 3, 1 / 3), (0.0, 0.5)])
def test_trials_needed_is_the_first_n_reaching_eighty_percent(p1: float, p2: float) -> None:
    n = evalstats.trials_needed(p1, p2)
    assert n is not None
    assert evalstats.fisher_power(p1, p2, n) >= 0.8
    assert all(evalstats.fisher_power(p1, p2, m) < 0.8 for m in range(1, n))


def test_trials_needed_edges() -> None:
    assert evalstats.trials_needed(0.5, 0.5) is None            # nothing to detect
    assert evalstats.trials_needed(0.51, 0.5, limit=100) is None  # more than the limit
    assert evalstats.trials_needed(1.0, 0.0) == 4                 # 4/4 vs 0/4: Fisher p = 0.029


@pytest.mark.parametrize("alpha", [0.05, 0.05 / 4, 0.2, 1e-6])
def test_z_two_sided_matches_scipy(alpha: float) -> None:
    assert evalstats.z_two_sided(alpha) == pytest.approx(stats.norm.isf(alpha / 2), abs=1e-9)


def test_trials_needed_after_a_multiplicity_correction() -> None:
    # 5/5 vs 0/5: Fisher p = 2/252 ≈ 0.0079, below 0.05/4; 4/4 vs 0/4 (p ≈ 0.029) is not.
    assert evalstats.trials_needed(1.0, 0.0, alpha=0.05 / 4) == 5
    n = evalstats.trials_needed(2 / 3, 1 / 3, alpha=0.01)
    assert n is not None and evalstats.fisher_power(2 / 3, 1 / 3, n, 0.01) >= 0.8 > evalstats.fisher_power(2 / 3, 1 / 3, n - 1, 0.01)


def test_trials_needed_beyond_the_exact_search_is_the_normal_approximation() -> None:
    n = evalstats.trials_needed(0.9, 0.8)
    assert n == math.ceil(evalstats.approximate_trials(0.9, 0.8)) == 219
    assert evalstats.fisher_power(0.9, 0.8, n) >= 0.8  # enough, by exact power
