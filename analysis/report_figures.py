"""The report's figures: data from the pure analysis modules, drawn with :mod:`planted.analysis.figures`,
written through the report's :class:`~planted.analysis.report_output.ReportWriter`."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from planted.analysis import figures, matching, tables
from planted.analysis.tables import Table
from planted.analysis.report_output import ReportWriter, slug

FIGURE1_PROCEDURES = ("oracle", "combination", "combination_ct", "rf_ridge", "hac_holm", "ivx_holm")
"""The baselines Figure 1 draws (paper: pre-specified oracle, combinations, ridge; exploratory HAC and IVX)."""



def _stack(frames: Sequence[pd.DataFrame | None]) -> pd.DataFrame:
    """Concatenate the non-empty frames (pandas 2 warns about empty entries)."""
    kept = [f for f in frames if f is not None and not f.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


RF_RIDGE_NOTE = ("the random-features ridge claims in about 9-11% of worlds whatever the signal: it is the paper's "
                 "procedure (SPEC 3.2), reproduced as specified, not a defect of the simulation")


def figure1(w: ReportWriter, runs: pd.DataFrame, design: str, sim: pd.DataFrame, *, same_world: bool = False) -> None:
    """Figure 1 per model. ``same_world``: ``sim`` holds the baselines' decisions on the agent's own worlds
    (no simulation given), and the figure says so with the command that adds simulated lines."""
    present = matching.simulated_procedures(sim)
    nominal = matching.power_curves(sim, procedures=[p for p in present if p in FIGURE1_PROCEDURES] or present)
    points = tables.rates_by_r2(runs).data
    per_level = int(sim[sim["procedure"] == sim["procedure"].iloc[0]].groupby(pd.to_numeric(sim["r2"])).size().min())
    lines = "same-world" if same_world else "simulated"
    for model in tables.models_of(runs):
        p = points[(points["model"] == model) & (points["design"] == design)]
        if p.empty:
            continue
        k, n = matching.agent_null_rate(runs[runs["model"] == model])
        problem = matching.anchor_problem(k, n)
        matched = matching.power_curves(sim, matched_rates={model: k / n}, procedures=list(dict.fromkeys(nominal["procedure"]))) if n else None
        fig = figures.figure1_power(p, nominal, matched, model=model, target_rate=k / n if n else None,
                                    world_note=f" ({per_level} worlds per R2 level)", matched_note=problem, lines=lines)
        data = Table(key="", title="", data=_stack([nominal.assign(curve="nominal"),
                                                     None if matched is None else matched.assign(curve="matched"),
                                                     p.assign(curve="agent")]))
        source = (f"the baselines' decisions on the agent's own linear worlds ({per_level} per R2 level; add simulated "
                  f"lines with `planted mc --family linear --shocks {design} --out mc` and `planted report --mc mc`)"
                  if same_world else "simulated baselines")
        notes = [f"panel B greyed: {problem}"] if problem else []
        if "rf_ridge" in set(nominal["procedure"]):
            notes.append(RF_RIDGE_NOTE)
        w.figure(f"Figure 1{'' if design == 'bootstrap' else ' (Gaussian)'}: {model}",
                 f"figure1_power_{design}_{slug(model)}", fig,
                 f"Claim rate by true R2, {model}, neutral runs (first replicate) in linear worlds (points, Wilson 95%); "
                 f"{source} at 5% (A) and at the agent's linear-null claim rate (B; CT combination and RF ridge not "
                 "matched), with Wilson bands",
                 [tables.rates_by_r2, matching.power_curves, figures.figure1_power],
                 w.role("confirmatory; exploratory: HAC-Holm and IVX lines, panel B (size matching)", runs), data,
                 "; ".join(notes))


def figure2(w: ReportWriter, runs: pd.DataFrame, design: str) -> None:
    bins = tables.calibration_bins(runs)
    if bins.data.empty or bins.data["runs"].sum() == 0:
        w.skip(f"Figure 2 ({design})", "Calibration", "no runs with a stated probability and an economic label")
        return
    tag = "" if design == "bootstrap" else " (Gaussian)"
    fig = figures.figure2_calibration(bins.data)
    w.figure(f"Figure 2{tag}", f"figure2_calibration_{design}", fig,
             "Share of runs in which the oracle beats the benchmark (economic label) by bin of the stated probability, "
             "all runs of each model, Wilson 95% intervals; lower panels: runs per bin",
             [tables.calibration_bins, figures.figure2_calibration], w.role("confirmatory", runs), bins)


def figure3(w: ReportWriter, runs: pd.DataFrame, design: str, mc: pd.DataFrame) -> None:
    points = tables.rates_by_r2(runs).data
    framing = tables.framing_rates(runs).data
    sim = matching.simulated_linear(mc, design)
    oracle = None
    if not sim.empty and "oracle" in set(sim["procedure"]):
        oracle = matching.power_curves(sim, procedures=["oracle"])
    if points.empty:
        w.skip(f"Figure 3 ({design})", "Models compared", "no neutral runs in linear worlds")
        return
    tag = "" if design == "bootstrap" else " (Gaussian)"
    notes = []
    if framing.empty:
        notes.append("panel B omitted: no world was run under all three framings")
    if oracle is None:
        notes.append("no oracle line: no simulation of this design given")
    fig = figures.figure3_models(points, framing, oracle)
    data = Table(key="", title="", data=_stack([points.assign(panel="A"), framing.assign(panel="B")]))
    w.figure(f"Figure 3{tag}", f"figure3_models_{design}", fig,
             "A: claim rate by true R2, neutral runs in linear worlds, per model (Wilson 95%); dashed: oracle at 5% over "
             "simulated worlds. B: claim rate by framing in the worlds run under all three framings",
             [tables.rates_by_r2, tables.framing_rates, figures.figure3_models],
             w.role("confirmatory", runs) + ("" if len(tables.models_of(runs)) == 1 else "; the comparison across models exploratory"),
             data, "; ".join(notes))


def figure4(w: ReportWriter, runs: pd.DataFrame, gauss: pd.DataFrame) -> None:
    table = tables.gaussian_vs_bootstrap(runs)
    fig = figures.figure4_gaussian(table.data)
    w.figure("Figure 4", "figure4_gaussian", fig,
             "Claim rates in Gaussian-shock worlds (filled, Wilson 95%), bootstrap worlds of the same cells (open; "
             "unpaired) and HAC-Holm at 5% on the Gaussian worlds (dashed), by R2 and for the persistent null (PN)",
             [tables.gaussian_vs_bootstrap, figures.figure4_gaussian], w.role("confirmatory", gauss), table)


def figure_d1(w: ReportWriter, runs: pd.DataFrame, design: str, sim: pd.DataFrame, *, same_world: bool = False) -> None:
    """Figure D.1 (``same_world`` as for :func:`figure1`)."""
    curves = matching.frontier_curves(sim)
    if curves.empty:
        w.skip(f"Figure D.1 ({design})", "Frontiers", "no linear worlds with R2=1% among the baselines' decisions")
        return
    points = matching.framing_points(runs)
    tag = "" if design == "bootstrap" else " (Gaussian)"
    notes = [] if not points.empty else ["no agent points: no neutral linear runs at both R2=0 and R2=1%"]
    if same_world:
        notes.append(f"frontiers from the baselines' decisions on the agent's own worlds; add simulated frontiers with "
                     f"`planted mc --family linear --shocks {design} --out mc` and `planted report --mc mc`")
    fig = figures.figure_d1_frontiers(curves, points)
    data = Table(key="", title="", data=_stack([curves.assign(series="frontier"), points.assign(series="agent")]))
    source = "claim rate on the agent's own worlds" if same_world else "simulated claim rate"
    w.figure(f"Figure D.1{tag}", f"figure_D1_frontiers_{design}", fig,
             f"Size-power frontiers at R2=1%: {source} at R2=1% against claim rate in linear null worlds as "
             "alpha varies (squares: 5%); the agent under each framing with Wilson 95% intervals in both directions",
             [matching.frontier_curves, matching.framing_points, figures.figure_d1_frontiers], "exploratory", data,
             "; ".join(notes))


__all__ = ["FIGURE1_PROCEDURES", "figure1", "figure2", "figure3", "figure4", "figure_d1"]
