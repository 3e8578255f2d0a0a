"""Claim-rate tables of a study's run table: pure functions from run tables to :class:`Table` objects.

Builds :class:`~planted.analysis.table_type.Table` records (numeric data for the CSV, cell
formats for Markdown) with the shared helpers (samples, world types, rate cells with Wilson 95%
intervals) and the descriptive tables of the paper: claim rates by world type (Table D.1), by
persistence and shock correlation (Table D.3), deployed test-window OOS R2 (Table D.5), Gaussian
against bootstrap worlds (Table F.1), the holdout rule (Table F.2), thresholds on the stated
probability (F.2), framing (Figure 3B, section 3.3) and calibration bins (Figure 2). The
repeated-value artifact tables are in :mod:`planted.analysis.artifact`.

Conventions
-----------
* Rates are fractions in the data (``x``, ``x_low``, ``x_high``: the rate and its Wilson 95%
  interval, :func:`planted.baselines.rates.wilson_interval`; ``x_k`` claims among ``x_n``) and shown
  in percent in Markdown.
* Samples follow :mod:`planted.analysis.hypotheses`: finished runs only (``status == "ok"``), the
  first replicate of a world under a framing, a missing verdict counts as no claim. Descriptive
  tables use neutral runs unless their title says otherwise.
* A baseline's claim is its ``baseline_<procedure>`` column (claim at 5% on the same world).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from planted.analysis.calibration import N_BINS, bin_index, outcome_labels
from planted.analysis.table_type import (  # noqa: F401 (the table type is part of this module's interface)
    HEADERS, PROCEDURE_LABELS, PROCEDURE_ORDER, Format, Table, format_value,
)
from planted.analysis.hypotheses import framing_table
from planted.analysis.samples import claims_of, first_replicate, linear_at, neutral_first, no_signal_runs, usable
from planted.baselines.procedures import KINDS
from planted.worlds.spec import world_type_label
from planted.baselines.rates import share_of_claims

FAMILY_ORDER = {"linear": 0, "persistent_null": 1, "momentum_null": 2, "reversal": 3, "regime": 4, "injected": 5}
GAUSSIAN_R2 = (0.0, 0.0025, 0.005, 0.01)
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
HOLDOUT_ALPHA = 0.05


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def models_of(runs: pd.DataFrame) -> list[str]:
    """Models in order of first appearance."""
    return [str(m) for m in pd.unique(runs["model"].dropna())]


def baseline_procedures(runs: pd.DataFrame) -> list[str]:
    """Procedures with a ``baseline_<procedure>`` column, in the paper's order (unknown ones last)."""
    present = [c[len("baseline_"):] for c in runs.columns if c.startswith("baseline_")]
    return [p for p in PROCEDURE_ORDER if p in present] + sorted(p for p in present if p not in PROCEDURE_ORDER)


def exploratory_procedures(procedures: Sequence[str]) -> tuple[str, ...]:
    """The procedures of ``procedures`` that SPEC 3.2 lists as exploratory."""
    return tuple(p for p in procedures if KINDS.get(p) == "exploratory")


def r2_label(r2: float) -> str:
    """``0.0025`` -> ``"0.25"`` (percent, no trailing zeros)."""
    return f"{100 * float(r2):g}"


def world_types(runs: pd.DataFrame) -> pd.DataFrame:
    """World type label and sort key of each run (paper Table D.1 rows).

    :func:`planted.worlds.spec.world_type_label` (linear worlds by R2, the four traps by name,
    injected worlds by factor and R2), with the paper's row order. Index aligned with ``runs``.
    """
    family = runs["family"].astype(str).to_numpy()
    r2 = pd.to_numeric(runs["r2"], errors="coerce").to_numpy()
    factor = runs["factor"].astype("string").fillna("").to_numpy() if "factor" in runs.columns else np.full(len(runs), "")
    labels = [world_type_label(fam, value, fac) for fam, value, fac in zip(family, r2, factor)]
    keys = [(FAMILY_ORDER.get(fam, 9), str(fac), 0.0 if np.isnan(value) else float(value))
            for fam, value, fac in zip(family, r2, factor)]
    return pd.DataFrame({"world": labels, "order": keys}, index=runs.index)


def rate_cells(claims: np.ndarray | pd.Series, name: str) -> dict[str, float]:
    """``{name, name_low, name_high, name_k, name_n}``: claim rate with its Wilson 95% interval
    (:func:`planted.baselines.rates.share_of_claims`)."""
    rate = share_of_claims(np.asarray(claims, dtype=bool))
    return {name: rate.rate, f"{name}_low": rate.low, f"{name}_high": rate.high,
            f"{name}_k": rate.claims, f"{name}_n": rate.n}


