"""Agents against baselines at a matched false-positive rate, from simulated decision p-values.

Pure functions of a run table and a Monte Carlo table (``mc.parquet`` of :mod:`planted.baselines.engine`):
the simulated power curves of Figure 1 (nominal and size-matched), Table D.2 (power at the agent's
false-positive rate, with bootstrap intervals for the agent minus the matched baseline), the
alternative anchors of Appendix D.3 and the size-power frontiers of Figure D.1 (SPEC 3.3).

Conventions
-----------
* Simulated worlds are the Monte Carlo table's linear worlds with the shocks of the agent's design
  (``bootstrap`` or ``gaussian``), pooled over phi and rho at each R2 level.
* The agent's false-positive rate c is its claim rate in its neutral linear null worlds (first
  replicate); alpha* is :func:`planted.baselines.rates.matched_alpha` of the simulated null
  decision p-values at c, and the matched baseline's claim rate at an R2 level is its share of
  simulated worlds with ``decision_p <= alpha*`` (Wilson interval over the simulated worlds).
* The interval of the agent minus the matched baseline (:func:`matched_difference`) resamples the
  agent's null and signal worlds and re-derives c and alpha* in each draw, as
  :func:`planted.baselines.rates.matched_difference` does (closed form per draw).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from planted.analysis.samples import claims_of, linear_at, neutral_first, no_signal_runs
from planted.analysis.tables import PROCEDURE_LABELS, PROCEDURE_ORDER, Table, models_of, r2_label, rate_cells
from planted.baselines.procedures import KINDS
from planted.baselines.rates import frontier, matched_alpha, matched_difference

SIGNAL_R2 = 0.01
NOMINAL = 0.05
NOT_MATCHED = ("combination_ct", "rf_ridge")
"""Procedures Figure 1B leaves at their nominal level (paper: not size-matched)."""


def simulated_linear(mc: pd.DataFrame, shocks: str) -> pd.DataFrame:
    """The Monte Carlo table's linear worlds with ``shocks`` (rows with a decision p-value)."""
    if mc.empty:
        return mc
    keep = (mc["family"] == "linear") & (mc["shocks"].astype("string") == shocks) & mc["decision_p"].notna()
    return mc[keep.to_numpy()]


def simulated_procedures(sim: pd.DataFrame) -> list[str]:
    """Procedures of a simulation, paper order first."""
    present = set(sim["procedure"]) if not sim.empty else set()
    return [p for p in PROCEDURE_ORDER if p in present] + sorted(present - set(PROCEDURE_ORDER))


def _levels(sim: pd.DataFrame) -> list[float]:
    return sorted(float(v) for v in pd.unique(pd.to_numeric(sim["r2"])))


def _p_at(sim: pd.DataFrame, procedure: str, r2: float) -> np.ndarray:
    rows = sim[(sim["procedure"] == procedure).to_numpy() & np.isclose(pd.to_numeric(sim["r2"]).to_numpy(), r2, atol=1e-12)]
    return rows["decision_p"].to_numpy(dtype=float)


def has_null(sim: pd.DataFrame) -> bool:
    """Whether the simulation has linear null worlds (needed for any size matching)."""
    return not sim.empty and bool(np.isclose(pd.to_numeric(sim["r2"]).to_numpy(), 0.0).any())


def power_curves(sim: pd.DataFrame, *, matched_rates: dict[str, float] | None = None,
                 procedures: Sequence[str] | None = None) -> pd.DataFrame:
    """Simulated claim rates by R2: at 5% (``matched_rates`` None) or at each procedure's alpha*.

    Parameters
    ----------
    sim : DataFrame
        :func:`simulated_linear` output.
    matched_rates : dict, optional
        ``{model: c}``: match each procedure to false-positive rate c (one curve set per model).
        Procedures in :data:`NOT_MATCHED` are left out of matched curves (paper Figure 1B).
    procedures : sequence of str, optional

    Returns
    -------
    DataFrame
        ``model`` (None for nominal curves), ``procedure``, ``kind``, ``alpha``, ``r2``, ``rate``,
        ``rate_low``, ``rate_high``, ``rate_k``, ``rate_n``.
    """
    procedures = list(procedures) if procedures is not None else simulated_procedures(sim)
    targets: list[tuple[str | None, float | None]] = [(None, None)] if matched_rates is None else list(matched_rates.items())
    rows = []
    for model, c in targets:
        for p in procedures:
            if c is not None and p in NOT_MATCHED:
                continue
            alpha = NOMINAL if c is None else matched_alpha(_p_at(sim, p, 0.0), c)
            for r2 in _levels(sim):
                pv = _p_at(sim, p, r2)
                rows.append({"model": model, "procedure": p, "kind": KINDS.get(p, ""), "alpha": alpha, "r2": r2,
                             **rate_cells(pv <= alpha, "rate")})
    return pd.DataFrame(rows)


