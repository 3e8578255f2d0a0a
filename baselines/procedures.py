"""Every baseline procedure as a test: a pure function of a panel of worlds (SPEC 3.1-3.2).

Each procedure returns a :class:`ProcedureResult` holding, per world, its **decision p-value** (the
number compared with alpha; the procedure claims "beats the benchmark" when it is at most alpha),
the candidate it chose, and its deployed forecast over the sealed test window (refit every 12
months) with the test-window OOS R2 and Clark-West p-value. Claims at any alpha, size matching and
frontiers are computed from the stored p-values afterwards (:mod:`planted.baselines.rates`).

Procedures are registered by name in ``PROCEDURES``; :func:`run_procedures` shares the expensive
pieces (the nine univariate forecasts, the benchmark) across the procedures of one panel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Literal

import numpy as np
import pandas as pd
from scipy import stats

from planted._typing import Float64Array
from planted.baselines.forecasts import (
    ForecastComparison,
    compare_forecasts,
    expanding_mean_forecasts,
    expanding_ols_forecasts,
)
from planted.baselines.ivx import ivx_wald
from planted.baselines.lasso import lasso_forecasts
from planted.baselines.multiple import holm
from planted.baselines.panel import CANDIDATE_NAMES, IN_SAMPLE_FIRST_PAIR, PROCEDURE_STREAM, Panel
from planted.baselines.rf_ridge import rf_ridge_forecasts
from planted.regression import newey_west_slope_t, ols_slope_t
from planted.seeding import generator

HAC_LAGS = 12
TEST_REFIT_EVERY = 12
RF_PAIRS = 6_000
"""Random Fourier feature pairs (cos and sin of each): 12,000 features."""
Kind = Literal["prespecified", "exploratory"]
CHOSEN_ALL = -1
"""``chosen`` code of procedures that use all candidates (combinations, ridge, lasso)."""
CHOSEN_ORACLE = -2
"""``chosen`` code of the oracle (the true regressor)."""


@dataclass(frozen=True)
class ProcedureResult:
    """Per-world outcome of one procedure on a panel.

    Attributes
    ----------
    name : str
    kind : {"prespecified", "exploratory"}
    decision_p : ndarray, shape (n,)
        The procedure claims at level alpha when ``decision_p <= alpha``.
    chosen : ndarray of int, shape (n,)
        Index into ``CANDIDATE_NAMES`` (0-7 = x1..x8, 8 = m12), ``CHOSEN_ALL`` or ``CHOSEN_ORACLE``.
    statistic : ndarray, shape (n,)
        The decisive statistic: the pseudo-OOS Clark-West statistic (pre-specified procedures) or
        the chosen candidate's in-sample t / Wald statistic (exploratory tests).
    test_forecast : ndarray, shape (n, T)
        The model's forecasts of the test-window returns (refit every 12 months); NaN elsewhere.
    test : ForecastComparison
        The model against the expanding mean over the test window (OOS R2, Clark-West).
    """

    name: str
    kind: Kind
    decision_p: Float64Array
    chosen: np.ndarray
    statistic: Float64Array
    test_forecast: Float64Array
    test: ForecastComparison

    def claims(self, alpha: float = 0.05) -> np.ndarray:
        """Whether each world's verdict is "beats the benchmark" at level ``alpha``."""
        return self.decision_p <= alpha

    def deployed_oos_r2(self, alpha: float = 0.05) -> Float64Array:
        """Test-window OOS R2 of the deployed forecast: the model's when it claims, 0 (the benchmark) otherwise."""
        return np.where(self.claims(alpha), self.test.oos_r2, 0.0)

    def to_frame(self) -> pd.DataFrame:
        """One row per world: decision p-value, chosen candidate, statistic and test-window results."""
        names = {CHOSEN_ALL: "all", CHOSEN_ORACLE: "oracle", **dict(enumerate(CANDIDATE_NAMES))}
        return pd.DataFrame(
            {
                "procedure": self.name,
                "kind": self.kind,
                "decision_p": self.decision_p,
                "chosen": [names[int(c)] for c in self.chosen],
                "statistic": self.statistic,
                "test_oos_r2": self.test.oos_r2,
                "test_cw_stat": self.test.cw_stat,
                "test_cw_p": self.test.cw_pvalue,
            }
        )


