"""Flagging runs that exploit the repeated-value artifact of bootstrap worlds (SPEC 6; paper 5.1, E.1).

Also the two artifact tables of the report: flagged runs per model (:func:`artifact_runs`) and the
share of repeated returns per world type (:func:`artifact_worlds`).

A run is flagged when its deployed model looks up past values or patterns of the return series
(a keyword screen of ``final_model.py``), or when its test-window OOS R2 exceeds 10%, far above the
strongest planted signal (population R2 4%). The paper checked its keyword hits by hand; here the
screen is only a screen: the flag's two parts are kept apart (``lookup_model`` and the R2 rule), so
a reader can check the keyword hits against the model files.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from planted.analysis.samples import claims_of, no_signal_runs, usable
from planted.analysis.tables import Table, models_of, rate_cells, world_types

HIGH_R2 = 0.10
"""Test-window OOS R2 above which a run is flagged whatever its code (paper 5.1)."""

LOOKUP_PATTERN = re.compile(
    r"look[\s_-]*up|nearest[\s_-]*neighbou?r|kneighbors|\bknn\b|np\.isclose\(|\.isin\(|searchsorted"
    r"|\boccurrences?\b|\bmatch(?:es|ing|ed)?[\s_-]*(?:idx|index|indices|values?|pattern|rows?)"
    r"|(?:previous|past|earlier|prior)[\s_-]*(?:occurrences?|matches|instances?)"
    r"|pattern[\s_-]*(?:match|lookup|dict|table)|\bsuccessors?\b|value[\s_-]*that[\s_-]*follow"
    r"|==\s*(?:last|prev\w*|current|cur|recent)\w*|(?:last|prev\w*|current|cur|recent)\w*\s*==",
    re.IGNORECASE,
)
"""Phrases of a model that forecasts by finding earlier occurrences of recent returns."""


def lookup_flag(model_source: str | None) -> bool | None:
    """Whether a final model's code matches the lookup screen (None when there is no model file).

    The screen needs both a lookup phrase (:data:`LOOKUP_PATTERN`: "lookup", "nearest neighbour",
    ``np.isclose(``, ``.isin(``, ``searchsorted``, "occurrence", an equality test against the last or
    current value, ...) and a use of the return series ``asset_A``.
    """
    if model_source is None:
        return None
    return bool(LOOKUP_PATTERN.search(model_source)) and "asset_a" in model_source.lower()


LOOKUP_CORRELATION = 0.8
"""A deployed model whose test-window forecasts correlate above this with the audit's exact lookup of
the last return (:func:`planted.baselines.detectors.lookup_exact`, k = 1) is flagged as a lookup."""


def lookup_correlation(evaluation: pd.DataFrame, returns: np.ndarray) -> float:
    """Correlation, over the test window, of a deployed model's departures from the benchmark with the
    exact-lookup detector's departures from the same benchmark (``evaluation.csv``: ``month``,
    ``forecast``, ``benchmark``); NaN when either never departs (a model that submits the benchmark,
    a world with no repeats) or there are fewer than three months."""
    from planted.baselines.detectors import Window, lookup_exact

    months = evaluation["month"].to_numpy(dtype=int)
    if months.size < 3 or months.max() >= returns.size:
        return float("nan")
    benchmark = pd.to_numeric(evaluation["benchmark"], errors="coerce").to_numpy(dtype=float)
    model = pd.to_numeric(evaluation["forecast"], errors="coerce").to_numpy(dtype=float) - benchmark
    window = Window(int(months.min()), int(months.max()) + 1)
    lookup = lookup_exact(np.asarray(returns, dtype=float), 1, window)[months] - benchmark
    keep = np.isfinite(model) & np.isfinite(lookup)
    model, lookup = model[keep], lookup[keep]
    scale = max(float(np.abs(benchmark[keep]).max(initial=0.0)), 1.0) * 1e-12
    if keep.sum() < 3 or np.ptp(model) <= scale or np.ptp(lookup) <= scale:
        return float("nan")
    return float(np.corrcoef(model, lookup)[0, 1])


def artifact_flags(runs: pd.DataFrame, *, high_r2: float = HIGH_R2) -> np.ndarray:
    """Per run: ``lookup_model`` is true (the keyword screen of the model file), ``lookup_correlation``
    exceeds :data:`LOOKUP_CORRELATION` (the forecasts follow the exact lookup), or ``test_oos_r2 >
    high_r2`` (a missing part counts as false)."""
    values = runs["lookup_model"].to_numpy(dtype=object) if "lookup_model" in runs.columns else []
    lookup = np.array([isinstance(v, (bool, np.bool_)) and bool(v) for v in values], dtype=bool)
    if "lookup_model" not in runs.columns:
        lookup = np.zeros(len(runs), dtype=bool)
    r2 = pd.to_numeric(runs["test_oos_r2"], errors="coerce").to_numpy()
    follows = np.zeros(len(runs), dtype=bool)
    if "lookup_correlation" in runs.columns:
        follows = np.nan_to_num(pd.to_numeric(runs["lookup_correlation"], errors="coerce").to_numpy(), nan=0.0) \
            > LOOKUP_CORRELATION
    return np.asarray(lookup | follows | (np.nan_to_num(r2, nan=-np.inf) > high_r2), dtype=bool)


def artifact_runs(runs: pd.DataFrame) -> Table:
    """Runs that exploit the repeated-value artifact (paper 5.1, Table E.1), per model and design.

    Counts over all finished runs: flagged by the lookup screen of the model file, by a test-window
    OOS R2 above 10%, by either (``artifact_flag``); the largest test-window R2; and, in the
    neutral no-signal worlds, the false-claim rate with and without the flagged runs (Wilson
    intervals) and the number of flagged false claims. Removing flagged runs conditions on the
    agent's behaviour (paper 5.1); it cannot replace worlds without the artifact.
    """
    rows = []
    for model in models_of(runs):
        for design in sorted(pd.unique(runs.loc[runs["model"] == model, "design"])):
            m = usable(runs[(runs["model"] == model) & (runs["design"] == design)])
            r2 = pd.to_numeric(m["test_oos_r2"], errors="coerce")
            lookup = np.array([isinstance(v, (bool, np.bool_)) and bool(v) for v in m["lookup_model"]], dtype=bool) \
                if "lookup_model" in m.columns else np.zeros(len(m), bool)
            flagged = m["artifact_flag"].astype(bool).to_numpy()
            null = no_signal_runs(m)
            null_flag = null["artifact_flag"].astype(bool).to_numpy()
            claims = claims_of(null["claim"])
            row: dict[str, object] = {
                "model": model, "design": design, "runs": len(m), "lookup_screen": int(lookup.sum()),
                "test_r2_above_10pct": int((r2 > 0.10).sum()), "flagged": int(flagged.sum()),
                "max_test_r2": float(r2.max()) if r2.notna().any() else float("nan"),
                "flagged_false_claims": int(np.sum(claims & null_flag)),
            }
            row |= rate_cells(claims, "false_claims")
            row |= rate_cells(claims[~null_flag], "false_claims_unflagged")
            rows.append(row)
    return Table(
        key="table_artifact_runs",
        title="Repeated-value artifact (section 5.1): runs flagged by the lookup screen of the model file or a "
              "test-window OOS R2 above 10%, all finished runs; false claims (%) in the no-signal worlds (neutral runs, first replicate) with and without flagged runs",
        data=pd.DataFrame(rows),
        formats=(("runs", "int"), ("lookup_screen", "int"), ("test_r2_above_10pct", "int"), ("flagged", "int"),
                 ("max_test_r2", "pct1"), ("flagged_false_claims", "int"), ("false_claims", "pct0"),
                 ("false_claims_unflagged", "pct0")),
    )


def artifact_worlds(worlds: pd.DataFrame, runs: pd.DataFrame) -> Table:
    """Share of a world's returns (training and test months) that repeat an earlier value exactly.

    Per design and world type (types from the runs of each world): worlds, median, minimum and
    maximum share (paper 5.1: "a median 46% of the 1,060 monthly returns repeat an earlier value"),
    and the median share of months whose (previous, current) pair occurred before (the share a
    lookup forecaster gets exactly right).
    """
    kinds = runs.drop_duplicates("world_id")
    kinds = kinds.assign(world=world_types(kinds)["world"], order=world_types(kinds)["order"])
    data = worlds.merge(kinds[["world_id", "world", "order"]], on="world_id", how="inner")
    rows = []
    for (design, order, label), g in data.groupby(["design", "order", "world"], sort=True):
        s = g["repeated_share"].to_numpy(float)
        rows.append({"design": design, "world": label, "worlds": len(g), "months": int(g["n_returns"].median()),
                     "median": float(np.median(s)), "min": float(s.min()), "max": float(s.max()),
                     "pair_median": float(np.median(g["repeated_follower_share"].to_numpy(float)))})
    return Table(
        key="table_artifact_worlds",
        title="Repeated-value artifact (section 5.1): share (%) of the returns of each world (training and test "
              "months) that repeat an earlier value exactly, and of months whose (previous, current) pair repeats",
        data=pd.DataFrame(rows),
        formats=(("worlds", "int"), ("months", "int"), ("median", "pct1"), ("min", "pct1"), ("max", "pct1"),
                 ("pair_median", "pct1")),
    )
