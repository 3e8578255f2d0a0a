"""Agreement of verdicts: between models on the same worlds (Cohen's kappa) and between replicate
runs of the same world (Fleiss' kappa, all-same share, run-to-run variance share, probability
that two runs disagree), with bootstrap intervals over worlds (SPEC 6; paper 4.2, 5.3, F.1, F.2).
"""

from __future__ import annotations

from itertools import combinations
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from planted.analysis.samples import claims_of, first_replicate, usable
from planted.analysis.results import Estimate
from planted.analysis.summary_records import Agreement, ReplicateAgreement

ShareMethod = Literal["paper", "anova"]


def cohen_kappa(first: np.ndarray, second: np.ndarray, *, first_name: str = "first",
                second_name: str = "second") -> Agreement:
    """Cohen's kappa of two binary raters on the same units.

    Returns
    -------
    Agreement
        ``kappa = (p_o - p_e) / (1 - p_e)`` with observed agreement ``p_o`` and chance agreement
        ``p_e = p_1 p_2 + (1 - p_1)(1 - p_2)`` from each rater's claim rate (sklearn
        ``cohen_kappa_score``); NaN when ``p_e = 1`` (both raters constant and equal).

    References
    ----------
    Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and Psychological
    Measurement 20(1), 37-46. doi:10.1177/001316446002000104
    """
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired verdicts must be 1-d of equal length, got {a.shape} and {b.shape}")
    n = a.size
    if n == 0:
        return Agreement(first_name, second_name, 0, float("nan"), float("nan"), float("nan"))
    po = float(np.mean(a == b))
    pa, pb = float(a.mean()), float(b.mean())
    pe = pa * pb + (1.0 - pa) * (1.0 - pb)
    kappa = (po - pe) / (1.0 - pe) if pe < 1.0 else float("nan")
    return Agreement(
        first=first_name, second=second_name, n=int(n), observed=po, expected=pe, kappa=kappa,
        both=int(np.sum(a & b)), first_only=int(np.sum(a & ~b)), second_only=int(np.sum(~a & b)),
        neither=int(np.sum(~a & ~b)),
    )


def model_agreement(runs: pd.DataFrame, models: Sequence[str] | None = None) -> tuple[Agreement, ...]:
    """Cohen's kappa for every pair of models on the worlds both ran (neutral, first replicate).

    Parameters
    ----------
    runs : DataFrame
        Run table of several models (``model``, ``world_id``, ``framing``, ``replicate``, ``claim``).
    models : sequence of str, optional
        Models and their pair order (default: sorted models of the table).
    """
    runs = usable(runs)
    runs = first_replicate(runs[runs["framing"] == "neutral"])
    if models is None:
        models = sorted(str(m) for m in pd.unique(runs["model"]))
    wide = runs.assign(c=claims_of(runs["claim"])).pivot(index="world_id", columns="model", values="c")
    out = []
    for m1, m2 in combinations(models, 2):
        pair = wide[[m1, m2]].dropna().astype(bool)
        out.append(cohen_kappa(pair[m1].to_numpy(), pair[m2].to_numpy(), first_name=m1, second_name=m2))
    return tuple(out)


def fleiss_kappa(ratings: np.ndarray) -> float:
    """Fleiss' kappa of binary ratings with the same number of raters per subject.

    Parameters
    ----------
    ratings : ndarray of bool, shape (n_subjects, n_raters)
        E.g. worlds x replicate runs.

    Returns
    -------
    float
        ``(Pbar - P_e) / (1 - P_e)`` with ``P_i = (sum_j n_ij^2 - m) / (m (m - 1))``, ``Pbar`` their
        mean and ``P_e = sum_j p_j^2`` over the two categories (statsmodels
        ``fleiss_kappa(method="fleiss")``); NaN when ``P_e = 1``.

    References
    ----------
    Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. Psychological
    Bulletin 76(5), 378-382. doi:10.1037/h0031619
    """
    x = np.asarray(ratings, dtype=bool)
    n, m = x.shape
    if m < 2 or n == 0:
        return float("nan")
    yes = x.sum(axis=1).astype(float)
    counts = np.column_stack([yes, m - yes])
    p_i = (np.sum(counts**2, axis=1) - m) / (m * (m - 1.0))
    p_j = counts.sum(axis=0) / (n * m)
    p_e = float(np.sum(p_j**2))
    return (float(p_i.mean()) - p_e) / (1.0 - p_e) if p_e < 1.0 else float("nan")


