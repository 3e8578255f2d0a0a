"""Frozen result objects shared by the analysis modules.

Every analysis returns one of these small, typed, immutable records: a hypothesis test
(:class:`TestResult`), a family of tests with Holm-adjusted p-values (:class:`TestFamily`), a point
estimate with a bootstrap interval (:class:`Estimate`), a logistic or least-squares fit
(:class:`LogitFit`, :class:`OLSFit`); the calibration and agreement records are in
:mod:`planted.analysis.summary_records`. Each has ``summary()`` (returned by ``str``) and
``to_frame()``; summaries carry no timestamps or paths, so they are stable in golden files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from planted._typing import Float64Array

Alternative = Literal["two-sided", "greater", "less"]
FitStatus = Literal["ok", "separation", "singular", "no_convergence", "empty"]


def rank_problem(X: np.ndarray, names: Sequence[str], unit: str = "runs") -> str:
    """Why the design matrix ``X`` (columns ``names``) has less than full column rank, in words.

    Names each column that is zero, constant besides an earlier constant column (the intercept), or
    an exact linear combination of the columns before it, or says that there are too few rows.
    """
    X = np.asarray(X, dtype=float)
    n, k = X.shape
    if n <= k:
        return f"{n} {unit} for {k} coefficients ({', '.join(names)})"
    reasons: list[str] = []
    kept: list[int] = []
    for j in range(k):
        column = X[:, j]
        if not column.any():
            reasons.append(f"{names[j]} is 0 in all {n} {unit}")
        elif np.linalg.matrix_rank(X[:, kept + [j]]) == len(kept):
            what = f"constant ({column[0]:g} in all {n} {unit})" if np.ptp(column) == 0 else \
                f"a linear combination of {', '.join(names[i] for i in kept)} in these {n} {unit}"
            reasons.append(f"{names[j]} is {what}")
        else:
            kept.append(j)
    return "; ".join(reasons) or f"the {k} columns ({', '.join(names)}) are collinear"


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if math.isnan(value):
        return "nan"
    return f"{value:.{digits}g}"


def format_p(p: float, missing: str = "nan") -> str:
    """The one p-value format of planted's outputs: ``<0.001``, else three decimals; ``missing`` when undefined."""
    if not math.isfinite(p):
        return missing
    return "<0.001" if p < 0.001 else f"{p:.3f}"


