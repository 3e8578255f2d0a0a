"""Batched simulation of every world family (SPEC 1.1-1.4), before anonymisation.

:func:`simulate_raw` turns a spec and a list of per-world seed sequences into raw (un-anonymised)
arrays for the whole batch. Each world draws from its own named sub-streams (see ``STREAMS``), so
a world is the same whether it is built alone or inside a batch of any size; the arithmetic runs
once for the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from planted.regression import newey_west_slope_t
from planted.seeding import describe, generator
from planted.worlds import spec as S
from planted.worlds.calibration import calibrate_regime, calibrate_reversal
from planted.worlds.data import FactorSeries
from planted.worlds.pool import ShockPool, own_lag_residuals, standardise
from planted.worlds.spec import WorldBuildError
from planted.worlds.processes import (
    garch11_returns,
    stationary_bootstrap_indices,
    stationary_unit_ar1,
    trailing_mean,
    two_state_markov,
)

STREAMS = {"return_shocks": 0, "planted": 1, "distractors": 2, "anonymise": 3, "regime": 4}
"""Sub-stream key of each source of randomness below a world's seed sequence.

Draw order within a stream: ``return_shocks`` gaussian: standard_normal(L); bootstrap:
integers(pool, L) then random(L) (momentum: key (0, attempt), i.i.d. integers(pool, L) or
standard_normal(L)); ``planted``: standard_normal() start, standard_normal(L) innovations;
``distractors``: choice(persistences, k, replace=False), standard_normal(k) starts,
standard_normal((k, L)); ``anonymise``: see :mod:`planted.worlds.anonymise`; ``regime``: random()
for the first state, random(L) for switches.
"""
MOMENTUM_ATTEMPTS_PER_ROUND = 16


@dataclass
class RawBatch:
    """Raw simulated arrays of a batch of worlds, on the kept window (training then test months).

    Attributes
    ----------
    returns : ndarray, shape (n, T)
        Decimal returns r[0..T-1].
    candidates : ndarray, shape (n, 8, T)
        Source order: the planted predictor first (when the family has one), then distractors.
    persistences : ndarray, shape (n, 8)
        AR(1) coefficient of each source column.
    has_planted : bool
        Whether source column 0 is a planted predictor.
    n_train : int
        Number of training months (the rest is the sealed test window).
    signal : ndarray or None, shape (n, T)
        The oracle regressor when it is not a candidate column or the return's own past
        (regime worlds: x[t] times the high-state indicator).
    regime : ndarray or None, shape (n, T)
        Regime state (1 = high volatility) in regime worlds.
    shock_ids : ndarray or None, shape (n, T)
        Pool index of each month's return shock in bootstrap worlds (for the artifact audit).
    params : dict
        Family constants (slopes, shock s.d.s, pool hashes, ...), JSON-ready.
    per_world : list of dict
        World-specific facts, e.g. the momentum selection's attempts and t-statistic.
    """

    returns: np.ndarray
    candidates: np.ndarray
    persistences: np.ndarray
    has_planted: bool
    n_train: int
    signal: np.ndarray | None = None
    regime: np.ndarray | None = None
    shock_ids: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    per_world: list = field(default_factory=list)


def _draw_shocks(
    seeds: Sequence[np.random.SeedSequence], length: int, shocks: str, pool: ShockPool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Standardised return shocks (n, length): stationary-bootstrap pool draws or N(0, 1)."""
    n = len(seeds)
    if shocks == "gaussian":
        out = np.empty((n, length))
        for i, seq in enumerate(seeds):
            out[i] = generator(seq, STREAMS["return_shocks"]).standard_normal(length)
        return out, None
    starts = np.empty((n, length), dtype=np.int64)
    uniforms = np.empty((n, length))
    for i, seq in enumerate(seeds):
        rng = generator(seq, STREAMS["return_shocks"])
        starts[i] = rng.integers(pool.size, size=length)
        uniforms[i] = rng.random(length)
    ids = stationary_bootstrap_indices(starts, uniforms, pool.size, S.MEAN_BLOCK_LENGTH)
    return pool.values[ids], ids


def _draw_planted(seeds: Sequence[np.random.SeedSequence], length: int) -> tuple[np.ndarray, np.ndarray]:
    """Stationary starts (n,) and innovation normals (n, length) of the planted predictor."""
    starts = np.empty(len(seeds))
    normals = np.empty((len(seeds), length))
    for i, seq in enumerate(seeds):
        rng = generator(seq, STREAMS["planted"])
        starts[i] = rng.standard_normal()
        rng.standard_normal(out=normals[i])
    return starts, normals