def _level_of(runs: pd.DataFrame) -> pd.Series:
    r2 = pd.to_numeric(runs["r2"], errors="coerce")
    linear = runs["family"] == "linear"
    return pd.Series(
        np.where(linear, "linear R2=" + r2.map(lambda v: f"{v:g}"), runs["family"].astype(str)), index=runs.index
    )


def _world_stats(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Per world: m, k, k^2/m, unbiased within variance s^2, P(two runs disagree), all-same."""
    s2 = k * (m - k) / (m * (m - 1.0))
    return np.column_stack([m, k, k**2 / m, s2, 2.0 * s2, ((k == 0) | (k == m)).astype(float)])


def _level_measures(totals: np.ndarray, n_worlds: np.ndarray) -> dict[str, np.ndarray]:
    """Measures from per-level weighted sums ``totals[..., level, stat]`` and world counts."""
    m, k, k2m, s2, dis, same = (totals[..., j] for j in range(6))
    c = k / m
    return {"m": m, "k": k, "c": c, "k2m": k2m, "s2": s2, "dis": dis, "same": same, "a": n_worlds}


def _share(parts: dict[str, np.ndarray], method: ShareMethod) -> np.ndarray:
    """Within-world share pooled over the level axis (the last axis)."""
    c, m, a = parts["c"], parts["m"], parts["a"]
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "paper":
            return parts["s2"].sum(axis=-1) / (a * c * (1.0 - c)).sum(axis=-1)
        ssw = (parts["k"] - parts["k2m"]).sum(axis=-1)
        ssb = (parts["k2m"] - parts["k"] ** 2 / m).sum(axis=-1)
        a_tot, n_tot = a.sum(axis=-1), m.sum(axis=-1)
        msw = ssw / (n_tot - a_tot)
        msb = ssb / (a_tot - a.shape[-1])
        n0 = (n_tot - (parts["sum_m2"] / m).sum(axis=-1)) / (a_tot - a.shape[-1])
        var_b = (msb - msw) / n0
        return msw / (msw + var_b)


def replicate_agreement(
    runs: pd.DataFrame,
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    level: float = 0.95,
    method: ShareMethod = "paper",
    framing: str = "neutral",
) -> tuple[ReplicateAgreement, ...]:
    """Run-to-run agreement of one model's verdicts on the worlds it ran more than once.

    Parameters
    ----------
    runs : DataFrame
        One model's run table; worlds with at least two runs under ``framing`` enter.
    rng : numpy.random.Generator
    n_boot : int
        Bootstrap draws; worlds are resampled with replacement *within each R2 level* (the level
        composition of the pooled estimate is fixed by design).
    level : float
        Interval level (percentile intervals over the defined draws).
    method : {"paper", "anova"}
        Estimator of the within-world (run-to-run) share of the variance of a single verdict.
    framing : str

    Returns
    -------
    tuple of ReplicateAgreement
        One per level (linear worlds by R2, other families by name), then "pooled".

    Notes
    -----
    For world i with m_i runs and k_i claims, ``s_i^2 = k_i (m_i - k_i) / (m_i (m_i - 1))`` is the
    unbiased within-world variance of the verdict, and ``2 s_i^2`` is the share of its run pairs
    that disagree. Per level with claim rate ``cbar = sum k / sum m``:

    * all-same share: share of worlds with ``k_i = 0`` or ``k_i = m_i``;
    * Fleiss' kappa over the level's worlds when they all have the same number of runs (NaN
      otherwise); the "pooled" kappa ignores the level (between-level differences count as
      agreement), so read the per-level values;
    * P(two runs disagree): mean of ``2 s_i^2``;
    * "paper" share (paper F.2): ``mean s_i^2 / (cbar (1 - cbar))`` — within-world variance over
      the total variance of a single verdict at that level; pooled over levels as
      ``sum_i s_i^2 / sum_levels a_l cbar_l (1 - cbar_l)`` (a_l worlds in level l), i.e. the
      world-weighted ratio. Not truncated: it can exceed 1 in small samples, as the paper notes.
    * "anova" share: one-way random-effects ANOVA estimator, ``MSW / (MSW + s_b^2)`` with
      ``s_b^2 = (MSB - MSW) / n0`` and ``n0 = (N - sum m_i^2 / N) / (a - 1)`` (Searle, Casella and
      McCulloch 1992, ch. 3); pooled with level fixed effects (between-world sums of squares
      around each level's mean, ``a - L`` degrees of freedom). One minus the intraclass correlation
      ICC(1); also untruncated.

    References
    ----------
    Searle, S. R., Casella, G. and McCulloch, C. E. (1992). Variance Components. Wiley.
    doi:10.1002/9780470316856
    Menkveld, A. J. et al. (2024). Nonstandard errors. Journal of Finance 79(3), 2339-2390.
    doi:10.1111/jofi.13337
    """
    models = pd.unique(runs["model"]) if "model" in runs.columns else []
    if len(models) > 1:
        raise ValueError(f"the run table holds several models {list(models)}; pass one model's runs")
    runs = usable(runs)
    runs = runs[runs["framing"] == framing].assign(c=lambda d: claims_of(d["claim"]), level=lambda d: _level_of(d))
    per_world = runs.groupby("world_id").agg(level=("level", "first"), m=("c", "size"), k=("c", "sum"))
    per_world = per_world[per_world["m"] >= 2]
    levels = sorted(pd.unique(per_world["level"]))
    if not levels:
        return ()
    groups = [per_world[per_world["level"] == lv] for lv in levels]
    stats_by_level = [_world_stats(g["k"].to_numpy(float), g["m"].to_numpy(float)) for g in groups]
    n_worlds = np.array([len(g) for g in groups], dtype=float)
    point = np.stack([s.sum(axis=0) for s in stats_by_level])  # (L, 6)
    sum_m2_point = np.array([float(np.sum(g["m"].to_numpy(float) ** 2)) for g in groups])
    draws = np.empty((n_boot, len(levels), 6))
    sum_m2_draws = np.empty((n_boot, len(levels)))
    for j, (s, g) in enumerate(zip(stats_by_level, groups)):
        w = rng.multinomial(len(g), np.full(len(g), 1.0 / len(g)), size=n_boot).astype(float)
        draws[:, j, :] = w @ s
        sum_m2_draws[:, j] = w @ (g["m"].to_numpy(float) ** 2)

    def measures(totals: np.ndarray, sum_m2: np.ndarray, sel: slice | list[int]) -> dict[str, np.ndarray]:
        parts = _level_measures(totals[..., sel, :], n_worlds[sel])
        parts["sum_m2"] = sum_m2[..., sel]
        a_tot = n_worlds[sel].sum()
        return {
            "all_same": parts["same"].sum(axis=-1) / a_tot,
            "disagree": parts["dis"].sum(axis=-1) / a_tot,
            "share": _share(parts, method),
            "claim_rate": parts["k"].sum(axis=-1) / parts["m"].sum(axis=-1),
        }

    tail = (1.0 - level) / 2.0

    def estimate(name: str, value: np.ndarray, boot: np.ndarray, n: int, worlds: int, what: str) -> Estimate:
        ok = boot[np.isfinite(boot)]
        low, high = (np.quantile(ok, [tail, 1.0 - tail]) if ok.size else (np.nan, np.nan))
        return Estimate(name=name, value=float(value), low=float(low), high=float(high), level=level, n=n,
                        n_clusters=worlds, n_boot=n_boot, method=what)

    results = []
    selections: list[tuple[str, list[int]]] = [(lv, [j]) for j, lv in enumerate(levels)]
    if len(levels) > 1:
        selections.append(("pooled", list(range(len(levels)))))
    for name, sel in selections:
        pt = measures(point, sum_m2_point, sel)
        bt = measures(draws, sum_m2_draws, sel)
        worlds = int(n_worlds[sel].sum())
        n_runs = int(point[sel, 0].sum())
        sub = per_world[per_world["level"].isin([levels[j] for j in sel])]
        ratings = None
        if sub["m"].nunique() == 1:
            ids = sub.index
            wide = runs[runs["world_id"].isin(ids)].groupby("world_id")["c"].apply(list)
            ratings = np.array(wide.tolist(), dtype=bool)
        boot_what = "percentile bootstrap over worlds within levels"
        results.append(
            ReplicateAgreement(
                level=name, n_worlds=worlds, n_runs=n_runs, claim_rate=float(pt["claim_rate"]),
                all_same=estimate("all same", pt["all_same"], bt["all_same"], n_runs, worlds, boot_what),
                fleiss=fleiss_kappa(ratings) if ratings is not None else float("nan"),
                within_share=estimate(f"within-world share ({method})", pt["share"], bt["share"], n_runs, worlds,
                                      boot_what),
                disagree=estimate("P(two runs disagree)", pt["disagree"], bt["disagree"], n_runs, worlds, boot_what),
            )
        )
    return tuple(results)
