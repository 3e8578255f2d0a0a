"""The table record every report table is built into, and its formats.

A :class:`Table` holds numeric data (written as CSV) and cell formats (used for Markdown: rates in
percent with their Wilson intervals folded in, p-values, standard errors); :func:`format_value`
is the one formatter of a cell; :data:`HEADERS` and :data:`PROCEDURE_LABELS` the column headers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from planted.analysis.results import format_p

Format = Literal["pct0", "pct1", "pct2", "pp0", "p", "num2", "num3", "dec3", "int", "text"]
PROCEDURE_ORDER = ("oracle", "combination", "combination_ct", "holm_best", "rf_ridge", "best9", "hac_holm", "ivx_holm",
                   "lasso")
PROCEDURE_LABELS = {
    "oracle": "Oracle", "combination": "Comb.", "combination_ct": "Comb. CT", "holm_best": "Holm", "rf_ridge": "RF ridge",
    "best9": "Best 9", "hac_holm": "HAC-Holm", "ivx_holm": "IVX", "lasso": "Lasso",
}
HEADERS = {"agent": "Agent", "model": "Model", "world": "World", "design": "Design", "holdout_cw": "Holdout CW",
           "most_persistent": "Most persistent", "multiple_testing": "Mult. test.", "persistence": "Persist.",
           "forecast_test": "Fcst. test", "benchmark": "Bench.", "median_specs": "Median specs", "candidates": "Cand.",
           "planted": "Planted", "gauge": "Irrel. (gauge)", "no_signal": "No-signal worlds", "r2_1pct": "R2=1%",
           "gauss": "Gauss.", "boot": "Boot.", "label": "Label", "n_worlds": "Worlds", "mean_probability": "Mean p",
           "brier": "Brier", "brier_skill": "BSS", "reliability": "REL", "resolution": "RES", "uncertainty": "UNC",
           "within_variance": "WBV", "within_covariance": "WBC",
           "ece": "ECE", "auc": "AUC", "auc_claims": "AUC claims", "auc_nonclaims": "AUC non-claims",
           "intercept": "Intercept", "slope": "Slope", "wald_p": "Wald p", "base": "Base rate",
           "claims_true": "Claims true", "claims_mean_p": "Claims mean p", "nonclaims_true": "Non-claims true",
           "nonclaims_mean_p": "Non-claims mean p", "target_rate": "c", "alpha": "alpha*", "matched": "Matched",
           "difference": "Agent - matched", "anchor": "Anchor", "procedure": "Procedure", "outcome": "Outcome",
           "runs": "Runs", "worlds": "Worlds", "framing": "Framing", "claim": "Claim", "signal": "Signal",
           "probability": "Mean p", "prior": "Mean prior", "agent_missing": "Agent claims, no evaluable model",
           "claims": "Claims", "flagged": "Flagged", "p_binomial": "p (binomial vs 5%)", "p_holm": "p (Holm)",
           "detector": "Detector", "family": "Family", "window": "Window", "rule": "Rule"}
# --------------------------------------------------------------------------------------------
# The table record and its Markdown form
# --------------------------------------------------------------------------------------------


ACRONYMS = {"r2": "R2", "oos": "OOS", "cw": "CW", "ols": "OLS", "hac": "HAC", "ivx": "IVX", "ci": "CI", "se": "SE",
            "pct": "%", "pp": "pp", "id": "id"}


def humanise(column: str) -> str:
    """A header for a column without one in :data:`HEADERS`: ``agent_missing`` -> ``Agent missing``, ``test_oos_r2`` -> ``Test OOS R2``."""
    if "_" not in str(column):  # a plain word or symbol (p, n, kappa) is already a header
        return ACRONYMS.get(str(column), str(column))
    words = [ACRONYMS.get(w, w) for w in str(column).split("_") if w]
    text = " ".join(words)
    return text[:1].upper() + text[1:] if text else str(column)


def format_value(value: object, kind: str) -> str:
    """One Markdown cell: ``value`` in format ``kind`` (see :class:`Table`); NaN and None show as an en dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if kind == "text" or isinstance(value, str):
        return str(value)
    v = float(value)  # type: ignore[arg-type]
    if kind == "pct0":
        return f"{100 * v:.0f}"
    if kind == "pct1":
        return f"{100 * v:.1f}"
    if kind == "pct2":
        return f"{100 * v:.2f}"
    if kind == "pp0":
        return f"{100 * v:+.0f}" if round(100 * v) != 0 else "0"
    if kind == "dec3":
        return f"{v:.3f}"
    if kind == "p":
        return format_p(v)
    if kind == "num2":
        return f"{v:.2f}"
    if kind == "int":
        return f"{v:.0f}"
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.4g}"


