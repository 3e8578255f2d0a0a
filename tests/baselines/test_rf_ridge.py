"""Random Fourier features ridge: checked against a month-by-month loop, the primal P x P solve, numpy."""

import numpy as np
import pytest

from planted.baselines.rf_ridge import expanding_std, rf_ridge_forecasts

K = 9


def make_worlds(seed: int, n: int, months: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (n, T) and 9 predictors (n, 9, T): 8 shifted/scaled AR(1)s and the trailing 12-month mean."""
    rng = np.random.default_rng(seed)
    phis = np.array([0.3, 0.6, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99])
    x = np.empty((n, 8, months))
    x[..., 0] = rng.standard_normal((n, 8))
    shocks = rng.standard_normal((n, 8, months)) * np.sqrt(1 - phis**2)[:, None]
    for t in range(1, months):
        x[..., t] = phis * x[..., t - 1] + shocks[..., t]
    x = x * rng.uniform(0.5, 3.0, (n, 8, 1)) + rng.uniform(-2.0, 2.0, (n, 8, 1))  # anonymised affine maps
    returns = 0.003 + 0.03 * rng.standard_normal((n, months))
    returns[:, 1:] += 0.004 * (x[:, 0, :-1] - x[:, 0, :-1].mean(axis=1, keepdims=True))
    m12 = np.full((n, months), np.nan)
    for t in range(11, months):
        m12[:, t] = returns[:, t - 11 : t + 1].mean(axis=1)
    return returns, np.concatenate([x, m12[:, None, :]], axis=1)


def standardised_input(x: np.ndarray, s: int) -> np.ndarray:
    """x[:, s] divided by the sample s.d. (ddof 1) of each series' finite values through month s."""
    out = np.full(x.shape[0], np.nan)
    for k in range(x.shape[0]):
        past = x[k, : s + 1]
        past = past[np.isfinite(past)]
        if past.size >= 2:
            out[k] = x[k, s] / np.std(past, ddof=1)
    return out


def loop_reference(returns, predictors, weights, first, last, refit_every=1, window=12, gamma=2.0, z=1000.0, primal=False):
    """Month-by-month implementation straight from the definition (SPEC 3.2a)."""
    n, months = returns.shape
    fc = np.full((n, months), np.nan)
    for i in range(n):
        w = weights if weights.ndim == 2 else weights[i]

        def features(x_std):
            angle = gamma * x_std @ w.T
            return np.concatenate([np.cos(angle), np.sin(angle)], axis=-1)

        for refit in range(first, last, refit_every):
            if refit - window - 1 < 0:
                continue
            x_train = np.array([standardised_input(predictors[i], s) for s in range(refit - window - 1, refit - 1)])
            y = returns[i, refit - window : refit]
            if not (np.isfinite(x_train).all() and np.isfinite(y).all()):
                continue
            f_train = features(x_train)
            sd = f_train.std(axis=0, ddof=1)
            z_train = f_train / sd
            if primal:
                p = z_train.shape[1]
                beta = np.linalg.solve(z * np.eye(p) + z_train.T @ z_train / window, z_train.T @ y / window)
            else:
                beta = z_train.T @ np.linalg.solve(z_train @ z_train.T + z * window * np.eye(window), y)
            for m in range(refit, min(refit + refit_every, last)):
                x_pred = standardised_input(predictors[i], m - 1)
                if np.isfinite(x_pred).all():
                    fc[i, m] = features(x_pred) / sd @ beta
    return fc


def test_expanding_std_matches_nanstd_through_each_month():
    rng = np.random.default_rng(1)
    values = 5.0 + rng.standard_normal((3, 40))
    values[0, :7] = np.nan
    values[1, 20] = np.nan
    out = expanding_std(values)
    for i in range(3):
        for s in range(40):
            past = values[i, : s + 1]
            past = past[np.isfinite(past)]
            if past.size < 2:
                assert np.isnan(out[i, s])
            else:
                assert out[i, s] == pytest.approx(np.std(past, ddof=1), rel=1e-12)


@pytest.mark.parametrize("refit_every", [1, 5])
def test_dual_form_equals_primal_solve(refit_every):
    returns, predictors = make_worlds(2, n=2, months=90)
    weights = np.random.default_rng(3).standard_normal((20, K))  # P = 40 features
    got = rf_ridge_forecasts(returns, predictors, weights, first_target=40, last_target=90, refit_every=refit_every)
    primal = loop_reference(returns, predictors, weights, 40, 90, refit_every, primal=True)
    assert np.array_equal(np.isnan(got), np.isnan(primal))
    assert np.isfinite(got[:, 40:90]).all()
    np.testing.assert_allclose(got, primal, rtol=1e-10, atol=0)


def test_matches_loop_reference_with_12000_features_and_per_world_weights():
    returns, predictors = make_worlds(4, n=2, months=130)
    weights = np.random.default_rng(5).standard_normal((2, 6000, K))
    got = rf_ridge_forecasts(returns, predictors, weights, first_target=118, last_target=124)
    want = loop_reference(returns, predictors, weights, 118, 124)
    assert np.isfinite(want[:, 118:124]).all()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    got12 = rf_ridge_forecasts(returns, predictors, weights, first_target=100, last_target=130, refit_every=12)
    want12 = loop_reference(returns, predictors, weights, 100, 130, refit_every=12)
    assert np.isfinite(want12[:, 100:130]).all()
    np.testing.assert_allclose(got12, want12, rtol=1e-9, atol=0)


def test_refit_every_applies_last_coefficients_to_current_inputs():
    returns, predictors = make_worlds(6, n=1, months=80)
    weights = np.random.default_rng(7).standard_normal((30, K))
    monthly = rf_ridge_forecasts(returns, predictors, weights, first_target=40, last_target=80)
    yearly = rf_ridge_forecasts(returns, predictors, weights, first_target=40, last_target=80, refit_every=12)
    refits = np.arange(40, 80, 12)
    np.testing.assert_allclose(yearly[:, refits], monthly[:, refits], rtol=1e-12)  # same fit at refit months
    assert not np.allclose(yearly[:, 41:52], monthly[:, 41:52])
    np.testing.assert_allclose(yearly, loop_reference(returns, predictors, weights, 40, 80, 12), rtol=1e-10)


@pytest.mark.parametrize("refit_every", [1, 12])
def test_no_look_ahead(refit_every):
    returns, predictors = make_worlds(8, n=2, months=100)
    weights = np.random.default_rng(9).standard_normal((50, K))
    base = rf_ridge_forecasts(returns, predictors, weights, first_target=30, last_target=100, refit_every=refit_every)
    rng = np.random.default_rng(10)
    for m in (30, 47, 64, 90):
        r2, x2 = returns.copy(), predictors.copy()
        r2[:, m:] += rng.standard_normal(r2[:, m:].shape)
        x2[:, :, m:] *= rng.uniform(-3, 3, x2[:, :, m:].shape)
        moved = rf_ridge_forecasts(r2, x2, weights, first_target=30, last_target=100, refit_every=refit_every)
        np.testing.assert_array_equal(moved[:, : m + 1], base[:, : m + 1])
        assert not np.allclose(moved[:, m + 1 :], base[:, m + 1 :])


def test_invariant_to_predictor_scale_and_batch_composition():
    returns, predictors = make_worlds(11, n=3, months=70)
    weights = np.random.default_rng(12).standard_normal((40, K))
    base = rf_ridge_forecasts(returns, predictors, weights, first_target=30, last_target=70)
    scaled = predictors * np.random.default_rng(13).uniform(0.01, 100.0, (3, K, 1))
    np.testing.assert_allclose(
        rf_ridge_forecasts(returns, scaled, weights, first_target=30, last_target=70), base, rtol=1e-9
    )
    alone = rf_ridge_forecasts(returns[1:2], predictors[1:2], weights, first_target=30, last_target=70)
    np.testing.assert_array_equal(alone[0], base[1])


def test_first_months_and_missing_rows_give_nan():
    returns, predictors = make_worlds(14, n=1, months=80)
    weights = np.random.default_rng(15).standard_normal((20, K))
    fc = rf_ridge_forecasts(returns, predictors, weights, first_target=0, last_target=80)
    # m12 is NaN in months 0..10 and its s.d. needs two values: first training row 12, first target 25.
    assert np.isnan(fc[0, :25]).all() and np.isfinite(fc[0, 25:]).all()
    predictors[0, 3, 50] = np.nan  # row 50 is in the windows of targets 52..63 and predicts target 51
    returns[0, 70] = np.nan  # target of the windows of refits 71..82
    fc = rf_ridge_forecasts(returns, predictors, weights, first_target=25, last_target=80)
    assert np.isnan(fc[0, 51:64]).all() and np.isfinite(fc[0, 64:71]).all() and np.isnan(fc[0, 71:]).all()
    np.testing.assert_allclose(fc, loop_reference(returns, predictors, weights, 25, 80), rtol=1e-10)


def test_rejects_bad_shapes_and_ranges():
    returns, predictors = make_worlds(16, n=2, months=40)
    weights = np.zeros((6, K))
    with pytest.raises(ValueError, match="even number"):
        rf_ridge_forecasts(returns, predictors, weights[:5], first_target=20, last_target=40)
    with pytest.raises(ValueError):
        rf_ridge_forecasts(returns, predictors[:, :8], weights, first_target=20, last_target=40)
    with pytest.raises(ValueError):
        rf_ridge_forecasts(returns, predictors, weights, first_target=20, last_target=41)
    assert np.isnan(rf_ridge_forecasts(returns, predictors, weights, first_target=5, last_target=12)).all()