def _distractors(seeds: Sequence[np.random.SeedSequence], out: np.ndarray) -> np.ndarray:
    """Fill ``out`` (n, count, length) with unit-variance AR(1) distractors; return persistences (n, count)."""
    n, count, _ = out.shape
    phis = np.empty((n, count))
    starts = np.empty((n, count))
    for i, seq in enumerate(seeds):
        rng = generator(seq, STREAMS["distractors"])
        phis[i] = rng.choice(np.asarray(S.DISTRACTOR_PERSISTENCES), size=count, replace=False)
        starts[i] = rng.standard_normal(count)
        rng.standard_normal(out=out[i])
    paths = stationary_unit_ar1(starts, out, phis, overwrite=True)
    if paths is not out:  # a single persistence value: lfilter returned a new array
        out[...] = paths
    return phis


def planted_predictive(
    shocks: np.ndarray, x_start: np.ndarray, x_normals: np.ndarray, *, beta: float, phi: float,
    rho: float, mean: float, shock_sd: float
) -> tuple[np.ndarray, np.ndarray]:
    """The predictive system of SPEC 1.1 on standardised return shocks ``e``.

    r[t] = mean + beta x[t-1] + shock_sd e[t] (t >= 1; r[0] is NaN), x[0] = x_start,
    x[t] = phi x[t-1] + sqrt(1 - phi^2) (rho e[t] + sqrt(1 - rho^2) z[t]).

    Returns
    -------
    returns, x : ndarray, shape (n, L)
    """
    drive = x_normals * np.sqrt(1.0 - rho * rho)
    if rho != 0.0:
        drive += rho * shocks
    x = stationary_unit_ar1(x_start, drive, phi, overwrite=True)
    returns = np.full_like(shocks, np.nan)
    returns[:, 1:] = mean + beta * x[:, :-1] + shock_sd * shocks[:, 1:]
    return returns, x


def _candidates(seeds, planted: np.ndarray | None, planted_phi: float | None, length: int):
    """Stack the planted column (if any) before freshly simulated distractors: (n, 8, L) and (n, 8)."""
    n = len(seeds)
    candidates = np.empty((n, S.N_CANDIDATES, length))
    first = 0 if planted is None else 1
    phis = _distractors(seeds, candidates[:, first:, :])
    if planted is None:
        return candidates, phis
    candidates[:, 0, :] = planted
    return candidates, np.concatenate([np.full((n, 1), planted_phi), phis], axis=1)


def _assemble(seeds, returns, planted, planted_phi, keep, n_train, **extra) -> RawBatch:
    """Simulate the distractors, cut the kept window and put the planted column (if any) first."""
    candidates, persistences = _candidates(seeds, planted, planted_phi, returns.shape[1])
    cut = lambda a: None if a is None else a[..., keep]  # noqa: E731
    return RawBatch(
        returns=returns[:, keep],
        candidates=candidates[..., keep],
        persistences=persistences,
        has_planted=planted is not None,
        n_train=n_train,
        signal=cut(extra.pop("signal", None)),
        regime=cut(extra.pop("regime", None)),
        shock_ids=cut(extra.pop("shock_ids", None)),
        **extra,
    )


def _shock_kind(spec: S.WorldSpec) -> str:
    """The spec's shocks (``bootstrap`` or ``gaussian``); every simulated family has one (WorldSpec checks it)."""
    if spec.shocks is None:
        raise ValueError(f"{spec.family} worlds need shocks='bootstrap' or 'gaussian'")
    return spec.shocks


def _linear(spec: S.WorldSpec, seeds, pool: ShockPool, *, r2: float, phi: float, rho: float) -> RawBatch:
    length = S.BURN_IN + S.N_TRAIN + S.N_TEST
    shocks, ids = _draw_shocks(seeds, length, _shock_kind(spec), pool)
    x_start, x_normals = _draw_planted(seeds, length)
    beta = np.sqrt(r2) * S.SIGMA
    shock_sd = S.SIGMA * np.sqrt(1.0 - r2)
    returns, x = planted_predictive(
        shocks, x_start, x_normals, beta=beta, phi=phi, rho=rho, mean=S.MU, shock_sd=shock_sd
    )
    params = {"beta": beta, "shock_sd": shock_sd, "r2": r2, "phi": phi, "rho": rho}
    return _assemble(seeds, returns, x, phi, slice(S.BURN_IN, length), S.N_TRAIN,
                     shock_ids=ids, params=params)