def mean_cells(values: np.ndarray | pd.Series, name: str) -> dict[str, float]:
    """``{name, name_se, name_n}``: mean of the finite values and its standard error (sd / sqrt(n))."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    return {name: float(x.mean()) if n else float("nan"),
            f"{name}_se": float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"), f"{name}_n": n}


def _baseline_claims(group: pd.DataFrame, procedure: str) -> np.ndarray:
    values = group[f"baseline_{procedure}"]
    return values[values.notna()].astype(bool).to_numpy()


def _by_type(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    types = world_types(runs)
    order = sorted(set(zip(types["order"], types["world"])))
    return [(label, runs[types["world"] == label]) for _, label in order]


def _pct_formats(columns: Sequence[str], kind: str = "pct0") -> tuple[tuple[str, str], ...]:
    return tuple((c, kind) for c in columns)


# --------------------------------------------------------------------------------------------
# Claim rates
# --------------------------------------------------------------------------------------------


def claim_rates_by_world(runs: pd.DataFrame, procedures: Sequence[str] | None = None) -> Table:
    """Table D.1: share of worlds in which the agent and each procedure claim, by world type.

    Parameters
    ----------
    runs : DataFrame
        One or more models' run tables (neutral first-replicate runs are used).
    procedures : sequence of str, optional
        Baselines to show (default: every ``baseline_<procedure>`` column, paper order).

    Returns
    -------
    Table
        One row per model and world type: ``n`` agent runs, the agent's claim rate and each
        procedure's claim rate at 5% on the same worlds, each with its Wilson 95% interval.
    """
    procedures = list(procedures) if procedures is not None else baseline_procedures(runs)
    base = neutral_first(runs)
    rows = []
    for model in models_of(base):
        for label, group in _by_type(base[base["model"] == model]):
            rows.append(_claim_row(group, procedures, model=model, world=label))
    return Table(
        key="table_D1_claim_rates",
        title="Table D.1: share of worlds (%) in which each procedure claims that a model beats the benchmark, "
              "neutral runs (first replicate), with Wilson 95% intervals; baselines at 5% on the same worlds",
        data=pd.DataFrame(rows), formats=(("n", "int"),) + _pct_formats(["agent", *procedures]),
        exploratory_columns=exploratory_procedures(procedures),
    )


def _claim_row(group: pd.DataFrame, procedures: Sequence[str], **keys: object) -> dict[str, object]:
    """One table row: the keys, the number of runs, the agent's and each baseline's claim-rate cells."""
    row: dict[str, object] = {**keys, "n": len(group)}
    row |= rate_cells(claims_of(group["claim"]), "agent")
    for p in procedures:
        row |= rate_cells(_baseline_claims(group, p), p)
    return row


def _signal_class(r2: float) -> tuple[int, str]:
    if np.isclose(r2, 0.0):
        return 0, "No signal (R2=0)"
    if r2 <= 0.01 + 1e-12:
        return 1, "Weak signal (R2 0.25-1%)"
    return 2, "Strong signal (R2 2-4%)"


def claim_rates_by_persistence(runs: pd.DataFrame, procedures: Sequence[str] | None = None) -> Table:
    """Table D.3: claim rates by predictor persistence phi and shock correlation rho, neutral linear runs.

    Rows: model x signal class (R2 = 0; weak: 0.25, 0.5, 1% pooled; strong: 2, 4% pooled) x phi x rho.
    """
    procedures = list(procedures) if procedures is not None else baseline_procedures(runs)
    base = neutral_first(runs)
    base = base[base["family"] == "linear"]
    classes = [_signal_class(float(v)) for v in pd.to_numeric(base["r2"])]
    base = base.assign(_class=[c[1] for c in classes], _order=[c[0] for c in classes])
    rows = []
    for model in models_of(base):
        m = base[base["model"] == model]
        for (_, label, phi, rho), group in m.groupby(["_order", "_class", "phi", "rho"], sort=True):
            rows.append(_claim_row(group, procedures, model=model, signal=label, phi=phi, rho=rho))
    return Table(
        key="table_D3_persistence",
        title="Table D.3: claim rates (%) by predictor persistence phi and shock correlation rho, neutral runs (first "
              "replicate) in linear worlds (weak signal pools R2 of 0.25, 0.5 and 1%), Wilson 95% intervals",
        data=pd.DataFrame(rows), formats=(("phi", "num2"), ("rho", "num2"), ("n", "int")) + _pct_formats(["agent", *procedures]),
        exploratory_columns=exploratory_procedures(procedures),
    )


def deployed_oos_r2(runs: pd.DataFrame, baselines: pd.DataFrame, procedures: Sequence[str] | None = None) -> Table:
    """Table D.5: mean test-window OOS R2 (%) of each procedure's deployed forecast, by world type.

    The deployed forecast is the procedure's model when it claims and the benchmark (OOS R2 exactly
    0) otherwise. The agent's is its submitted model's ``test_oos_r2`` when it claims; a claiming run
    whose model could not be evaluated has no deployed forecast and is left out (counted in
    ``agent_missing``, never set to 0). Baselines: ``test_oos_r2`` of ``baselines.parquet`` where
    ``claim_5pct``, else 0, on the same worlds. Standard errors over worlds.
    """
    procedures = list(procedures) if procedures is not None else [
        p for p in baseline_procedures(runs) if p in set(baselines["procedure"])]
    base = neutral_first(runs)
    deployed = {}
    for p in procedures:
        b = baselines[baselines["procedure"] == p].drop_duplicates("world_id").set_index("world_id")
        deployed[p] = pd.Series(np.where(b["claim_5pct"].astype(bool), b["test_oos_r2"], 0.0), index=b.index)
    rows = []
    for model in models_of(base):
        for label, group in _by_type(base[base["model"] == model]):
            claim = claims_of(group["claim"])
            r2 = pd.to_numeric(group["test_oos_r2"], errors="coerce").to_numpy()
            agent = np.where(claim, r2, 0.0)
            row: dict[str, object] = {"model": model, "world": label, "n": len(group)}
            row |= mean_cells(agent, "agent")
            row["agent_missing"] = int(np.sum(claim & ~np.isfinite(r2)))
            for p in procedures:
                row |= mean_cells(deployed[p].reindex(group["world_id"]).to_numpy(), p)
            rows.append(row)
    return Table(
        key="table_D5_deployed_oos_r2",
        title="Table D.5: test-window OOS R2 (%) of each procedure's deployed forecast (its model when it claims, "
              "the benchmark otherwise), neutral runs (first replicate); mean (standard error over worlds)",
        data=pd.DataFrame(rows), formats=(("n", "int"), ("agent_missing", "int")) + _pct_formats(["agent", *procedures], "pct2"),
        exploratory_columns=exploratory_procedures(procedures),
    )


def _gaussian_rows(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    rows = [(world_type_label("linear", r2, None), linear_at(runs, [r2])) for r2 in GAUSSIAN_R2]
    rows.append(("Persistent null", runs[runs["family"] == "persistent_null"]))
    rows.append(("No-signal worlds pooled", no_signal_runs(runs)))
    return rows


def gaussian_vs_bootstrap(runs: pd.DataFrame) -> Table:
    """Table F.1 (claim rates): Gaussian-shock worlds next to the bootstrap worlds of the same cells.

    Per model with Gaussian runs: its neutral first-replicate claim rate in Gaussian worlds
    (``gauss``), in the bootstrap worlds of the same cells when the model ran them (``boot``; other
    worlds, so unpaired) and the HAC-Holm test at 5% on the Gaussian worlds (``hac_holm``), for
    linear R2 0, 0.25, 0.5, 1%, the persistent null and the pooled no-signal worlds.
    """
    base = neutral_first(runs)
    rows = []
    for model in models_of(base[base["design"] == "gaussian"]):
        m = base[base["model"] == model]
        gauss = dict(_gaussian_rows(m[m["design"] == "gaussian"]))
        boot = dict(_gaussian_rows(m[m["design"] == "bootstrap"]))
        for label, group in gauss.items():
            row: dict[str, object] = {"model": model, "world": label}
            row |= rate_cells(claims_of(group["claim"]), "gauss")
            row |= rate_cells(claims_of(boot[label]["claim"]), "boot")
            row |= rate_cells(_baseline_claims(group, "hac_holm") if "baseline_hac_holm" in group else [], "hac_holm")
            rows.append(row)
    return Table(
        key="table_F1_gaussian_claim_rates",
        title="Table F.1: claim rates (%) in Gaussian-shock worlds (gauss) and in the bootstrap worlds of the same "
              "cells (boot; different worlds, unpaired), neutral runs, first replicate; HAC-Holm at 5% on the "
              "Gaussian worlds; Wilson 95% intervals",
        data=pd.DataFrame(rows), formats=_pct_formats(["gauss", "boot", "hac_holm"]),
    )


def _design_rows(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    linear = runs[runs["family"] == "linear"]
    levels = sorted(pd.to_numeric(linear["r2"]).dropna().unique())
    rows = [(world_type_label("linear", r2, None), linear_at(runs, [r2])) for r2 in levels]
    if (runs["family"] == "persistent_null").any():
        rows.append(("Persistent null", runs[runs["family"] == "persistent_null"]))
    rows.append(("No-signal worlds pooled", no_signal_runs(runs)))
    return rows


def holdout_rule(runs: pd.DataFrame, *, alpha: float = HOLDOUT_ALPHA) -> Table:
    """Table F.2: the agent's verdict against a one-sided Clark-West test of its submitted model on the
    sealed test window at ``alpha`` (``holdout_cw_p <= alpha``); a run without an evaluable model
    counts as no claim. Neutral first-replicate runs, per model and design."""
    base = neutral_first(runs)
    rows = []
    for model in models_of(base):
        for design in sorted(pd.unique(base.loc[base["model"] == model, "design"])):
            m = base[(base["model"] == model) & (base["design"] == design)]
            for label, group in _design_rows(m):
                p = pd.to_numeric(group["holdout_cw_p"], errors="coerce").to_numpy()
                evaluable = (np.array([isinstance(e, (bool, np.bool_)) and bool(e) for e in group["evaluable"]], dtype=bool)
                             if "evaluable" in group.columns else np.ones(len(group), dtype=bool))
                holdout = evaluable & (np.nan_to_num(p, nan=1.0) <= alpha)
                row: dict[str, object] = {"model": model, "design": design, "world": label, "n": len(group)}
                row |= rate_cells(claims_of(group["claim"]), "agent")
                row |= rate_cells(holdout, "holdout_cw")
                rows.append(row)
    return Table(
        key="table_F2_holdout_rule",
        title=f"Table F.2: claim rates (%) of the agent's verdict and of a one-sided Clark-West test of its submitted "
              f"model on the sealed test window at {alpha:.0%} (holdout CW; no evaluable model = no claim), "
              "neutral runs, first replicate, Wilson 95% intervals",
        data=pd.DataFrame(rows), formats=(("n", "int"),) + _pct_formats(["agent", "holdout_cw"]),
    )


def probability_thresholds(runs: pd.DataFrame, thresholds: Sequence[float] = THRESHOLDS) -> Table:
    """Paper F.2: the stated probability as a test statistic.

    Per model and design: claiming when the stated probability is at least each threshold (and, in
    the first row, the verdict itself), the false-claim rate in the no-signal worlds and the claim
    rate in linear worlds with R2 = 1%, neutral first-replicate runs. A run without a probability
    does not claim. The thresholds are not chosen on the data here, but any reading of "the best
    threshold" off this table is chosen on the runs it is evaluated on.
    """
    base = neutral_first(runs)
    rows = []
    for model in models_of(base):
        for design in sorted(pd.unique(base.loc[base["model"] == model, "design"])):
            m = base[(base["model"] == model) & (base["design"] == design)]
            null, signal = no_signal_runs(m), linear_at(m, [0.01])
            rules: list[tuple[str, np.ndarray, np.ndarray]] = [
                ("verdict", claims_of(null["claim"]), claims_of(signal["claim"]))]
            for t in thresholds:
                pn = pd.to_numeric(null["probability"], errors="coerce").fillna(-1.0).to_numpy()
                ps = pd.to_numeric(signal["probability"], errors="coerce").fillna(-1.0).to_numpy()
                rules.append((f"p >= {t:g}", pn >= t - 1e-12, ps >= t - 1e-12))
            for rule, a, b in rules:
                rows.append({"model": model, "design": design, "rule": rule, **rate_cells(a, "no_signal"),
                             **rate_cells(b, "r2_1pct")})
    data = pd.DataFrame(rows)
    title = ("Appendix F.2: claiming when the stated probability reaches a threshold: false claims (%) in the "
             "no-signal worlds and claim rate (%) in linear worlds with R2=1%, neutral runs (first replicate), Wilson 95% "
             "intervals")
    if not data.empty and (data["r2_1pct_n"] == 0).all():  # say why, rather than show an empty column
        data = data.drop(columns=[c for c in data.columns if c.startswith("r2_1pct")])
        title += "; these runs have no linear worlds with R2=1%, so the claim-rate column is left out"
    return Table(key="table_F2b_probability_thresholds", title=title, data=data,
                 formats=_pct_formats(["no_signal", "r2_1pct"]))


def framing_rates(runs: pd.DataFrame) -> Table:
    """Claim rate by framing in the worlds run under all three framings (paper 3.3, Figure 3B).

    Per model and framing (skeptical, neutral, optimistic): worlds, claim rate overall, in the
    no-signal and in the signal worlds among them, mean stated probability and mean prior.
    """
    rows = []
    for model in models_of(runs):
        m = first_replicate(usable(runs[runs["model"] == model]))
        worlds = framing_table(m).index
        if not len(worlds):
            continue
        m = m[m["world_id"].isin(worlds)]
        for framing in ("skeptical", "neutral", "optimistic"):
            g = m[m["framing"] == framing]
            signal = g["signal"].astype(bool).to_numpy()
            claim = claims_of(g["claim"])
            row: dict[str, object] = {"model": model, "framing": framing, "worlds": len(g)}
            row |= rate_cells(claim, "claim")
            row |= rate_cells(claim[~signal], "no_signal")
            row |= rate_cells(claim[signal], "signal")
            row["probability"] = float(pd.to_numeric(g["probability"], errors="coerce").mean())
            row["prior"] = float(pd.to_numeric(g["prior_probability"], errors="coerce").mean())
            rows.append(row)
    return Table(
        key="table_framing",
        title="Framing (section 3.3): claim rates (%) in the worlds run under all three framings (first replicate of each), overall and in "
              "worlds without and with a signal, Wilson 95% intervals; mean stated probability and prior",
        data=pd.DataFrame(rows),
        formats=(("worlds", "int"), ("probability", "num2"), ("prior", "num2")) + _pct_formats(["claim", "no_signal", "signal"]),
    )


def calibration_bins(runs: pd.DataFrame, *, label: str = "economic", n_bins: int = N_BINS) -> Table:
    """Figure 2 data: per model, the label's rate in each bin of the stated probability (all runs).

    Bins of width 1/``n_bins`` (:func:`planted.analysis.calibration.bin_index`); ``mean_p`` is the
    mean stated probability in the bin (where Figure 2 places its point); the outcome rate has its
    Wilson 95% interval. Runs without a probability or a label are left out.
    """
    rows = []
    for model in models_of(runs):
        m = usable(runs[runs["model"] == model])
        p = pd.to_numeric(m["probability"], errors="coerce").to_numpy()
        y = outcome_labels(m, label).to_numpy()  # type: ignore[arg-type]
        keep = np.isfinite(p) & np.isfinite(y)
        p, y = p[keep], y[keep].astype(bool)
        b = bin_index(p, n_bins)
        for k in range(n_bins):
            inside = b == k
            row: dict[str, object] = {"model": model, "bin": f"[{k / n_bins:.1f}, {(k + 1) / n_bins:.1f})",
                                      "bin_index": k, "runs": int(inside.sum()),
                                      "mean_p": float(p[inside].mean()) if inside.any() else float("nan")}
            row |= rate_cells(y[inside], "outcome")
            rows.append(row)
    return Table(
        key=f"figure2_data_{label}",
        title=f"Figure 2 data: share of runs with the {label} label by bin of the stated probability, all runs, "
              "Wilson 95% intervals",
        data=pd.DataFrame(rows), formats=(("runs", "int"), ("mean_p", "num2"), ("bin_index", "int"), ("outcome", "pct0")),
    )


def rates_by_r2(runs: pd.DataFrame) -> Table:
    """Figure 1 and 3A points: the agent's claim rate by R2 in neutral linear worlds, per model and design."""
    base = neutral_first(runs)
    base = base[base["family"] == "linear"]
    rows = []
    for model in models_of(base):
        for design in sorted(pd.unique(base.loc[base["model"] == model, "design"])):
            m = base[(base["model"] == model) & (base["design"] == design)]
            for r2, group in m.groupby(pd.to_numeric(m["r2"]), sort=True):
                rows.append({"model": model, "design": design, "r2": float(r2), **rate_cells(claims_of(group["claim"]), "agent")})
    return Table(
        key="agent_rates_by_r2",
        title="Agent claim rate (%) by true population R2, neutral runs in linear worlds (first replicate), Wilson 95% intervals",
        data=pd.DataFrame(rows, columns=["model", "design", "r2", "agent", "agent_low", "agent_high", "agent_k", "agent_n"]),
        formats=(("r2", "pct2"), ("agent", "pct0")),
    )
