"""How the agent searches: Table D.4 (search behaviour by outcome) and the potency of claiming models by
signal strength (paper D.5), from the coded transcripts (:mod:`planted.analysis.coding`, columns
added by :mod:`planted.analysis.loading`). Exploratory throughout: the coding was designed after the
results of the first study were known (paper 7.2), and its flags are unvalidated keyword matches.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planted.worlds.spec import world_type_label

from planted.analysis.samples import claims_of, neutral_first
from planted.analysis.tables import Table, mean_cells, models_of, rate_cells

OUTCOMES = (
    ("Claim, signal (correct)", True, True),
    ("Claim, no signal (false)", True, False),
    ("No claim, signal (missed)", False, True),
    ("No claim, no signal (correct)", False, False),
)
KEYWORDS = ("multiple_testing", "persistence", "forecast_test")


def _known(values: pd.Series) -> np.ndarray:
    """Booleans of the entries that are known (not None/NaN)."""
    out = [bool(v) for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    return np.asarray(out, dtype=bool)


def search_behaviour(runs: pd.DataFrame) -> Table:
    """Table D.4: search behaviour by outcome, neutral runs (first replicate) in linear and
    persistent-null worlds, per model and design.

    Selection measures, for claims only (only a claiming run deploys its model): ``candidates``
    (mean number of candidates in the deployed model), ``planted`` (share retaining the planted
    column, worlds with one), ``gauge`` (mean share of irrelevant candidates retained),
    ``most_persistent`` (share including the most persistent candidate). For every run:
    transcript mentions of multiple testing / data snooping, persistence / Stambaugh bias and a
    formal forecast-comparison test; the submitted model is the benchmark; median number of logged
    specifications (paper F.2, "search size"). Shares carry Wilson 95% intervals; runs without a
    transcript are left out of the transcript shares.
    """
    base = neutral_first(runs)
    base = base[base["family"].isin(["linear", "persistent_null"])]
    rows = []
    for model in models_of(base):
        for design in sorted(pd.unique(base.loc[base["model"] == model, "design"])):
            m = base[(base["model"] == model) & (base["design"] == design)]
            claim = claims_of(m["claim"])
            signal = m["signal"].astype(bool).to_numpy()
            for label, is_claim, is_signal in OUTCOMES:
                g = m[(claim == is_claim) & (signal == is_signal)]
                row: dict[str, object] = {"model": model, "design": design, "outcome": label, "runs": len(g)}
                if is_claim:
                    row |= mean_cells(pd.to_numeric(g["n_candidates"], errors="coerce"), "candidates")
                    row |= rate_cells(_known(g["planted_retained"]), "planted") if is_signal else rate_cells([], "planted")
                    row |= mean_cells(pd.to_numeric(g["gauge"], errors="coerce"), "gauge")
                    row |= rate_cells(_known(g["most_persistent_included"]), "most_persistent")
                else:
                    row |= {"candidates": float("nan"), "planted": float("nan"), "gauge": float("nan"),
                            "most_persistent": float("nan")}
                for key in KEYWORDS:
                    row |= rate_cells(_known(g[key]), key)
                row |= rate_cells(_known(g["benchmark"]), "benchmark")
                specs = pd.to_numeric(g["n_specs"], errors="coerce").dropna()
                row["median_specs"] = float(specs.median()) if len(specs) else float("nan")
                rows.append(row)
    pct = ("planted", "gauge", "most_persistent", *KEYWORDS, "benchmark")
    return Table(
        key="table_D4_search_behaviour",
        title="Table D.4: search behaviour by outcome, neutral runs (first replicate) in linear and persistent-null worlds. For claims: "
              "mean candidates in the deployed model, share (%) retaining the planted predictor, mean share of "
              "irrelevant candidates retained (gauge), share including the most persistent candidate; for all runs: "
              "share (%) of transcripts mentioning multiple testing, persistence, a forecast-comparison test, share "
              "submitting the benchmark, median logged specifications; Wilson 95% intervals (exploratory keyword coding)",
        data=pd.DataFrame(rows),
        formats=(("runs", "int"), ("candidates", "num2"), ("median_specs", "num2")) + tuple((c, "pct0") for c in pct),
    )


def potency_by_signal(runs: pd.DataFrame) -> Table:
    """Paper D.5: among neutral runs that correctly claim in linear worlds with a signal, the share whose
    deployed model retains the planted predictor (potency; Wilson interval) and the mean gauge, by R2."""
    base = neutral_first(runs)
    base = base[(base["family"] == "linear") & base["signal"].astype(bool)]
    base = base[claims_of(base["claim"])]
    rows = []
    for model in models_of(base):
        for design in sorted(pd.unique(base.loc[base["model"] == model, "design"])):
            m = base[(base["model"] == model) & (base["design"] == design)]
            for r2, g in m.groupby(pd.to_numeric(m["r2"]), sort=True):
                rows.append({"model": model, "design": design, "world": world_type_label("linear", r2, None), "claims": len(g),
                             **rate_cells(_known(g["planted_retained"]), "potency"),
                             **mean_cells(pd.to_numeric(g["gauge"], errors="coerce"), "gauge")})
    return Table(
        key="table_D5b_potency",
        title="Appendix D.5: potency (share (%) of correct claims whose deployed model retains the planted predictor, "
              "Wilson 95% intervals) and gauge (mean share of irrelevant candidates retained) by true R2, neutral "
              "runs (first replicate) in linear worlds (exploratory keyword coding)",
        data=pd.DataFrame(rows), formats=(("claims", "int"), ("potency", "pct0"), ("gauge", "pct0")),
    )