def _momentum_null(spec: S.WorldSpec, seeds, pool: ShockPool) -> RawBatch:
    """GARCH(1,1) null worlds redrawn until trailing-12-month momentum looks significant (SPEC 1.3)."""
    rule = S.MOMENTUM_GARCH
    length = S.BURN_IN + S.N_TRAIN + S.N_TEST
    omega = S.SIGMA**2 * (1.0 - rule["arch"] - rule["garch"])
    n = len(seeds)
    returns = np.empty((n, length))
    ids = None if spec.shocks == "gaussian" else np.empty((n, length), dtype=np.int64)
    chosen: list[dict | None] = [None] * n
    pending = list(range(n))
    first_attempt = 0
    while pending:
        if first_attempt >= rule["max_tries"]:
            raise WorldBuildError(
                f"momentum_null: no draw met the selection rule (Newey-West t > {rule['threshold_t']}) "
                f"within {rule['max_tries']} tries for seeds {[describe(seeds[w]) for w in pending]}; "
                "this happens for about 1 seed in 1,000 (see docs/conventions.md): use another seed",
                failed=pending,
            )
        attempts = range(first_attempt, min(first_attempt + MOMENTUM_ATTEMPTS_PER_ROUND, int(rule["max_tries"])))
        draws = np.empty((len(pending), len(attempts), length))
        draw_ids = np.zeros(draws.shape, dtype=np.int64)  # pool indices (bootstrap shocks only)
        for p, world in enumerate(pending):
            for a, attempt in enumerate(attempts):
                rng = generator(seeds[world], STREAMS["return_shocks"], attempt)
                if ids is None:
                    draws[p, a] = rng.standard_normal(length)
                else:
                    draw_ids[p, a] = rng.integers(pool.size, size=length)
                    draws[p, a] = pool.values[draw_ids[p, a]]
        flat = S.MU + garch11_returns(draws.reshape(-1, length), omega, rule["arch"], rule["garch"])
        paths = flat.reshape(draws.shape)
        t_stats = momentum_t(paths[..., S.BURN_IN : S.BURN_IN + S.N_TRAIN], int(rule["hac_lags"]))
        still = []
        for p, world in enumerate(pending):
            hits = np.flatnonzero(t_stats[p] > rule["threshold_t"])
            if hits.size == 0:
                still.append(world)
                continue
            a = int(hits[0])
            returns[world] = paths[p, a]
            if ids is not None:
                ids[world] = draw_ids[p, a]
            chosen[world] = {"momentum_attempts": attempts[a] + 1, "momentum_nw_t": float(t_stats[p, a])}
        pending = still
        first_attempt = attempts[-1] + 1
    params = {"omega": omega, **{k: rule[k] for k in ("arch", "garch", "threshold_t", "hac_lags", "max_tries")}}
    return _assemble(seeds, returns, None, None, slice(S.BURN_IN, length), S.N_TRAIN,
                     shock_ids=ids, params=params, per_world=chosen)


def momentum_t(train_returns: np.ndarray, lags: int = 12) -> np.ndarray:
    """Newey-West t of the trailing 12-month mean m12[t] as a predictor of r[t+1], t = 12..T-2.

    The pairs (m12[t], r[t+1]) for t = 12, ..., T - 2 of the training window are those the
    exploratory in-sample tests use (SPEC 3.2), so "momentum-looking" means looking significant to
    the HAC test the baselines run.
    """
    m12 = trailing_mean(train_returns, 12)
    return newey_west_slope_t(train_returns[..., 13:], m12[..., 12:-1], lags)[1]


def _reversal(spec: S.WorldSpec, seeds, pool: ShockPool) -> RawBatch:
    from scipy.signal import lfilter

    length = S.BURN_IN + S.N_TRAIN + S.N_TEST
    cal = calibrate_reversal(S.REVERSAL_R2, S.SIGMA)
    shocks, ids = _draw_shocks(seeds, length, _shock_kind(spec), pool)
    ar = np.concatenate([[1.0], np.full(12, cal.b / 12.0)])
    returns = S.MU + lfilter([1.0], ar, cal.shock_sd * shocks, axis=-1)
    params = {"b": cal.b, "shock_sd": cal.shock_sd, "r2": S.REVERSAL_R2, "window": 12}
    return _assemble(seeds, returns, None, None, slice(S.BURN_IN, length), S.N_TRAIN,
                     shock_ids=ids, params=params)


