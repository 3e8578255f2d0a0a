"""The command line: world build/show/list/tour and one-line errors with exit status 2."""

import json

import pytest

from planted.cli import main

ARGS = ["world", "build", "--family", "linear", "--r2", "0.01", "--phi", "0.95", "--rho", "-0.8",
        "--shocks", "gaussian", "--seed", "7"]


def test_world_build_twice_gives_the_same_bytes(tmp_path, capsys):
    assert main([*ARGS, "--out", str(tmp_path / "a")]) == 0
    assert main([*ARGS, "--out", str(tmp_path / "b")]) == 0
    for name in ("visible/data.csv", "sealed/test.csv", "sealed/meta.json", "sealed/truth.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert "planted column" in capsys.readouterr().out


def test_world_show_prints_summary_and_json(tmp_path, capsys):
    main([*ARGS, "--out", str(tmp_path / "w")])
    capsys.readouterr()
    assert main(["world", "show", str(tmp_path / "w")]) == 0
    assert "linear_r2=0.01_phi=0.95_rho=-0.8_gaussian" in capsys.readouterr().out
    assert main(["world", "show", str(tmp_path / "w"), "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["spec"]["family"] == "linear" and meta["seed"]["entropy"] == 7


def test_world_list_names_every_family(capsys):
    assert main(["world", "list"]) == 0
    out = capsys.readouterr().out
    for family in ("linear", "persistent_null", "momentum_null", "reversal", "regime", "injected"):
        assert family in out


def test_tour_builds_every_family(tmp_path, capsys, ff5_file):
    assert main(["world", "tour", "--out", str(tmp_path), "--path", str(ff5_file)]) == 0
    out = capsys.readouterr().out
    for family in ("linear", "persistent_null", "momentum_null", "reversal", "regime", "injected_HML", "injected_RMW"):
        assert family in out
    assert len(list(tmp_path.iterdir())) == 9


def test_bad_input_gives_one_line_and_status_2(tmp_path, capsys):
    assert main(["world", "build", "--family", "linear", "--r2", "2", "--phi", "0.5", "--rho", "0",
                 "--seed", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "r2 must lie in [0, 1)" in err[0]
    assert main(["world", "show", str(tmp_path / "missing")]) == 2
    assert "not a world directory" in capsys.readouterr().err


def test_run_dry_run_prints_the_plan_without_launching_anything(tmp_path, capsys):
    assert main(["run", "--study", "smoke", "--model", "qwen", "--out", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "11 runs on 9 worlds; 0 done, 11 to run" in out and "qwen" in out and "cost:" in out
    assert not (tmp_path / "smoke").exists()


def test_missing_api_key_is_reported_before_any_world_is_built(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["run", "--study", "smoke", "--model", "opus", "--out", str(tmp_path)]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_compose_model_is_the_model_section_alone():
    """compose_model gives what composing a whole study gives for its model, overrides included."""
    from planted.config import ConfigError, compose_model, compose_study

    assert compose_model("opus") == compose_study("smoke", "opus")["model"]
    assert compose_model("opus", ["model.max_tokens=4000"])["max_tokens"] == 4000
    with pytest.raises(ConfigError, match="available: .*opus"):
        compose_model("nope")
    with pytest.raises(ConfigError, match="start with 'model.'"):
        compose_model("opus", ["study.budget=3"])


def test_mc_cells_are_crossed_by_the_engine():
    from planted.baselines.engine import cells_for

    linear = cells_for("linear", shocks="gaussian", r2=[0.0, 0.01], phi=[0.95, 0.99], rho=[-0.8])
    assert [(c.r2, c.phi) for c in linear] == [(0.0, 0.95), (0.0, 0.99), (0.01, 0.95), (0.01, 0.99)]
    assert [c.r2 for c in cells_for("injected", shocks=None, r2=[0.01, 0.04], factor="HML")] == [0.01, 0.04]
    assert len(cells_for("reversal", shocks="bootstrap")) == 1


LINEAR = ["--family", "linear", "--r2", "0.01", "--phi", "0.95", "--rho", "-0.8"]
MC = ["mc", "--family", "linear", "--r2", "0", "--phi", "0.95", "--rho", "-0.8", "--procedures", "oracle"]


@pytest.mark.parametrize("argv, expected", [
    (["world", "build", *LINEAR, "--seed", "-1", "--out", "{tmp}/w"], "--seed: must be 0 or more, got -1"),
    (["world", "build", *LINEAR, "--seed", "1", "--out", "{file}"], "is a file, not a directory"),
    (["world", "build", "--family", "linear", "--r2", "0.01", "--rho", "-0.8", "--seed", "1", "--out", "{tmp}/w"],
     "needs phi: pass --phi"),
    (["run", "--concurrency", "-3", "--out", "{tmp}/runs"], "--concurrency: must be 1 or more, got -3"),
    (["run", "--concurrency", "0", "--out", "{tmp}/runs"], "--concurrency: must be 1 or more, got 0"),
    (["run", "--out", "{file}", "--dry-run"], "is a file, not a directory"),
    (["run", "--out", "{file}/sub", "--dry-run"], "is a file, so"),
    (["report", "--runs", "{tmp}", "--out", "{file}"], "is a file, not a directory"),
    ([*MC, "--procedures", "nope"], "unknown procedures ['nope']; choose from oracle"),
    ([*MC, "--worlds-per-cell", "0"], "--worlds-per-cell: must be 1 or more"),
    ([*MC, "--n-jobs", "0"], "0 workers cannot run anything"),
    ([*MC, "--out", "{file}"], "is a file, not a directory"),
    ([*MC, "--r2", "0,x"], "expected comma-separated numbers"),
])
def test_bad_input_is_one_line_naming_the_problem_before_any_work(argv, expected, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    argv = [a.format(tmp=tmp_path, file=afile) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing was written


def test_a_changed_mc_configuration_and_a_damaged_study_are_one_line(tmp_path, capsys):
    out = str(tmp_path / "mc")
    assert main([*MC, "--worlds-per-cell", "2", "--out", out, "--json"]) == 0
    capsys.readouterr()
    assert main([*MC, "--worlds-per-cell", "2", "--seed", "2", "--out", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another seed" in err[0] and "can only grow" in err[0]
    study = tmp_path / "study"
    study.mkdir()
    (study / "runs.parquet").write_bytes(b"PAR1 truncated")
    assert main(["report", "--runs", str(study), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs.parquet cannot be read" in err[0] and "planted run" in err[0]


def test_a_large_r2_warns_that_r2_is_a_share(tmp_path, capsys):
    assert main(["world", "build", "--family", "linear", "--r2", "0.5", "--phi", "0.95", "--rho", "-0.8",
                 "--seed", "1", "--out", str(tmp_path / "w")]) == 0
    assert "R2 0.5 is 50% of the return variance" in capsys.readouterr().err


def test_world_build_refuses_to_replace_another_world(tmp_path, capsys):
    args = ["world", "build", *LINEAR, "--out", str(tmp_path / "w")]
    assert main([*args, "--seed", "1"]) == 0
    before = (tmp_path / "w" / "visible" / "data.csv").read_bytes()
    assert main([*args, "--seed", "1"]) == 0  # the same world again: nothing changes
    capsys.readouterr()
    assert main([*args, "--seed", "2"]) == 2
    assert "holds another world" in capsys.readouterr().err
    assert (tmp_path / "w" / "visible" / "data.csv").read_bytes() == before
    assert main([*args, "--seed", "2", "--force"]) == 0
    assert (tmp_path / "w" / "visible" / "data.csv").read_bytes() != before