class Workspace:
    """Shared, lazily computed pieces of one panel: windows, benchmark, the nine univariate forecasts."""

    def __init__(self, panel: Panel):
        self.panel = panel
        self.pseudo_start = panel.n_train // 2
        self.n_train = panel.n_train
        self.n_months = panel.n_months

    @cached_property
    def benchmark(self) -> Float64Array:
        """Expanding historical mean for every target month from 1 on."""
        return expanding_mean_forecasts(self.panel.returns, 1, self.n_months)

    @cached_property
    def univariate_pseudo(self) -> Float64Array:
        """(n, 9, T) expanding OLS forecasts, refit monthly, targets in the second training half."""
        return expanding_ols_forecasts(
            self.panel.returns[:, None, :], self.panel.candidates, self.pseudo_start, self.n_train
        )

    @cached_property
    def univariate_test(self) -> Float64Array:
        """(n, 9, T) expanding OLS forecasts of the test window, refit every 12 months."""
        return expanding_ols_forecasts(
            self.panel.returns[:, None, :], self.panel.candidates, self.n_train, self.n_months,
            refit_every=TEST_REFIT_EVERY,
        )

    def pseudo(self, forecasts: Float64Array) -> ForecastComparison:
        """Compare forecasts with the benchmark over the pseudo-OOS window."""
        return compare_forecasts(self.panel.returns, self.benchmark, forecasts, self.pseudo_start, self.n_train)

    def test(self, forecasts: Float64Array) -> ForecastComparison:
        """Compare forecasts with the benchmark over the sealed test window."""
        return compare_forecasts(self.panel.returns, self.benchmark, forecasts, self.n_train, self.n_months)

    def pick(self, forecasts: Float64Array, chosen: np.ndarray) -> Float64Array:
        """Select each world's chosen candidate from an (n, 9, T) forecast array."""
        return forecasts[np.arange(forecasts.shape[0]), chosen]

    def in_sample_pairs(self) -> tuple[Float64Array, Float64Array]:
        """(y, x): r[t+1] (n, 1, P) and the nine candidates x[t] (n, 9, P) for t = 12 .. n_train - 2."""
        t0, n = IN_SAMPLE_FIRST_PAIR, self.n_train
        return self.panel.returns[:, None, t0 + 1 : n], self.panel.candidates[:, :, t0 : n - 1]


Procedure = Callable[[Workspace], ProcedureResult]
PROCEDURES: dict[str, Procedure] = {}
KINDS: dict[str, Kind] = {}


def register(name: str, kind: Kind) -> Callable[[Procedure], Procedure]:
    """Register a procedure under ``name`` (a config picks procedures by these names)."""

    def decorate(func: Procedure) -> Procedure:
        PROCEDURES[name] = func
        KINDS[name] = kind
        return func

    return decorate


def _prespecified(ws: Workspace, name: str, pseudo: Float64Array, test: Float64Array, chosen) -> ProcedureResult:
    comparison = ws.pseudo(pseudo)
    return ProcedureResult(
        name=name, kind="prespecified", decision_p=comparison.cw_pvalue,
        chosen=np.broadcast_to(np.asarray(chosen), comparison.cw_pvalue.shape).astype(np.int64),
        statistic=comparison.cw_stat, test_forecast=test, test=ws.test(test),
    )


@register("oracle", "prespecified")
def oracle(ws: Workspace) -> ProcedureResult:
    """Expanding OLS on the true regressor, decided by the pseudo-OOS Clark-West test at alpha."""
    panel = ws.panel
    pseudo = expanding_ols_forecasts(panel.returns, panel.oracle, ws.pseudo_start, ws.n_train)
    test = expanding_ols_forecasts(panel.returns, panel.oracle, ws.n_train, ws.n_months, refit_every=TEST_REFIT_EVERY)
    return _prespecified(ws, "oracle", pseudo, test, CHOSEN_ORACLE)


