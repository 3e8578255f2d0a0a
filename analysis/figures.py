"""The paper's figures as pure functions from tidy data to a matplotlib :class:`~matplotlib.figure.Figure`.

Figure 1 (power curves, nominal and size-matched), Figure 2 (calibration), Figure 3 (the models
compared), Figure 4 (Gaussian against bootstrap worlds) and Figure D.1 (size-power frontiers). The
data come from :mod:`planted.analysis.tables` and :mod:`planted.analysis.matching`; every rate is
drawn with its Wilson 95% interval (error bars for the agents, shaded bands for simulated
baselines). The Agg backend is selected on import: figures are written to files, never shown.

Sizes are for print: 7 inches wide (a journal's full text width), 8-9 point text.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import functools  # noqa: E402
import textwrap  # noqa: E402
from typing import Any, Callable, Sequence, TypeVar  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.layout_engine import ConstrainedLayoutEngine  # noqa: E402
from matplotlib.ticker import MaxNLocator, PercentFormatter  # noqa: E402

from planted.analysis.tables import PROCEDURE_LABELS  # noqa: E402

WIDTH = 7.0
STYLE: dict[str, Any] = {
    "font.size": 8.5, "axes.titlesize": 9, "axes.labelsize": 8.5, "legend.fontsize": 7.5, "xtick.labelsize": 8,
    "ytick.labelsize": 8, "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100,
    "savefig.dpi": 200, "font.family": "DejaVu Sans",
}
PROCEDURE_STYLE: dict[str, dict[str, object]] = {
    "oracle": {"color": "black", "linestyle": "-"},
    "combination": {"color": "#1f77b4", "linestyle": "-"},
    "combination_ct": {"color": "#17becf", "linestyle": "-."},
    "holm_best": {"color": "#9467bd", "linestyle": "-"},
    "rf_ridge": {"color": "#bcbd22", "linestyle": "-."},
    "best9": {"color": "#7f7f7f", "linestyle": ":"},
    "hac_holm": {"color": "#d62728", "linestyle": "--"},
    "ivx_holm": {"color": "#ff7f0e", "linestyle": "--"},
    "lasso": {"color": "#8c564b", "linestyle": "--"},
}
MODEL_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
FRAMING_MARKERS = {"skeptical": "v", "neutral": "o", "optimistic": "^"}
NOMINAL = 0.05


F = TypeVar("F", bound=Callable[..., Figure])


def styled(func: F) -> F:
    """Run a figure function under the module's rc parameters (fonts and spines are read when artists are made)."""

    @functools.wraps(func)
    def wrapper(*args: object, **kwargs: object) -> Figure:
        with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout=ConstrainedLayoutEngine(wspace=0.06))


def _title(fig: Figure, text: str) -> None:
    """Figure caption line(s), wrapped to the figure's width (about 15 characters per inch at 9 points)."""
    width = int(fig.get_figwidth() * 15)
    fig.suptitle(textwrap.fill(text, width), x=0.01, ha="left", fontsize=9)