@dataclass(frozen=True)
class TestResult:
    """One hypothesis test.

    Attributes
    ----------
    name : str
        Label of the test in its study ("H2", "G3 opus", "mcnemar", ...).
    statistic : float
        The test statistic (a count for exact tests, chi2 or t/z otherwise).
    pvalue : float
        p-value in the direction of ``alternative``; NaN when the test is undefined (see ``flag``).
    df : float or None
        Degrees of freedom of the reference distribution (None for exact tests).
    null : str
        The null hypothesis in words.
    alternative : {"two-sided", "greater", "less"}
    n : int
        Number of units entering the test (worlds, runs or pairs; see ``method``).
    method : str
        The test's name and reference distribution.
    estimate : float
        The effect estimate the test is about (a rate, a coefficient), NaN if none.
    details : tuple of (str, float)
        Further named numbers (discordant counts, standard errors, ...); see :meth:`detail`.
    flag : str
        Empty when the test is well defined; otherwise why not ("separation", "singular",
        "no discordant pairs", "empty sample", ...).
    """

    __test__ = False  # not a pytest test class

    name: str
    statistic: float
    pvalue: float
    df: float | None
    null: str
    alternative: Alternative
    n: int
    method: str
    estimate: float = float("nan")
    details: tuple[tuple[str, float], ...] = ()
    flag: str = ""

    def detail(self, key: str) -> float:
        """The value of the named detail (KeyError if absent)."""
        for name, value in self.details:
            if name == key:
                return value
        raise KeyError(f"{self.name} has no detail {key!r}; it has {[k for k, _ in self.details]}")

    def summary(self) -> str:
        """One line: name, statistic, df, p-value, n, method and flag."""
        df = "" if self.df is None else f", df={_fmt(self.df)}"
        flag = f"  [{self.flag}]" if self.flag else ""
        est = "" if math.isnan(self.estimate) else f", estimate={_fmt(self.estimate)}"
        return (
            f"{self.name}: statistic={_fmt(self.statistic)}{df}, p={format_p(self.pvalue)} "
            f"({self.alternative}), n={self.n}{est}; {self.method}; H0: {self.null}{flag}"
        )

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row: the fields, then one column per detail."""
        row = {
            "name": self.name, "statistic": self.statistic, "df": self.df, "pvalue": self.pvalue,
            "alternative": self.alternative, "n": self.n, "estimate": self.estimate,
            "method": self.method, "null": self.null, "flag": self.flag,
        }
        row.update(dict(self.details))
        return pd.DataFrame([row])


@dataclass(frozen=True)
class TestFamily:
    """Tests adjusted together (Holm), plus exploratory tests reported unadjusted.

    Attributes
    ----------
    name : str
    tests : tuple of TestResult
        The family adjusted together, in their pre-specified order.
    adjusted : tuple of float
        Holm-adjusted p-values, same order as ``tests``. A NaN raw p-value enters the adjustment
        as 1 (the family keeps its pre-specified size m) and its adjusted value stays NaN.
    exploratory : tuple of TestResult
        Reported next to the family, not adjusted.
    method : str
    """

    __test__ = False

    name: str
    tests: tuple[TestResult, ...]
    adjusted: tuple[float, ...]
    exploratory: tuple[TestResult, ...] = ()
    method: str = "holm"

    def __getitem__(self, name: str) -> TestResult:
        for test in self.tests + self.exploratory:
            if test.name == name:
                return test
        raise KeyError(f"no test {name!r} in {self.name}")

    def adjusted_pvalue(self, name: str) -> float:
        """Holm-adjusted p-value of a test of the family (NaN for an exploratory test)."""
        for test, adj in zip(self.tests, self.adjusted):
            if test.name == name:
                return adj
        if any(t.name == name for t in self.exploratory):
            return float("nan")
        raise KeyError(f"no test {name!r} in {self.name}")

    def to_frame(self) -> pd.DataFrame:
        """One row per test: its fields, the adjusted p-value and whether it is confirmatory."""
        rows = []
        for test, adj in zip(self.tests, self.adjusted):
            rows.append(test.to_frame().assign(p_adjusted=adj, role="confirmatory"))
        for test in self.exploratory:
            rows.append(test.to_frame().assign(p_adjusted=float("nan"), role="exploratory"))
        return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()

    def summary(self) -> str:
        """A small table: test, statistic, raw and adjusted p-value, n."""
        lines = [f"{self.name} ({self.method} across {len(self.tests)})"]
        for test, adj in zip(self.tests, self.adjusted):
            flag = f" [{test.flag}]" if test.flag else ""
            lines.append(
                f"  {test.name:<14} stat={_fmt(test.statistic):>9}  p={format_p(test.pvalue):>7}  "
                f"p_{self.method}={format_p(adj):>7}  n={test.n}{flag}"
            )
        for test in self.exploratory:
            flag = f" [{test.flag}]" if test.flag else ""
            lines.append(
                f"  {test.name:<14} stat={_fmt(test.statistic):>9}  p={format_p(test.pvalue):>7}  "
                f"(exploratory, unadjusted)  n={test.n}{flag}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a percentile bootstrap interval (NaN bounds when not bootstrapped).

    Attributes
    ----------
    name : str
    value : float
    low, high : float
        Percentile interval at ``level`` over the bootstrap draws that are defined.
    level : float
    n : int
        Number of runs (or pairs) behind the estimate.
    n_clusters : int
        Number of worlds, the resampled unit.
    n_boot : int
        Number of bootstrap draws (0: no interval).
    method : str
    """

    name: str
    value: float
    low: float = float("nan")
    high: float = float("nan")
    level: float = 0.95
    n: int = 0
    n_clusters: int = 0
    n_boot: int = 0
    method: str = ""

    def summary(self) -> str:
        """``name = value [low, high] (n=..., worlds=...)``."""
        ci = "" if self.n_boot == 0 else f" [{_fmt(self.low)}, {_fmt(self.high)}]"
        return f"{self.name} = {_fmt(self.value)}{ci} (n={self.n}, worlds={self.n_clusters})"

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row with every field."""
        return pd.DataFrame([self.__dict__]).loc[:, list(self.__dataclass_fields__)]


@dataclass(frozen=True, eq=False)
class LogitFit:
    """Maximum-likelihood logistic regression.

    Attributes
    ----------
    names : tuple of str
        Regressor names, in the column order of the design matrix.
    params : ndarray, shape (k,)
        NaN unless ``status == "ok"``.
    cov : ndarray, shape (k, k)
        Covariance of ``params``: the inverse observed information, or the cluster-robust sandwich.
    n : int
    loglike : float
    status : {"ok", "separation", "singular", "no_convergence", "empty"}
        "separation": the data are completely or quasi-completely separated, so the maximum
        likelihood estimate does not exist (Albert and Anderson 1984).
    iterations : int
    cov_type : {"nonrobust", "cluster"}
    n_clusters : int
        Number of clusters (0 for nonrobust).
    dropped : tuple of str
        Regressors removed before the fit (e.g. dummies of levels with a constant outcome).
    """

    names: tuple[str, ...]
    params: Float64Array
    cov: Float64Array
    n: int
    loglike: float
    status: FitStatus
    iterations: int
    cov_type: str = "nonrobust"
    n_clusters: int = 0
    dropped: tuple[str, ...] = ()
    why: str = ""
    """For a failed fit, which part of the design caused it (:func:`rank_problem`)."""

    @property
    def flag(self) -> str:
        """Empty for a fit that exists, else its status and why (the flag of the test built on it)."""
        return "" if self.status == "ok" else f"{self.status}: {self.why}" if self.why else self.status

    @cached_property
    def bse(self) -> Float64Array:
        """Standard errors."""
        return np.sqrt(np.diag(self.cov))

    @cached_property
    def zvalues(self) -> Float64Array:
        """Wald z statistics ``params / bse``."""
        return self.params / self.bse

    def coef(self, name: str) -> float:
        """Coefficient of a named regressor."""
        return float(self.params[self.names.index(name)])

    def se(self, name: str) -> float:
        """Standard error of a named regressor."""
        return float(self.bse[self.names.index(name)])

    def summary(self) -> str:
        """Coefficient table with standard errors and two-sided normal p-values."""
        lines = [f"logit n={self.n} status={self.status} cov={self.cov_type} loglike={_fmt(self.loglike, 6)}"]
        for i, name in enumerate(self.names):
            p = 2 * stats.norm.sf(abs(self.zvalues[i])) if self.status == "ok" else float("nan")
            lines.append(f"  {name:<24} {_fmt(self.params[i]):>10} ({_fmt(self.bse[i])})  p={format_p(p)}")
        if self.dropped:
            lines.append(f"  dropped: {', '.join(self.dropped)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row per regressor: coefficient, standard error, z."""
        return pd.DataFrame({"coef": self.params, "se": self.bse, "z": self.zvalues}, index=list(self.names))


