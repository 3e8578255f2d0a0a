"""Lasso forecasts with a time-series cross-validated penalty (SPEC 3.2 ``lasso``), vectorised.

The reference is scikit-learn's ``LassoCV(cv=TimeSeriesSplit(5), alphas=30)`` on predictors
standardised with ``StandardScaler`` over the estimation sample, refit every 12 months. Fitting it
per world is far too slow for the Monte Carlo engine (48 refits x 5 folds x 30 penalties a world),
so this module rebuilds the same estimator from sufficient statistics: every estimation sample,
fold and validation block is a range of months, so its cross-products come from cumulative sums,
and all lasso problems of a batch of worlds are solved together by :func:`lasso_gram`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planted._typing import BoolArray, Float64Array, Int64Array
from planted.baselines import _lasso_kernels  # type: ignore[attr-defined]  # compiled, no stub

__all__ = ["LassoFits", "lasso_alpha_grid", "lasso_fits", "lasso_forecasts", "lasso_gram"]

_WORLD_CHUNK = 64
_KKT_SLACK = 1e-10
_MAX_ROUNDS = 1000


@dataclass(frozen=True)
class LassoFits:
    """Cross-validated lasso fits of a batch of worlds at a list of refit months.

    Attributes
    ----------
    refit_months : ndarray of int, shape (R,)
        Month t of each refit: the estimation sample is the pairs (x[s], r[s + 1]) with s + 1 <= t.
    n_obs : ndarray of int, shape (n, R)
        Estimation sample size (pairs without NaN).
    ok : ndarray of bool, shape (n, R)
        Whether a fit was made (at least ``n_folds + 1`` pairs).
    alphas : ndarray, shape (n, R, n_alphas)
        Penalty grid, decreasing (scikit-learn's convention, see :func:`lasso_alpha_grid`).
    cv_mse : ndarray, shape (n, R, n_alphas)
        Validation MSE averaged over the folds.
    alpha : ndarray, shape (n, R)
        Chosen penalty: the first grid point with the smallest ``cv_mse``.
    coef : ndarray, shape (n, R, K)
        Coefficients on the standardised predictors, refit on the whole estimation sample.
    intercept : ndarray, shape (n, R)
    mean, scale : ndarray, shape (n, R, K)
        Standardisation of the predictors (estimation-sample mean and s.d., divisor n).
    """

    refit_months: Int64Array
    n_obs: Int64Array
    ok: BoolArray
    alphas: Float64Array
    cv_mse: Float64Array
    alpha: Float64Array
    coef: Float64Array
    intercept: Float64Array
    mean: Float64Array
    scale: Float64Array

    def predict(self, x: Float64Array) -> Float64Array:
        """Forecasts ``intercept + ((x - mean) / scale) @ coef`` for x of shape (n, R, K)."""
        return self.intercept + np.einsum("nrk,nrk->nr", (x - self.mean) / self.scale, self.coef)


def lasso_alpha_grid(alpha_max: Float64Array, n_alphas: int = 30, eps: float = 1e-3) -> Float64Array:
    """scikit-learn's automatic lasso penalty grid, vectorised.

    Parameters
    ----------
    alpha_max : ndarray, shape (...)
        ``max_j |X_j' (y - ybar)| / n`` with X the (standardised, centred) predictors: the smallest
        penalty at which all coefficients are zero.
    n_alphas : int, default 30
    eps : float, default 1e-3
        Ratio of the smallest to the largest penalty.

    Returns
    -------
    ndarray, shape (..., n_alphas)
        ``numpy.geomspace(alpha_max, eps * alpha_max, n_alphas)`` (decreasing); where ``alpha_max``
        is below ``numpy.finfo(float).resolution`` (1e-15) every grid point is that resolution.

    Notes
    -----
    Exactly ``sklearn.linear_model._coordinate_descent._alpha_grid`` (scikit-learn 1.9, l1_ratio =
    1, no sample weights), which ``LassoCV`` evaluates once on the full data passed to ``fit``
    (here: the standardised estimation sample), not per fold.
    """
    alpha_max = np.asarray(alpha_max, dtype=float)
    resolution = np.finfo(np.float64).resolution
    safe = np.where(alpha_max > resolution, alpha_max, 1.0)
    grid = np.moveaxis(np.geomspace(safe, safe * eps, num=n_alphas), 0, -1)
    return np.where((alpha_max > resolution)[..., None], grid, resolution)


def lasso_gram(
    gram: Float64Array, xy: Float64Array, penalty: Float64Array, start: Float64Array | None = None
) -> Float64Array:
    """Exact solutions of a batch of lasso problems given in covariance (Gram) form.

    Minimises ``0.5 w' G w - c' w + penalty * ||w||_1`` for each problem; with ``G = X'X`` and
    ``c = X'y`` of centred data this is scikit-learn's ``Lasso`` objective ``||y - Xw||^2 / (2n) +
    alpha ||w||_1`` times n, i.e. ``penalty = n * alpha``.

    Parameters
    ----------
    gram : ndarray, shape (B, K, K)
        Positive semi-definite matrices G.
    xy : ndarray, shape (B, K)
        Vectors c.
    penalty : ndarray, shape (B,)
        Positive penalties.
    start : ndarray, shape (B, K), optional
        Warm start (e.g. the solution at the previous, larger penalty); zeros by default.

    Returns
    -------
    ndarray, shape (B, K)

    Notes
    -----
    Rounds of cyclic coordinate-descent sweeps (the covariance updates of Friedman, Hastie and
    Tibshirani 2010, as in scikit-learn's Gram path; 2 sweeps in the first round, one more each
    round up to 20), each followed by a polish: with the active set A and signs s read off the
    iterate, solve ``G_AA w_A = c_A - penalty s_A`` exactly (Gaussian elimination with partial
    pivoting) and accept the result if it satisfies the Karush-Kuhn-Tucker conditions
    (``sign(w_A) = s_A`` and ``|c_j - G_j w| <= penalty (1 + 1e-10)`` off A). An accepted solution
    is the lasso optimum up to rounding (duality gap below 1e-12 ||y||^2 in the tests;
    scikit-learn stops at ``gap <= tol ||y||^2``, default tol 1e-4). Problems are solved
    independently, one after another, in compiled code (``lasso_kernels.c``: fixed summation order,
    no fused multiply-adds), so a problem's answer depends neither on the others in the batch nor
    on the machine. A column with ``G_jj = 0`` gets coefficient 0. Raises ``RuntimeError`` if a
    problem is not solved within 1,000 rounds (a NaN in its input, for instance, never satisfies the
    conditions).

    References
    ----------
    Friedman, J., Hastie, T. and Tibshirani, R. (2010). Regularization paths for generalized linear
    models via coordinate descent. Journal of Statistical Software 33(1). doi:10.18637/jss.v033.i01
    """
    gram = np.ascontiguousarray(gram, dtype=float)
    xy = np.ascontiguousarray(xy, dtype=float)
    penalty = np.ascontiguousarray(penalty, dtype=float)
    if gram.ndim != 3 or xy.ndim != 2 or penalty.ndim != 1:
        raise ValueError("gram must be (B, K, K), xy (B, K) and penalty (B,)")
    coef = np.zeros(xy.shape) if start is None else np.array(start, dtype=float, order="C")
    unsolved = _lasso_kernels.gram_solve(gram, xy, penalty, coef, _MAX_ROUNDS, _KKT_SLACK)
    if unsolved:
        raise RuntimeError(f"lasso_gram: {unsolved} problems not solved after {_MAX_ROUNDS} rounds")
    return coef


def lasso_fits(
    returns: Float64Array,
    predictors: Float64Array,
    refit_months: Int64Array,
    *,
    n_alphas: int = 30,
    n_folds: int = 5,
) -> LassoFits:
    """Lasso on all K predictors with its penalty chosen by time-series cross-validation.

    Parameters
    ----------
    returns : ndarray, shape (n, T)
    predictors : ndarray, shape (n, K, T)
        x[s] observed at the end of month s; NaN where unavailable.
    refit_months : sequence of int
        Months t (1 <= t <= T - 1) at which to fit; the estimation sample is the pairs
        (x[s], r[s + 1]) with s + 1 <= t, skipping pairs with a NaN.
    n_alphas : int, default 30
    n_folds : int, default 5

    Returns
    -------
    LassoFits

    Notes
    -----
    At each refit month, exactly what ``StandardScaler().fit_transform(X)`` followed by
    ``LassoCV(alphas=n_alphas, cv=TimeSeriesSplit(n_folds), fit_intercept=True)`` computes on the
    estimation sample (scikit-learn 1.9; ``n_alphas=30`` before 1.9), with exact lasso solutions
    (:func:`lasso_gram`) instead of coordinate descent stopped at a duality gap of
    ``1e-4 ||y||^2``. In the tests, coefficients agree with scikit-learn run to ``tol=1e-12`` to
    ~1e-15 and with its default tolerance to ~1e-7, and the chosen grid point is the same:

    * predictors standardised over the estimation sample (mean 0, s.d. 1 with divisor n; a
      constant predictor keeps scale 1 and gets coefficient 0);
    * penalty grid :func:`lasso_alpha_grid` from the whole standardised estimation sample:
      ``alpha_max = max_j |X_j'(y - ybar)| / n``, 30 points log-spaced down to ``1e-3 alpha_max``;
    * folds of ``TimeSeriesSplit(n_folds)`` on the n pairs in time order: test blocks of
      ``n // (n_folds + 1)`` pairs at the end of the sample, each trained on all earlier pairs;
    * each fold's lasso has an unpenalised intercept (predictors and target centred on the fold's
      training part), objective ``||y - Xw||^2 / (2 n_train) + alpha ||w||_1``;
    * validation MSE of each fold (intercept ``ybar_train - xbar_train' w``), averaged over folds
      with equal weights; the chosen alpha is the first grid point (largest alpha) at the minimum;
    * refit at the chosen alpha on the whole estimation sample; intercept = sample mean return.

    A refit needs at least ``n_folds + 1`` pairs (``ok`` is False otherwise and the fit is NaN).
    """
    returns = np.asarray(returns, dtype=float)
    predictors = np.asarray(predictors, dtype=float)
    refit_months = np.asarray(refit_months, dtype=np.int64)
    n_worlds, n_months = returns.shape
    if predictors.ndim != 3 or predictors.shape[0] != n_worlds or predictors.shape[2] != n_months:
        raise ValueError("returns must be (n, T) and predictors (n, K, T)")
    if n_worlds == 0 or refit_months.ndim != 1 or refit_months.size == 0:
        raise ValueError("need at least one world and a 1-d, non-empty list of refit months")
    if refit_months.min() < 1 or refit_months.max() > n_months - 1:
        raise ValueError(f"refit months must lie in [1, {n_months - 1}]")
    chunks = [
        _fits_chunk(returns[lo : lo + _WORLD_CHUNK], predictors[lo : lo + _WORLD_CHUNK], refit_months, n_alphas, n_folds)
        for lo in range(0, n_worlds, _WORLD_CHUNK)
    ]
    fields = {name: np.concatenate([chunk[name] for chunk in chunks]) for name in chunks[0]}
    return LassoFits(refit_months=refit_months, **fields)


def _fits_chunk(
    returns: Float64Array, predictors: Float64Array, refit_months: Int64Array, n_alphas: int, n_folds: int
) -> dict[str, np.ndarray]:
    """:func:`lasso_fits` for one chunk of worlds."""
    n_worlds, n_features, _ = predictors.shape
    rows = int(refit_months.max())  # the pairs s = 0 .. rows - 1 are the only ones ever used
    x = np.moveaxis(predictors[:, :, :rows], 1, 2)  # (n, rows, K)
    y = returns[:, 1 : rows + 1]
    valid = np.isfinite(x).all(axis=2) & np.isfinite(y)

    # Cross-products of z = [1, x - x0, y - y0] (x0, y0: first valid pair, against cancellation),
    # cumulated over months: any range of months gives its count, sums and cross-products.
    first = np.argmax(valid, axis=1)
    x0 = x[np.arange(n_worlds), first]
    y0 = y[np.arange(n_worlds), first]
    z = np.concatenate([np.ones((n_worlds, rows, 1)), x - x0[:, None], (y - y0[:, None])[..., None]], axis=2)
    z = np.where(valid[..., None], z, 0.0)
    cum = np.zeros((n_worlds, rows + 1, n_features + 2, n_features + 2))
    np.cumsum(z[:, :, :, None] * z[:, :, None, :], axis=1, out=cum[:, 1:])
    count = np.concatenate([np.zeros((n_worlds, 1), dtype=np.int64), np.cumsum(valid, axis=1)], axis=1)

    # Ranges (in pairs, in time order) of the estimation sample, the folds' training parts and the
    # validation blocks of TimeSeriesSplit; mapped to month ranges through the valid-pair counts.
    n_obs = count[:, refit_months]  # (n, R)
    test_size = n_obs // (n_folds + 1)
    ok = n_obs >= n_folds + 1
    fold = np.arange(n_folds)
    test_start = n_obs[..., None] - (n_folds - fold) * test_size[..., None]  # (n, R, F)
    test_stop = test_start + test_size[..., None]
    month_of = np.stack([np.searchsorted(count[w], np.arange(rows + 1), side="left") for w in range(n_worlds)])

    def range_sums(lo_rank: np.ndarray, hi_rank: np.ndarray) -> np.ndarray:
        lo = np.take_along_axis(month_of, lo_rank.reshape(n_worlds, -1).clip(0, rows), axis=1)
        hi = np.take_along_axis(month_of, hi_rank.reshape(n_worlds, -1).clip(0, rows), axis=1)
        idx = np.arange(n_worlds)[:, None]
        sums = cum[idx, hi] - cum[idx, lo]
        return sums.reshape(*lo_rank.shape, n_features + 2, n_features + 2)

    full = range_sums(np.zeros_like(n_obs), n_obs)  # (n, R, D, D)
    train = range_sums(np.zeros_like(test_start), test_start)  # (n, R, F, D, D)
    test = range_sums(test_start, test_stop)

    # Standardisation over the estimation sample (StandardScaler: divisor n, zero scale -> 1).
    n_full = np.where(ok, n_obs, 1).astype(float)
    mean_dev = full[..., 0, 1:] / n_full[..., None]  # means of [x - x0, y - y0]
    centred = full[..., 1:, 1:] - full[..., 0, 1:, None] * mean_dev[..., None, :]
    var = np.diagonal(centred[..., :n_features, :n_features], axis1=-2, axis2=-1) / n_full[..., None]
    scale = np.sqrt(np.maximum(var, 0.0))
    scale = np.where(scale < 10 * np.finfo(float).eps, 1.0, scale)
    inv = 1.0 / scale

    gram_full = centred[..., :n_features, :n_features] * inv[..., :, None] * inv[..., None, :]
    xy_full = centred[..., :n_features, n_features] * inv
    alphas = lasso_alpha_grid(np.abs(xy_full).max(axis=-1) / n_full, n_alphas)  # (n, R, A)

    # Each fold: centred Gram form of the training part, and the validation block's moments about
    # the training means (for the validation MSE as a quadratic form in w).
    n_train = np.maximum(train[..., 0, 0], 1.0)
    m_train = train[..., 0, 1:] / n_train[..., None]
    train_c = train[..., 1:, 1:] - train[..., 0, 1:, None] * m_train[..., None, :]
    inv_f = inv[:, :, None, :]
    gram_f = train_c[..., :n_features, :n_features] * inv_f[..., :, None] * inv_f[..., None, :]
    xy_f = train_c[..., :n_features, n_features] * inv_f
    n_test = np.maximum(test[..., 0, 0], 1.0)
    t_sum = test[..., 0, 1:]
    t_c = (
        test[..., 1:, 1:]
        - t_sum[..., :, None] * m_train[..., None, :]
        - m_train[..., :, None] * t_sum[..., None, :]
        + n_test[..., None, None] * m_train[..., :, None] * m_train[..., None, :]
    )
    bb = t_c[..., :n_features, :n_features] * inv_f[..., :, None] * inv_f[..., None, :]
    ab = t_c[..., :n_features, n_features] * inv_f
    aa = t_c[..., n_features, n_features]

    # Invalid refits become harmless problems (identity Gram, zero target) and are masked later.
    eye = np.eye(n_features)
    gram_f = np.where(ok[..., None, None, None], gram_f, eye)
    xy_f = np.where(ok[..., None, None], xy_f, 0.0)
    batch = gram_f.reshape(-1, n_features, n_features)
    xy_batch = xy_f.reshape(-1, n_features)
    lam_scale = np.broadcast_to(n_train, ok.shape + (n_folds,)).reshape(-1)
    alpha_b = np.broadcast_to(alphas[:, :, None, :], ok.shape + (n_folds, n_alphas)).reshape(-1, n_alphas)
    path = np.empty((batch.shape[0], n_alphas, n_features))
    coef = np.zeros((batch.shape[0], n_features))
    for a in range(n_alphas):  # warm starts down the decreasing grid
        coef = lasso_gram(batch, xy_batch, lam_scale * alpha_b[:, a], start=coef)
        path[:, a] = coef
    path = path.reshape(*ok.shape, n_folds, n_alphas, n_features)
    sse = (
        aa[..., None]
        - 2.0 * np.einsum("nrfak,nrfk->nrfa", path, ab)
        + np.einsum("nrfak,nrfkl,nrfal->nrfa", path, bb, path)
    )
    cv_mse = (sse / n_test[..., None]).mean(axis=2)  # (n, R, A)
    best = np.argmin(cv_mse, axis=-1)
    alpha = np.take_along_axis(alphas, best[..., None], axis=-1)[..., 0]

    gram_full = np.where(ok[..., None, None], gram_full, eye)
    xy_full = np.where(ok[..., None], xy_full, 0.0)
    coef_full = lasso_gram(
        gram_full.reshape(-1, n_features, n_features), xy_full.reshape(-1, n_features), (n_full * alpha).reshape(-1)
    ).reshape(*ok.shape, n_features)

    mean = x0[:, None, :] + mean_dev[..., :n_features]
    intercept = y0[:, None] + mean_dev[..., n_features]
    nan = np.where(ok, 0.0, np.nan)
    return {
        "n_obs": n_obs,
        "ok": ok,
        "alphas": alphas + nan[..., None],
        "cv_mse": cv_mse + nan[..., None],
        "alpha": alpha + nan,
        "coef": coef_full + nan[..., None],
        "intercept": intercept + nan,
        "mean": mean + nan[..., None],
        "scale": scale + nan[..., None],
    }


def lasso_forecasts(
    returns: Float64Array,
    predictors: Float64Array,
    *,
    first_target: int,
    last_target: int,
    first_refit: int = 120,
    refit_every: int = 12,
    n_alphas: int = 30,
    n_folds: int = 5,
) -> Float64Array:
    """Cross-validated lasso forecasts on all K predictors, indexed by target month.

    Parameters
    ----------
    returns : ndarray, shape (n, T)
    predictors : ndarray, shape (n, K, T)
        x[s] observed at the end of month s (NaN where unavailable).
    first_target, last_target : int
        Forecast the target months ``first_target <= m < last_target`` (``last_target <= T``).
    first_refit : int, default 120
        First refit month t; later refits at ``first_refit + k * refit_every``.
    refit_every : int, default 12
    n_alphas : int, default 30
    n_folds : int, default 5

    Returns
    -------
    ndarray, shape (n, T)
        ``fc[i, m]`` forecasts ``returns[i, m]`` with the fit of the last refit month t <= m - 1
        (data through t only) applied to x[m - 1]; NaN outside ``[first_target, last_target)``,
        for m <= first_refit, where that refit has fewer than ``n_folds + 1`` pairs, and where
        x[m - 1] has a NaN.

    Notes
    -----
    SPEC 3.2 ``lasso``: the fit of :func:`lasso_fits` (StandardScaler + ``LassoCV(alphas=30,
    cv=TimeSeriesSplit(5))`` conventions, exact lasso solutions) at refit months t = first_refit,
    first_refit + refit_every, ..., each used for the targets t + 1, ..., t + refit_every. Only the
    refits that serve a target in ``[first_target, last_target)`` are computed.

    References
    ----------
    Tibshirani, R. (1996). Regression shrinkage and selection via the lasso. Journal of the Royal
    Statistical Society B 58(1), 267-288. doi:10.1111/j.2517-6161.1996.tb02080.x
    """
    returns = np.asarray(returns, dtype=float)
    predictors = np.asarray(predictors, dtype=float)
    n_worlds, n_months = returns.shape
    if not 0 <= first_target <= last_target <= n_months:
        raise ValueError(f"need 0 <= first_target <= last_target <= T = {n_months}")
    if first_refit < 1 or refit_every < 1:
        raise ValueError("first_refit and refit_every must be positive")
    out = np.full((n_worlds, n_months), np.nan)
    # Refit t serves targets t + 1 .. t + refit_every.
    lo = max(first_refit, first_target - refit_every)
    k0 = -(-(lo - first_refit) // refit_every)
    refits = np.arange(first_refit + k0 * refit_every, last_target - 1, refit_every)
    refits = refits[refits + refit_every >= first_target]
    if refits.size == 0:
        return out
    fits = lasso_fits(returns, predictors, refits, n_alphas=n_alphas, n_folds=n_folds)
    for j, t in enumerate(refits.tolist()):
        targets = np.arange(max(t + 1, first_target), min(t + refit_every + 1, last_target))
        x = np.moveaxis(predictors[:, :, targets - 1], 1, 2)  # (n, m, K)
        centred = (x - fits.mean[:, j, None, :]) / fits.scale[:, j, None, :]
        out[:, targets] = fits.intercept[:, j, None] + np.einsum("nmk,nk->nm", centred, fits.coef[:, j])
    return out