UNRELIABLE = "not results, the match has no sound anchor"
"""Opens the note of a size-matched output whose anchor fails :func:`anchor_problem` (drawn greyed)."""
MIN_ANCHOR_WORLDS = 20
"""Fewest agent null worlds on which a size match is drawn as a result (below: greyed, with a note)."""


def anchor_problem(claims: int, worlds: int) -> str | None:
    """Why the agent's null claim rate ``claims / worlds`` cannot anchor a size match (None: it can).

    A rate of 0 or 1 has no matched level inside (0, 1) that means anything (every baseline would
    be matched to never or always claiming), and a rate from few worlds moves the matched level by
    more than the differences the match is meant to show.
    """
    if worlds == 0:
        return "no neutral linear null runs: nothing to match"
    if claims in (0, worlds):
        return f"the agent's {claims} of {worlds} null runs cannot anchor a match (a rate of {claims / worlds:.0%})"
    if worlds < MIN_ANCHOR_WORLDS:
        return f"the agent's {worlds} null runs are fewer than the {MIN_ANCHOR_WORLDS} a match needs"
    return None


def same_world_decisions(runs: pd.DataFrame, baselines: pd.DataFrame) -> pd.DataFrame:
    """The baselines' decisions on the agent's own linear worlds, shaped like :func:`simulated_linear`
    (``procedure``, ``r2``, ``decision_p``, ``world``), for the figures when no simulation is given."""
    worlds = runs[runs["family"] == "linear"].drop_duplicates("world_id").set_index("world_id")["r2"]
    table = baselines[baselines["world_id"].isin(worlds.index) & baselines["decision_p"].notna()]
    return table.assign(r2=worlds.reindex(table["world_id"]).to_numpy(), world=table["world_id"].to_numpy(),
                        family="linear")


def agent_null_rate(runs: pd.DataFrame) -> tuple[int, int]:
    """(claims, worlds) of one model in its neutral linear null worlds (first replicate)."""
    null = linear_at(neutral_first(runs), [0.0])
    return int(claims_of(null["claim"]).sum()), len(null)


def matched_power(runs: pd.DataFrame, sim: pd.DataFrame, *, rng: np.random.Generator, n_boot: int = 2000,
                  procedures: Sequence[str] | None = None) -> Table:
    """Table D.2: power at the agent's false-positive rate, per model (one design).

    For each model: c = its claim rate in its neutral linear null worlds; each simulated procedure
    at alpha*(c): its claim rate at every simulated R2 level (Wilson interval over simulated
    worlds), the agent's claim rate at that level (Wilson interval over its worlds) and the
    difference agent minus baseline with a bootstrap interval (:func:`matched_difference`). The
    first row per model is the agent itself (alpha column empty).
    """
    procedures = list(procedures) if procedures is not None else simulated_procedures(sim)
    base = neutral_first(runs)
    rows = []
    for model in models_of(base):
        m = base[base["model"] == model]
        null = claims_of(linear_at(m, [0.0])["claim"])
        if not null.size:
            continue
        for r2 in _levels(sim):
            agent = claims_of(linear_at(m, [r2])["claim"])
            rows.append({"model": model, "procedure": "agent", "alpha": float("nan"), "target_rate": float(null.mean()),
                         "r2": r2, **rate_cells(agent, "rate"), "difference": float("nan"),
                         "difference_low": float("nan"), "difference_high": float("nan")})
        for p in procedures:
            null_p = _p_at(sim, p, 0.0)
            for r2 in _levels(sim):
                agent = claims_of(linear_at(m, [r2])["claim"])
                signal_p = _p_at(sim, p, r2)
                diff = matched_difference(null, agent, null_p, signal_p, rng=rng, n_boot=n_boot)
                alpha = matched_alpha(null_p, float(null.mean()))
                rows.append({"model": model, "procedure": p, "alpha": alpha, "target_rate": float(null.mean()),
                             "r2": r2, **rate_cells(signal_p <= alpha, "rate"), "difference": diff.difference,
                             "difference_low": diff.low, "difference_high": diff.high})
    data = pd.DataFrame(rows)
    return Table(
        key="table_D2_matched_power",
        title="Table D.2: claim rates (%) by true R2 of each baseline at the level alpha* at which it claims in the "
              "agent's share of simulated linear null worlds (Wilson 95% intervals over simulated worlds), the "
              "agent's own rates (neutral runs, first replicate), and agent minus matched baseline (percentage points, 95% bootstrap interval "
              "resampling the agent's null and signal worlds)",
        data=data, display=_d2_display(data) if not data.empty else None,
        formats=(("alpha", "num3"), ("target_rate", "pct0"), ("r2", "pct2"), ("rate", "pct0"), ("difference", "pp0")),
    )