@dataclass(frozen=True, eq=False)
class Table:
    """One report table: numeric data for the CSV and the formats of its Markdown form.

    Attributes
    ----------
    key : str
        File stem (``table_D1_claim_rates``).
    title : str
        Caption: what the rows are, the sample, the units.
    data : DataFrame
        Numbers (rates as fractions). A column ``x`` with siblings ``x_low`` and ``x_high`` is shown
        as ``x [low, high]``; with ``x_se`` as ``x (se)``; ``x_k`` and ``x_n`` stay in the CSV only.
    formats : tuple of (column, format)
        ``pct0``/``pct1``/``pct2`` (percent, 0-2 decimals), ``pp0`` (a difference of rates in
        percentage points), ``p`` (p-value), ``num2`` (2 decimals), ``dec3`` (3 decimals), ``int``
        or ``text``; columns not listed show 3 significant digits.
    display : DataFrame, optional
        A ready-formatted frame (strings) to show instead of ``data`` (wide layouts of long data).
    exploratory_columns : tuple of str
        Columns that hold exploratory quantities in an otherwise pre-specified table.
    hidden : tuple of str
        Columns kept in the CSV but left out of the Markdown (to keep it readable).
    """

    key: str
    title: str
    data: pd.DataFrame
    formats: tuple[tuple[str, str], ...] = ()
    display: pd.DataFrame | None = None
    exploratory_columns: tuple[str, ...] = field(default=())
    hidden: tuple[str, ...] = field(default=())

    def formatted(self) -> pd.DataFrame:
        """The Markdown cells: intervals and standard errors folded in, units in the headers."""
        if self.display is not None:
            return self.display
        kinds = dict(self.formats)
        columns = list(self.data.columns)
        hidden = {f"{c}_{s}" for c in columns for s in ("low", "high", "se", "k", "n")
                  if f"{c}_{s}" in columns and c in columns}
        out = {}
        for c in columns:
            if c in hidden or c in self.hidden:
                continue
            kind = kinds.get(c, "num3")
            values = self.data[c].tolist()
            if f"{c}_low" in columns and f"{c}_high" in columns:
                lows, highs = self.data[f"{c}_low"].tolist(), self.data[f"{c}_high"].tolist()
                cells = [format_value(v, kind) if format_value(lo, kind) == "–" else f"{format_value(v, kind)} [{format_value(lo, kind)}, {format_value(hi, kind)}]"
                         for v, lo, hi in zip(values, lows, highs)]
            elif f"{c}_se" in columns:
                ses = self.data[f"{c}_se"].tolist()
                cells = [format_value(v, kind) if format_value(s, kind) == "–" else f"{format_value(v, kind)} ({format_value(s, kind)})"
                         for v, s in zip(values, ses)]
            elif c == "procedure":
                cells = [PROCEDURE_LABELS.get(str(v), str(v)) for v in values]
            else:
                cells = [format_value(v, kind) for v in values]
            header = HEADERS.get(c, PROCEDURE_LABELS.get(c)) or humanise(c)
            if kind.startswith("pct"):
                header += " (%)"
            elif kind == "pp0":
                header += " (pp)"
            out[header] = cells
        return pd.DataFrame(out)

    def to_markdown(self) -> str:
        """A caption line and a pipe table."""
        body = self.formatted().to_markdown(index=False, disable_numparse=True)
        return f"**{self.title}**\n\n{body}\n"
