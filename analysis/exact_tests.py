"""The generic tests the pre-specified hypotheses use, on plain arrays (SPEC 6).

Exact McNemar (:func:`mcnemar_exact`), the one-sided exact binomial test of a claim rate against
its nominal level (:func:`binomial_exceedance`), Cochran's Q (:func:`cochran_q`), OLS with
model-based or cluster-robust covariance (:func:`ols_fit`) and the directional test of one slope
(:func:`slope_test`), and the complexity slope of a search (:func:`complexity_slope`). Each is
validated against an independent implementation in ``tests/analysis/test_hypotheses.py``;
:mod:`planted.analysis.hypotheses` applies them to the pre-specified samples of a run table.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats

from planted.analysis.results import Alternative, OLSFit, TestResult, rank_problem
from planted.baselines.rates import wilson_interval

NULL_RATE = 0.05
"""The nominal false-claim rate of H2 and G1."""



def mcnemar_exact(
    first: np.ndarray,
    second: np.ndarray,
    *,
    alternative: Alternative = "two-sided",
    name: str = "McNemar",
) -> TestResult:
    """Exact McNemar test of paired binary outcomes (conditional binomial test).

    Parameters
    ----------
    first, second : ndarray of bool, shape (n,)
        Paired outcomes, e.g. the agent's and a baseline's claims on the same worlds.
    alternative : {"two-sided", "greater", "less"}
        "greater": the first claims more often than the second; "less": less often.
    name : str

    Returns
    -------
    TestResult
        ``statistic`` is ``b``, the number of pairs in which only the first claims; with ``c``
        pairs in which only the second claims and ``m = b + c``, under H0 (equal claim rates)
        ``b ~ Binomial(m, 1/2)`` given m. One-sided p-values are ``P(B >= b)`` ("greater") and
        ``P(B <= b)`` ("less"); two-sided is ``min(1, 2 P(B <= min(b, c)))``, statsmodels'
        ``mcnemar(exact=True)``. With no discordant pair the p-value is 1 (flagged). ``estimate``
        is the difference in claim rates; details give b, c, both and neither.

    References
    ----------
    McNemar, Q. (1947). Note on the sampling error of the difference between correlated
    proportions or percentages. Psychometrika 12(2), 153-157. doi:10.1007/BF02295996
    """
    a = np.asarray(first, dtype=bool)
    s = np.asarray(second, dtype=bool)
    if a.shape != s.shape:
        raise ValueError(f"paired samples differ in shape: {a.shape} and {s.shape}")
    b = int(np.sum(a & ~s))
    c = int(np.sum(~a & s))
    m = b + c
    if alternative == "greater":
        p = float(stats.binom.sf(b - 1, m, 0.5))
    elif alternative == "less":
        p = float(stats.binom.cdf(b, m, 0.5))
    elif alternative == "two-sided":
        p = float(min(1.0, 2.0 * stats.binom.cdf(min(b, c), m, 0.5)))
    else:
        raise ValueError(f"unknown alternative {alternative!r}")
    n = int(a.size)
    return TestResult(
        name=name, statistic=float(b), pvalue=p if m else 1.0, df=None,
        null="equal claim rates (b ~ Binomial(b + c, 1/2))", alternative=alternative, n=n,
        method="exact McNemar (conditional binomial) on paired claims",
        estimate=float(a.mean() - s.mean()) if n else float("nan"),
        details=(
            ("first_only", float(b)), ("second_only", float(c)), ("both", float(np.sum(a & s))),
            ("neither", float(np.sum(~a & ~s))), ("rate_first", float(a.mean()) if n else float("nan")),
            ("rate_second", float(s.mean()) if n else float("nan")),
        ),
        flag="" if m else "no discordant pairs",
    )


def binomial_exceedance(claims: np.ndarray, *, null_rate: float = NULL_RATE, name: str = "binomial") -> TestResult:
    """One-sided exact binomial test that a claim rate exceeds ``null_rate``.

    Returns
    -------
    TestResult
        ``statistic`` = number of claims k among n; ``pvalue = P(K >= k)`` for
        ``K ~ Binomial(n, null_rate)`` (scipy ``binomtest(k, n, null_rate, alternative="greater")``);
        ``estimate`` = k / n; details give the Wilson 95% interval. NaN p-value for n = 0.

    References
    ----------
    Clopper, C. J. and Pearson, E. S. (1934). The use of confidence or fiducial limits illustrated in
    the case of the binomial. Biometrika 26(4), 404-413. doi:10.1093/biomet/26.4.404
    """
    x = np.asarray(claims, dtype=bool)
    k, n = int(x.sum()), int(x.size)
    low, high = wilson_interval(k, n)
    return TestResult(
        name=name, statistic=float(k), pvalue=float(stats.binom.sf(k - 1, n, null_rate)) if n else float("nan"),
        df=None, null=f"claim rate <= {null_rate:g}", alternative="greater", n=n,
        method="exact binomial, one-sided", estimate=k / n if n else float("nan"),
        details=(("wilson_low", low), ("wilson_high", high)), flag="" if n else "empty sample",
    )


def cochran_q(table: np.ndarray, *, name: str = "Cochran Q") -> TestResult:
    """Cochran's Q test that k paired binary outcomes have equal success rates.

    Parameters
    ----------
    table : ndarray of bool, shape (n, k)
        One row per subject (world), one column per treatment (framing or model).

    Returns
    -------
    TestResult
        ``Q = (k-1) (k sum_j C_j^2 - T^2) / (k T - sum_i R_i^2)`` with column sums C_j, row sums
        R_i and total T, referred to chi2(k-1) (statsmodels ``cochrans_q``). When every row is
        constant (no discordant subject) Q is 0/0; it is reported as 0 with p = 1 and a flag.
        ``estimate`` is the number of discordant subjects; details give each column's rate.

    References
    ----------
    Cochran, W. G. (1950). The comparison of percentages in matched samples. Biometrika 37(3/4),
    256-266. doi:10.1093/biomet/37.3-4.256
    """
    x = np.asarray(table, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"table must be (subjects, treatments), got shape {x.shape}")
    n, k = x.shape
    rows, cols = x.sum(axis=1), x.sum(axis=0)
    total = x.sum()
    denom = k * total - np.sum(rows**2)
    discordant = int(np.sum((rows > 0) & (rows < k)))
    details = tuple((f"rate_{j}", float(cols[j] / n) if n else float("nan")) for j in range(k))
    common = dict(name=name, df=float(k - 1), null="equal claim rates across the columns", alternative="two-sided",
                  n=int(n), method=f"Cochran's Q, chi2({k - 1})", estimate=float(discordant), details=details)
    if denom == 0:
        return TestResult(statistic=0.0, pvalue=1.0, flag="no discordant subjects", **common)  # type: ignore[arg-type]
    q = float((k - 1) * (k * np.sum(cols**2) - total**2) / denom)
    return TestResult(statistic=q, pvalue=float(stats.chi2.sf(q, k - 1)), **common)  # type: ignore[arg-type]


def ols_fit(
    y: np.ndarray, X: np.ndarray, *, names: Sequence[str] | None = None, groups: np.ndarray | None = None
) -> OLSFit:
    """Least squares with a model-based or cluster-robust covariance.

    Notes
    -----
    Nonrobust: ``s^2 (X'X)^-1`` with ``s^2 = RSS / (n - k)`` and t(n - k) inference. Cluster
    (CR1): ``(X'X)^-1 (sum_g u_g u_g') (X'X)^-1 * G/(G-1) * (n-1)/(n-k)`` with ``u_g`` the summed
    ``x_i e_i`` of cluster g and t(G - 1) inference — statsmodels
    ``OLS.fit(cov_type="cluster", cov_kwds={"groups": g}, use_t=True)`` and Stata's ``vce(cluster)``.

    References
    ----------
    Cameron, A. C. and Miller, D. L. (2015). A practitioner's guide to cluster-robust inference.
    Journal of Human Resources 50(2), 317-372. doi:10.3368/jhr.50.2.317
    """
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    n, k = X.shape
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(k))
    cov_type = "nonrobust" if groups is None else "cluster"
    if n <= k or np.linalg.matrix_rank(X) < k:
        return OLSFit(names=names, params=np.full(k, np.nan), cov=np.full((k, k), np.nan), n=n,
                      df_resid=float("nan"), cov_type=cov_type, status="singular" if n else "empty",
                      why=rank_problem(X, names) if n else "")
    xtx_inv = np.linalg.inv(X.T @ X)
    beta = xtx_inv @ (X.T @ y)
    resid = y - X @ beta
    if groups is None:
        cov = float(resid @ resid / (n - k)) * xtx_inv
        return OLSFit(names=names, params=beta, cov=cov, n=n, df_resid=float(n - k), cov_type=cov_type)
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    n_clusters = int(codes.max()) + 1
    if n_clusters < 2:
        raise ValueError("cluster-robust covariance needs at least two clusters")
    summed = np.zeros((n_clusters, k))
    np.add.at(summed, codes, X * resid[:, None])
    correction = n_clusters / (n_clusters - 1.0) * (n - 1.0) / (n - k)
    cov = correction * xtx_inv @ (summed.T @ summed) @ xtx_inv
    return OLSFit(names=names, params=beta, cov=cov, n=n, df_resid=float(n_clusters - 1), cov_type=cov_type,
                  n_clusters=n_clusters)


def directional_p(stat: float, alternative: Alternative, df: float | None) -> float:
    """One-sided (or two-sided) p-value of a t (``df``) or normal (``df`` None) statistic."""
    dist = stats.norm if df is None else stats.t(df)
    if alternative == "greater":
        return float(dist.sf(stat))
    if alternative == "less":
        return float(dist.cdf(stat))
    return float(2.0 * dist.sf(abs(stat)))


def slope_test(
    y: np.ndarray,
    x: np.ndarray,
    *,
    alternative: Alternative = "greater",
    groups: np.ndarray | None = None,
    name: str = "slope",
    x_name: str = "x",
) -> TestResult:
    """t test of the slope b in ``y = a + b x + e`` (OLS; see :func:`ols_fit` for the covariance);
    ``x_name`` names x when the design is singular.

    Returns
    -------
    TestResult
        ``statistic`` = t of b, ``df`` = n - 2 (nonrobust) or G - 1 (cluster), p in the direction of
        ``alternative``; ``estimate`` = b; details give a, b and the standard error of b.
    """
    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float)
    fit = ols_fit(y, np.column_stack([np.ones_like(x), x]), names=("const", x_name), groups=groups)
    method = f"OLS slope t test, {fit.cov_type} covariance"
    if fit.status != "ok":
        return TestResult(name=name, statistic=float("nan"), pvalue=float("nan"), df=None, null="slope = 0",
                          alternative=alternative, n=fit.n, method=method, flag=fit.flag)
    t = float(fit.tvalues[1])
    return TestResult(
        name=name, statistic=t, pvalue=directional_p(t, alternative, fit.df_resid), df=fit.df_resid,
        null="slope = 0", alternative=alternative, n=fit.n, method=method, estimate=float(fit.params[1]),
        details=(("intercept", float(fit.params[0])), ("slope", float(fit.params[1])), ("se_slope", float(fit.bse[1])),
                 ("n_clusters", float(fit.n_clusters))),
    )


def complexity_slope(n_parameters: Sequence[float | None]) -> float:
    """Complexity drift of one run: OLS slope of the reported parameter counts on their order.

    Parameters
    ----------
    n_parameters : sequence of float or None
        ``n_parameters`` of each ``record_spec`` call, in call order; missing counts are skipped
        (their position in the order is kept).

    Returns
    -------
    float
        Parameters added per recorded specification (paper D.7); NaN with fewer than two counts.
    """
    counts = np.asarray([np.nan if v is None else float(v) for v in n_parameters], dtype=float)
    order = np.arange(counts.size, dtype=float)
    ok = ~np.isnan(counts)
    if ok.sum() < 2:
        return float("nan")
    xo, yo = order[ok], counts[ok]
    xc = xo - xo.mean()
    return float(xc @ (yo - yo.mean()) / (xc @ xc))