def _cell(v: float, lo: float, hi: float) -> str:
    if not np.isfinite(v):
        return "–"
    return f"{100 * v:.0f} [{100 * lo:.0f}, {100 * hi:.0f}]"


def _d2_display(data: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (model, procedure), g in data.groupby(["model", "procedure"], sort=False):
        row = {"model": model, "procedure": "Agent" if procedure == "agent" else PROCEDURE_LABELS.get(procedure, procedure),
               "alpha*": "–" if procedure == "agent" else f"{g['alpha'].iloc[0]:.3g}",
               "c (%)": f"{100 * g['target_rate'].iloc[0]:.0f}"}
        for r in g.itertuples(index=False):
            row[f"R2={r2_label(r.r2)}%"] = _cell(r.rate, r.rate_low, r.rate_high)
        if procedure != "agent":
            at = g[np.isclose(g["r2"], SIGNAL_R2)]
            row["agent - matched at R2=1% (pp)"] = "–" if at.empty else _cell(
                at["difference"].iloc[0], at["difference_low"].iloc[0], at["difference_high"].iloc[0])
        out.append(row)
    return pd.DataFrame(out).fillna("–")


def matched_anchors(runs: pd.DataFrame, sim: pd.DataFrame, baselines: pd.DataFrame, *, rng: np.random.Generator,
                    n_boot: int = 2000, procedures: Sequence[str] | None = None, signal_r2: float = SIGNAL_R2) -> Table:
    """Appendix D.3: the matched comparison at R2 = ``signal_r2`` under three ways of setting alpha*.

    * ``linear null (simulated)``: the main definition (Table D.2).
    * ``no-signal worlds (simulated)``: c is the agent's rate in all its no-signal worlds (linear
      null and persistent null), alpha* still from simulated linear null worlds.
    * ``agent's own null worlds``: alpha* at which the procedure claims in share c of the agent's
      own neutral linear null worlds (their decision p-values in ``baselines``); no interval (with a
      few null claims per procedure this calibration is imprecise, paper D.3).
    """
    procedures = list(procedures) if procedures is not None else simulated_procedures(sim)
    base = neutral_first(runs)
    rows = []
    for model in models_of(base):
        m = base[base["model"] == model]
        null_linear = linear_at(m, [0.0])
        signal = claims_of(linear_at(m, [signal_r2])["claim"])
        if null_linear.empty or not signal.size:
            continue
        anchors = [("linear null (simulated)", claims_of(null_linear["claim"])),
                   ("no-signal worlds (simulated)", claims_of(no_signal_runs(m)["claim"]))]
        for p in procedures:
            null_p, signal_p = _p_at(sim, p, 0.0), _p_at(sim, p, signal_r2)
            if not signal_p.size:
                continue
            for anchor, claims in anchors:
                diff = matched_difference(claims, signal, null_p, signal_p, rng=rng, n_boot=n_boot)
                rows.append({"model": model, "procedure": p, "anchor": anchor, **rate_cells(claims, "target_rate"),
                             "alpha": diff.alpha, **rate_cells(signal_p <= diff.alpha, "matched"),
                             **rate_cells(signal, "agent"), "difference": diff.difference,
                             "difference_low": diff.low, "difference_high": diff.high})
            own = baselines[(baselines["procedure"] == p) & baselines["world_id"].isin(null_linear["world_id"])]
            if not own.empty:
                own_claims = claims_of(null_linear["claim"])
                c = float(own_claims.mean())
                alpha = matched_alpha(own["decision_p"].to_numpy(float), c)
                matched = signal_p <= alpha
                rows.append({"model": model, "procedure": p, "anchor": "agent's own null worlds",
                             **rate_cells(own_claims, "target_rate"),
                             "alpha": alpha, **rate_cells(matched, "matched"), **rate_cells(signal, "agent"),
                             "difference": float(signal.mean() - matched.mean()), "difference_low": float("nan"),
                             "difference_high": float("nan")})
    return Table(
        key="table_D3b_matched_anchors",
        title=f"Appendix D.3: the size-matched comparison at R2={r2_label(signal_r2)}% under three calibrations of the "
              "matched level: matched baseline's and agent's claim rates (%, Wilson 95% intervals; neutral runs, first replicate) and their "
              "difference (percentage points, 95% bootstrap interval)",
        data=pd.DataFrame(rows),
        formats=(("target_rate", "pct0"), ("alpha", "num3"), ("matched", "pct0"), ("agent", "pct0"), ("difference", "pp0")),
    )


def frontier_curves(sim: pd.DataFrame, *, signal_r2: float = SIGNAL_R2, procedures: Sequence[str] | None = None,
                    max_points: int = 400) -> pd.DataFrame:
    """Figure D.1 lines: each procedure's simulated claim rate at R2 = ``signal_r2`` against its rate in
    linear null worlds as alpha varies (:func:`planted.baselines.rates.frontier`).

    The frontier is evaluated at every distinct p-value and thinned to at most ``max_points``
    points (the largest-alpha point of each thinned step kept), plus the nominal 5% point flagged
    ``nominal``.
    """
    procedures = list(procedures) if procedures is not None else simulated_procedures(sim)
    frames = []
    for p in procedures:
        null_p, signal_p = _p_at(sim, p, 0.0), _p_at(sim, p, signal_r2)
        if not (null_p.size and signal_p.size):
            continue
        curve = frontier(null_p, signal_p)
        if len(curve) > max_points:
            curve = curve.iloc[np.unique(np.linspace(0, len(curve) - 1, max_points).round().astype(int))]
        nominal = frontier(null_p, signal_p, alphas=np.array([NOMINAL]))
        frames.append(pd.concat([curve.assign(nominal=False), nominal.assign(nominal=True)], ignore_index=True)
                      .assign(procedure=p, kind=KINDS.get(p, ""), n_null=null_p.size, n_signal=signal_p.size))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["alpha", "null_rate", "signal_rate", "nominal", "procedure", "kind", "n_null", "n_signal"])


