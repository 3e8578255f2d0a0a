"""Study and Monte Carlo directories on disk built from simulated run tables, for the report tests.

:func:`write_study` writes what ``planted run`` writes minus the episodes (``runs.parquet``,
``baselines.parquet``, ``study.json``): the loader then finds no transcripts and the report must say
so. :func:`write_mc` writes an ``mc.parquet`` whose decision p-values have a known law: uniform in
null worlds and ``U ** (1 + 150 R2)`` in signal worlds (stochastically smaller as R2 grows), so
every claim rate and matched level has a closed form.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from planted.records import RUNS_SCHEMA_VERSION, BaselineRow, baseline_columns, run_columns
from planted.study_layout import StudyLayout

from .simulate import Agent, make_worlds, simulate_runs

BASELINE_PROCEDURES = ("oracle", "combination", "hac_holm")
KIND = {"oracle": "prespecified", "combination": "prespecified", "hac_holm": "exploratory"}


def baselines_of(worlds: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """A ``baselines.parquet`` table consistent with the worlds' baseline claims and CW statistics."""
    rows = []
    for w in worlds.itertuples(index=False):
        claims = {"oracle": bool(w.oracle_cw_stat > 1.645), "combination": bool(w.baseline_combination),
                  "hac_holm": bool(w.baseline_hac_holm)}
        stats = {"oracle": w.oracle_cw_stat, "combination": w.combination_cw_stat, "hac_holm": float(rng.normal())}
        for p in BASELINE_PROCEDURES:
            p_value = float(rng.uniform(0.0, 0.05) if claims[p] else rng.uniform(0.05, 1.0))
            rows.append(BaselineRow(
                world_id=w.world_id, procedure=p, kind=KIND[p], decision_p=p_value, chosen="x1",
                statistic=float(stats[p]), test_oos_r2=float(rng.normal(w.r2 - 0.002, 0.01)), test_cw_stat=0.0,
                test_cw_p=0.5, claim_5pct=claims[p], signal=bool(w.signal), economic=bool(w.economic)))
    return pd.DataFrame([asdict(r) for r in rows], columns=baseline_columns())


def complete_runs(runs: pd.DataFrame, *, shocks: str, label: str | None, backend: str = "anthropic") -> pd.DataFrame:
    """Add the run-table columns of the grid runner that the simulator leaves out."""
    runs = runs.copy()
    runs["shocks"] = np.where(runs["family"] == "injected", None, shocks)
    runs["world_id"] = runs["world_id"] + f"_{shocks}"
    runs["run_id"] = runs["run_id"] + f"_{shocks}"
    runs["baseline_oracle"] = runs["oracle_cw_stat"] > 1.645
    runs["evaluable"] = runs["test_oos_r2"].notna()
    runs["holdout_cw_p"] = np.where(runs["test_oos_r2"] > 0.01, 0.01, 0.5)
    runs["n_specs"] = 5 + (runs.index.to_numpy() % 7)
    runs["backend"] = backend
    runs["analysis_label"] = label
    runs["verdict"] = np.where(runs["claim"], "beats", "does_not_beat")
    return runs


def write_study(directory: Path, runs: pd.DataFrame, baselines: pd.DataFrame, *, name: str) -> Path:
    """Write ``runs.parquet``, ``baselines.parquet`` and ``study.json`` as the grid lays them out.

    The run table gets every column of :class:`planted.records.RunRow` (the simulator's values, and
    None for the columns it does not simulate), so the fixture follows the real schema by construction.
    """
    layout = StudyLayout(directory)
    directory.mkdir(parents=True, exist_ok=True)
    missing = {c: None for c in run_columns() if c not in runs.columns}
    table = runs.assign(**missing).assign(schema_version=RUNS_SCHEMA_VERSION)
    table.to_parquet(layout.runs_table, index=False)
    baselines.to_parquet(layout.baselines_table, index=False)
    layout.study_file.write_text(json.dumps({"config": {"study": {"name": name}}}))
    return directory


def simulated_study(root: Path, design: str, agents: list[Agent], *, seed: int, label: str | None = "confirmatory",
                    backends: dict[str, str] | None = None) -> list[Path]:
    """One study directory per agent on a common grid (v1 with bootstrap shocks, v3 with Gaussian)."""
    rng = np.random.default_rng(seed)
    worlds = make_worlds("v1" if design == "bootstrap" else "v3", rng)
    shocks = "bootstrap" if design == "bootstrap" else "gaussian"
    base = baselines_of(worlds.assign(world_id=worlds["world_id"] + f"_{shocks}"), rng)
    paths = []
    for agent in agents:
        runs = complete_runs(simulate_runs(worlds, agent, rng), shocks=shocks, label=label,
                             backend=(backends or {}).get(agent.model, "anthropic"))
        paths.append(write_study(root / f"{design}-{agent.model}", runs, base, name=f"{design}-{agent.model}"))
    return paths


def mc_table(shocks: str, *, levels=(0.0, 0.0025, 0.005, 0.01, 0.02, 0.04), per_cell: int = 50,
             procedures=("oracle", "combination", "hac_holm"), seed: int = 5) -> pd.DataFrame:
    """A Monte Carlo table with known p-value laws (module docstring), 4 cells per level."""
    rng = np.random.default_rng(seed)
    rows = []
    for r2 in levels:
        for phi in (0.5, 0.95):
            for rho in (0.0, -0.8):
                cell = f"linear_r2={r2:g}_phi={phi:g}_rho={rho:g}_{shocks}"
                for p in procedures:
                    u = rng.random(per_cell)
                    decision = u ** (1.0 + 150.0 * r2)
                    rows.append(pd.DataFrame({
                        "family": "linear", "r2": r2, "phi": phi, "rho": rho, "shocks": shocks, "factor": None,
                        "cell": cell, "world": np.arange(per_cell), "procedure": p, "kind": KIND.get(p, "exploratory"),
                        "decision_p": decision, "seed": 1,
                    }))
    return pd.concat(rows, ignore_index=True)


def write_mc(directory: Path, table: pd.DataFrame) -> Path:
    """Write ``mc.parquet`` under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    table.to_parquet(directory / "mc.parquet", index=False)
    return directory
