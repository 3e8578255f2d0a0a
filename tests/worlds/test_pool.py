"""Shock pool and residualisation: bit-reproducible small OLS fits checked against statsmodels."""

import numpy as np
import pytest
import statsmodels.api as sm

from planted.worlds.data import embedded_hml
from planted.worlds.pool import ar1_residuals, default_pool, exact_ols, own_lag_residuals, standardise


def test_exact_ols_matches_statsmodels():
    rng = np.random.default_rng(3)
    design = np.column_stack([np.ones(500), rng.standard_normal((500, 12))])
    y = design @ rng.standard_normal(13) + rng.standard_normal(500)
    np.testing.assert_allclose(exact_ols(y, design), sm.OLS(y, design).fit().params, rtol=1e-10, atol=1e-12)


def test_ar1_and_own_lag_residuals_match_statsmodels():
    returns = embedded_hml().returns
    ar1 = sm.OLS(returns[1:], sm.add_constant(returns[:-1])).fit()
    np.testing.assert_allclose(ar1_residuals(returns), ar1.resid, rtol=0, atol=1e-14)
    lags = np.column_stack([returns[12 - j : -j] for j in range(1, 13)])
    ar12 = sm.OLS(returns[12:], sm.add_constant(lags)).fit()
    np.testing.assert_allclose(own_lag_residuals(returns, 12), ar12.resid, rtol=0, atol=1e-14)


def test_default_pool_is_standardised_hml_ar1_residuals():
    pool = default_pool()
    assert pool.size == 644  # 645 months 1963-07 .. 2017-03, less one lag
    assert abs(pool.values.mean()) < 1e-15
    assert pool.values.std() == 1.0 or abs(pool.values.std() - 1.0) < 1e-15
    assert not pool.values.flags.writeable
    expected = standardise(ar1_residuals(embedded_hml().returns))
    np.testing.assert_array_equal(pool.values, expected)
    assert "1963-07..2017-03" in pool.source
    # the pool keeps the fat tails of the factor (kurtosis well above the normal's 3)
    assert ((pool.values**4).mean()) > 4.0


def test_pool_choices_have_the_documented_spans(ff5_file):
    """embedded: 1963-07..2017-03 (644 residuals); ff5: from 1963-07 to the file's end or pool_end."""
    import re

    from planted.worlds import PoolChoice
    from planted.worlds.data import FactorDataError

    embedded = PoolChoice().load(None)
    assert embedded.size == 644 and "1963-07..2017-03" in embedded.source
    full = PoolChoice("ff5").load(ff5_file)
    monthly = [line.strip()[:6] for line in ff5_file.read_text().splitlines() if re.match(r"\s*\d{6},", line)]
    last = monthly[-1]
    expected = (int(last[:4]) - 1963) * 12 + int(last[4:]) - 7 + 1 - 1  # months from 1963-07, less the AR(1) lag
    assert full.size == expected
    cut = PoolChoice("ff5", "2000-12").load(ff5_file)
    assert cut.size == (2000 - 1963) * 12 + 12 - 7 + 1 - 1 and "1963-07..2000-12" in cut.source
    with pytest.raises(FactorDataError, match="pass --path"):
        PoolChoice("ff5").load(None)
    with pytest.raises(ValueError, match="YYYY-MM"):
        PoolChoice("ff5", "2026-8")


def test_repeated_value_share_counts_repeated_pool_draws():
    """In R2 = 0 bootstrap worlds a return repeats exactly when its pool draw does (distinct pool values)."""
    from planted.worlds import PoolChoice, WorldSpec, build_batch, repeated_value_share

    pool = PoolChoice().load(None)
    assert np.unique(pool.values).size == pool.size
    seeds = [np.random.SeedSequence(0, spawn_key=(3, j)) for j in range(50)]
    batch = build_batch(WorldSpec(family="linear", r2=0.0, phi=0.95, rho=-0.8, shocks="bootstrap"), seeds, pool=pool)
    ids = batch.raw.shock_ids
    shares = [1.0 - np.unique(row).size / row.size for row in ids]
    assert repeated_value_share(pool, worlds=50) == pytest.approx(float(np.median(shares)), abs=1e-12)
    assert 0.3 < repeated_value_share(pool, worlds=50) < 0.7
