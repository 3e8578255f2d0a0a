"""Frozen result objects shared by the analysis modules.

Every analysis returns one of these small, typed, immutable records: a hypothesis test
(:class:`TestResult`), a family of tests with Holm-adjusted p-values (:class:`TestFamily`), a point
estimate with a bootstrap interval (:class:`Estimate`), a logistic or least-squares fit
(:class:`LogitFit`, :class:`OLSFit`), the calibration records (:class:`MurphyDecomposition`,
:class:`CalibrationSummary`, :class:`Recalibration`) and the agreement records
(:class:`Agreement`, :class:`ReplicateAgreement`). Each has ``summary()`` (returned by ``str``) and
``to_frame()``; summaries carry no timestamps or paths, so they are stable in golden files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from planted._typing import Float64Array

Alternative = Literal["two-sided", "greater", "less"]
FitStatus = Literal["ok", "separation", "singular", "no_convergence", "empty"]


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if math.isnan(value):
        return "nan"
    return f"{value:.{digits}g}"


def _fmt_p(p: float) -> str:
    if math.isnan(p):
        return "nan"
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
            f"{self.name}: statistic={_fmt(self.statistic)}{df}, p={_fmt_p(self.pvalue)} "
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
                f"  {test.name:<14} stat={_fmt(test.statistic):>9}  p={_fmt_p(test.pvalue):>7}  "
                f"p_{self.method}={_fmt_p(adj):>7}  n={test.n}{flag}"
            )
        for test in self.exploratory:
            flag = f" [{test.flag}]" if test.flag else ""
            lines.append(
                f"  {test.name:<14} stat={_fmt(test.statistic):>9}  p={_fmt_p(test.pvalue):>7}  "
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
            lines.append(f"  {name:<24} {_fmt(self.params[i]):>10} ({_fmt(self.bse[i])})  p={_fmt_p(p)}")
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


@dataclass(frozen=True)
class MurphyDecomposition:
    """Murphy (1973) decomposition of the Brier score, with the two within-bin terms.

    ``brier = reliability - resolution + uncertainty + within_variance - 2 within_covariance``
    holds exactly (Stephenson, Coelho and Jolliffe 2008). Over the distinct forecast values
    (``n_bins`` None) both within terms are zero and Murphy's three-term identity is exact.
    """

    brier: float
    reliability: float
    resolution: float
    uncertainty: float
    within_variance: float
    within_covariance: float
    n: int
    n_bins: int | None

    @property
    def identity_residual(self) -> float:
        """``brier`` minus the right-hand side of the five-term identity (zero up to rounding)."""
        rhs = self.reliability - self.resolution + self.uncertainty + self.within_variance - 2 * self.within_covariance
        return self.brier - rhs

    def summary(self) -> str:
        """One line with the five terms."""
        bins = "distinct values" if self.n_bins is None else f"{self.n_bins} bins"
        return (
            f"Brier {self.brier:.4f} = REL {self.reliability:.4f} - RES {self.resolution:.4f} + UNC "
            f"{self.uncertainty:.4f} + WBV {self.within_variance:.4f} - 2 WBC {self.within_covariance:.4f} "
            f"({bins}, n={self.n})"
        )

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row with every field."""
        return pd.DataFrame([self.__dict__]).loc[:, list(self.__dataclass_fields__)]