def _legend(fig: Figure, axes: Sequence[Axes] | np.ndarray, ncol: int = 3) -> None:
    """One legend below the panels, each label once (labels starting with an underscore left out)."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)
    if labels:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(ncol, len(labels)), frameon=False)


def _percent_axis(ax: Axes, axis: str = "y", top: float = 1.0) -> None:
    fmt = PercentFormatter(xmax=1.0, decimals=0)
    if axis == "y":
        ax.set_ylim(-0.02, top + 0.02)
        ax.yaxis.set_major_formatter(fmt)
    else:
        ax.set_xlim(-0.02, top + 0.02)
        ax.xaxis.set_major_formatter(fmt)


def _nominal_line(ax: Axes) -> None:
    ax.axhline(NOMINAL, color="0.35", linestyle=":", linewidth=0.9, label="_5%", zorder=0)


def _r2_positions(levels: Sequence[float]) -> dict[float, int]:
    return {float(v): i for i, v in enumerate(sorted(set(float(x) for x in levels)))}


def _r2_ticks(ax: Axes, positions: dict[float, int], extra: Sequence[str] = ()) -> None:
    labels = [f"{100 * v:g}" for v in positions] + list(extra)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)


def _errorbar(ax: Axes, x: np.ndarray, rate: pd.Series, low: pd.Series, high: pd.Series, **kwargs: object) -> None:
    y = rate.to_numpy(float)
    err = np.vstack([y - low.to_numpy(float), high.to_numpy(float) - y])
    options: dict[str, object] = {"capsize": 2.5, "linewidth": 0, "elinewidth": 1.0, "markersize": 5, "zorder": 3}
    ax.errorbar(x, y, yerr=err, **(options | kwargs))  # type: ignore[arg-type]


BAND_LABEL = "Shaded: Wilson 95% band of each baseline's rate"


def _band_key(ax: Axes) -> None:
    """A legend entry that says what the shaded bands are (an empty band carrying the label)."""
    ax.fill_between([], [], [], color="0.5", alpha=0.25, linewidth=0, label=BAND_LABEL)


def _curves(ax: Axes, curves: pd.DataFrame, positions: dict[float, int], *, grey: bool = False) -> None:
    """Each procedure's rate by R2 as a line with its Wilson band (``grey``: a match that cannot be trusted)."""
    for procedure, g in curves.groupby("procedure", sort=False):
        g = g.sort_values("r2")
        x = np.array([positions[float(v)] for v in g["r2"]])
        style = dict(PROCEDURE_STYLE.get(str(procedure), {"color": "0.5", "linestyle": "-"}))
        if grey:
            style["color"] = "0.75"
        kind = "exploratory" if g["kind"].iloc[0] == "exploratory" else "pre-specified"
        label = f"{PROCEDURE_LABELS.get(str(procedure), procedure)} ({kind})"
        ax.plot(x, g["rate"], linewidth=1.3, label="_" + label if grey else label, **style)  # type: ignore[arg-type]
        ax.fill_between(x, g["rate_low"], g["rate_high"], color=style["color"], alpha=0.12, linewidth=0)  # type: ignore[arg-type]
    if not curves.empty:
        _band_key(ax)


