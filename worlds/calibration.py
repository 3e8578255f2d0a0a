"""Closed-form and numerical calibration of the trap families' slopes (SPEC 1.3).

* ``reversal``: r[t+1] - mu = -b (m12[t] - mu) + eps[t+1], an AR(12) of r - mu with equal coefficients -b/12. Its
  autocovariances solve the Yule-Walker system exactly, which gives the population R2 of r[t+1] on
  m12[t] as ``b^2 Var(m12) / Var(r)``; ``b`` solves R2(b) = 1% by Brent's method, once, cached, and is
  rounded to 12 significant digits so that the constant (and every world built from it) is the same
  on every machine whatever LAPACK returned in its last bits.
* ``regime``: the oracle regressor is s[t] = x[t] 1{high state at t}; with a 50/50 stationary chain
  and x independent of the state, Var(s) = 1/2, so beta = sigma sqrt(2 R2) gives population R2 = R2
  of r[t+1] on s[t], and the low-state shock s.d. follows from Var(r) = sigma^2.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq


def equal_weight_ar_acov(coef: float, order: int = 12) -> np.ndarray:
    """Autocovariances gamma_0..gamma_order of y[t] = -coef * sum_{j=1..order} y[t-j] + e[t], Var(e) = 1.

    Solves the Yule-Walker equations gamma_k + coef * sum_j gamma_|k-j| = 1{k = 0}, k = 0..order.
    """
    system = np.eye(order + 1)
    for k in range(order + 1):
        for j in range(1, order + 1):
            system[k, abs(k - j)] += coef
    rhs = np.zeros(order + 1)
    rhs[0] = 1.0
    return np.linalg.solve(system, rhs)


def reversal_r2(b: float, window: int = 12) -> float:
    """Population R2 of r[t+1] on the trailing ``window``-month mean in the reversal world with slope b."""
    gamma = equal_weight_ar_acov(b / window, order=window)
    weights = window - np.arange(1, window)
    var_mean = (window * gamma[0] + 2.0 * float(np.dot(weights, gamma[1:window]))) / window**2
    return float(b * b * var_mean / gamma[0])


@dataclass(frozen=True)
class ReversalCalibration:
    """Constants of the reversal world: slope ``b`` on -m12 and return-shock s.d. ``shock_sd``."""

    b: float
    shock_sd: float
    r2: float


@functools.lru_cache(maxsize=8)
def calibrate_reversal(r2: float, sigma: float, window: int = 12) -> ReversalCalibration:
    """Slope b and shock s.d. of the reversal world for a target R2 and return s.d. ``sigma``.

    Notes
    -----
    The return is an AR(``window``) with coefficients -b/window; the unconditional variance with unit
    shocks is gamma_0(b), so the shock s.d. is sigma / sqrt(gamma_0). Both constants are rounded to
    12 significant digits (see the module docstring).
    """
    b = brentq(lambda value: reversal_r2(value, window) - r2, 1e-9, 2.0, xtol=1e-15, rtol=1e-15)
    b = float(f"{b:.12g}")
    gamma0 = equal_weight_ar_acov(b / window, order=window)[0]
    shock_sd = float(f"{sigma / math.sqrt(gamma0):.12g}")
    return ReversalCalibration(b=b, shock_sd=shock_sd, r2=reversal_r2(b, window))


@dataclass(frozen=True)
class RegimeCalibration:
    """Constants of the regime world: slope, low- and high-state shock s.d."""

    beta: float
    low_sd: float
    high_sd: float


def calibrate_regime(r2: float, sigma: float, vol_ratio: float) -> RegimeCalibration:
    """Slope on x[t] 1{high at t} and state shock s.d.s giving population R2 = r2 and Var(r) = sigma^2.

    Notes
    -----
    Stationary probabilities are 1/2 each (symmetric chain), so Var(beta x 1{high}) = beta^2 / 2 and
    E[shock variance] = low_sd^2 (1 + vol_ratio^2) / 2.
    """
    beta = sigma * math.sqrt(2.0 * r2)
    low_var = (sigma**2 - 0.5 * beta**2) / (0.5 * (1.0 + vol_ratio**2))
    low_sd = math.sqrt(low_var)
    return RegimeCalibration(beta=beta, low_sd=low_sd, high_sd=vol_ratio * low_sd)
