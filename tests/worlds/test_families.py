"""Every family hits its planted truth: achieved R2, persistence, correlation, selection rules.

Large-sample checks pool many worlds built with ``build_batch`` and compare with the design value;
tolerances are several standard errors of the pooled estimate (stated next to each).
"""

import numpy as np
import pytest
import statsmodels.api as sm
from statsmodels.tsa.arima_process import arma_acovf

from planted.worlds import WorldSpec, build, build_batch
from planted.worlds import spec as S
from planted.worlds.data import embedded_hml
from planted.worlds.calibration import calibrate_regime, calibrate_reversal, reversal_r2
from planted.worlds.processes import trailing_mean

N_WORLDS = 300


def _pooled_r2(y: np.ndarray, x: np.ndarray) -> float:
    """R2 of y on x pooling all worlds (rows), each row demeaned by the design mean of y."""
    return float(np.corrcoef(x.ravel(), y.ravel())[0, 1] ** 2)


def _planted_visible(batch):
    """The visible column the metadata names as planted, mapped back with the sealed affine map.

    Pooling needs the map: anonymisation flips signs and rescales per world.
    """
    rows = np.arange(len(batch))
    idx = batch.planted_index
    visible = batch.candidates[rows, idx]
    return (visible - batch.maps.intercept[rows, idx][:, None]) / batch.maps.slope[rows, idx][:, None]


@pytest.mark.parametrize("shocks", ["gaussian", "bootstrap"])
@pytest.mark.parametrize(("r2", "phi", "rho"), [(0.04, 0.95, -0.8), (0.01, 0.5, 0.0)])
def test_linear_worlds_plant_the_stated_r2_persistence_and_correlation(shocks, r2, phi, rho):
    batch = build_batch(WorldSpec(family="linear", r2=r2, phi=phi, rho=rho, shocks=shocks), range(N_WORLDS))
    # the visible column that the metadata names as planted
    x = _planted_visible(batch)
    r = batch.raw.returns
    # 300 x 1059 pairs: s.e. of the pooled R2 is about 0.0007 at R2 = 4%
    assert _pooled_r2(r[:, 1:], x[:, :-1]) == pytest.approx(r2, abs=0.004)
    truth = batch.raw
    assert truth.returns.std() == pytest.approx(S.SIGMA, rel=0.02)
    assert truth.returns.mean() == pytest.approx(S.MU, abs=0.0005)
    planted = truth.candidates[:, 0]
    assert planted.var() == pytest.approx(1.0, abs=0.06)
    slope = (planted[:, 1:] * planted[:, :-1]).sum() / (planted[:, :-1] ** 2).sum()
    assert slope == pytest.approx(phi, abs=0.006)
    eps = truth.returns[:, 1:] - S.MU - np.sqrt(r2) * S.SIGMA * planted[:, :-1]
    u = planted[:, 1:] - phi * planted[:, :-1]
    assert np.corrcoef(eps.ravel(), u.ravel())[0, 1] == pytest.approx(rho, abs=0.01)


def test_distractors_are_unit_variance_ar1_with_persistences_drawn_without_replacement():
    batch = build_batch(WorldSpec(family="linear", r2=0.0, phi=0.5, rho=0.0, shocks="gaussian"), range(50))
    persist = batch.raw.persistences
    assert (persist[:, 0] == 0.5).all()
    for row in persist[:, 1:]:
        assert len(set(row)) == 7 and set(row) <= set(S.DISTRACTOR_PERSISTENCES)
    trap = build_batch(WorldSpec(family="reversal", shocks="gaussian"), range(5))
    for row in trap.raw.persistences:
        assert sorted(row) == sorted(S.DISTRACTOR_PERSISTENCES)
    d = batch.raw.candidates[:, 1:]
    assert d.var() == pytest.approx(1.0, abs=0.05)
    # each distractor's lag-1 autocorrelation matches its persistence
    lag1 = (d[..., 1:] * d[..., :-1]).sum(-1) / (d[..., :-1] ** 2).sum(-1)
    assert np.abs(lag1 - persist[:, 1:]).mean() < 0.03


