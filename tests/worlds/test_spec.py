"""WorldSpec validation: bad specs fail on construction with a message naming the field."""

import pytest

from planted.worlds import WorldSpec, WorldSpecError, build, linear_cells
from planted.worlds.data import FactorDataError


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"family": "linear", "r2": 1.0, "phi": 0.5, "rho": 0.0}, "r2 must lie in [0, 1)"),
        ({"family": "linear", "r2": -0.01, "phi": 0.5, "rho": 0.0}, "r2 must lie in [0, 1)"),
        ({"family": "linear", "r2": 0.01, "phi": 1.0, "rho": 0.0}, "|phi| must be below 1"),
        ({"family": "linear", "r2": 0.01, "phi": -1.2, "rho": 0.0}, "|phi| must be below 1"),
        ({"family": "linear", "r2": 0.01, "phi": 0.5, "rho": 1.0}, "|rho| must be below 1"),
        ({"family": "linear", "r2": 0.01, "phi": 0.5}, "needs rho"),
        ({"family": "sideways"}, "unknown world family 'sideways'"),
        ({"family": "linear", "r2": 0.01, "phi": 0.5, "rho": 0.0, "shocks": "cauchy"}, "unknown shocks 'cauchy'"),
        ({"family": "regime", "r2": 0.01}, "does not take r2"),
        ({"family": "persistent_null", "phi": 0.9}, "does not take phi"),
        ({"family": "injected", "r2": 0.01}, "needs factor"),
        ({"family": "injected", "r2": 0.01, "factor": "SMB"}, "unknown factor 'SMB'"),
        ({"family": "injected", "factor": "HML", "r2": 0.01, "shocks": "gaussian"}, "does not take shocks"),
    ],
)
def test_bad_specs_fail_on_construction(kwargs, fragment):
    with pytest.raises(WorldSpecError) as info:
        WorldSpec(**kwargs)
    assert fragment in str(info.value)


def test_missing_factor_file_fails_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANTED_DATA_DIR", str(tmp_path))
    spec = WorldSpec(family="injected", factor="RMW", r2=0.01)
    assert spec.needs_factor_file
    with pytest.raises(FactorDataError, match="planted data fetch"):
        build(spec, seed=1)


def test_linear_cells_cover_the_paper_grid():
    cells = linear_cells()
    assert len(cells) == 24
    assert len({c.label() for c in cells}) == 24
    assert {c.r2 for c in cells} == {0.0, 0.0025, 0.005, 0.01, 0.02, 0.04}


def test_injected_spec_carries_no_shock_choice():
    assert WorldSpec(family="injected", factor="HML", r2=0.0).shocks is None


def test_the_one_world_type_label():
    from planted.worlds.spec import world_group, world_type_label

    assert WorldSpec(family="linear", r2=0.0025, phi=0.95, rho=-0.8, shocks="gaussian").world_type() == "Linear, R2=0.25%"
    assert world_type_label("linear", 0.0, None) == "Linear, R2=0%"
    assert WorldSpec(family="injected", factor="RMW", r2=0.01).world_type() == "Injected RMW, R2=1%"
    assert WorldSpec(family="momentum_null", shocks="bootstrap").world_type() == "Momentum-looking null"
    assert world_group("injected", "HML") == "injected_HML" and world_group("regime", None) == "regime"