@register("combination", "prespecified")
def combination(ws: Workspace) -> ProcedureResult:
    """Equal-weight mean of the nine univariate forecasts (Rapach, Strauss and Zhou 2010)."""
    return _prespecified(
        ws, "combination", ws.univariate_pseudo.mean(axis=1), ws.univariate_test.mean(axis=1), CHOSEN_ALL
    )


@register("combination_ct", "prespecified")
def combination_ct(ws: Workspace) -> ProcedureResult:
    """The combination with Campbell-Thompson truncation: each negative univariate forecast set to 0."""
    return _prespecified(
        ws, "combination_ct", np.fmax(ws.univariate_pseudo, 0.0).mean(axis=1),
        np.fmax(ws.univariate_test, 0.0).mean(axis=1), CHOSEN_ALL,
    )


@register("rf_ridge", "prespecified")
def rf_ridge(ws: Workspace) -> ProcedureResult:
    """Random Fourier features ridge (Kelly, Malamud and Zhou 2024) on the nine candidates.

    Notes
    -----
    12,000 features from W ~ N(0, I) of shape 6,000 x 9 drawn per world from its procedure
    sub-stream, bandwidth 2, 12-month rolling window, ridge penalty 1,000 (dual form); refit every
    month over the pseudo-OOS window and every 12 months over the test window. Conventions in
    :func:`planted.baselines.rf_ridge.rf_ridge_forecasts`.
    """
    panel = ws.panel
    pseudo, test = np.empty_like(panel.returns), np.empty_like(panel.returns)
    for i, seed in enumerate(panel.seeds):  # one world at a time: its 6,000 x 9 weights are drawn when needed
        returns, candidates = panel.returns[i : i + 1], panel.candidates[i : i + 1]
        weights = generator(seed, PROCEDURE_STREAM).standard_normal((RF_PAIRS, candidates.shape[1]))
        pseudo[i] = rf_ridge_forecasts(
            returns, candidates, weights, first_target=ws.pseudo_start, last_target=ws.n_train
        )[0]
        test[i] = rf_ridge_forecasts(
            returns, candidates, weights, first_target=ws.n_train, last_target=ws.n_months, refit_every=TEST_REFIT_EVERY
        )[0]
    return _prespecified(ws, "rf_ridge", pseudo, test, CHOSEN_ALL)


@register("lasso", "exploratory")
def lasso(ws: Workspace) -> ProcedureResult:
    """Lasso on the nine standardised candidates, penalty by 5-fold time-series CV, Clark-West rule.

    Notes
    -----
    Refit every 12 months from month 120 (each refit serves the next 12 targets); decided by the
    one-sided Clark-West test on the pseudo-OOS window; on the test window refit every 12 months
    from its start. Conventions in :func:`planted.baselines.lasso.lasso_forecasts`.
    """
    panel = ws.panel
    pseudo = lasso_forecasts(panel.returns, panel.candidates, first_target=ws.pseudo_start, last_target=ws.n_train)
    test = lasso_forecasts(
        panel.returns, panel.candidates, first_target=ws.n_train, last_target=ws.n_months,
        first_refit=ws.n_train - 1, refit_every=TEST_REFIT_EVERY,
    )
    result = _prespecified(ws, "lasso", pseudo, test, CHOSEN_ALL)
    return replace(result, kind="exploratory")


def _two_sided_normal(t: Float64Array) -> Float64Array:
    return 2.0 * stats.norm.sf(np.abs(t))