def test_reversal_calibration_matches_statsmodels_acovf_and_simulation():
    cal = calibrate_reversal(0.01, S.SIGMA)
    # independent autocovariances from statsmodels (AR polynomial 1 + b/12 L + ... + b/12 L^12)
    gamma = arma_acovf(np.r_[1.0, np.full(12, cal.b / 12)], np.array([1.0]), nobs=13)
    weights = 12 - np.arange(1, 12)
    var_m12 = (12 * gamma[0] + 2 * weights @ gamma[1:12]) / 144
    assert cal.b**2 * var_m12 / gamma[0] == pytest.approx(0.01, rel=1e-9)
    assert reversal_r2(cal.b) == pytest.approx(0.01, rel=1e-9)
    assert cal.shock_sd**2 * gamma[0] == pytest.approx(S.SIGMA**2, rel=1e-9)
    batch = build_batch(WorldSpec(family="reversal", shocks="gaussian"), range(N_WORLDS))
    r = batch.raw.returns
    m12 = trailing_mean(r, 12)
    # s.e. of the pooled R2 near 1% with ~315,000 pairs: about 0.00035
    assert _pooled_r2(r[:, 12:], m12[:, 11:-1]) == pytest.approx(0.01, abs=0.0015)
    assert r.std() == pytest.approx(S.SIGMA, rel=0.01)
    slope = np.polyfit(m12[:, 11:-1].ravel(), r[:, 12:].ravel(), 1)[0]
    assert slope == pytest.approx(-cal.b, abs=0.04)


def test_regime_world_has_the_stated_r2_and_volatility_ratio():
    batch = build_batch(WorldSpec(family="regime", shocks="gaussian"), range(N_WORLDS))
    raw = batch.raw
    r, signal, state = raw.returns, raw.signal, raw.regime
    assert _pooled_r2(r[:, 1:], signal[:, :-1]) == pytest.approx(0.01, abs=0.0015)
    assert r.std() == pytest.approx(S.SIGMA, rel=0.01)
    cal = calibrate_regime(0.01, S.SIGMA, 2.0)
    resid = r[:, 1:] - S.MU - cal.beta * signal[:, :-1]
    high, low = resid[state[:, 1:] == 1].std(), resid[state[:, 1:] == 0].std()
    assert high / low == pytest.approx(2.0, rel=0.02)
    np.testing.assert_array_equal(signal, raw.candidates[:, 0] * state)


@pytest.mark.parametrize("r2", [0.0, 0.04])
def test_injected_hml_worlds_plant_the_stated_r2_on_real_residuals(r2):
    """Closed form: r[t+1] = m + beta x[t] + c e[t+1] with Var(x) = Var(e) = 1, so R2 = beta^2 / (beta^2 + c^2).

    A pooled regression over worlds is not the right check here: every world shares the same real
    residual sequence e, whose sample autocorrelations beyond lag 12 leak into x[t] through rho, so
    the realised R2 of a finite sample deviates from the population value in the same direction in
    every world.
    """
    batch = build_batch(WorldSpec(family="injected", factor="HML", r2=r2), range(N_WORLDS))
    assert batch.n_train == S.N_TRAIN_INJECTED
    assert batch.returns.shape[1] == 633  # 1963-07 .. 2017-03 less 12 lags: 480 train + 153 test
    params = batch.raw.params
    beta, c = params["beta"], params["shock_sd"]
    assert beta**2 / (beta**2 + c**2) == pytest.approx(r2, abs=1e-12)
    assert beta**2 + c**2 == pytest.approx(params["factor_sd"] ** 2, rel=1e-12)
    hml = embedded_hml().returns
    lags = np.column_stack([hml[12 - j : -j] for j in range(1, 13)])
    e = sm.OLS(hml[12:], sm.add_constant(lags)).fit().resid
    e = (e - e.mean()) / e.std()
    x = _planted_visible(batch)
    np.testing.assert_allclose(
        batch.raw.returns[:, 1:] - params["factor_mean"] - c * e[1:], beta * x[:, :-1], atol=1e-10
    )
    u = x[:, 1:] - 0.95 * x[:, :-1]
    assert np.corrcoef(np.broadcast_to(e[1:], u.shape).ravel(), u.ravel())[0, 1] == pytest.approx(-0.8, abs=0.01)