def _unreliable(ax: Axes, note: str) -> None:
    """Say on a panel why its content is not a result."""
    import textwrap

    ax.text(0.5, 0.5, textwrap.fill(note, 38), transform=ax.transAxes, ha="center", va="center", fontsize=8,
            color="0.2", bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.6"}, zorder=5)


@styled
def figure1_power(points: pd.DataFrame, nominal: pd.DataFrame, matched: pd.DataFrame | None = None, *,
                  model: str, target_rate: float | None = None, world_note: str = "",
                  matched_note: str | None = None, lines: str = "simulated") -> Figure:
    """Figure 1: claim rate by true population R2, one model, neutral framing, pooled over phi and rho.

    Parameters
    ----------
    points : DataFrame
        The agent's rates: ``r2``, ``agent``, ``agent_low``, ``agent_high`` (Wilson), ``agent_n``.
    nominal : DataFrame
        Simulated baseline curves at 5% (:func:`planted.analysis.matching.power_curves`).
    matched : DataFrame, optional
        Curves at each procedure's matched level; adds panel B.
    model : str
    target_rate : float, optional
        The agent's linear-null claim rate that panel B matches (for the panel title).
    world_note : str
        Appended to the caption line (e.g. the number of simulated worlds per level).
    matched_note : str, optional
        Why the match cannot be trusted (:func:`planted.analysis.matching.anchor_problem`): panel B
        is drawn greyed (or empty) with this note instead of as a result.
    lines : str
        What the baseline lines are (``simulated``, or ``same-world`` decisions on the agent's worlds).

    Returns
    -------
    Figure
        Panel A (and B): baselines as lines with Wilson bands (the legend says so), the agent as
        points with Wilson error bars, the nominal 5% as a dotted line.
    """
    panels = [("A. Nominal 5% level", nominal)]
    if (matched is not None and not matched.empty) or matched_note:
        title = "B. At the agent's false-positive rate"
        if target_rate is not None:
            title += f" ({100 * target_rate:.0f}%)"
        panels.append((title, matched if matched is not None else nominal.iloc[0:0]))
    fig = _figure(WIDTH, 3.6)
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    levels = list(points["r2"]) + [float(v) for _, c in panels for v in c["r2"]]
    positions = _r2_positions(levels)
    for index, (ax, (title, curves)) in enumerate(zip(axes, panels)):
        grey = index == 1 and matched_note is not None
        _curves(ax, curves, positions, grey=grey)
        if grey:
            _unreliable(ax, str(matched_note))
        x = np.array([positions[float(v)] for v in points["r2"]])
        _errorbar(ax, x, points["agent"], points["agent_low"], points["agent_high"], color="black", marker="o",
                  label=f"Agent: {model} (Wilson 95%)")
        _nominal_line(ax)
        _r2_ticks(ax, positions)
        _percent_axis(ax)
        ax.set_title(title, loc="left")
        ax.set_xlabel("True population R2 (%)")
    axes[0].set_ylabel("Claim rate (share of worlds)")
    _legend(fig, axes, ncol=3)
    _title(fig, f"Figure 1: claim rate by true R2, {model}, neutral runs in linear worlds; {lines} baselines{world_note}")
    return fig


@styled
def figure2_calibration(bins: pd.DataFrame, *, label: str = "economic") -> Figure:
    """Figure 2: calibration of the stated probabilities, one column per model.

    Parameters
    ----------
    bins : DataFrame
        :func:`planted.analysis.tables.calibration_bins` data: ``model``, ``bin_index``, ``runs``,
        ``mean_p``, ``outcome``, ``outcome_low``, ``outcome_high``.

    Returns
    -------
    Figure
        Upper panels: share of runs with the label by bin of the stated probability (points at the
        mean stated probability, Wilson 95% intervals) and the diagonal of perfect calibration;
        lower panels: runs per bin.
    """
    models = list(dict.fromkeys(bins["model"]))
    fig = _figure(max(4.0, min(WIDTH, 2.6 * len(models) + 0.6)), 4.6)
    axes = fig.subplots(2, len(models), squeeze=False, sharex=True, sharey="row", height_ratios=[3, 1.2])
    for j, model in enumerate(models):
        b = bins[(bins["model"] == model) & (bins["runs"] > 0)]
        top, bottom = axes[0, j], axes[1, j]
        top.plot([0, 1], [0, 1], color="0.35", linestyle=":", linewidth=0.9, label="Perfect calibration")
        _errorbar(top, b["mean_p"].to_numpy(float), b["outcome"], b["outcome_low"], b["outcome_high"],
                  color=MODEL_COLORS[j % len(MODEL_COLORS)], marker="o", label="Runs in bin (Wilson 95%)")
        _percent_axis(top)
        top.set_xlim(0, 1)
        top.set_title(str(model), loc="left")
        width = 1.0 / max(int(bins["bin_index"].max()) + 1, 1)
        bottom.bar(b["bin_index"].to_numpy(float) * width + width / 2, b["runs"], width=width * 0.9,
                   color=MODEL_COLORS[j % len(MODEL_COLORS)], alpha=0.6)
        bottom.set_xlim(0, 1)
        bottom.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
        bottom.set_xlabel("Stated probability")
        if j == 0:
            top.set_ylabel("Share in which the oracle\nbeats the benchmark" if label == "economic" else f"Share with {label} label")
            bottom.set_ylabel("Runs")
    _legend(fig, [axes[0, 0]], ncol=2)
    _title(fig, f"Figure 2: calibration of the stated probabilities against the {label} label, all runs "
                "(bins of width 0.1; lower panels: runs per bin)")
    return fig


def _offsets(n: int, spread: float = 0.22) -> np.ndarray:
    return np.zeros(1) if n == 1 else np.linspace(-spread, spread, n)


@styled
def figure3_models(r2_points: pd.DataFrame, framing: pd.DataFrame | None = None,
                   oracle: pd.DataFrame | None = None) -> Figure:
    """Figure 3: the models compared.

    Parameters
    ----------
    r2_points : DataFrame
        Per model and R2: ``model``, ``r2``, ``agent``, ``agent_low``, ``agent_high`` (neutral linear runs).
    framing : DataFrame, optional
        :func:`planted.analysis.tables.framing_rates` data (``model``, ``framing``, ``claim`` and its
        interval); adds panel B.
    oracle : DataFrame, optional
        The oracle's simulated curve at 5% (``r2``, ``rate``, ``rate_low``, ``rate_high``): dashed line.

    Returns
    -------
    Figure
        Panel A: claim rate by true R2 with Wilson 95% intervals, models offset horizontally;
        panel B: claim rate by framing in the worlds run under all three framings.
    """
    models = list(dict.fromkeys(r2_points["model"]))
    has_b = framing is not None and not framing.empty
    fig = _figure(WIDTH, 3.5)
    axes = fig.subplots(1, 2 if has_b else 1, squeeze=False, width_ratios=[1.6, 1] if has_b else None)[0]
    levels = list(r2_points["r2"]) + ([] if oracle is None else list(oracle["r2"]))
    positions = _r2_positions(levels)
    ax = axes[0]
    if oracle is not None and not oracle.empty:
        o = oracle.sort_values("r2")
        x = np.array([positions[float(v)] for v in o["r2"]])
        ax.plot(x, o["rate"], color="0.3", linestyle="--", linewidth=1.2, label="Oracle at 5% (simulated)")
        ax.fill_between(x, o["rate_low"], o["rate_high"], color="0.3", alpha=0.12, linewidth=0)
        _band_key(ax)
    for j, (model, dx) in enumerate(zip(models, _offsets(len(models)))):
        g = r2_points[r2_points["model"] == model].sort_values("r2")
        x = np.array([positions[float(v)] for v in g["r2"]]) + dx
        _errorbar(ax, x, g["agent"], g["agent_low"], g["agent_high"], color=MODEL_COLORS[j % len(MODEL_COLORS)],
                  marker="o", label=str(model))
    _nominal_line(ax)
    _r2_ticks(ax, positions)
    _percent_axis(ax)
    ax.set_xlabel("True population R2 (%)")
    ax.set_ylabel("Claim rate (share of worlds)")
    ax.set_title("A. Neutral runs in linear worlds", loc="left")
    if has_b:
        assert framing is not None
        bx = axes[1]
        order = ["skeptical", "neutral", "optimistic"]
        for j, (model, dx) in enumerate(zip(models, _offsets(len(models)))):
            g = framing[framing["model"] == model].set_index("framing").reindex(order).dropna(subset=["claim"])
            x = np.array([order.index(f) for f in g.index]) + dx
            _errorbar(bx, x, g["claim"], g["claim_low"], g["claim_high"], color=MODEL_COLORS[j % len(MODEL_COLORS)],
                      marker="o", label=str(model))
        bx.set_xticks(range(3), ["Skeptical", "Neutral", "Optimistic"])
        bx.set_xlim(-0.5, 2.5)
        _percent_axis(bx)
        worlds = int(framing["worlds"].max())
        _nominal_line(bx)
        bx.set_title(f"B. By framing (n={worlds} world{'s' if worlds != 1 else ''})", loc="left")
        bx.set_xlabel("Framing sentence")
    _legend(fig, axes, ncol=5)
    _title(fig, "Figure 3: the models compared (Wilson 95% intervals; dotted line: 5%)")
    return fig


@styled
def figure4_gaussian(data: pd.DataFrame) -> Figure:
    """Figure 4: claim rates in Gaussian-shock worlds, one panel per model.

    Parameters
    ----------
    data : DataFrame
        :func:`planted.analysis.tables.gaussian_vs_bootstrap` data: ``model``, ``world`` and the
        rates ``gauss``, ``boot``, ``hac_holm`` with their Wilson intervals (the pooled no-signal
        row is ignored).

    Returns
    -------
    Figure
        Filled markers: Gaussian worlds; open markers: bootstrap worlds of the same cells (other
        worlds, unpaired); dashed grey line with band: HAC-Holm at 5% on the Gaussian worlds;
        dotted: 5%. x: linear worlds by R2 and the persistent null (PN).
    """
    data = data[data["world"] != "No-signal worlds pooled"]
    models = list(dict.fromkeys(data["model"]))
    ncols = min(len(models), 4)
    nrows = int(np.ceil(len(models) / ncols))
    fig = _figure(WIDTH if ncols > 1 else 3.8, 2.9 * nrows + 0.6)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    for j, model in enumerate(models):
        ax = axes[j]
        g = data[data["model"] == model].reset_index(drop=True)
        x = np.arange(len(g), dtype=float)
        linear = g["world"].str.startswith("Linear").to_numpy()
        ax.plot(x[linear], g["hac_holm"][linear], color="0.45", linestyle="--", linewidth=1.2,
                label="HAC-Holm at 5%, Gaussian worlds")
        ax.fill_between(x[linear], g["hac_holm_low"][linear], g["hac_holm_high"][linear], color="0.45", alpha=0.15,
                        linewidth=0)
        _band_key(ax)
        if (~linear).any():
            _errorbar(ax, x[~linear], g["hac_holm"][~linear], g["hac_holm_low"][~linear], g["hac_holm_high"][~linear],
                      color="0.45", marker="_", markersize=12, label="_hac_pn")
        color = MODEL_COLORS[j % len(MODEL_COLORS)]
        if g["boot"].notna().any():
            _errorbar(ax, x + 0.15, g["boot"], g["boot_low"], g["boot_high"], color=color, marker="o",
                      markerfacecolor="white", label="Agent, bootstrap worlds (unpaired)")
        _errorbar(ax, x - (0.15 if g["boot"].notna().any() else 0.0), g["gauss"], g["gauss_low"], g["gauss_high"],
                  color=color, marker="o", label="Agent, Gaussian worlds")
        _nominal_line(ax)
        labels = [w.replace("Linear, R2=", "").replace("%", "").replace("Persistent null", "PN") for w in g["world"]]
        ax.set_xticks(x, labels)
        ax.set_xlim(-0.6, len(g) - 0.4)
        _percent_axis(ax)
        ax.set_title(str(model), loc="left")
        ax.set_xlabel("True R2 (%) / PN")
    for ax in axes[len(models):]:
        ax.set_visible(False)
    axes[0].set_ylabel("Claim rate (share of worlds)")
    _legend(fig, axes[: len(models)], ncol=3)
    _title(fig, "Figure 4: claim rates in Gaussian-shock worlds, neutral runs, first replicate (Wilson 95% intervals); "
                "x: linear worlds by true R2 and the persistent null (PN)")
    return fig


@styled
def figure_d1_frontiers(curves: pd.DataFrame, points: pd.DataFrame, *, signal_r2: float = 0.01) -> Figure:
    """Figure D.1: size-power frontiers at R2 = ``signal_r2``, one panel per model.

    Parameters
    ----------
    curves : DataFrame
        :func:`planted.analysis.matching.frontier_curves` (``procedure``, ``kind``, ``null_rate``,
        ``signal_rate``, ``nominal``).
    points : DataFrame
        :func:`planted.analysis.matching.framing_points` (one row per model and framing with the two
        rates and their Wilson intervals); may be empty (frontiers only).

    Returns
    -------
    Figure
        Lines: each procedure's claim rate in simulated signal worlds against its rate in simulated
        linear null worlds as alpha varies; squares: the nominal 5% level; points: the agent under
        each framing with Wilson 95% intervals in both directions.
    """
    models = list(dict.fromkeys(points["model"])) if not points.empty else [None]
    ncols = min(len(models), 3)
    nrows = int(np.ceil(len(models) / ncols))
    fig = _figure(WIDTH if ncols > 1 else 4.6, 3.4 * nrows + 0.9)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True, sharex=True).ravel()
    for j, model in enumerate(models):
        ax = axes[j]
        for procedure, g in curves.groupby("procedure", sort=False):
            style = PROCEDURE_STYLE.get(str(procedure), {"color": "0.5", "linestyle": "-"})
            line = g[~g["nominal"].astype(bool)].sort_values("alpha")
            kind = "exploratory" if g["kind"].iloc[0] == "exploratory" else "pre-specified"
            ax.plot(line["null_rate"], line["signal_rate"], linewidth=1.2, drawstyle="steps-post",
                    label=f"{PROCEDURE_LABELS.get(str(procedure), procedure)} ({kind})", **style)  # type: ignore[arg-type]
            nom = g[g["nominal"].astype(bool)]
            ax.plot(nom["null_rate"], nom["signal_rate"], marker="s", markersize=5, linestyle="none",
                    color=style["color"], label="_nominal")
        ax.plot([], [], marker="s", linestyle="none", color="0.3", label="Nominal 5% level")
        if model is not None:
            p = points[points["model"] == model]
            for framing, r in p.set_index("framing").iterrows():
                x, y = float(r["null_rate"]), float(r["signal_rate"])
                ax.errorbar([x], [y], xerr=[[x - r["null_rate_low"]], [r["null_rate_high"] - x]],
                            yerr=[[y - r["signal_rate_low"]], [r["signal_rate_high"] - y]],
                            marker=FRAMING_MARKERS.get(str(framing), "o"), color="black", markersize=6, capsize=2,
                            elinewidth=0.9, linewidth=0, zorder=4, label=f"Agent, {framing}")
            sample = p["sample"].iloc[0] if len(p) else ""
            ax.set_title(f"{model}" + (f" ({sample})" if sample else ""), loc="left")
        _percent_axis(ax, "x")
        _percent_axis(ax, "y")
        ax.set_xlabel("Claim rate in linear null worlds")
        if j % ncols == 0:
            ax.set_ylabel(f"Claim rate at R2={100 * signal_r2:g}%")
    for ax in axes[len(models):]:
        ax.set_visible(False)
    _legend(fig, axes[: len(models)], ncol=3 if fig.get_figwidth() >= 6 else 2)
    _title(fig, f"Figure D.1: size-power frontiers at R2={100 * signal_r2:g}% over simulated worlds; agent points "
                "with Wilson 95% intervals in both directions")
    return fig