@register("holm_best", "prespecified")
def holm_best(ws: Workspace) -> ProcedureResult:
    """HAC-Holm screen on the first training half, then Clark-West of the best candidate on the second.

    Notes
    -----
    Newey-West (12 lags) t-tests of the nine candidates over the pairs t = 12 .. start - 2 of the
    first half, two-sided normal p-values, Holm-adjusted. The candidate with the smallest adjusted
    p forecasts the second half (expanding OLS) and the Clark-West test decides. The decision
    p-value is ``max(min adjusted p, CW p)``: at any alpha the procedure claims exactly when the
    screen rejects at alpha and the CW test rejects at alpha (at 5%, the SPEC's rule).
    """
    start, t0 = ws.pseudo_start, IN_SAMPLE_FIRST_PAIR
    panel = ws.panel
    y = panel.returns[:, None, t0 + 1 : start]
    x = panel.candidates[:, :, t0 : start - 1]
    adjusted = holm(_two_sided_normal(newey_west_slope_t(y, x, HAC_LAGS)[1]))
    chosen = np.argmin(adjusted, axis=1)
    result = _prespecified(ws, "holm_best", ws.pick(ws.univariate_pseudo, chosen), ws.pick(ws.univariate_test, chosen), chosen)
    return replace(result, decision_p=np.maximum(adjusted.min(axis=1), result.decision_p))


def _in_sample(ws: Workspace, name: str, pvalues: Float64Array, statistics: Float64Array, adjust: bool) -> ProcedureResult:
    """Decide by the smallest (Holm-adjusted) p-value; deploy the expanding OLS of that candidate."""
    decision = holm(pvalues) if adjust else pvalues
    chosen = np.argmin(decision, axis=1)
    rows = np.arange(len(chosen))
    test = ws.pick(ws.univariate_test, chosen)
    return ProcedureResult(
        name=name, kind="exploratory", decision_p=decision[rows, chosen], chosen=chosen.astype(np.int64),
        statistic=statistics[rows, chosen], test_forecast=test, test=ws.test(test),
    )


@register("best9", "exploratory")
def best9(ws: Workspace) -> ProcedureResult:
    """Largest conventional OLS |t| of the nine, two-sided Student-t(n - 2) p-value, unadjusted."""
    y, x = ws.in_sample_pairs()
    t = ols_slope_t(y, x)[1]
    p = 2.0 * stats.t.sf(np.abs(t), df=y.shape[-1] - 2)
    return _in_sample(ws, "best9", p, t, adjust=False)


@register("hac_holm", "exploratory")
def hac_holm(ws: Workspace) -> ProcedureResult:
    """Newey-West (12 lags, Bartlett) t-tests, two-sided normal p-values, Holm across the nine."""
    y, x = ws.in_sample_pairs()
    t = newey_west_slope_t(y, x, HAC_LAGS)[1]
    return _in_sample(ws, "hac_holm", _two_sided_normal(t), t, adjust=True)


@register("ivx_holm", "exploratory")
def ivx_holm(ws: Workspace) -> ProcedureResult:
    """IVX Wald tests (Kostakis, Magdalinos and Stamatogiannis 2015), chi2(1), Holm across the nine."""
    t0, n = IN_SAMPLE_FIRST_PAIR, ws.n_train
    panel = ws.panel
    result = ivx_wald(panel.returns[:, None, t0:n], panel.candidates[:, :, t0:n])
    return _in_sample(ws, "ivx_holm", result.pvalue, result.wald, adjust=True)


def run_procedures(panel: Panel, names: list[str] | tuple[str, ...]) -> dict[str, ProcedureResult]:
    """Run the named procedures on one panel, sharing the univariate forecasts between them."""
    unknown = [n for n in names if n not in PROCEDURES]
    if unknown:
        raise KeyError(f"unknown procedures {unknown}; choose from {', '.join(PROCEDURES)}")
    ws = Workspace(panel)
    return {name: PROCEDURES[name](ws) for name in names}


def economic_label(oracle_result: ProcedureResult) -> np.ndarray:
    """Economic truth label (SPEC 4): the oracle's test-window forecasts beat the expanding mean."""
    return oracle_result.test.oos_r2 > 0.0