def test_injected_rmw_uses_the_five_factor_file(ff5_file):
    world = build(WorldSpec(family="injected", factor="RMW", r2=0.01), seed=4, factor_file=ff5_file)
    assert world.meta["params"]["factor_sha256"] == "505bef206e7be6328fbc06146e8de6f8431107d51c8c4c97a54b403479727bfd"
    assert world.meta["n_train"] == 480 and world.meta["n_test"] == 734 - 12 - 480
    assert world.meta["params"]["first_month"] == "1964-07"


def test_momentum_null_worlds_meet_their_selection_rule_by_statsmodels():
    batch = build_batch(WorldSpec(family="momentum_null", shocks="bootstrap"), range(4))
    for i in range(4):
        r = batch.raw.returns[i, : S.N_TRAIN]
        m12 = trailing_mean(r, 12)
        fit = sm.OLS(r[13:], sm.add_constant(m12[12:-1])).fit(cov_type="HAC", cov_kwds={"maxlags": 12})
        assert fit.tvalues[1] > 2.0
        assert batch.world(i).meta["momentum_nw_t"] == pytest.approx(fit.tvalues[1], rel=1e-9)
        assert batch.world(i).planted_column is None


def test_momentum_null_is_a_garch_null():
    batch = build_batch(WorldSpec(family="momentum_null", shocks="gaussian"), range(40))
    r = batch.raw.returns
    assert r.std() == pytest.approx(S.SIGMA, rel=0.05)
    # volatility clustering: squared returns are autocorrelated, returns are not
    sq = r**2 - (r**2).mean(axis=1, keepdims=True)
    assert (sq[:, 1:] * sq[:, :-1]).sum() / (sq**2).sum() > 0.1


def test_repeated_values_exist_only_with_bootstrap_shocks():
    null = dict(family="linear", r2=0.0, phi=0.95, rho=-0.8)
    gauss = build_batch(WorldSpec(shocks="gaussian", **null), range(20))
    boot = build_batch(WorldSpec(shocks="bootstrap", **null), range(20))
    for i in range(20):
        assert gauss.world(i).meta["repeated_share"] == 0.0
        assert boot.world(i).meta["repeated_share"] > 0.2  # 700 draws from 644 shocks
        assert boot.world(i).meta["repeated_pair_share"] > 0.1


def test_reversal_worlds_follow_the_documented_equation_exactly():
    """r[t+1] - mu = -b (m12[t] - mu) + shock_sd * eps[t+1] (docs/conventions.md), to 1e-12.

    The shocks are redrawn independently from the worlds' seeds; the undemeaned form
    r[t+1] = mu - b m12[t] + eps would leave a residual of mean b * mu instead.
    """
    from planted.worlds.pool import default_pool
    from planted.worlds.simulate import _draw_shocks

    seeds = [np.random.SeedSequence(s) for s in range(3)]
    batch = build_batch(WorldSpec(family="reversal", shocks="gaussian"), seeds)
    cal = calibrate_reversal(S.REVERSAL_R2, S.SIGMA)
    shocks, _ = _draw_shocks(seeds, S.BURN_IN + S.N_TRAIN + S.N_TEST, "gaussian", default_pool())
    r = batch.raw.returns
    m12 = trailing_mean(r, 12)
    residual = (r[:, 12:] - S.MU) + cal.b * (m12[:, 11:-1] - S.MU)
    np.testing.assert_allclose(residual, cal.shock_sd * shocks[:, S.BURN_IN + 12:], rtol=0, atol=1e-12)
