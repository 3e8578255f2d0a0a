"""The pre-specified hypothesis tests of SPEC 6: H1-H6 per model, the cross-model tests C1-C3, the
Gaussian-shock tests G1-G3 and the local-model variant, each family with its Holm adjustment.

Every test exists twice: as a function on plain arrays (:mod:`planted.analysis.exact_tests`:
:func:`mcnemar_exact`, :func:`binomial_exceedance`, :func:`cochran_q`, :func:`slope_test`, ...) and
as a function here on the run table that selects the pre-specified sample (:func:`h1_power`,
:func:`h2_size`, ...; the samples are :mod:`planted.analysis.samples`).

Run table
---------
One row per run with at least ``run_id, world_id, framing, replicate, model, family, r2, claim``;
``claim`` is True for a "beats" verdict. Further columns used here:

* ``baseline_<procedure>`` (bool): the procedure's claim at 5% on the same world
  (``baseline_combination`` for H1, ``baseline_hac_holm`` for G3).
* ``probability`` and ``economic`` (H3).
* ``in_sample_r2_final``, ``test_oos_r2`` and ``complexity_slope`` (H5): the final model's
  in-sample R2 over the training window and its test-window OOS R2 (fractions, not percent), and
  the OLS slope of the parameter count of the recorded specifications on their order
  (:func:`complexity_slope`).
* ``prior_probability``, ``oracle_cw_stat`` and ``combination_cw_stat`` (H6): the prior and the
  pseudo-OOS Clark-West statistics of the oracle and of the combination on the training window
  (the ``statistic`` of those procedures in the baselines table).
* ``status`` (optional): when present, only runs with status "ok" enter any test.

Samples (paper Table 1, sections 3-5)
-------------------------------------
* The *first replicate* of a world under a framing is its run with the smallest ``replicate``.
* Weak-signal worlds: neutral linear worlds with R2 in {0.25, 0.5, 1}%, first replicate.
* No-signal worlds: neutral linear worlds with R2 = 0 and persistent-null worlds, first replicate
  (the momentum-looking null is a trap reported separately).
* A run without a verdict (``claim`` missing) counts as no claim: the agent did not claim.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from planted.analysis.calibration import EPS, calibration_wald, fit_logit, log_odds, outcome_labels
from planted.analysis.results import TestFamily, TestResult
from planted.analysis.samples import (  # noqa: F401 (the samples are part of this module's vocabulary)
    WEAK_R2, claims_of, first_replicate, neutral_first, no_signal_runs, r2_in, usable, weak_signal_runs,
)
from planted.analysis.exact_tests import (  # noqa: F401 (the generic tests are part of this module's vocabulary)
    NULL_RATE, binomial_exceedance, cochran_q, complexity_slope, directional_p, mcnemar_exact, ols_fit, slope_test,
)
from planted.baselines.multiple import holm
from planted.worlds.spec import world_group

FRAMINGS = ("skeptical", "neutral", "optimistic")
FramingControl = Literal["none", "additive", "interacted"]


# --------------------------------------------------------------------------------------------
# Samples
# --------------------------------------------------------------------------------------------


def _model_of(runs: pd.DataFrame) -> str:
    models = pd.unique(runs["model"]) if "model" in runs.columns else np.array(["agent"])
    if len(models) > 1:
        raise ValueError(f"the run table holds several models {list(models)}; pass one model's runs")
    return str(models[0]) if len(models) else "agent"


def _unique_worlds(sample: pd.DataFrame, what: str) -> None:
    if sample["world_id"].duplicated().any():
        raise ValueError(f"{what}: several runs of one world in the sample; pass one model's runs")


# --------------------------------------------------------------------------------------------
# H1-H6 on a run table (one model)
# --------------------------------------------------------------------------------------------


def _paired(sample: pd.DataFrame, baseline: str) -> tuple[np.ndarray, np.ndarray]:
    column = f"baseline_{baseline}"
    if column not in sample.columns:
        raise KeyError(f"run table has no column {column!r}")
    known = sample[column].notna().to_numpy()
    return claims_of(sample["claim"])[known], sample[column].to_numpy()[known].astype(bool)


def h1_power(
    runs: pd.DataFrame,
    *,
    baseline: str = "combination",
    reverse: bool = False,
    levels: Sequence[float] = WEAK_R2,
) -> TestResult:
    """H1: the agent is less powerful than the primary baseline in weak-signal worlds (H1': more).

    Exact McNemar test (:func:`mcnemar_exact`), one-sided, on the agent's and the baseline's claims
    in the same weak-signal worlds (paper 3.1: "All 72 discordant pairs ... favor the agent").
    ``reverse=True`` gives H1' (agent more powerful, exploratory). Worlds whose baseline claim is
    missing are dropped.
    """
    _model_of(runs)
    sample = weak_signal_runs(runs, levels)
    _unique_worlds(sample, "H1")
    agent, base = _paired(sample, baseline)
    return mcnemar_exact(agent, base, alternative="greater" if reverse else "less", name="H1'" if reverse else "H1")


def h2_size(runs: pd.DataFrame, *, null_rate: float = NULL_RATE) -> TestResult:
    """H2: the false-claim rate in no-signal worlds exceeds ``null_rate`` (exact binomial, one-sided)."""
    _model_of(runs)
    sample = no_signal_runs(runs)
    _unique_worlds(sample, "H2")
    return binomial_exceedance(claims_of(sample["claim"]), null_rate=null_rate, name="H2")


def h3_calibration(
    runs: pd.DataFrame, *, label: Literal["economic", "own", "signal"] = "economic", eps: float = EPS,
    cluster: bool = False,
) -> TestResult:
    """H3: stated probabilities are miscalibrated against the economic label (all runs of the model).

    Logistic regression of the label on ``logit(clip(p, eps, 1 - eps))`` and the joint Wald test of
    intercept 0 and slope 1, chi2(2) (:func:`planted.analysis.calibration.calibration_wald`).
    Pools every run with a stated probability and a known label, all framings (paper 3.2: "pooling
    all 900 runs"). ``cluster=True`` clusters the covariance by world.
    """
    _model_of(runs)
    runs = usable(runs)
    p = pd.to_numeric(runs["probability"], errors="coerce").to_numpy()
    y = outcome_labels(runs, label).to_numpy()
    keep = ~(np.isnan(p) | np.isnan(y))
    groups = runs["world_id"].to_numpy()[keep] if cluster else None
    return calibration_wald(y[keep], p[keep], eps=eps, groups=groups, name="H3")


def framing_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Claims of the worlds observed under all three framings: one row per world, columns
    skeptical, neutral, optimistic (first replicate of each; a missing verdict is no claim)."""
    runs = first_replicate(usable(runs))
    runs = runs[runs["framing"].isin(FRAMINGS)]
    wide = runs.assign(c=claims_of(runs["claim"])).pivot(index="world_id", columns="framing", values="c")
    wide = wide.reindex(columns=list(FRAMINGS)).dropna()
    return wide.astype(bool)


def h4_framing(runs: pd.DataFrame) -> TestResult:
    """H4: the verdict depends on framing — Cochran's Q over worlds run under all three framings.

    Returns
    -------
    TestResult
        Cochran's Q, chi2(2), columns (skeptical, neutral, optimistic); details: claim rate per
        framing, discordant worlds, and ``ordered``: discordant worlds whose claims are
        non-decreasing from skeptical to neutral to optimistic (paper 3.3: "46 of 50").
    """
    _model_of(runs)
    wide = framing_table(runs)
    x = wide.to_numpy()
    result = cochran_q(x, name="H4")
    rows = x.sum(axis=1)
    discordant = (rows > 0) & (rows < 3)
    ordered = discordant & (x[:, 0] <= x[:, 1]) & (x[:, 1] <= x[:, 2])
    details = tuple((f"rate_{f}", float(x[:, j].mean()) if len(x) else float("nan")) for j, f in enumerate(FRAMINGS))
    return TestResult(
        name="H4", statistic=result.statistic, pvalue=result.pvalue if len(x) else float("nan"), df=result.df,
        null="equal claim rates under the three framings", alternative="two-sided", n=result.n,
        method=result.method + " over worlds observed under all three framings", estimate=result.estimate,
        details=details + (("discordant", float(discordant.sum())), ("ordered", float(ordered.sum()))),
        flag="empty sample" if not len(x) else result.flag,
    )


def h5_drift(runs: pd.DataFrame, *, cluster: bool = True) -> TestResult:
    """H5: complexity drift widens the gap between the final model's in-sample and test-window R2.

    OLS of ``gap = in_sample_r2_final - test_oos_r2`` on ``complexity_slope`` over all runs of the
    model where both are known; one-sided t test of a positive slope. ``cluster=True`` (default,
    the paper's frozen code: world-clustered standard errors, Appendix G) clusters by world with
    t(G - 1) inference.
    """
    _model_of(runs)
    runs = usable(runs)
    gap = (pd.to_numeric(runs["in_sample_r2_final"], errors="coerce")
           - pd.to_numeric(runs["test_oos_r2"], errors="coerce")).to_numpy()
    drift = pd.to_numeric(runs["complexity_slope"], errors="coerce").to_numpy()
    keep = np.isfinite(gap) & np.isfinite(drift)
    groups = runs["world_id"].to_numpy()[keep] if cluster else None
    return slope_test(gap[keep], drift[keep], alternative="greater", groups=groups, name="H5",
                      x_name="complexity_slope")


def world_type(runs: pd.DataFrame) -> pd.Series:
    """World type of each run for the H6 controls (:func:`planted.worlds.spec.world_group`)."""
    factor = runs["factor"].astype("string").fillna("") if "factor" in runs.columns else pd.Series("", index=runs.index)
    return pd.Series([world_group(f, x) for f, x in zip(runs["family"].astype(str), factor)], index=runs.index)


def h6_prior(
    runs: pd.DataFrame,
    *,
    framing: FramingControl = "none",
    cluster: bool = True,
    eps: float = EPS,
) -> TestResult:
    """H6 (exploratory): the prior predicts the verdict.

    Logistic regression of the claim on ``logit(prior_probability)`` (clipped at ``eps``),
    controlling for ``oracle_cw_stat``, ``combination_cw_stat`` and world-type dummies
    (:func:`world_type`; the first level is the reference). One-sided z test of a positive prior
    coefficient. ``framing``: "none" (pre-specified), "additive" (framing dummies) or
    "interacted" (world-type-by-framing dummies, paper D.7). ``cluster=True`` (default, the frozen
    code) clusters by world.

    Notes
    -----
    A world type (cell) whose runs all claim, or all do not, would send its dummy to infinity
    (quasi-complete separation). Its runs are dropped and the level named in the details
    (``dropped_<level>``): since the cell dummies span the cell indicators, the remaining
    coefficients' MLE is the limit of the full likelihood's maximiser. If the remaining data are
    still separated, the p-value is NaN and ``flag`` says "separation".
    """
    _model_of(runs)
    runs = usable(runs)
    data = pd.DataFrame(
        {
            "y": claims_of(runs["claim"]).astype(float),
            "prior": pd.to_numeric(runs["prior_probability"], errors="coerce").to_numpy(),
            "oracle_cw": pd.to_numeric(runs["oracle_cw_stat"], errors="coerce").to_numpy(),
            "combination_cw": pd.to_numeric(runs["combination_cw_stat"], errors="coerce").to_numpy(),
            "cell": world_type(runs).to_numpy(),
            "framing": runs["framing"].to_numpy(),
            "world": runs["world_id"].to_numpy(),
        }
    ).dropna()
    if framing == "interacted":
        data["cell"] = data["cell"] + ":" + data["framing"]
    rate = data.groupby("cell")["y"].transform("mean")
    constant = (rate == 0) | (rate == 1)
    dropped = tuple(sorted(pd.unique(data.loc[constant, "cell"])))
    data = data[~constant]
    columns = {"const": np.ones(len(data)), "prior_logodds": log_odds(data["prior"].to_numpy(), eps),
               "oracle_cw": data["oracle_cw"].to_numpy(), "combination_cw": data["combination_cw"].to_numpy()}
    levels = sorted(pd.unique(data["cell"]))
    for level in levels[1:]:
        columns[f"type[{level}]"] = (data["cell"] == level).to_numpy(dtype=float)
    if framing == "additive":
        for f in ("optimistic", "skeptical"):
            if (data["framing"] == f).any():
                columns[f"framing[{f}]"] = (data["framing"] == f).to_numpy(dtype=float)
    X = np.column_stack(list(columns.values())) if len(data) else np.empty((0, len(columns)))
    groups = data["world"].to_numpy() if cluster and data["world"].nunique() > 1 else None
    fit = fit_logit(data["y"].to_numpy(), X, names=tuple(columns), groups=groups)
    method = f"logistic regression, one-sided z, {fit.cov_type} covariance, framing control: {framing}"
    details = tuple((f"dropped_{level}", 1.0) for level in dropped)
    null = "prior coefficient <= 0"
    if fit.status != "ok":
        return TestResult(name="H6", statistic=float("nan"), pvalue=float("nan"), df=None, null=null,
                          alternative="greater", n=fit.n, method=method, details=details, flag=fit.flag)
    z = float(fit.zvalues[1])
    return TestResult(
        name="H6", statistic=z, pvalue=directional_p(z, "greater", None), df=None, null=null, alternative="greater",
        n=fit.n, method=method, estimate=float(fit.params[1]),
        details=(("coef_prior", float(fit.params[1])), ("se_prior", float(fit.bse[1]))) + details,
    )


# --------------------------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------------------------


def holm_family(name: str, tests: Sequence[TestResult], exploratory: Sequence[TestResult] = ()) -> TestFamily:
    """Holm-adjust the p-values of ``tests`` together (:func:`planted.baselines.multiple.holm`).

    A NaN p-value (an undefined test) enters as 1, so the family keeps its pre-specified size; its
    adjusted value is reported as NaN.
    """
    raw = np.array([t.pvalue for t in tests], dtype=float)
    missing = np.isnan(raw)
    adjusted = holm(np.where(missing, 1.0, raw)) if raw.size else raw
    adjusted = np.where(missing, np.nan, adjusted)
    return TestFamily(name=name, tests=tuple(tests), adjusted=tuple(float(a) for a in adjusted),
                      exploratory=tuple(exploratory))


def confirmatory_tests(
    runs: pd.DataFrame, *, baseline: str = "combination", null_rate: float = NULL_RATE, h6_framing: FramingControl = "none"
) -> TestFamily:
    """H1-H5 with Holm across the five, plus H1' and H6 unadjusted (exploratory), for one model.

    H6 is included only when its columns (``prior_probability``, ``oracle_cw_stat``,
    ``combination_cw_stat``) are present; H5 only when ``in_sample_r2_final`` and
    ``complexity_slope`` are (otherwise it enters as an undefined test, flagged).
    """
    model = _model_of(runs)
    h5_cols = {"in_sample_r2_final", "test_oos_r2", "complexity_slope"}
    if h5_cols <= set(runs.columns):
        h5 = h5_drift(runs)
    else:
        h5 = TestResult(name="H5", statistic=float("nan"), pvalue=float("nan"), df=None, null="slope = 0",
                        alternative="greater", n=0, method="OLS slope t test",
                        flag=f"missing columns {sorted(h5_cols - set(runs.columns))}")
    tests = [h1_power(runs, baseline=baseline), h2_size(runs, null_rate=null_rate), h3_calibration(runs),
             h4_framing(runs), h5]
    exploratory = [h1_power(runs, baseline=baseline, reverse=True)]
    if {"prior_probability", "oracle_cw_stat", "combination_cw_stat"} <= set(runs.columns):
        exploratory.append(h6_prior(runs, framing=h6_framing))
    return holm_family(f"{model}: H1-H5", tests, exploratory)


def intersection_union(name: str, tests: Sequence[TestResult], null: str) -> TestResult:
    """Intersection-union test: reject "not every component holds" when every component rejects.

    ``pvalue = max`` of the component p-values (Berger 1982); ``statistic`` and ``estimate`` are
    those of the component with the largest p-value; details give each component's p-value.

    References
    ----------
    Berger, R. L. (1982). Multiparameter hypothesis testing and acceptance sampling.
    Technometrics 24(4), 295-300. doi:10.1080/00401706.1982.10487790
    """
    ps = np.array([t.pvalue for t in tests], dtype=float)
    worst = tests[int(np.nanargmax(ps))] if not np.isnan(ps).all() else tests[0]
    return TestResult(
        name=name, statistic=worst.statistic, pvalue=float(np.max(ps)), df=worst.df, null=null,
        alternative=worst.alternative, n=sum(t.n for t in tests),
        method=f"intersection-union test (max p) over {len(tests)} components: {worst.method}",
        estimate=worst.estimate, details=tuple((f"p_{t.name}", t.pvalue) for t in tests),
        flag="; ".join(f"{t.name}: {t.flag}" for t in tests if t.flag),
    )


def _wide_claims(sample: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    sample = sample[sample["model"].isin(models)]
    wide = sample.assign(c=claims_of(sample["claim"])).pivot(index="world_id", columns="model", values="c")
    return wide.reindex(columns=list(models)).dropna().astype(bool)


def across_models_q(sample: pd.DataFrame, models: Sequence[str], *, name: str) -> TestResult:
    """Cochran's Q across models over the worlds of ``sample`` that every model ran."""
    result = cochran_q(_wide_claims(sample, models).to_numpy(), name=name)
    details = tuple((f"rate_{m}", v) for m, (_, v) in zip(models, result.details))
    return TestResult(
        name=name, statistic=result.statistic, pvalue=result.pvalue, df=result.df,
        null="equal claim rates across models", alternative="two-sided", n=result.n,
        method=result.method + " over worlds run by every model", estimate=result.estimate, details=details,
        flag=result.flag,
    )


def _models(runs: pd.DataFrame, models: Sequence[str] | None) -> list[str]:
    present = list(pd.unique(runs["model"]))
    if models is None:
        return sorted(str(m) for m in present)
    missing = [m for m in models if m not in present]
    if missing:
        raise ValueError(f"models {missing} have no runs in the table")
    return list(models)


def cross_model_tests(
    runs: pd.DataFrame, *, new_models: Sequence[str], models: Sequence[str] | None = None,
    null_rate: float = NULL_RATE,
) -> TestFamily:
    """C1-C3 of the second study, Holm across the three (paper section 4).

    C1: every new model's false-claim rate in no-signal worlds exceeds ``null_rate`` (intersection-
    union over the models' H2 tests). C2: every new model's verdict depends on framing (IUT over H4).
    C3: weak-signal claim rates differ across ``models`` (default: every model in the table),
    Cochran's Q over the weak-signal worlds run by all of them.
    """
    models = _models(runs, models)
    by_model = {m: runs[runs["model"] == m] for m in _models(runs, new_models)}
    h2 = [replace(h2_size(r, null_rate=null_rate), name=f"H2 {m}") for m, r in by_model.items()]
    h4 = [replace(h4_framing(r), name=f"H4 {m}") for m, r in by_model.items()]
    c1 = intersection_union("C1", h2, null=f"some new model's no-signal claim rate <= {null_rate:g}")
    c2 = intersection_union("C2", h4, null="some new model's claims do not depend on framing")
    c3 = across_models_q(weak_signal_runs(runs), models, name="C3")
    return holm_family("C1-C3", [c1, c2, c3])


def g_tests_for(runs: pd.DataFrame, *, baseline: str = "hac_holm", null_rate: float = NULL_RATE) -> tuple[TestResult, TestResult]:
    """G1 (exact binomial vs ``null_rate``) and G3 (exact McNemar, agent claims more often than the
    baseline at 5%) for one model on its no-signal worlds (paper 5.2, Table 4)."""
    model = _model_of(runs)
    sample = no_signal_runs(runs)
    _unique_worlds(sample, "G")
    g1 = binomial_exceedance(claims_of(sample["claim"]), null_rate=null_rate, name=f"G1 {model}")
    agent, base = _paired(sample, baseline)
    g3 = mcnemar_exact(agent, base, alternative="greater", name=f"G3 {model}")
    return g1, g3


def gaussian_tests(
    runs: pd.DataFrame, *, models: Sequence[str] | None = None, baseline: str = "hac_holm", null_rate: float = NULL_RATE
) -> TestFamily:
    """G1 per model, G2 (Cochran's Q across models on the no-signal worlds), G3 per model; Holm
    across all of them (seven p-values with three models; paper 5.2)."""
    models = _models(runs, models)
    pairs = [g_tests_for(runs[runs["model"] == m], baseline=baseline, null_rate=null_rate) for m in models]
    g2 = across_models_q(no_signal_runs(runs), models, name="G2")
    return holm_family("G1-G3", [p[0] for p in pairs] + [g2] + [p[1] for p in pairs])


def local_model_tests(
    runs: pd.DataFrame, *, model: str, baseline: str = "hac_holm", null_rate: float = NULL_RATE
) -> TestFamily:
    """The local-model variant (paper 5.4): G1 and G3 for one model, Holm across the two."""
    g1, g3 = g_tests_for(runs[runs["model"] == model], baseline=baseline, null_rate=null_rate)
    return holm_family(f"{model}: G1, G3", [g1, g3])
