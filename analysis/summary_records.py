"""Frozen result records of the calibration and agreement analyses.

The Murphy decomposition of a Brier score (:class:`MurphyDecomposition`), a model's calibration
measures (:class:`CalibrationSummary`), out-of-fold recalibration (:class:`Recalibration`) and the
agreement records (:class:`Agreement`, :class:`ReplicateAgreement`). Like the tests' records in
:mod:`planted.analysis.results`, each has ``summary()`` (returned by ``str``) and ``to_frame()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from planted.analysis.results import Estimate, TestResult, _fmt


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