def _regime(spec: S.WorldSpec, seeds, pool: ShockPool) -> RawBatch:
    length = S.BURN_IN + S.N_TRAIN + S.N_TEST
    cfg = S.REGIME
    cal = calibrate_regime(cfg["r2"], S.SIGMA, cfg["vol_ratio"])
    shocks, ids = _draw_shocks(seeds, length, _shock_kind(spec), pool)
    x_start, x_normals = _draw_planted(seeds, length)
    x = stationary_unit_ar1(x_start, x_normals, cfg["phi"], overwrite=True)
    first = np.empty(len(seeds))
    switch = np.empty((len(seeds), length))
    for i, seq in enumerate(seeds):
        rng = generator(seq, STREAMS["regime"])
        first[i] = rng.random()
        switch[i] = rng.random(length)
    state = two_state_markov(first, switch, cfg["stay"])
    signal = x * state
    shock_sd = np.where(state == 1, cal.high_sd, cal.low_sd)
    returns = np.full_like(shocks, np.nan)
    returns[:, 1:] = S.MU + cal.beta * signal[:, :-1] + shock_sd[:, 1:] * shocks[:, 1:]
    params = {"beta": cal.beta, "low_sd": cal.low_sd, "high_sd": cal.high_sd, **cfg}
    return _assemble(seeds, returns, x, cfg["phi"], slice(S.BURN_IN, length), S.N_TRAIN,
                     signal=signal, regime=state, shock_ids=ids, params=params)


def _injected(spec: S.WorldSpec, seeds, factor: FactorSeries) -> RawBatch:
    """Real factor residuals plus a planted predictor (SPEC 1.4).

    The factor is residualised on 12 own lags; its standardised residuals e are the return shocks,
    scaled so that Var(r) equals the factor's sample variance, and the mean is the factor's sample
    mean over the residual months. The series gets one leading month so that the first real
    month's return has a predictor value; that month is dropped.
    """
    resid = standardise(own_lag_residuals(factor.returns, 12))
    kept = factor.returns[12:]
    mean = float(np.mean(kept))
    sd = float(np.std(kept))
    n_months = resid.size
    n_test = min(S.N_TEST, n_months - S.N_TRAIN_INJECTED)
    if n_test <= 0:
        raise ValueError(f"{factor.name}: {n_months} residual months leave no test window after {S.N_TRAIN_INJECTED}")
    cfg = S.INJECTED_PREDICTOR
    length = n_months + 1
    shocks = np.broadcast_to(np.concatenate([[0.0], resid]), (len(seeds), length))
    x_start, x_normals = _draw_planted(seeds, length)
    if spec.r2 is None:
        raise ValueError("injected worlds need r2")
    r2 = float(spec.r2)
    beta = np.sqrt(r2) * sd
    shock_sd = sd * np.sqrt(1.0 - r2)
    returns, x = planted_predictive(
        shocks, x_start, x_normals, beta=beta, phi=cfg["phi"], rho=cfg["rho"], mean=mean, shock_sd=shock_sd
    )
    keep = slice(1, 1 + S.N_TRAIN_INJECTED + n_test)
    first_month = factor.months[12]
    params = {
        "beta": beta, "shock_sd": shock_sd, "r2": spec.r2, **cfg, "factor_mean": mean, "factor_sd": sd,
        "factor_source": factor.source, "factor_sha256": factor.sha256,
        "first_month": str(first_month), "n_test": n_test,
    }
    return _assemble(seeds, returns, x, cfg["phi"], keep, S.N_TRAIN_INJECTED, params=params)


def simulate_raw(
    spec: S.WorldSpec, seeds: Sequence[np.random.SeedSequence], *, pool: ShockPool, factor: FactorSeries | None = None
) -> RawBatch:
    """Simulate a batch of worlds of one spec, one seed sequence per world.

    Parameters
    ----------
    spec : WorldSpec
    seeds : sequence of numpy.random.SeedSequence
        One per world; world i depends on ``seeds[i]`` only.
    pool : ShockPool
        Pool for bootstrap shocks (and momentum-null i.i.d. pool draws).
    factor : FactorSeries, optional
        The real factor of an injected world.
    """
    family = spec.family
    if family == "linear":
        if spec.r2 is None or spec.phi is None or spec.rho is None:
            raise ValueError("linear worlds need r2, phi and rho")
        batch = _linear(spec, seeds, pool, r2=spec.r2, phi=spec.phi, rho=spec.rho)
    elif family == "persistent_null":
        batch = _linear(spec, seeds, pool, **S.PERSISTENT_NULL)
    elif family == "momentum_null":
        batch = _momentum_null(spec, seeds, pool)
    elif family == "reversal":
        batch = _reversal(spec, seeds, pool)
    elif family == "regime":
        batch = _regime(spec, seeds, pool)
    else:
        if factor is None:
            raise ValueError("injected worlds need the factor series")
        batch = _injected(spec, seeds, factor)
    if spec.shocks == "bootstrap":
        batch.params["pool_sha256"] = pool.sha256
        batch.params["pool_source"] = pool.source
        batch.params["pool_size"] = pool.size
    if not batch.per_world:
        batch.per_world = [{} for _ in seeds]
    return batch
