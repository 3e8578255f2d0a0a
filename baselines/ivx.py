"""IVX Wald test of Kostakis, Magdalinos and Stamatogiannis (2015) for predictive regressions.

Two entry points compute the same statistic with the conventions of the R package ``ivx``
(Vasilopoulos & Pavlidis; ``src/ivx_fit_cpp.cpp``, itself a port of the authors' MATLAB
``ivxlh.m``), horizon 1 only:

- :func:`ivx_wald` -- one predictor per series, vectorised over any leading axes (worlds,
  candidates), for the Monte Carlo engine;
- :func:`ivx_wald_multi` -- K predictors of one series, with the joint and the individual Wald
  statistics that ``summary(ivx::ivx(y ~ x1 + ... + xK))`` reports.

Both take the *contemporaneous* series, as ``ivx::ivx`` does with its data, and regress ``y[1:]``
on ``x[:-1]`` themselves (n = T - 1 pairs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import signal, stats

from planted._typing import Float64Array

__all__ = ["IvxMultiResult", "IvxResult", "ivx_bandwidth", "ivx_wald", "ivx_wald_multi"]

_RZ_C = 1.0
"""Instrument localising constant c in R_z = 1 - c / n**beta (``ivx``: 1)."""
_RZ_BETA = 0.95
"""Instrument persistence exponent beta in R_z = 1 - c / n**beta (``ivx``: 0.95)."""
_BANDWIDTH_EXPONENT = 0.3333333
"""Exponent of the Bartlett truncation lag, written as in ``ivx_fit_cpp.cpp`` (not exactly 1/3)."""
_MIN_PAIRS = 3


@dataclass(frozen=True)
class IvxResult:
    """IVX estimates and Wald tests of one predictor, one entry per series.

    Attributes
    ----------
    coef : ndarray
        IVX slope estimate A_ivx (``coef(ivx::ivx(y ~ x))``), shape of the leading axes.
    wald : ndarray
        IVX Wald statistic, asymptotically chi2(1) under A = 0.
    pvalue : ndarray
        ``chi2(1)`` upper-tail probability of ``wald`` (two-sided in the slope).
    """

    coef: Float64Array
    wald: Float64Array
    pvalue: Float64Array


@dataclass(frozen=True)
class IvxMultiResult:
    """IVX estimates, joint and individual Wald tests of K predictors of one series.

    Attributes
    ----------
    coef : ndarray, shape (K,)
        IVX slope estimates A_ivx.
    wald : float
        Joint Wald statistic of A = 0 (``Wald_Joint``), asymptotically chi2(K).
    pvalue : float
        ``chi2(K)`` upper-tail probability of ``wald``.
    wald_ind : ndarray, shape (K,)
        Individual Wald statistics A_i**2 / Q_ii (``Wald_Ind``, column "Wald Ind" of the summary).
    pvalue_ind : ndarray, shape (K,)
        ``chi2(1)`` upper-tail probabilities of ``wald_ind`` (column "Pr(> chi)").
    vcov : ndarray, shape (K, K)
        Q, the estimated covariance matrix of ``coef`` (``vcov(ivx_model)``).
    names : tuple of str
        Predictor names (default ``x1``, ..., ``xK`` as ``ivx_fit`` names unnamed columns).
    """

    coef: Float64Array
    wald: float
    pvalue: float
    wald_ind: Float64Array
    pvalue_ind: Float64Array
    vcov: Float64Array
    names: tuple[str, ...]

    @property
    def df(self) -> int:
        """Degrees of freedom of the joint test (K)."""
        return len(self.names)

    def to_frame(self) -> pd.DataFrame:
        """The coefficient table of ``summary.ivx``: Estimate, Wald Ind, Pr(> chi)."""
        return pd.DataFrame(
            {"estimate": self.coef, "wald_ind": self.wald_ind, "pvalue": self.pvalue_ind},
            index=pd.Index(self.names, name="predictor"),
        )

    def summary(self) -> str:
        """Coefficient table and joint Wald line, in the layout of ``print.summary.ivx``."""
        table = self.to_frame().to_string(float_format=lambda v: f"{v:.4g}")
        joint = f"Joint Wald statistic: {self.wald:.4g} on {self.df} DF, p-value {self.pvalue:.4g}"
        return f"{table}\n\n{joint}"

    def __str__(self) -> str:
        return self.summary()


def ivx_bandwidth(n: int) -> int:
    """Bartlett truncation lag of the IVX long-run covariances for n regression pairs.

    Parameters
    ----------
    n : int
        Number of (x[t-1], y[t]) pairs, T - 1.

    Returns
    -------
    int
        ``floor(n ** 0.3333333)``.

    Notes
    -----
    ``ivx_fit_cpp.cpp`` computes ``floor(pow(nn, 0.3333333))``. This equals floor(n^(1/3)) for
    every n except perfect cubes k**3 (k >= 2), where it is k - 1 (e.g. n = 343 gives 6 lags, not
    7; n = 1000 gives 9). We follow the package.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    return math.floor(float(n) ** _BANDWIDTH_EXPONENT)


