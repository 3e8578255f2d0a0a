"""Vectorised cross-validated lasso: checked against scikit-learn's Lasso and LassoCV(TimeSeriesSplit)."""

import numpy as np
import pytest
from sklearn.linear_model import Lasso, LassoCV
from sklearn.model_selection import TimeSeriesSplit
from sklearn.preprocessing import StandardScaler

from planted.baselines.lasso import lasso_alpha_grid, lasso_fits, lasso_forecasts, lasso_gram

TIGHT = {"tol": 1e-12, "max_iter": 1_000_000}  # scikit-learn run (nearly) to the exact optimum


def make_worlds(seed: int, n: int, months: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (n, T) and 9 predictors (n, 9, T): 8 shifted/scaled AR(1)s (the first one predictive)
    and the trailing 12-month mean return (NaN in months 0..10)."""
    rng = np.random.default_rng(seed)
    phis = np.array([0.95, 0.3, 0.6, 0.8, 0.9, 0.97, 0.98, 0.99])
    x = np.empty((n, 8, months))
    x[..., 0] = rng.standard_normal((n, 8))
    shocks = rng.standard_normal((n, 8, months)) * np.sqrt(1 - phis**2)[:, None]
    for t in range(1, months):
        x[..., t] = phis * x[..., t - 1] + shocks[..., t]
    returns = 0.003 + 0.03 * rng.standard_normal((n, months))
    returns[:, 1:] += 0.006 * x[:, 0, :-1]
    x = x * rng.uniform(0.5, 3.0, (n, 8, 1)) + rng.uniform(-2.0, 2.0, (n, 8, 1))
    m12 = np.full((n, months), np.nan)
    for t in range(11, months):
        m12[:, t] = returns[:, t - 11 : t + 1].mean(axis=1)
    return returns, np.concatenate([x, m12[:, None, :]], axis=1)


def sklearn_fit(returns, predictors, t, **params):
    """StandardScaler + LassoCV(alphas=30, cv=TimeSeriesSplit(5)) on the pairs (x[s], r[s+1]), s+1 <= t."""
    x, y = predictors[:, :t].T, returns[1 : t + 1]
    keep = np.isfinite(x).all(axis=1) & np.isfinite(y)
    scaler = StandardScaler().fit(x[keep])
    model = LassoCV(alphas=30, cv=TimeSeriesSplit(n_splits=5), **params).fit(scaler.transform(x[keep]), y[keep])
    return scaler, model


def test_alpha_grid_is_sklearns():
    rng = np.random.default_rng(0)
    x = StandardScaler().fit_transform(rng.standard_normal((150, 9)) @ rng.standard_normal((9, 9)))
    y = x[:, 2] * 0.3 + rng.standard_normal(150)
    model = LassoCV(alphas=30, cv=TimeSeriesSplit(5), tol=1e-8, max_iter=100_000).fit(x, y)
    alpha_max = np.abs(x.T @ (y - y.mean())).max() / 150
    np.testing.assert_allclose(lasso_alpha_grid(alpha_max), model.alphas_, rtol=1e-14)
    assert lasso_alpha_grid(alpha_max)[-1] == pytest.approx(1e-3 * alpha_max, rel=1e-14)
    np.testing.assert_array_equal(lasso_alpha_grid(np.array([0.0])), np.full((1, 30), np.finfo(float).resolution))


def test_gram_solver_matches_sklearn_lasso_at_fixed_alpha():
    rng = np.random.default_rng(1)
    n, k = 240, 9
    mixing = np.eye(k) + 0.6 * rng.standard_normal((k, k)) / np.sqrt(k)  # correlated columns
    problems = []
    for b in range(6):
        x = rng.standard_normal((n, k)) @ mixing
        y = x @ rng.standard_normal(k) * 0.2 + rng.standard_normal(n)
        alpha_max = np.abs((x - x.mean(0)).T @ (y - y.mean())).max() / n
        problems.append((x, y, alpha_max * [0.9, 0.3, 0.05, 0.002][b % 4]))
    gram = np.stack([(x - x.mean(0)).T @ (x - x.mean(0)) for x, _, _ in problems])
    xy = np.stack([(x - x.mean(0)).T @ (y - y.mean()) for x, y, _ in problems])
    penalty = np.array([n * alpha for _, _, alpha in problems])
    got = lasso_gram(gram, xy, penalty)
    for (x, y, alpha), coef in zip(problems, got):
        want = Lasso(alpha=alpha, **TIGHT).fit(x, y).coef_
        np.testing.assert_allclose(coef, want, rtol=0, atol=1e-10)
        assert np.array_equal(coef == 0, want == 0)
        # Duality gap of scikit-learn's stopping rule (objective scaled by n), tight to rounding.
        xc, yc = x - x.mean(0), y - y.mean()
        resid = yc - xc @ coef
        nu = resid * min(1.0, n * alpha / np.abs(xc.T @ resid).max())
        primal = 0.5 * resid @ resid + n * alpha * np.abs(coef).sum()
        dual = 0.5 * yc @ yc - 0.5 * (yc - nu) @ (yc - nu)
        assert primal - dual <= 1e-12 * (yc @ yc)
    # Each problem is solved on its own: the batch does not change any answer.
    np.testing.assert_array_equal(lasso_gram(gram[2:4], xy[2:4], penalty[2:4]), got[2:4])


def test_gram_solver_refuses_what_it_cannot_solve():
    # A NaN never satisfies the optimality conditions: reported, not returned as an answer.
    with pytest.raises(RuntimeError, match="1 problems not solved"):
        lasso_gram(np.stack([np.eye(3), np.eye(3)]), np.array([[1.0, np.nan, 0.0], [3.0, 0.5, 0.0]]), np.ones(2))
    with pytest.raises(ValueError, match="at most 64"):
        lasso_gram(np.eye(65)[None], np.ones((1, 65)), np.array([1.0]))


def test_fits_match_lasso_cv_on_simulated_worlds():
    returns, predictors = make_worlds(2, n=3, months=400)
    predictors[1, 4, 200:203] = np.nan  # a few missing pairs inside the sample
    refits = np.array([120, 203, 396])
    fits = lasso_fits(returns, predictors, refits)
    for i in range(3):
        for j, t in enumerate(refits):
            scaler, model = sklearn_fit(returns[i], predictors[i], t, **TIGHT)
            assert fits.ok[i, j] and fits.n_obs[i, j] == scaler.n_samples_seen_
            np.testing.assert_allclose(fits.mean[i, j], scaler.mean_, rtol=1e-12)
            np.testing.assert_allclose(fits.scale[i, j], scaler.scale_, rtol=1e-12)
            np.testing.assert_allclose(fits.alphas[i, j], model.alphas_, rtol=1e-12)
            np.testing.assert_allclose(fits.cv_mse[i, j], model.mse_path_.mean(axis=1), rtol=1e-9)
            # The same grid point is chosen (the grids agree to rounding, so compare positions).
            assert np.argmin(fits.cv_mse[i, j]) == np.flatnonzero(model.alphas_ == model.alpha_)[0]
            np.testing.assert_allclose(fits.coef[i, j], model.coef_, rtol=0, atol=1e-10)
            assert fits.intercept[i, j] == pytest.approx(model.intercept_, rel=1e-12)
            x_now = predictors[i, :, t]
            want = model.predict(scaler.transform(x_now[None]))[0]
            assert fits.predict(np.broadcast_to(x_now, (3, 3, 9)))[i, j] == pytest.approx(want, rel=1e-10)
    assert (fits.coef != 0).any() and (fits.coef == 0).any()


def test_chosen_alpha_agrees_with_sklearn_defaults():
    returns, predictors = make_worlds(3, n=3, months=400)
    refits = np.array([156, 300, 396])
    fits = lasso_fits(returns, predictors, refits)
    for i in range(3):
        for j, t in enumerate(refits):
            _, model = sklearn_fit(returns[i], predictors[i], t)  # default tol=1e-4, max_iter=1000
            assert np.argmin(fits.cv_mse[i, j]) == np.flatnonzero(model.alphas_ == model.alpha_)[0]
            np.testing.assert_allclose(fits.coef[i, j], model.coef_, rtol=0, atol=1e-5)


def test_forecasts_apply_last_refit_to_current_predictors():
    returns, predictors = make_worlds(4, n=2, months=300)
    fc = lasso_forecasts(returns, predictors, first_target=140, last_target=300, first_refit=120, refit_every=12)
    assert np.isnan(fc[:, :140]).all() and np.isfinite(fc[:, 140:]).all()
    for i in range(2):
        for t in range(132, 299, 12):
            scaler, model = sklearn_fit(returns[i], predictors[i], t, **TIGHT)
            targets = np.arange(max(t + 1, 140), min(t + 13, 300))
            want = model.predict(scaler.transform(predictors[i][:, targets - 1].T))
            np.testing.assert_allclose(fc[i, targets], want, rtol=1e-9, atol=1e-12)


def test_no_look_ahead_and_batch_independence():
    returns, predictors = make_worlds(5, n=3, months=320)
    kwargs = {"first_target": 121, "last_target": 320}
    base = lasso_forecasts(returns, predictors, **kwargs)
    rng = np.random.default_rng(6)
    for m in (121, 150, 253, 300):
        r2, x2 = returns.copy(), predictors.copy()
        r2[:, m:] += 0.1 * rng.standard_normal(r2[:, m:].shape)
        x2[:, :, m:] *= rng.uniform(-3, 3, x2[:, :, m:].shape)
        moved = lasso_forecasts(r2, x2, **kwargs)
        np.testing.assert_array_equal(moved[:, : m + 1], base[:, : m + 1])
        assert not np.allclose(moved[:, m + 1 :], base[:, m + 1 :])
    np.testing.assert_array_equal(lasso_forecasts(returns[2:], predictors[2:], **kwargs)[0], base[2])


def test_refit_schedule_and_missing_data():
    returns, predictors = make_worlds(7, n=1, months=200)
    fc = lasso_forecasts(returns, predictors, first_target=0, last_target=200, first_refit=120, refit_every=12)
    assert np.isnan(fc[0, :121]).all() and np.isfinite(fc[0, 121:]).all()
    predictors[0, 2, 150] = np.nan
    fc2 = lasso_forecasts(returns, predictors, first_target=0, last_target=200, first_refit=120, refit_every=12)
    assert np.isnan(fc2[0, 151]) and np.array_equal(fc2[0, 121:151], fc[0, 121:151])
    # Too few pairs for TimeSeriesSplit(5) (the 12-month mean starts in month 11): no fit.
    fits = lasso_fits(returns, predictors, np.array([16, 17]))
    assert fits.n_obs.tolist() == [[5, 6]] and fits.ok.tolist() == [[False, True]]
    assert np.isnan(fits.coef[0, 0]).all() and np.isfinite(fits.coef[0, 1]).all()
