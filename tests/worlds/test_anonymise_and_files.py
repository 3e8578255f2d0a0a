"""Anonymisation is invertible and honest about the planted column; files are sealed and exact."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from planted.worlds import WorldFileError, WorldSpec, build, build_batch, read_meta, read_visible, write_world
from planted.worlds.anonymise import deanonymise

SPEC = WorldSpec(family="linear", r2=0.02, phi=0.95, rho=-0.8, shocks="bootstrap")


def test_anonymisation_inverts_with_the_sealed_factors():
    batch = build_batch(SPEC, range(25))
    returns, candidates = deanonymise(batch.returns, batch.candidates, batch.maps)
    np.testing.assert_allclose(returns, batch.raw.returns, rtol=1e-13)
    np.testing.assert_allclose(candidates, batch.raw.candidates, rtol=1e-10, atol=1e-12)


def test_meta_names_the_planted_column_and_its_map():
    world = build(SPEC, seed=9)
    meta = world.meta
    column = meta["planted_column"]
    assert meta["anonymisation"]["source_column"][column] == 0
    assert meta["persistence"][column] == 0.95
    slope, intercept = meta["anonymisation"]["slope"][column], meta["anonymisation"]["intercept"][column]
    recovered = (world.visible[column].to_numpy() - intercept) / slope
    np.testing.assert_allclose(recovered, world.truth.planted[:700], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        world.visible["asset_A"] / meta["anonymisation"]["return_scale"], world.truth.returns[:700], rtol=1e-14
    )
    others = [c for c in meta["persistence"] if c != column]
    for name in others:  # no other column is the planted predictor
        assert abs(np.corrcoef(world.visible[name], world.visible[column])[0, 1]) < 0.999


def test_signs_are_flipped_in_some_worlds_and_scales_vary():
    batch = build_batch(SPEC, range(40))
    assert (batch.maps.slope < 0).any() and (batch.maps.slope > 0).any()
    assert batch.maps.return_scale.min() >= 20 and batch.maps.return_scale.max() <= 200
    assert len(set(batch.planted_index)) > 4  # the planted column moves around


def test_visible_frame_is_what_the_agent_gets():
    world = build(SPEC, seed=3)
    assert list(world.visible.columns) == ["month", "asset_A"] + [f"x{j}" for j in range(1, 9)]
    assert world.visible["month"].tolist() == list(range(700))
    assert world.test["month"].tolist() == list(range(700, 1060))
    text = world.visible_csv()
    round_trip = pd.read_csv(pd.io.common.StringIO(text))
    np.testing.assert_array_equal(round_trip.to_numpy(), world.visible.to_numpy())


def test_batch_worlds_equal_single_builds():
    seeds = [11, 12, 13]
    batch = build_batch(SPEC, seeds)
    for i, seed in enumerate(seeds):
        assert batch.world(i).meta["content_sha256"] == build(SPEC, seed=seed).meta["content_sha256"]


@pytest.mark.parametrize(
    "spec",
    [SPEC, WorldSpec(family="momentum_null", shocks="gaussian"), WorldSpec(family="injected", factor="HML", r2=0.01)],
)
def test_same_spec_and_seed_give_the_same_hash_in_another_process(spec, tmp_path):
    code = (
        "from planted.worlds import WorldSpec, build;"
        f"print(build(WorldSpec(**{spec.to_dict()!r}), seed=5).meta['content_sha256'])"
    )
    # from a neutral directory: in the checkout, `-c` would import the source tree, not the install
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=tmp_path).stdout.strip()
    assert other == build(spec, seed=5).meta["content_sha256"]
    assert build(spec, seed=6).meta["content_sha256"] != other


def test_world_files_are_split_into_visible_and_sealed(tmp_path):
    world = build(SPEC, seed=2)
    root = write_world(world, tmp_path / "w")
    assert sorted(p.name for p in (root / "visible").iterdir()) == ["data.csv"]
    assert sorted(p.name for p in (root / "sealed").iterdir()) == ["meta.json", "test.csv", "truth.csv"]
    meta = read_meta(root)
    assert meta == json.loads(json.dumps(world.meta))
    pd.testing.assert_frame_equal(read_visible(root), world.visible)
    assert "700" not in (root / "visible" / "data.csv").read_text().splitlines()[-1].split(",")[0]


def test_tampered_world_files_are_detected(tmp_path):
    root = write_world(build(SPEC, seed=2), tmp_path / "w")
    path = root / "visible" / "data.csv"
    path.write_text(path.read_text().replace("\n1,", "\n1,0.0", 1))
    with pytest.raises(WorldFileError, match="content_sha256"):
        read_meta(root)
    with pytest.raises(WorldFileError, match="not a world directory"):
        read_meta(tmp_path)
