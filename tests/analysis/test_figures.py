"""Figures render without warnings and draw the expected series and points."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from planted.analysis import figures, matching, tables

from .study_files import mc_table


def _errorbars(ax) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def _labelled_lines(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


@pytest.fixture(scope="module")
def sim() -> pd.DataFrame:
    return matching.simulated_linear(mc_table("bootstrap", per_cell=40, procedures=("oracle", "combination", "hac_holm")),
                                     "bootstrap")


def _points(levels=(0.0, 0.0025, 0.005, 0.01, 0.02, 0.04)) -> pd.DataFrame:
    rows = []
    for i, r2 in enumerate(levels):
        rows.append({"r2": r2, **tables.rate_cells(np.arange(20) < 2 + 3 * i, "agent")})
    return pd.DataFrame(rows)


def test_figure1_has_one_line_per_procedure_and_the_agents_points(sim, tmp_path):
    nominal = matching.power_curves(sim)
    matched = matching.power_curves(sim, matched_rates={"m": 0.15})
    fig = figures.figure1_power(_points(), nominal, matched, model="m", target_rate=0.15)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert _labelled_lines(ax) == ["Oracle (pre-specified)", "Comb. (pre-specified)", "HAC-Holm (exploratory)"]
        (points,) = _errorbars(ax)
        assert len(points.lines[0].get_xdata()) == 6
        assert len(ax.collections) >= 3  # a Wilson band per procedure
    assert len(fig.legends) == 1
    fig.savefig(tmp_path / "f1.png")
    single = figures.figure1_power(_points(), nominal, None, model="m")
    assert len(single.axes) == 1


def test_figure2_has_two_panels_per_model():
    runs = pd.DataFrame({"model": np.repeat(["a", "b"], 50), "probability": np.tile(np.linspace(0.01, 0.99, 50), 2),
                         "economic": np.tile(np.arange(50) % 3 == 0, 2), "status": "ok"})
    bins = tables.calibration_bins(runs).data
    fig = figures.figure2_calibration(bins)
    assert len(fig.axes) == 4
    top = fig.axes[0]
    (points,) = _errorbars(top)
    assert len(points.lines[0].get_xdata()) == int((bins[bins["model"] == "a"]["runs"] > 0).sum()) == 10
    assert len(fig.axes[2].patches) == 10  # lower panel of model a: one bar per bin


def test_figure3_offsets_models_and_adds_the_framing_panel():
    r2 = pd.concat([_points().assign(model=m) for m in ("a", "b", "c")], ignore_index=True)
    framing = pd.DataFrame([{"model": m, "framing": f, "worlds": 40, **tables.rate_cells(np.arange(40) < k, "claim")}
                            for m in ("a", "b", "c") for k, f in ((5, "skeptical"), (10, "neutral"), (20, "optimistic"))])
    fig = figures.figure3_models(r2, framing)
    assert len(fig.axes) == 2
    a, b = fig.axes
    assert len(_errorbars(a)) == 3 and len(_errorbars(b)) == 3
    xs = [c.lines[0].get_xdata()[0] for c in _errorbars(a)]
    assert len(set(np.round(xs, 6))) == 3  # offset horizontally
    assert len(figures.figure3_models(r2, None).axes) == 1


def test_figure4_one_panel_per_model():
    rows = []
    for model in ("a", "b"):
        for world in ("Linear, R2=0%", "Linear, R2=0.25%", "Linear, R2=0.5%", "Linear, R2=1%", "Persistent null",
                      "No-signal worlds pooled"):
            row = {"model": model, "world": world}
            row |= tables.rate_cells(np.arange(20) < 5, "gauss")
            row |= tables.rate_cells(np.arange(10) < 2 if model == "a" else [], "boot")
            row |= tables.rate_cells(np.arange(20) < 3, "hac_holm")
            rows.append(row)
    fig = figures.figure4_gaussian(pd.DataFrame(rows))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 2
    # model a: Gaussian and bootstrap points plus the HAC-Holm PN marker; model b: no bootstrap runs
    assert len(_errorbars(visible[0])) == 3 and len(_errorbars(visible[1])) == 2
    assert len(_errorbars(visible[0])[-1].lines[0].get_xdata()) == 5  # pooled row not drawn


def test_figure_d1_frontiers_and_framing_points(sim):
    curves = matching.frontier_curves(sim)
    points = pd.DataFrame([{"model": "m", "framing": f, "sample": "framing worlds",
                            **tables.rate_cells(np.arange(40) < k, "null_rate"),
                            **tables.rate_cells(np.arange(40) < k + 15, "signal_rate")}
                           for k, f in ((2, "skeptical"), (6, "neutral"), (12, "optimistic"))])
    fig = figures.figure_d1_frontiers(curves, points)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert _labelled_lines(ax)[:3] == ["Oracle (pre-specified)", "Comb. (pre-specified)", "HAC-Holm (exploratory)"]
    assert len(_errorbars(ax)) == 3
    empty = figures.figure_d1_frontiers(curves, points.iloc[:0])
    assert len([a for a in empty.axes if a.get_visible()]) == 1