def _vdot(a: Float64Array, b: Float64Array) -> Float64Array:
    """Inner product along the last axis, broadcasting over the leading axes."""
    return np.vecdot(a, b)


def ivx_wald(y: Float64Array, x: Float64Array) -> IvxResult:
    """IVX Wald test of one predictor, vectorised over all leading axes.

    Parameters
    ----------
    y : array_like, shape (..., T)
        Contemporaneous response series (e.g. returns); broadcast against ``x``, so one return
        series of shape (n_worlds, 1, T) serves all candidates of shape (n_worlds, K, T).
    x : array_like, shape (..., T)
        Contemporaneous predictor series. The test regresses ``y[..., 1:]`` on
        ``x[..., :-1]``, n = T - 1 pairs, as ``ivx::ivx(y ~ x)`` does with its data.

    Returns
    -------
    IvxResult
        ``coef``, ``wald`` and ``pvalue`` (chi2(1)), each of the broadcast leading shape.

    Notes
    -----
    Exactly the horizon-1 computation of the R package ``ivx`` (``ivx_fit_cpp``), with
    n = T - 1, y_t = y[t], x_{t-1} = x[t-1] for t = 1..n:

    1. ``eps``: OLS residuals of y_t on [1, x_{t-1}].
    2. ``u``: x_t - rho x_{t-1}, rho the AR(1) coefficient fitted *without* intercept.
    3. Divisor n throughout: s_ee = eps'eps / n; Bartlett kernel with L = :func:`ivx_bandwidth`
       (n) lags and weights 1 - l / (L + 1):
       Omega_uu = [sum_t u_t^2 + 2 sum_l w_l sum_{t>=l} u_t u_{t-l}] / n (two-sided),
       Omega_ue = [sum_t u_t eps_t + sum_l w_l sum_{t>=l} u_t eps_{t-l}] / n (one-sided: the
       predictor innovation dated after the return shock), s_FM = s_ee - Omega_ue^2 / Omega_uu.
    4. Instrument z_t = R_z z_{t-1} + (x_t - x_{t-1}), z_1 = x_1 - x_0, R_z = 1 - 1/n^0.95;
       Z = (0, z_1, ..., z_{n-1}) lagged with a zero first entry and *not* demeaned.
    5. A_ivx = Z'Y / Z'X with Y, X the demeaned y_t and x_{t-1};
       M = Z'Z s_ee - n zbar^2 s_FM (zbar the mean of Z, zero entry included);
       Q = M / (Z'X)^2; Wald = A_ivx^2 / Q = (Z'Y)^2 / M, compared with chi2(1).

    The statistic is invariant to x -> a x (a != 0) and y -> c y + d (c != 0) up to rounding. It
    is *not* exactly invariant to x -> x + b: the intercept-free AR(1) makes ``u`` (hence
    Omega_uu, Omega_ue and M) depend on the level of x; ``coef`` is shift-invariant.
    Degenerate input (constant x, T < 4) gives inf/nan with numpy's RuntimeWarning, or raises.

    References
    ----------
    Kostakis, A., Magdalinos, T. and Stamatogiannis, M. P. (2015). Robust econometric inference
    for stock return predictability. Review of Financial Studies 28(5), 1506-1553.
    doi:10.1093/rfs/hhu139

    Magdalinos, T. and Phillips, P. C. B. (2009). Limit theory for cointegrated systems with
    moderately integrated and moderately explosive regressors. Econometric Theory 25(2), 482-526.
    doi:10.1017/S0266466608090154

    Vasilopoulos, K. and Pavlidis, E. ivx: Robust Econometric Inference. R package,
    https://CRAN.R-project.org/package=ivx
    """
    y = np.asarray(y, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    if y.ndim == 0 or x.ndim == 0 or y.shape[-1] != x.shape[-1]:
        raise ValueError(f"y and x need the same time length on the last axis, got {y.shape}, {x.shape}")
    n = x.shape[-1] - 1
    if n < _MIN_PAIRS:
        raise ValueError(f"need at least {_MIN_PAIRS + 1} observations, got {n + 1}")

    x_lag, x_now, y_now = x[..., :-1], x[..., 1:], y[..., 1:]
    y_dm = y_now - y_now.mean(axis=-1, keepdims=True)
    x_dm = x_lag - x_lag.mean(axis=-1, keepdims=True)

    # 1. OLS residuals of y on [1, x_lag]
    slope_ols = _vdot(x_dm, y_dm) / _vdot(x_dm, x_dm)
    eps = y_dm - slope_ols[..., None] * x_dm
    # 2. AR(1) innovations of x, no intercept
    rho = _vdot(x_lag, x_now) / _vdot(x_lag, x_lag)
    u = x_now - rho[..., None] * x_lag
    # 3. Bartlett long-run (co)variances, divisor n
    n_lags = ivx_bandwidth(n)
    s_ee = _vdot(eps, eps) / n
    omega_uu = _vdot(u, u)
    omega_ue = _vdot(u, eps)
    for lag in range(1, n_lags + 1):
        weight = 1.0 - lag / (n_lags + 1.0)
        omega_uu = omega_uu + 2.0 * weight * _vdot(u[..., lag:], u[..., :-lag])
        omega_ue = omega_ue + weight * _vdot(u[..., lag:], eps[..., :-lag])
    omega_uu = omega_uu / n
    omega_ue = omega_ue / n
    s_fm = s_ee - omega_ue**2 / omega_uu
    # 4. mildly integrated instrument z_t = R z_{t-1} + dx_t; Z = (0, z_1..z_{n-1}), zero row
    #    dropped from the sums below (it contributes nothing), mean still over n rows
    r_z = 1.0 - _RZ_C / float(n) ** _RZ_BETA
    z = signal.lfilter([1.0], [1.0, -r_z], x_now - x_lag, axis=-1)
    z_lag = z[..., :-1]
    # 5. IVX estimate and Wald statistic
    zx = _vdot(z_lag, x_dm[..., 1:])
    zy = _vdot(z_lag, y_dm[..., 1:])
    z_sum = z_lag.sum(axis=-1)
    m_stat = _vdot(z_lag, z_lag) * s_ee - z_sum**2 / n * s_fm  # n zbar^2 = (sum Z)^2 / n
    coef = zy / zx
    wald = zy**2 / m_stat
    pvalue = stats.chi2.sf(wald, 1)
    return IvxResult(coef=np.asarray(coef), wald=np.asarray(wald), pvalue=np.asarray(pvalue))


def ivx_wald_multi(
    y: Float64Array, X: Float64Array, *, names: Sequence[str] | None = None
) -> IvxMultiResult:
    """IVX joint and individual Wald tests of K predictors of one series.

    Parameters
    ----------
    y : array_like, shape (T,)
        Contemporaneous response series.
    X : array_like, shape (T,) or (T, K)
        Contemporaneous predictors; the test regresses ``y[1:]`` on ``X[:-1]`` (n = T - 1), as
        ``ivx::ivx(y ~ x1 + ... + xK)`` does with its data.
    names : sequence of str, optional
        Predictor names; default ``x1``, ..., ``xK``.

    Returns
    -------
    IvxMultiResult
        Coefficients, joint Wald statistic with its chi2(K) p-value, individual Wald statistics
        with chi2(1) p-values, and Q, as ``summary(ivx::ivx(...))`` reports them.

    Notes
    -----
    The conventions of :func:`ivx_wald` in matrix form (``ivx_fit_cpp``, horizon 1):
    OLS residuals ``eps`` of y_t on [1, x_{t-1}]; ``u`` from a separate intercept-free AR(1) of
    each predictor (diagonal R_n); with divisor n and Bartlett weights over
    L = :func:`ivx_bandwidth` (n) lags, Omega_uu = Sigma_uu + Lambda + Lambda' with
    Lambda = sum_l w_l sum_t u_t u_{t-l}' / n, and Omega_eu = Sigma_eu + sum_l w_l sum_t
    eps_{t-l} u_t / n; s_FM = s_ee - Omega_eu' Omega_uu^{-1} Omega_eu. Instruments
    z_t = R_z z_{t-1} + dx_t with R_z = (1 - 1/n^0.95) I, lagged with a zero first row, not demeaned.
    A_ivx = (Z'X)^{-1} Z'Y (demeaned Y and X), M = Z'Z s_ee - n zbar zbar' s_FM,
    Q = (Z'X)^{-1} M (X'Z)^{-1}, joint Wald = A' Q^{-1} A ~ chi2(K), individual Wald
    A_i^2 / Q_ii ~ chi2(1). Linear solves replace the package's ``pinv`` (identical at full rank);
    p-values are upper-tail ``chi2.sf`` (the package prints ``1 - pchisq``, equal to rounding).

    References
    ----------
    Kostakis, A., Magdalinos, T. and Stamatogiannis, M. P. (2015). Robust econometric inference
    for stock return predictability. Review of Financial Studies 28(5), 1506-1553.
    doi:10.1093/rfs/hhu139

    Vasilopoulos, K. and Pavlidis, E. ivx: Robust Econometric Inference. R package,
    https://CRAN.R-project.org/package=ivx
    """
    y = np.asarray(y, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if y.ndim != 1 or X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"y must be (T,) and X (T,) or (T, K) with the same T, got {y.shape}, {X.shape}")
    n, k = X.shape[0] - 1, X.shape[1]
    if n < _MIN_PAIRS + k:
        raise ValueError(f"need at least {_MIN_PAIRS + k + 1} observations for {k} predictors, got {n + 1}")
    if names is None:
        names = [f"x{i + 1}" for i in range(k)]
    if len(names) != k:
        raise ValueError(f"{len(names)} names for {k} predictors")

    x_lag, x_now, y_now = X[:-1], X[1:], y[1:]
    y_dm = y_now - y_now.mean()
    x_dm = x_lag - x_lag.mean(axis=0)

    design = np.column_stack([np.ones(n), x_lag])
    eps = y_now - design @ np.linalg.lstsq(design, y_now, rcond=None)[0]
    rho = np.sum(x_lag * x_now, axis=0) / np.sum(x_lag * x_lag, axis=0)
    u = x_now - x_lag * rho

    n_lags = ivx_bandwidth(n)
    s_ee = float(eps @ eps) / n
    lam_uu = np.zeros((k, k))
    lam_ue = np.zeros(k)
    for lag in range(1, n_lags + 1):
        weight = 1.0 - lag / (n_lags + 1.0)
        lam_uu += weight * (u[lag:].T @ u[:-lag])
        lam_ue += weight * (u[lag:].T @ eps[:-lag])
    omega_uu = (u.T @ u + lam_uu + lam_uu.T) / n
    omega_ue = (u.T @ eps + lam_ue) / n
    s_fm = s_ee - float(omega_ue @ np.linalg.solve(omega_uu, omega_ue))

    r_z = 1.0 - _RZ_C / float(n) ** _RZ_BETA
    z = signal.lfilter([1.0], [1.0, -r_z], x_now - x_lag, axis=0)
    z_inst = np.vstack([np.zeros((1, k)), z[:-1]])
    z_bar = z_inst.mean(axis=0)

    zx = z_inst.T @ x_dm
    coef = np.linalg.solve(zx, z_inst.T @ y_dm)
    m_mat = z_inst.T @ z_inst * s_ee - n * np.outer(z_bar, z_bar) * s_fm
    vcov = np.linalg.solve(zx, np.linalg.solve(zx, m_mat).T).T  # (Z'X)^-1 M (X'Z)^-1
    wald = float(coef @ np.linalg.solve(vcov, coef))
    wald_ind = coef**2 / np.diag(vcov)
    return IvxMultiResult(
        coef=coef,
        wald=wald,
        pvalue=float(stats.chi2.sf(wald, k)),
        wald_ind=wald_ind,
        pvalue_ind=stats.chi2.sf(wald_ind, 1),
        vcov=vcov,
        names=tuple(names),
    )
