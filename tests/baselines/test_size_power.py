"""Size and power of the in-sample tests on simulated Gaussian linear worlds (slow: pytest -m slow).

With phi = 0.5 and rho = 0 the classical conditions hold approximately, so each Holm-adjusted test's
null claim rate must be near its nominal 5% (Holm controls the family-wise rate; 2,000 worlds give a
binomial s.e. of 0.5 percentage points), the unadjusted best-of-nine near ``1 - 0.95^9`` (nine
nearly independent candidates), and every claim rate must rise with R2.
"""

import numpy as np
import pytest

from planted.baselines.engine import SimulationConfig, simulate
from planted.worlds import WorldSpec

LEVELS = (0.0, 0.005, 0.01, 0.02)


@pytest.mark.slow
def test_in_sample_tests_hold_their_size_and_gain_power():
    cells = [WorldSpec(family="linear", r2=r2, phi=0.5, rho=0.0, shocks="gaussian") for r2 in LEVELS]
    table = simulate(
        SimulationConfig(cells=cells, worlds_per_cell=2000, procedures=["hac_holm", "ivx_holm", "best9"], seed=9,
                         n_jobs=2),
        progress=False,
    )
    rates = table.assign(claim=table["decision_p"] <= 0.05).groupby(["procedure", "r2"])["claim"].mean()
    assert 0.025 <= rates["hac_holm", 0.0] <= 0.08
    assert 0.025 <= rates["ivx_holm", 0.0] <= 0.08
    assert rates["best9", 0.0] == pytest.approx(1 - 0.95**9, abs=0.05)
    for procedure in ("hac_holm", "ivx_holm", "best9"):
        assert np.all(np.diff([rates[procedure, r2] for r2 in LEVELS]) > 0), procedure
