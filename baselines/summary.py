"""Summaries of a Monte Carlo table: claim rates by level with Wilson intervals, and size matching."""

from __future__ import annotations

import numpy as np
import pandas as pd

from planted.baselines.rates import claim_rate, matched_alpha


def level_key(row_r2: float | None, family: str) -> str:
    """Grouping key of a world: its R2 as the float string given (``"0.01"``), else its family."""
    if row_r2 is None or (isinstance(row_r2, float) and np.isnan(row_r2)):
        return family
    return str(float(row_r2))


def _keyed(table: pd.DataFrame) -> pd.DataFrame:
    evaluated = table[table["procedure"] != "<build-error>"].copy()
    evaluated["level"] = [level_key(r2, fam) for r2, fam in zip(evaluated["r2"], evaluated["family"])]
    return evaluated


def summarise(table: pd.DataFrame, alpha: float = 0.05, match_null_rate: float | None = None) -> dict:
    """Claim rates (pooled over the cells of each level) with Wilson 95% intervals, as a JSON-ready dict.

    Parameters
    ----------
    table : DataFrame
        Output of :func:`planted.baselines.engine.simulate`.
    alpha : float
        Nominal level.
    match_null_rate : float, optional
        Target false-positive rate c: adds, per procedure, alpha* at which it claims in share c of the
        simulated linear null worlds (R2 = 0) and its claim rates at alpha*.

    Returns
    -------
    dict
        ``{"alpha", "claim_rates": {proc: {level: rate}}, "intervals": {proc: {level: [lo, hi]}},
        "n_worlds": {level: n}, "build_errors": n}`` and, when asked, ``"matched"``.
    """
    data = _keyed(table)
    summary: dict = {"alpha": alpha, "claim_rates": {}, "intervals": {}, "n_worlds": {}}
    for (procedure, level), group in data.groupby(["procedure", "level"], sort=False):
        rate = claim_rate(group["decision_p"].to_numpy(), alpha)
        summary["claim_rates"].setdefault(procedure, {})[level] = rate.rate
        summary["intervals"].setdefault(procedure, {})[level] = [rate.low, rate.high]
        summary["n_worlds"][level] = rate.n
    summary["build_errors"] = int((table["procedure"] == "<build-error>").sum())
    if match_null_rate is not None:
        null = data[(data["family"] == "linear") & (data["level"] == "0.0")]
        if null.empty:
            raise ValueError("size matching needs simulated linear null worlds: add R2 = 0 to the grid")
        summary["matched"] = {}
        for procedure, group in data.groupby("procedure", sort=False):
            a_star = matched_alpha(null.loc[null["procedure"] == procedure, "decision_p"].to_numpy(), match_null_rate)
            rates = {
                level: claim_rate(g["decision_p"].to_numpy(), a_star).rate
                for level, g in group.groupby("level", sort=False)
            }
            summary["matched"][procedure] = {"alpha": a_star, "claim_rates": rates}
        summary["match_null_rate"] = match_null_rate
    return summary


def rate_table(table: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Claim rates as a table: one row per procedure, one column per level, ``rate [lo, hi]`` strings."""
    data = _keyed(table)
    cells: dict[str, dict[str, str]] = {}
    for (procedure, level), group in data.groupby(["procedure", "level"], sort=False):
        rate = claim_rate(group["decision_p"].to_numpy(), alpha)
        cells.setdefault(procedure, {})[level] = f"{rate.rate:.1%} [{rate.low:.1%}, {rate.high:.1%}]"
    return pd.DataFrame(cells).T
