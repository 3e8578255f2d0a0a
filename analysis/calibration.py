"""Calibration of stated probabilities: calibration intercept and slope (H3), the summary of every
measure per model and label, and cross-validated recalibration maps (SPEC 6; paper sections 3.2,
D.4, E.1, F.2); the scores themselves (Brier, Murphy terms, ECE, AUC) are in
:mod:`planted.analysis.scores`.

Also holds the maximum-likelihood logistic regression used here and by
:mod:`planted.analysis.hypotheses` (H3, H6): a Newton-Raphson fit that checks for separation
*before* fitting, so a design whose likelihood has no maximum returns a flagged result instead of
a diverging fit and a warning.

Conventions
-----------
* Probabilities enter log-odds after clipping to ``[EPS, 1 - EPS]`` with ``EPS = 0.005`` (a
  stated probability of 0 or 1 would otherwise give an infinite regressor). 0.005 is half of the
  coarsest grid agents use (0.01), so no stated value other than 0 and 1 is moved.
* Ten equal-width bins on [0, 1]: bin k holds ``k/10 <= p < (k+1)/10``, and p = 1 falls in the
  last bin (the bins of Figure 2 in the paper).
* Labels (:func:`outcome_labels`): "economic" is the oracle's test-window OOS R2 > 0 (SPEC 4);
  "own" is the agent's submitted model's test-window OOS R2 > 0, with a run without an evaluable
  model (abort, crash, timeout) counted as not beating (paper F.2); "signal" is the design truth.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy import optimize, special, stats
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import GroupKFold

from planted._typing import Float64Array
from planted.analysis.results import LogitFit, TestResult, rank_problem
from planted.analysis.samples import claims_of
from planted.analysis.summary_records import CalibrationSummary, Recalibration
from planted.analysis.scores import (  # noqa: F401 (the scores are part of this module's vocabulary)
    N_BINS, auc, bin_index, brier_score, brier_skill, checked_pair, ece_bootstrap, expected_calibration_error,
    murphy_decomposition,
)

EPS = 0.005
Label = Literal["economic", "own", "signal"]
MAPS = ("stated", "base_rate", "verdict", "logodds", "isotonic", "both")


# --------------------------------------------------------------------------------------------
# Logistic regression
# --------------------------------------------------------------------------------------------


def log_odds(p: np.ndarray, eps: float = EPS) -> Float64Array:
    """``log(q / (1 - q))`` with ``q = clip(p, eps, 1 - eps)`` (module convention, ``EPS = 0.005``)."""
    q = np.clip(np.asarray(p, dtype=float), eps, 1.0 - eps)
    return np.log(q) - np.log1p(-q)


def is_separated(y: np.ndarray, X: np.ndarray, tol: float = 1e-6) -> bool:
    """Whether binary data are completely or quasi-completely separated by the columns of ``X``.

    Parameters
    ----------
    y : ndarray, shape (n,)
        0/1 outcomes.
    X : ndarray, shape (n, k)
        Full-rank design matrix (include the constant).
    tol : float
        The LP optimum above which the data count as separated.

    Returns
    -------
    bool
        True when some ``b != 0`` has ``s_i x_i'b >= 0`` for every i (``s_i = 2 y_i - 1``) with at
        least one strict inequality; then the logistic likelihood has no maximum (Albert and
        Anderson 1984). Decided by the linear program ``max sum_i s_i x_i'b`` subject to
        ``s_i x_i'b >= 0`` and ``-1 <= b_j <= 1`` (columns scaled to max |x| = 1), whose optimum is 0
        exactly when the data are not separated (Konis 2007).

    References
    ----------
    Albert, A. and Anderson, J. A. (1984). On the existence of maximum likelihood estimates in
    logistic regression models. Biometrika 71(1), 1-10. doi:10.1093/biomet/71.1.1
    Konis, K. (2007). Linear programming algorithms for detecting separated data in binary logistic
    regression models. DPhil thesis, University of Oxford.
    """
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    scale = np.max(np.abs(X), axis=0)
    scale[scale == 0] = 1.0
    A = (2.0 * y - 1.0)[:, None] * (X / scale)
    res = optimize.linprog(
        -A.sum(axis=0), A_ub=-A, b_ub=np.zeros(len(y)), bounds=[(-1.0, 1.0)] * X.shape[1], method="highs"
    )
    return bool(res.status == 0 and -res.fun > tol)


def _loglike(y: Float64Array, eta: Float64Array) -> float:
    return float(np.sum(y * eta - np.logaddexp(0.0, eta)))


def fit_logit(
    y: np.ndarray,
    X: np.ndarray,
    *,
    names: Sequence[str] | None = None,
    groups: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> LogitFit:
    """Maximum-likelihood logistic regression by Newton-Raphson with step halving.

    Parameters
    ----------
    y : ndarray, shape (n,)
        0/1 (or bool) outcomes.
    X : ndarray, shape (n, k)
        Design matrix; include the constant column yourself.
    names : sequence of str, optional
        Regressor names (default ``x0..x{k-1}``).
    groups : ndarray, shape (n,), optional
        Cluster labels: the covariance becomes the cluster-robust sandwich.
    max_iter, tol : int, float
        Newton iterations and the convergence threshold on the largest step relative to
        ``1 + max |b|``.

    Returns
    -------
    LogitFit
        ``status`` "ok", or "singular" (rank-deficient X), "separation" (no MLE, see
        :func:`is_separated`), "no_convergence" or "empty", with NaN parameters in the last four.

    Notes
    -----
    Nonrobust covariance: the inverse of the information ``X' diag(mu(1-mu)) X`` at the estimate
    (statsmodels ``Logit.fit().cov_params()``). Cluster covariance (CR1):
    ``H^-1 (sum_g S_g S_g') H^-1 * G/(G-1) * (n-1)/(n-k)`` with ``S_g`` the summed scores
    ``x_i (y_i - mu_i)`` of cluster g — statsmodels' ``cov_type="cluster"`` with its default
    small-sample correction. Inference on a coefficient uses the normal distribution.
    """
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"X must be (n, k) with n = len(y) = {y.shape[0]}, got {X.shape}")
    n, k = X.shape
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(k))
    if len(names) != k:
        raise ValueError(f"{len(names)} names for {k} columns")
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ValueError("fit_logit needs finite y and X; drop missing rows first")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("y must be 0/1")
    cov_type = "nonrobust" if groups is None else "cluster"

    def failed(status: str, iterations: int = 0, why: str = "") -> LogitFit:
        return LogitFit(
            names=names, params=np.full(k, np.nan), cov=np.full((k, k), np.nan), n=n, loglike=float("nan"),
            status=status, iterations=iterations, cov_type=cov_type, why=why,  # type: ignore[arg-type]
        )

    if n == 0:
        return failed("empty")
    if np.linalg.matrix_rank(X) < k:
        return failed("singular", why=rank_problem(X, names))
    if is_separated(y, X):
        return failed("separation")
    beta = np.zeros(k)
    ll = _loglike(y, X @ beta)
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):
        mu = special.expit(X @ beta)
        hess = (X * (mu * (1.0 - mu))[:, None]).T @ X
        step = np.linalg.solve(hess, X.T @ (y - mu))
        t = 1.0
        while True:
            candidate = beta + t * step
            ll_new = _loglike(y, X @ candidate)
            if ll_new >= ll - 1e-12 * abs(ll) or t < 1e-8:
                break
            t /= 2.0
        beta, ll = candidate, ll_new
        if np.max(np.abs(t * step)) <= tol * (1.0 + np.max(np.abs(beta))):
            converged = True
            break
    if not converged:
        return failed("no_convergence", iterations)
    mu = special.expit(X @ beta)
    hess = (X * (mu * (1.0 - mu))[:, None]).T @ X
    hess_inv = np.linalg.inv(hess)
    n_clusters = 0
    if groups is None:
        cov = hess_inv
    else:
        codes, n_clusters = _cluster_codes(groups, n)
        scores = X * (y - mu)[:, None]
        summed = np.zeros((n_clusters, k))
        np.add.at(summed, codes, scores)
        meat = summed.T @ summed
        correction = n_clusters / (n_clusters - 1.0) * (n - 1.0) / (n - k)
        cov = correction * hess_inv @ meat @ hess_inv
    return LogitFit(
        names=names, params=beta, cov=cov, n=n, loglike=_loglike(y, X @ beta), status="ok",
        iterations=iterations, cov_type=cov_type, n_clusters=n_clusters,
    )


def _cluster_codes(groups: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    groups = np.asarray(groups)
    if groups.shape != (n,):
        raise ValueError(f"groups must have shape ({n},), got {groups.shape}")
    _, codes = np.unique(groups, return_inverse=True)
    n_clusters = int(codes.max()) + 1 if n else 0
    if n_clusters < 2:
        raise ValueError("cluster-robust covariance needs at least two clusters")
    return codes, n_clusters


def calibration_fit(
    labels: np.ndarray, probabilities: np.ndarray, *, eps: float = EPS, groups: np.ndarray | None = None
) -> LogitFit:
    """Logistic recalibration curve: ``P(label) = expit(a + b logit(p))`` (Cox 1958).

    Parameters
    ----------
    labels : ndarray of bool, shape (n,)
    probabilities : ndarray, shape (n,)
        Stated probabilities, clipped to ``[eps, 1 - eps]`` before the log-odds.
    eps : float
    groups : ndarray, optional
        World labels for a cluster-robust covariance.

    Returns
    -------
    LogitFit
        Parameters ``("intercept", "slope")``; perfect calibration is (0, 1).

    References
    ----------
    Cox, D. R. (1958). Two further applications of a model for binary regression. Biometrika
    45(3/4), 562-565. doi:10.1093/biomet/45.3-4.562
    """
    x = log_odds(probabilities, eps)
    X = np.column_stack([np.ones_like(x), x])
    return fit_logit(np.asarray(labels, dtype=float), X, names=("intercept", "slope"), groups=groups)


def calibration_wald(
    labels: np.ndarray,
    probabilities: np.ndarray,
    *,
    eps: float = EPS,
    groups: np.ndarray | None = None,
    name: str = "H3",
) -> TestResult:
    """Joint Wald test of calibration intercept 0 and slope 1 (H3; SPEC 6, paper 3.2).

    Parameters
    ----------
    labels, probabilities : ndarray, shape (n,)
    eps : float
        Clipping of the probabilities before the log-odds (module convention 0.005).
    groups : ndarray, optional
        World labels: cluster-robust covariance. The paper's frozen code uses the model-based
        covariance for H3 (world clusters only in H5 and H6; paper Appendix G), the default here.
    name : str

    Returns
    -------
    TestResult
        ``statistic = d' V^-1 d`` with ``d = (a, b - 1)`` and V the covariance of the logistic
        estimates; chi2(2), two-sided by nature (the ``alternative`` field says "two-sided");
        details: intercept, slope, their standard errors and ``n_clipped``, the number of
        probabilities below ``eps`` or above ``1 - eps`` (clipping them moves the slope when there
        are many, so it is reported next to the result and in ``method``). With separated or singular data the
        p-value is NaN and ``flag`` names the reason.
    """
    y = np.asarray(labels, dtype=float)
    p = np.asarray(probabilities, dtype=float)
    clipped = int(np.sum((p < eps) | (p > 1 - eps)))
    fit = calibration_fit(y, probabilities, eps=eps, groups=groups)
    method = f"logistic Wald chi2(2), {fit.cov_type} covariance, eps={eps} ({clipped} of {p.size} probabilities clipped)"
    null = "calibration intercept 0 and slope 1"
    if fit.status != "ok":
        return TestResult(
            name=name, statistic=float("nan"), pvalue=float("nan"), df=2.0, null=null, alternative="two-sided",
            n=fit.n, method=method, flag=fit.flag,
        )
    d = fit.params - np.array([0.0, 1.0])
    wald = float(d @ np.linalg.solve(fit.cov, d))
    return TestResult(
        name=name, statistic=wald, pvalue=float(stats.chi2.sf(wald, 2)), df=2.0, null=null,
        alternative="two-sided", n=fit.n, method=method, estimate=float(fit.params[1]),
        details=(
            ("intercept", float(fit.params[0])), ("slope", float(fit.params[1])),
            ("se_intercept", float(fit.bse[0])), ("se_slope", float(fit.bse[1])), ("n_clipped", float(clipped)),
        ),
    )


# --------------------------------------------------------------------------------------------
# Run tables
# --------------------------------------------------------------------------------------------


def outcome_labels(runs: pd.DataFrame, label: Label) -> pd.Series:
    """The binary label of each run (float 0/1, NaN when unknown); see the module conventions."""
    if label == "economic":
        return runs["economic"].astype(float)
    if label == "signal":
        return runs["signal"].astype(float)
    if label == "own":
        r2 = pd.to_numeric(runs["test_oos_r2"], errors="coerce")
        return (r2 > 0).astype(float)  # NaN (not evaluable / no model) compares False: not beating
    raise ValueError(f"unknown label {label!r}; choose economic, own or signal")


def label_sample(runs: pd.DataFrame, label: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stated probabilities, labels, claims and worlds of the runs that have a probability and a known label."""
    p = pd.to_numeric(runs["probability"], errors="coerce").to_numpy()
    y = outcome_labels(runs, label).to_numpy()  # type: ignore[arg-type]
    keep = np.isfinite(p) & np.isfinite(y)
    return p[keep], y[keep].astype(bool), claims_of(runs["claim"])[keep], runs["world_id"].to_numpy()[keep]


def _calibration_sample(runs: pd.DataFrame, label: Label) -> pd.DataFrame:
    sample = pd.DataFrame(
        {
            "p": pd.to_numeric(runs["probability"], errors="coerce").to_numpy(),
            "y": outcome_labels(runs, label).to_numpy(),
            "claim": runs["claim"].astype(float).fillna(0.0).to_numpy(),
            "world": runs["world_id"].to_numpy(),
        }
    )
    return sample.dropna(subset=["p", "y"]).reset_index(drop=True)


def calibration_summary(
    runs: pd.DataFrame,
    *,
    label: Label = "economic",
    rng: np.random.Generator,
    n_boot: int = 2000,
    n_bins: int = N_BINS,
    eps: float = EPS,
    level: float = 0.95,
) -> CalibrationSummary:
    """Every calibration measure of SPEC 6 for one model's runs against one label (paper D.4).

    Parameters
    ----------
    runs : DataFrame
        One model's runs with ``probability``, ``claim``, ``world_id`` and the label's column
        (``economic``, ``test_oos_r2`` or ``signal``). Runs without a stated probability or with an
        unknown label are dropped (all runs otherwise: every framing, as in the paper's pooled 900).
    label : {"economic", "own", "signal"}
    rng : numpy.random.Generator
        For the world-clustered ECE interval.
    n_boot, n_bins, eps, level
        Bootstrap draws, bins, log-odds clipping and interval level.

    Returns
    -------
    CalibrationSummary
        Brier, Brier skill vs in-sample climatology, Murphy decomposition over ``n_bins`` bins,
        ECE with its world bootstrap interval, AUC overall / within claims / within non-claims,
        calibration intercept and slope and the H3 Wald test.
    """
    s = _calibration_sample(runs, label)
    p, y = s["p"].to_numpy(), s["y"].to_numpy()
    claim = s["claim"].to_numpy().astype(bool)
    wald = calibration_wald(y, p, eps=eps, name=f"calibration ({label})")
    fit_ok = not wald.flag
    return CalibrationSummary(
        label=label, n=int(p.size), n_worlds=int(s["world"].nunique()), base_rate=float(y.mean()),
        mean_probability=float(p.mean()), brier=brier_score(p, y), brier_skill=brier_skill(p, y),
        murphy=murphy_decomposition(p, y, n_bins=n_bins),
        ece=ece_bootstrap(p, y, s["world"].to_numpy(), rng=rng, n_boot=n_boot, n_bins=n_bins, level=level),
        auc=auc(p, y), auc_claims=auc(p[claim], y[claim]), auc_nonclaims=auc(p[~claim], y[~claim]),
        intercept=wald.detail("intercept") if fit_ok else float("nan"),
        slope=wald.detail("slope") if fit_ok else float("nan"),
        wald=wald,
    )


def _logit_predict(y: np.ndarray, X_train: np.ndarray, X_test: np.ndarray) -> np.ndarray | None:
    fit = fit_logit(y, X_train)
    if fit.status != "ok":
        return None
    return special.expit(X_test @ fit.params)


def recalibration(
    labels: np.ndarray,
    probabilities: np.ndarray,
    claims: np.ndarray,
    worlds: np.ndarray,
    *,
    n_folds: int = 5,
    eps: float = EPS,
    label: str = "label",
) -> Recalibration:
    """Out-of-fold Brier score and AUC of recalibration maps, folds grouped by world (paper E.1).

    Parameters
    ----------
    labels, probabilities, claims, worlds : ndarray, shape (n,)
    n_folds : int
        Folds of ``sklearn.model_selection.GroupKFold`` (deterministic, balanced by run count);
        every run of a world lands in the same test fold.
    eps : float
        Log-odds clipping.
    label : str
        Name of the label, for the summary.

    Returns
    -------
    Recalibration
        Maps, each fitted on the training folds and applied to the held-out fold:
        ``stated`` (no recalibration), ``base_rate`` (training share of positives; its AUC is NaN by
        convention), ``verdict`` (logistic on the verdict alone, computed in closed form as the
        training outcome rate within each verdict, which is the logistic MLE when it exists and its
        limit under separation; a verdict absent from the training folds gets the base rate),
        ``logodds`` (logistic on ``logit(p)``), ``isotonic`` (``IsotonicRegression`` on p, increasing,
        clipped to [0, 1] and out of range) and ``both`` (logistic on verdict and ``logit(p)``).
        A logistic map whose fit fails in a fold (separation, singular design) has NaN scores and
        counts that fold in ``failed_folds``.
    """
    y = np.asarray(labels, dtype=float)
    p = np.asarray(probabilities, dtype=float)
    c = np.asarray(claims, dtype=float)
    checked_pair(p, y)
    z = log_odds(p, eps)
    ones = np.ones_like(z)
    X_log = np.column_stack([ones, z])
    X_both = np.column_stack([ones, c, z])
    oof = {name: np.full(y.size, np.nan) for name in MAPS}
    failed = dict.fromkeys(MAPS, 0)
    for train, test in GroupKFold(n_splits=n_folds).split(p, y, groups=np.asarray(worlds)):
        oof["stated"][test] = p[test]
        base = float(y[train].mean())
        oof["base_rate"][test] = base
        for v in (0.0, 1.0):
            in_train, in_test = train[c[train] == v], test[c[test] == v]
            oof["verdict"][in_test] = y[in_train].mean() if in_train.size else base
        for name, X in (("logodds", X_log), ("both", X_both)):
            pred = _logit_predict(y[train], X[train], X[test])
            if pred is None:
                failed[name] += 1
            else:
                oof[name][test] = pred
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        oof["isotonic"][test] = iso.fit(p[train], y[train]).predict(p[test])
    briers, aucs = [], []
    for name in MAPS:
        pred = oof[name]
        ok = not np.isnan(pred).any()
        briers.append(float(np.mean((pred - y) ** 2)) if ok else float("nan"))
        aucs.append(auc(pred, y) if ok and name != "base_rate" else float("nan"))
    claim = c.astype(bool)
    return Recalibration(
        label=label, n=int(y.size), n_folds=n_folds, maps=MAPS, brier=tuple(briers), auc=tuple(aucs),
        failed_folds=tuple(failed[m] for m in MAPS), auc_claims=auc(p[claim], y[claim]),
        auc_nonclaims=auc(p[~claim], y[~claim]),
    )


def recalibrate_runs(
    runs: pd.DataFrame, *, label: Label = "economic", n_folds: int = 5, eps: float = EPS
) -> Recalibration:
    """:func:`recalibration` on one model's run table (runs without probability or label dropped)."""
    s = _calibration_sample(runs, label)
    return recalibration(
        s["y"].to_numpy(), s["p"].to_numpy(), s["claim"].to_numpy(), s["world"].to_numpy(),
        n_folds=n_folds, eps=eps, label=label,
    )