@dataclass(frozen=True)
class CalibrationSummary:
    """Calibration of stated probabilities against one binary label (SPEC 6; paper D.4, Figure 2)."""

    label: str
    n: int
    n_worlds: int
    base_rate: float
    mean_probability: float
    brier: float
    brier_skill: float
    murphy: MurphyDecomposition
    ece: Estimate
    auc: float
    auc_claims: float
    auc_nonclaims: float
    intercept: float
    slope: float
    wald: TestResult

    def summary(self) -> str:
        """A few lines with every measure."""
        return "\n".join(
            [
                f"calibration against {self.label}: n={self.n} runs, {self.n_worlds} worlds",
                f"  base rate {self.base_rate:.3f}, mean probability {self.mean_probability:.3f}",
                f"  Brier {self.brier:.4f}, skill vs climatology {self.brier_skill:.3f}",
                f"  {self.murphy.summary()}",
                f"  ECE {_fmt(self.ece.value)} [{_fmt(self.ece.low)}, {_fmt(self.ece.high)}]",
                f"  AUC {_fmt(self.auc)} (claims {_fmt(self.auc_claims)}, non-claims {_fmt(self.auc_nonclaims)})",
                f"  intercept {_fmt(self.intercept)}, slope {_fmt(self.slope)}; {self.wald.summary()}",
            ]
        )

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row: the scalar measures (Murphy terms and the ECE interval flattened)."""
        return pd.DataFrame(
            [
                {
                    "label": self.label, "n": self.n, "n_worlds": self.n_worlds, "base_rate": self.base_rate,
                    "mean_probability": self.mean_probability, "brier": self.brier, "brier_skill": self.brier_skill,
                    "reliability": self.murphy.reliability, "resolution": self.murphy.resolution,
                    "uncertainty": self.murphy.uncertainty, "within_variance": self.murphy.within_variance,
                    "within_covariance": self.murphy.within_covariance, "ece": self.ece.value,
                    "ece_low": self.ece.low, "ece_high": self.ece.high, "auc": self.auc,
                    "auc_claims": self.auc_claims, "auc_nonclaims": self.auc_nonclaims,
                    "intercept": self.intercept, "slope": self.slope, "wald_stat": self.wald.statistic,
                    "wald_p": self.wald.pvalue,
                }
            ]
        )


@dataclass(frozen=True)
class Recalibration:
    """Out-of-fold Brier score and AUC of each recalibration map (paper E.1, Table E.2).

    Attributes
    ----------
    label : str
    n : int
    n_folds : int
    maps : tuple of str
    brier, auc : tuple of float
        Same order as ``maps``; NaN when a fold's fit failed (see ``failed_folds``) or, for the AUC of
        the base-rate map, by convention (its forecast is constant within each fold).
    failed_folds : tuple of int
        Folds per map in which the logistic fit did not exist (separation) or was singular.
    auc_claims, auc_nonclaims : float
        AUC of the stated probability within runs that claim and within runs that do not.
    """

    label: str
    n: int
    n_folds: int
    maps: tuple[str, ...]
    brier: tuple[float, ...]
    auc: tuple[float, ...]
    failed_folds: tuple[int, ...]
    auc_claims: float
    auc_nonclaims: float

    def get(self, name: str) -> tuple[float, float]:
        """(Brier, AUC) of one map."""
        i = self.maps.index(name)
        return self.brier[i], self.auc[i]

    def to_frame(self) -> pd.DataFrame:
        """One row per map."""
        return pd.DataFrame(
            {"brier": self.brier, "auc": self.auc, "failed_folds": self.failed_folds}, index=list(self.maps)
        ).rename_axis("map")

    def summary(self) -> str:
        """One line per map, then the within-verdict AUCs."""
        lines = [f"recalibration against {self.label} ({self.n_folds}-fold CV grouped by world, n={self.n})"]
        for name, b, a, f in zip(self.maps, self.brier, self.auc, self.failed_folds):
            lines.append(f"  {name:<10} Brier {_fmt(b)}  AUC {_fmt(a)}" + (f"  [{f} failed folds]" if f else ""))
        lines.append(f"  AUC within claims {_fmt(self.auc_claims)}, within non-claims {_fmt(self.auc_nonclaims)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class Agreement:
    """Agreement of two raters' binary verdicts on the same units (Cohen 1960)."""

    first: str
    second: str
    n: int
    observed: float
    expected: float
    kappa: float
    both: int = 0
    first_only: int = 0
    second_only: int = 0
    neither: int = 0

    def summary(self) -> str:
        """Agreement share and kappa."""
        return (
            f"{self.first} vs {self.second}: agree {self.observed:.1%} (chance {self.expected:.1%}), "
            f"kappa {_fmt(self.kappa)}, n={self.n}"
        )

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row with every field."""
        return pd.DataFrame([self.__dict__]).loc[:, list(self.__dataclass_fields__)]


@dataclass(frozen=True)
class ReplicateAgreement:
    """Run-to-run agreement of one model's verdicts on replicated worlds (paper 5.3, F.1, F.2).

    Attributes
    ----------
    level : str
        The R2 level (e.g. "0.01") or "pooled".
    n_worlds : int
    n_runs : int
    claim_rate : float
    all_same : Estimate
        Share of worlds whose replicates all give the same verdict.
    fleiss : float
        Fleiss' kappa (NaN when worlds have unequal numbers of replicates or no variation).
    within_share : Estimate
        Run-to-run share of the variance of a single verdict (see
        :func:`planted.analysis.agreement.replicate_agreement`).
    disagree : Estimate
        Probability that two runs of the same world disagree.
    """

    level: str
    n_worlds: int
    n_runs: int
    claim_rate: float
    all_same: Estimate
    fleiss: float
    within_share: Estimate
    disagree: Estimate

    def summary(self) -> str:
        """Two lines per level."""
        return (
            f"level {self.level}: {self.n_worlds} worlds, {self.n_runs} runs, claim rate {self.claim_rate:.3f}; "
            f"all same {self.all_same.value:.3f} [{_fmt(self.all_same.low)}, {_fmt(self.all_same.high)}], "
            f"Fleiss kappa {_fmt(self.fleiss)}\n"
            f"  within-world share {_fmt(self.within_share.value)} [{_fmt(self.within_share.low)}, "
            f"{_fmt(self.within_share.high)}], P(two runs disagree) {_fmt(self.disagree.value)} "
            f"[{_fmt(self.disagree.low)}, {_fmt(self.disagree.high)}]"
        )

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row, intervals flattened."""
        row: dict[str, object] = {
            "level": self.level, "n_worlds": self.n_worlds, "n_runs": self.n_runs, "claim_rate": self.claim_rate,
            "fleiss_kappa": self.fleiss,
        }
        for name in ("all_same", "within_share", "disagree"):
            est: Estimate = getattr(self, name)
            row.update({name: est.value, f"{name}_low": est.low, f"{name}_high": est.high})
        return pd.DataFrame([row])
