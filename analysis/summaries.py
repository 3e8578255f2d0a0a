"""Report tables built on the analysis modules' tests and estimators: the pre-specified tests (Tables 3
and 4), calibration (D.4, Figure 2), recalibration (Table E.2), H5/H6 details (D.7), agreement between
models (section 4.2) and across replicates (Table F.1, F.2); the models side by side (Table E.1) are in
:mod:`planted.analysis.models_compared`.

Every function is pure: run tables (and simulated decision p-values for E.1) in, :class:`Table` out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from planted.analysis.agreement import model_agreement, replicate_agreement
from planted.analysis.calibration import calibration_summary, label_sample, recalibrate_runs
from planted.analysis.hypotheses import (
    confirmatory_tests,
    cross_model_tests,
    gaussian_tests,
    h5_drift,
    h6_prior,
    local_model_tests,
)
from planted.analysis.samples import usable
from planted.analysis.results import TestFamily, format_p
from planted.seeding import named_generator
from planted.analysis.tables import (
    Table,
    models_of,
    rate_cells,
)
from planted.baselines.rates import wilson_interval

TEST_LABELS = {
    "H1": "H1 Agent less powerful", "H2": "H2 False positives above 5%", "H3": "H3 Probability miscalibrated",
    "H4": "H4 Verdict depends on framing", "H5": "H5 Drift widens gap", "H1'": "H1' Agent more powerful (exploratory)",
    "H6": "H6 Prior predicts verdict (exploratory)", "C1": "C1 Every new model: false positives above 5%",
    "C2": "C2 Every new model: framing effect", "C3": "C3 Claim rates differ across models",
}
LABELS = ("economic", "signal", "own")


def _family_rows(family: TestFamily, model: str) -> pd.DataFrame:
    frame = family.to_frame()
    frame.insert(0, "model", model)
    frame.insert(1, "family", family.name)
    return frame


# --------------------------------------------------------------------------------------------
# Pre-specified tests
# --------------------------------------------------------------------------------------------


def prespecified_tests(runs: pd.DataFrame, *, models: Sequence[str] | None = None, baseline: str = "combination") -> Table:
    """Table 3: H1-H5 (Holm across the five), H1' and H6 (exploratory, unadjusted) per model, and
    C1-C3 (Holm across the three) when there are at least two models.

    Parameters
    ----------
    runs : DataFrame
        Run table of the bootstrap-shock studies (paper studies 1-2).
    models : sequence of str, optional
        Models and their order; the first is the reference, the others the "new models" of C1 and C2
        (paper: Opus, then Sol and Terra). Default: order of appearance.
    baseline : str
        Primary baseline of H1 (``baseline_<baseline>`` column).

    Returns
    -------
    Table
        Data: one row per test and model with every field of the test (statistic, raw p, Holm p,
        n, estimate, flag, role and the test's details). Markdown: the paper's layout, Holm p-values
        for H1-H5 and C1-C3, raw p-values for H1' and H6, with the reason when a test is undefined.
    """
    models = list(models) if models is not None else models_of(runs)
    frames = [_family_rows(confirmatory_tests(runs[runs["model"] == m], baseline=baseline), m) for m in models]
    if len(models) >= 2:
        frames.append(_family_rows(cross_model_tests(runs, new_models=models[1:], models=models), "all models"))
    data = pd.concat(frames, ignore_index=True)
    rows = []
    for name, label in TEST_LABELS.items():
        sub = data[data["name"] == name]
        if sub.empty:
            continue
        row = {"prediction": label}
        for model in models + (["all models"] if len(models) >= 2 else []):
            hit = sub[sub["model"] == model]
            if hit.empty:
                continue
            r = hit.iloc[0]
            value = r["p_adjusted"] if r["role"] == "confirmatory" else r["pvalue"]
            cell = format_p(float(value), missing="–")
            if r["flag"]:
                cell += f" ({r['flag']})"
            row[model] = cell
        rows.append(row)
    return Table(
        key="table3_prespecified_tests",
        title="Table 3: pre-specified tests by model. H1-H5: p-values Holm-adjusted across H1-H5 within each "
              "model; H1' and H6: exploratory, unadjusted; C1-C3: cross-model tests, Holm across the three "
              "(C1, C2 intersection-union over the new models; C3 Cochran's Q across all models)",
        data=data, display=pd.DataFrame(rows).fillna(""),
    )


def _rate_from(result, key: str, n: int) -> dict[str, float]:
    rate = result.detail(key)
    k = int(round(rate * n)) if np.isfinite(rate) else 0
    low, high = wilson_interval(k, n)
    return {"rate": rate, "low": low, "high": high, "k": k}


def gaussian_tests_table(runs: pd.DataFrame, *, models: Sequence[str] | None = None,
                         local_models: Sequence[str] = ()) -> Table:
    """Table 4: G1 (false claims in the no-signal worlds above 5%), G2 (Cochran's Q across models) and
    G3 (agent claims more often than HAC-Holm at 5% on the same worlds), Holm across all of them for
    the commercial models; each local model gets G1 and G3 with Holm across its two (paper 5.2, 5.4).

    With a single non-local model, G2 is undefined and that model gets the two-test family.
    Rates carry Wilson 95% intervals; ``discordant`` is "agent only : HAC-Holm only".
    """
    gauss = runs[runs["design"] == "gaussian"]
    models = list(models) if models is not None else models_of(gauss)
    models = [m for m in models if m in set(gauss["model"])]
    local = [m for m in models if m in set(local_models)]
    commercial = [m for m in models if m not in set(local)]
    families: list[TestFamily] = []
    if len(commercial) >= 2:
        families.append(gaussian_tests(gauss, models=commercial))
    elif commercial:
        families.append(replace(local_model_tests(gauss, model=commercial[0]), name=f"{commercial[0]}: G1, G3"))
    families += [local_model_tests(gauss, model=m) for m in local]
    rows, display = [], []
    for family in families:
        for test, adjusted in zip(family.tests, family.adjusted):
            kind, _, model = test.name.partition(" ")
            row: dict[str, object] = {"family": family.name, "test": kind, "model": model or "all models",
                                      "statistic": test.statistic, "pvalue": test.pvalue, "p_holm": adjusted,
                                      "n": test.n, "flag": test.flag}
            shown = {"Test": kind, "Model": model or "all models", "n": str(test.n)}
            if kind == "G1":
                k = int(test.statistic)
                low, high = wilson_interval(k, test.n)
                row |= {"agent": test.estimate, "agent_low": low, "agent_high": high}
                shown["Agent (%)"] = f"{100 * test.estimate:.0f} [{100 * low:.0f}, {100 * high:.0f}]"
            elif kind == "G3":
                a, b = _rate_from(test, "rate_first", test.n), _rate_from(test, "rate_second", test.n)
                row |= {"agent": a["rate"], "agent_low": a["low"], "agent_high": a["high"], "hac_holm": b["rate"],
                        "hac_holm_low": b["low"], "hac_holm_high": b["high"],
                        "agent_only": test.detail("first_only"), "hac_holm_only": test.detail("second_only")}
                shown["Agent (%)"] = f"{100 * a['rate']:.0f} [{100 * a['low']:.0f}, {100 * a['high']:.0f}]"
                shown["HAC-Holm (%)"] = f"{100 * b['rate']:.0f} [{100 * b['low']:.0f}, {100 * b['high']:.0f}]"
                shown["Discordant"] = f"{test.detail('first_only'):.0f} : {test.detail('second_only'):.0f}"
            else:
                shown["Agent (%)"] = ", ".join(f"{k.removeprefix('rate_')} {100 * v:.0f}" for k, v in test.details)
            shown |= {"Statistic": f"{test.statistic:.3g}", "p": format_p(test.pvalue, missing="–"), "p Holm": format_p(adjusted, missing="–"),
                      "Holm family": family.name}
            if test.flag:
                shown["p"] += f" ({test.flag})"
            rows.append(row)
            display.append(shown)
    order = ["Test", "Model", "n", "Agent (%)", "HAC-Holm (%)", "Discordant", "Statistic", "p", "p Holm", "Holm family"]
    shown_frame = pd.DataFrame(display)
    shown_frame = shown_frame.reindex(columns=[c for c in order if c in shown_frame.columns]).fillna("")
    return Table(
        key="table4_gaussian_tests",
        title="Table 4: pre-specified tests of the Gaussian-shock studies on the no-signal worlds (linear R2=0 and "
              "persistent null, neutral, first replicate): G1 exact binomial against 5%, G2 Cochran's Q across "
              "models, G3 exact McNemar of the agent against HAC-Holm at 5% (discordant: agent only : HAC-Holm "
              "only); Holm within each family; Wilson 95% intervals",
        data=pd.DataFrame(rows), display=shown_frame,
    )


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


def calibration_table(runs: pd.DataFrame, *, seed: np.random.SeedSequence, n_boot: int = 2000,
                      labels: Sequence[str] = LABELS) -> Table:
    """Calibration measures per model, design and label, all finished runs (paper D.4, F.2).

    :func:`planted.analysis.calibration.calibration_summary` (Brier, Brier skill, Murphy terms over
    ten bins, ECE with a world-clustered bootstrap interval, AUC overall and within verdicts,
    calibration intercept and slope with the Wald test of (0, 1)), plus the base rate and the share
    of claims and of non-claims whose label is positive (Wilson intervals) next to the mean stated
    probability in each. Labels: ``economic`` (oracle beats the benchmark, H3's label), ``signal``
    (design truth), ``own`` (the submitted model's test-window OOS R2 > 0; no evaluable model counts
    as not beating; paper F.2). A label with fewer than two runs is left out. Each (model, design,
    label) draws its bootstrap from its own stream below ``seed``
    (:func:`planted.seeding.named_generator`), so adding a model changes no other row.
    """
    rows = []
    for model in models_of(runs):
        for design in sorted(pd.unique(runs.loc[runs["model"] == model, "design"])):
            m = usable(runs[(runs["model"] == model) & (runs["design"] == design)])
            for label in labels:
                p, y, claim, _ = label_sample(m, label)
                if p.size < 2:
                    continue
                rng = named_generator(seed, model, str(design), label)
                summary = calibration_summary(m, label=label, rng=rng, n_boot=n_boot)  # type: ignore[arg-type]
                row = summary.to_frame().iloc[0].to_dict()
                row |= {"model": model, "design": design}
                row |= rate_cells(y, "base")
                row |= rate_cells(y[claim], "claims_true")
                row["claims_mean_p"] = float(p[claim].mean()) if claim.any() else float("nan")
                row |= rate_cells(y[~claim], "nonclaims_true")
                row["nonclaims_mean_p"] = float(p[~claim].mean()) if (~claim).any() else float("nan")
                rows.append(row)
    data = pd.DataFrame(rows)
    if not data.empty:
        first = ["model", "design", "label", "n", "n_worlds"]
        data = data[first + [c for c in data.columns if c not in first]]
        data = data.drop(columns=["base_rate"])
    pct = ("base", "claims_true", "nonclaims_true")
    return Table(
        key="table_calibration",
        title="Calibration of the stated probabilities (appendix D.4, F.2), all runs of each model: Brier score "
              "and its decomposition over ten bins, which adds up exactly: Brier = REL - RES + UNC + WBV - 2 WBC "
              "(Murphy's three terms and the within-bin variance and covariance of Stephenson, Coelho and Jolliffe "
              "2008), ECE (world-clustered bootstrap 95% interval), AUC (overall, within "
              "claims, within non-claims), calibration intercept and slope with the Wald test of (0, 1); share (%) "
              "of claims and non-claims whose label is positive (Wilson 95% intervals) and their mean stated probability",
        data=data,
        formats=tuple((c, "pct0") for c in pct) + (
            ("n", "int"), ("n_worlds", "int"), ("wald_p", "p"), ("claims_mean_p", "num2"), ("nonclaims_mean_p", "num2"),
            ("mean_probability", "num2"), ("brier", "dec3"), ("brier_skill", "num2"), ("reliability", "dec3"),
            ("resolution", "dec3"), ("uncertainty", "dec3"), ("within_variance", "dec3"),
            ("within_covariance", "dec3"), ("ece", "dec3"), ("auc", "num2"), ("auc_claims", "num2"),
            ("auc_nonclaims", "num2"), ("intercept", "num2"), ("slope", "num2")),
        hidden=("wald_stat",),
    )


def recalibration_table(runs: pd.DataFrame, *, labels: Sequence[str] = ("economic", "signal"), n_folds: int = 5) -> Table:
    """Table E.2: out-of-fold Brier score and AUC of the recalibration maps, five-fold CV grouped by world.

    :func:`planted.analysis.calibration.recalibrate_runs` per model, design and label, all finished
    runs; plus the AUC of the stated probability within claims and within non-claims. A sample with
    fewer worlds than folds is left out.
    """
    rows = []
    for model in models_of(runs):
        for design in sorted(pd.unique(runs.loc[runs["model"] == model, "design"])):
            m = usable(runs[(runs["model"] == model) & (runs["design"] == design)])
            for label in labels:
                p, y, _, worlds = label_sample(m, label)
                if len(set(worlds)) < n_folds:
                    continue
                rec = recalibrate_runs(m, label=label, n_folds=n_folds)  # type: ignore[arg-type]
                frame = rec.to_frame().reset_index()
                frame.insert(0, "model", model)
                frame.insert(1, "design", design)
                frame.insert(2, "label", label)
                frame["n"] = rec.n
                frame["auc_claims"] = rec.auc_claims
                frame["auc_nonclaims"] = rec.auc_nonclaims
                rows.append(frame)
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return Table(
        key="tableE2_recalibration",
        title="Table E.2: recalibration of the stated probabilities, all runs: Brier score and AUC of out-of-sample "
              "predictions from five-fold cross-validation grouped by world (stated: no recalibration; base_rate: "
              "training share of positives; verdict, logodds, isotonic, both: maps fitted on the training folds); "
              "AUC of the stated probability within claims and within non-claims",
        data=data, formats=(("failed_folds", "int"), ("n", "int"), ("brier", "dec3"), ("auc", "num2"),
                            ("auc_claims", "num2"), ("auc_nonclaims", "num2")),
    )


# --------------------------------------------------------------------------------------------
# H5 and H6 in detail
# --------------------------------------------------------------------------------------------


def prior_and_complexity(runs: pd.DataFrame) -> Table:
    """Appendix D.7: H6 with and without framing controls, on all runs and on neutral runs; H5 one- and
    two-sided; the mean complexity drift. Per model and design (world-clustered standard errors)."""
    rows = []
    h6_cols = {"prior_probability", "oracle_cw_stat", "combination_cw_stat"}
    h5_cols = {"in_sample_r2_final", "test_oos_r2", "complexity_slope"}
    for model in models_of(runs):
        for design in sorted(pd.unique(runs.loc[runs["model"] == model, "design"])):
            m = usable(runs[(runs["model"] == model) & (runs["design"] == design)])
            results = []
            if h6_cols <= set(m.columns):
                for framing in ("none", "additive", "interacted"):
                    results.append((f"H6, framing control: {framing}", h6_prior(m, framing=framing)))  # type: ignore[arg-type]
                results.append(("H6, neutral runs only", h6_prior(m[m["framing"] == "neutral"])))
            if h5_cols <= set(m.columns):
                h5 = h5_drift(m)
                results.append(("H5 (one-sided, world clusters)", h5))
                two = h5
                if np.isfinite(h5.statistic) and h5.df is not None:
                    two = replace(h5, alternative="two-sided", pvalue=float(2 * stats.t.sf(abs(h5.statistic), h5.df)))
                results.append(("H5 (two-sided, world clusters)", two))
            for analysis, test in results:
                se = test.detail("se_prior") if analysis.startswith("H6") and not test.flag else (
                    test.detail("se_slope") if analysis.startswith("H5") and not test.flag else float("nan"))
                rows.append({"model": model, "design": design, "analysis": analysis, "estimate": test.estimate,
                             "se": se, "statistic": test.statistic, "pvalue": test.pvalue, "n": test.n,
                             "flag": test.flag})
            drift = pd.to_numeric(m.get("complexity_slope"), errors="coerce") if "complexity_slope" in m else pd.Series(dtype=float)
            rows.append({"model": model, "design": design, "analysis": "mean complexity drift (parameters per spec)",
                         "estimate": float(drift.mean()) if drift.notna().any() else float("nan"), "se": float("nan"),
                         "statistic": float("nan"), "pvalue": float("nan"), "n": int(drift.notna().sum()), "flag": ""})
    return Table(
        key="table_D7_prior_and_complexity",
        title="Appendix D.7: H6 (logistic regression of the verdict on the log-odds of the prior, controlling for the "
              "oracle's and the combination's Clark-West statistics and world type) with and without framing "
              "controls, and H5 (slope of the in-sample minus test-window R2 gap on complexity drift); "
              "world-clustered standard errors",
        data=pd.DataFrame(rows), formats=(("pvalue", "p"), ("n", "int")),
    )


# --------------------------------------------------------------------------------------------
# Agreement
# --------------------------------------------------------------------------------------------


def model_agreement_table(runs: pd.DataFrame, *, models: Sequence[str] | None = None) -> Table:
    """Section 4.2: agreement of verdicts between models on the worlds both ran (neutral, first
    replicate), per design: share of worlds with the same verdict (Wilson interval), Cohen's kappa
    and the four cells."""
    rows = []
    for design in sorted(pd.unique(runs["design"])):
        d = runs[runs["design"] == design]
        present = [m for m in (models or models_of(d)) if m in set(d["model"])]
        if len(present) < 2:
            continue
        for a in model_agreement(d, present):
            row = {"design": design, **a.to_frame().iloc[0].to_dict()}
            k = int(round(a.observed * a.n))
            row |= {f"agree{s}": v for s, v in rate_cells(np.r_[np.ones(k, bool), np.zeros(a.n - k, bool)], "").items()}
            rows.append(row)
    data = pd.DataFrame(rows)
    if not data.empty:
        data = data.drop(columns=["observed"])
        first = ["design", "first", "second", "n", "agree", "agree_low", "agree_high", "expected", "kappa"]
        data = data[first + [c for c in data.columns if c not in first]]
    return Table(
        key="table_model_agreement",
        title="Agreement between models (section 4.2): share (%) of worlds run by both under neutral framing (first replicate) with "
              "the same verdict (Wilson 95% intervals), agreement expected by chance, Cohen's kappa",
        data=data, formats=(("agree", "pct0"), ("expected", "pct0"), ("kappa", "num2"), ("n", "int"), ("both", "int"),
                            ("first_only", "int"), ("second_only", "int"), ("neither", "int")),
    )


def replicate_table(runs: pd.DataFrame, *, rng: np.random.Generator, n_boot: int = 2000) -> Table:
    """Tables F.1 (replicate rows) and F.2 (run-to-run variation): per model, design and level of the
    worlds run more than once (neutral): claim rate, share of worlds with the same verdict in every
    run (Wilson interval), Fleiss' kappa, the run-to-run share of the variance of a verdict and the
    probability that two runs of a world disagree (bootstrap intervals over worlds;
    :func:`planted.analysis.agreement.replicate_agreement`)."""
    rows = []
    for model in models_of(runs):
        for design in sorted(pd.unique(runs.loc[runs["model"] == model, "design"])):
            m = runs[(runs["model"] == model) & (runs["design"] == design)]
            for res in replicate_agreement(m, rng=rng, n_boot=n_boot):
                frame = res.to_frame().iloc[0].to_dict()
                k = int(round(res.all_same.value * res.n_worlds))
                low, high = wilson_interval(k, res.n_worlds)
                frame |= {"all_same_low": low, "all_same_high": high}
                claims = int(round(res.claim_rate * res.n_runs))
                low, high = wilson_interval(claims, res.n_runs)  # over runs (runs of a world are not independent)
                frame |= {"claim_rate_low": low, "claim_rate_high": high}
                rows.append({"model": model, "design": design, **frame})
    return Table(
        key="table_replicates",
        title="Replicates (Tables F.1, F.2): worlds run more than once under neutral framing, per R2 level: claim "
              "rate, share (%) of worlds with the same verdict in every run (Wilson 95% interval), Fleiss' kappa, "
              "run-to-run share of the variance of a verdict and P(two runs disagree) (bootstrap 95% intervals "
              "over worlds)",
        data=pd.DataFrame(rows),
        formats=(("n_worlds", "int"), ("n_runs", "int"), ("claim_rate", "pct0"), ("fleiss_kappa", "num2"),
                 ("all_same", "pct0"), ("within_share", "pct0"), ("disagree", "pct0")),
        exploratory_columns=("within_share", "disagree"),
    )


from planted.analysis.models_compared import models_compared  # noqa: E402,F401 (Table E.1, with the other summaries)