@dataclass(frozen=True, eq=False)
class OLSFit:
    """Least-squares fit with a model-based or cluster-robust covariance.

    Attributes
    ----------
    names : tuple of str
    params, cov : ndarray
    n : int
    df_resid : float
        Degrees of freedom of the t reference distribution: n - k (nonrobust) or G - 1 (cluster).
    cov_type : {"nonrobust", "cluster"}
    n_clusters : int
    status : {"ok", "singular", "empty"}
    """

    names: tuple[str, ...]
    params: Float64Array
    cov: Float64Array
    n: int
    df_resid: float
    cov_type: str
    n_clusters: int = 0
    status: FitStatus = "ok"
    why: str = ""
    """For a failed fit, which part of the design caused it (:func:`rank_problem`)."""

    @property
    def flag(self) -> str:
        """Empty for a fit that exists, else its status and why (the flag of the test built on it)."""
        return "" if self.status == "ok" else f"{self.status}: {self.why}" if self.why else self.status

    @cached_property
    def bse(self) -> Float64Array:
        """Standard errors."""
        return np.sqrt(np.diag(self.cov))

    @cached_property
    def tvalues(self) -> Float64Array:
        """t statistics ``params / bse``."""
        return self.params / self.bse

    def summary(self) -> str:
        """Coefficient table."""
        lines = [f"OLS n={self.n} cov={self.cov_type} df={_fmt(self.df_resid)} status={self.status}"]
        for i, name in enumerate(self.names):
            lines.append(f"  {name:<24} {_fmt(self.params[i]):>10} ({_fmt(self.bse[i])})  t={_fmt(self.tvalues[i])}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row per regressor: coefficient, standard error, t."""
        return pd.DataFrame({"coef": self.params, "se": self.bse, "t": self.tvalues}, index=list(self.names))
