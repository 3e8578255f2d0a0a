"""The Monte Carlo engine: identical bytes for any workers and chunking, resumable, honest refusals."""

import json

import pandas as pd
import pytest

from planted.baselines.engine import SimulationConfig, linear_grid, simulate, world_seed
from planted.cli import main
from planted.worlds import WorldSpec

PROCS = ["hac_holm", "best9", "oracle", "combination"]


def _config(**kwargs):
    base = dict(cells=linear_grid([0.0, 0.01], "gaussian", phis=(0.95,), rhos=(-0.8,)), worlds_per_cell=24,
                procedures=PROCS, seed=3, chunk_size=10)
    return SimulationConfig(**(base | kwargs))


def test_results_do_not_depend_on_workers_or_chunks():
    serial = simulate(_config(), progress=False)
    parallel = simulate(_config(n_jobs=2), progress=False)
    rechunked = simulate(_config(chunk_size=7, n_jobs=2), progress=False)
    pd.testing.assert_frame_equal(serial, parallel)
    key = ["cell", "procedure", "world"]
    pd.testing.assert_frame_equal(
        serial.sort_values(key).reset_index(drop=True), rechunked.sort_values(key).reset_index(drop=True)
    )
    assert len(serial) == 2 * 24 * len(PROCS)


def test_simulated_seeds_are_disjoint_from_agent_worlds():
    spec = WorldSpec(family="linear", r2=0.0, phi=0.5, rho=0.0)
    assert world_seed(1, spec, 0).spawn_key[0] == 1
    assert world_seed(1, spec, 0).spawn_key != world_seed(1, WorldSpec(family="linear", r2=0.01, phi=0.5, rho=0.0), 0).spawn_key


def test_rerun_resumes_and_a_changed_config_is_refused(tmp_path):
    first = simulate(_config(), tmp_path, progress=False)
    chunk_files = sorted((tmp_path / "chunks").glob("*.parquet"))
    assert len(chunk_files) == 6
    chunk_files[2].unlink()
    again = simulate(_config(), tmp_path, progress=False)
    pd.testing.assert_frame_equal(first, again)
    with pytest.raises(ValueError, match="another seed; a directory can only grow"):
        simulate(_config(seed=4), tmp_path, progress=False)


def test_a_directory_grows_to_exactly_the_larger_run(tmp_path):
    """More worlds per cell and a new R2 level extend a directory; the result is the single larger
    run's table bit for bit; the old partial chunk is kept under chunks/superseded/, never deleted."""
    small = dict(cells=linear_grid([0.0], "gaussian", phis=(0.95,), rhos=(-0.8,)), worlds_per_cell=15)
    large = dict(cells=linear_grid([0.0, 0.01], "gaussian", phis=(0.95,), rhos=(-0.8,)), worlds_per_cell=24)
    simulate(_config(**small), tmp_path / "grown", progress=False)
    grown = simulate(_config(**large), tmp_path / "grown", progress=False)
    single = simulate(_config(**large), tmp_path / "single", progress=False)
    pd.testing.assert_frame_equal(grown, single)
    assert (tmp_path / "grown" / "mc.parquet").read_bytes() == (tmp_path / "single" / "mc.parquet").read_bytes()
    assert [p.name for p in (tmp_path / "grown" / "chunks" / "superseded").iterdir()] == [
        "linear_r2=0_phi=0.95_rho=-0.8_gaussian__0000010-0000015.parquet"]
    manifest = json.loads((tmp_path / "grown" / "simulation.json").read_text())
    assert manifest["config"]["worlds_per_cell"] == 24 and manifest["history"][0]["config"]["worlds_per_cell"] == 15
    with pytest.raises(ValueError, match="larger simulation"):
        simulate(_config(**small), tmp_path / "grown", progress=False)


def test_build_errors_are_reported_not_fatal(monkeypatch):
    import planted.worlds.spec as spec_module

    monkeypatch.setitem(spec_module.MOMENTUM_GARCH, "max_tries", 1)
    table = simulate(
        SimulationConfig(cells=[WorldSpec(family="momentum_null", shocks="gaussian")], worlds_per_cell=6,
                         procedures=["hac_holm"], seed=1, chunk_size=6),
        progress=False,
    )
    errors = table[table["procedure"] == "<build-error>"]
    assert len(errors) >= 1 and errors["error"].str.contains("another seed").all()
    assert len(table[table["procedure"] == "hac_holm"]) == 6 - len(errors)


def test_mc_cli_prints_the_json_contract(capsys):
    code = main(["mc", "--family", "linear", "--shocks", "gaussian", "--r2", "0,0.01", "--phi", "0.95", "--rho", "-0.8",
                 "--worlds-per-cell", "20", "--procedures", "hac_holm,oracle", "--seed", "1", "--json",
                 "--match-null-rate", "0.15"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["claim_rates"]) == {"hac_holm", "oracle"}
    assert set(out["claim_rates"]["hac_holm"]) == {"0.0", "0.01"}
    assert out["n_worlds"] == {"0.0": 20, "0.01": 20} and out["alpha"] == 0.05
    matched = out["matched"]["hac_holm"]
    assert matched["claim_rates"]["0.0"] >= 0.15 and 0 < matched["alpha"] <= 1


def test_a_dask_cluster_through_joblib_gives_the_same_table():
    """The distributed backend is a configuration switch: same seeds, same bytes."""
    import distributed  # part of the test extras

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None):
        on_dask = simulate(_config(backend="dask", n_jobs=2), progress=False)
    pd.testing.assert_frame_equal(simulate(_config(), progress=False), on_dask)


def test_the_shock_pool_of_a_simulation_is_recorded_and_stated(tmp_path, ff5_file, capsys):
    from planted.analysis.loading import load_mc
    from planted.worlds import PoolChoice

    cell = [WorldSpec(family="linear", r2=0.0, phi=0.95, rho=-0.8, shocks="bootstrap")]
    default = SimulationConfig(cells=cell, worlds_per_cell=20, procedures=["hac_holm"], seed=3)
    assert "pool" not in default.fingerprint()  # directories written before the choice existed stay valid
    chosen = SimulationConfig(cells=cell, worlds_per_cell=20, procedures=["hac_holm"], seed=3,
                              factor_file=str(ff5_file), pool=PoolChoice("ff5", "2000-12"))
    a = simulate(default, tmp_path / "embedded", progress=False)
    b = simulate(chosen, tmp_path / "ff5", progress=False)
    assert json.loads((tmp_path / "ff5" / "simulation.json").read_text())["config"]["pool"] == {"source": "ff5", "end": "2000-12"}
    assert not a["decision_p"].equals(b["decision_p"])  # other shocks, other worlds
    mc = load_mc([tmp_path / "embedded", tmp_path / "ff5"])
    assert set(mc["mc_pool"]) == {"embedded", "ff5 through 2000-12"}
    assert main(["mc", "--family", "linear", "--shocks", "bootstrap", "--r2", "0", "--phi", "0.95", "--rho", "-0.8",
                 "--worlds-per-cell", "20", "--procedures", "hac_holm", "--seed", "3", "--pool", "ff5",
                 "--pool-end", "2000-12", "--path", str(ff5_file), "--out", str(tmp_path / "ff5"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pool"]["residuals"] == PoolChoice("ff5", "2000-12").load(ff5_file).size
    assert 0 < out["pool"]["repeated_value_share"] < 1