def framing_points(runs: pd.DataFrame, *, signal_r2: float = SIGNAL_R2) -> pd.DataFrame:
    """Figure D.1 points: per model and framing, the false-claim rate in linear null worlds and the claim
    rate at R2 = ``signal_r2``, each with its Wilson interval.

    Uses the worlds run under a framing other than neutral (the framing worlds), with the neutral
    runs of the same worlds; a model without framing worlds at both levels gets its neutral point
    over all its neutral linear worlds (``sample`` says which).
    """
    rows = []
    runs = runs[runs["family"] == "linear"]
    for model in models_of(runs):
        m = runs[runs["model"] == model]
        m = m[m["status"] == "ok"] if "status" in m.columns else m
        framed = set(m.loc[m["framing"] != "neutral", "world_id"])
        sub = m[m["world_id"].isin(framed)]
        use_framed = not linear_at(sub, [0.0]).empty and not linear_at(sub, [signal_r2]).empty
        sample = "framing worlds" if use_framed else "all neutral worlds"
        source = sub if use_framed else m[m["framing"] == "neutral"]
        for framing in ("skeptical", "neutral", "optimistic"):
            g = source[source["framing"] == framing]
            g = g[g["replicate"] == g.groupby("world_id")["replicate"].transform("min")] if not g.empty else g
            null, signal = linear_at(g, [0.0]), linear_at(g, [signal_r2])
            if null.empty or signal.empty:
                continue
            rows.append({"model": model, "framing": framing, "sample": sample,
                         **rate_cells(claims_of(null["claim"]), "null_rate"),
                         **rate_cells(claims_of(signal["claim"]), "signal_rate")})
    return pd.DataFrame(rows)