@styled
def audit_figure(table: pd.DataFrame) -> Figure:
    """One panel per family: detectors on the x axis, pseudo-OOS and test-window claim rates as points
    with Wilson 95% intervals; flagged (detector, window) pairs filled red; the nominal 5% dotted.

    Parameters
    ----------
    table : DataFrame
        :func:`planted.baselines.audit.summarise` output.
    """
    families = list(dict.fromkeys(table["family"]))
    fig = _figure(WIDTH, 2.6 * len(families) + 0.8)
    axes = fig.subplots(len(families), 1, squeeze=False)[:, 0]
    for ax, family in zip(axes, families):
        g = table[table["family"] == family]
        detectors = list(dict.fromkeys(g["detector"]))
        x = {d: i for i, d in enumerate(detectors)}
        for offset, window, marker in ((-0.15, "pseudo", "o"), (0.15, "test", "s")):
            w = g[g["window"] == window]
            xs = np.array([x[d] for d in w["detector"]]) + offset
            y = w["rate"].to_numpy(float)
            err = np.clip(np.vstack([y - w["rate_low"].to_numpy(float), w["rate_high"].to_numpy(float) - y]), 0, None)
            ax.errorbar(xs, y, yerr=err, fmt=marker, color="0.2", markersize=4, capsize=2, linewidth=0, elinewidth=0.9,
                        label=f"{'pseudo-OOS' if window == 'pseudo' else 'test'} window (Wilson 95%)")
            flagged = w["flagged"].to_numpy(bool)
            ax.plot(xs[flagged], y[flagged], marker, color="tab:red", markersize=6, label="flagged (Holm, binomial vs 5%)")
        _nominal_line(ax)
        _percent_axis(ax)
        ax.set_xticks(range(len(detectors)), [d.replace("_", " ") for d in detectors], rotation=30, ha="right",
                      fontsize=7)
        ax.set_title(family, loc="left", fontsize=9)
        ax.set_ylabel("Claim rate")
    _legend(fig, axes, ncol=3)
    _title(fig, "World audit: detectors' claim rates at 5% in null worlds")
    return fig
