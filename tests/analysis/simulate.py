"""Simulated run tables with a known truth, for the analysis tests.

A simulated agent is a test of chosen size and power: in each world it has a claim propensity
``pi`` drawn from a Beta law with mean ``size`` (no signal) or ``power`` (signal) and concentration
``kappa`` (kappa = inf: every run of a world claims with the same probability), shifted by
``framing_shift`` under optimistic (+) and skeptical (-) framing. The run-to-run share of the
variance of a verdict is then ``kappa / (kappa + 1)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

V1_R2 = (0.0, 0.0025, 0.005, 0.01, 0.02, 0.04)
V3_R2 = (0.0, 0.0025, 0.005, 0.01)
CELLS = [(phi, rho) for phi in (0.5, 0.95) for rho in (0.0, -0.8)]


def make_worlds(design: str, rng: np.random.Generator) -> pd.DataFrame:
    """World table of a prereg-v1-like ("v1") or prereg-v3-like ("v3") grid, with truth and baselines.

    Columns: world_id, family, factor, r2, phi, rho, signal, economic, planted_column,
    baseline_combination, baseline_hac_holm, oracle_cw_stat, combination_cw_stat, framing_world,
    replicated.
    """
    rows = []

    def add(family: str, r2: float, phi: float, rho: float, seed: int, factor: str | None = None, **flags) -> None:
        label = f"{family}_{factor or ''}_{r2:g}_{phi:g}_{rho:g}_{seed}"
        rows.append(dict(world_id=label, family=family, factor=factor, r2=r2, phi=phi, rho=rho, seed=seed,
                         framing_world=flags.get("framing", False), replicated=flags.get("replicated", False)))

    if design == "v1":
        for r2 in V1_R2:
            for phi, rho in CELLS:
                for s in range(10 if r2 in (0.0, 0.04) else 20):
                    add("linear", r2, phi, rho, s, framing=s < 10 and r2 in (0.0, 0.005, 0.01, 0.02))
        for fam in ("persistent_null", "momentum_null", "reversal", "regime"):
            r2 = 0.01 if fam in ("reversal", "regime") else 0.0
            for s in range(30):
                add(fam, r2, np.nan, np.nan, s)
        for factor in ("HML", "RMW"):
            for r2 in (0.0, 0.01, 0.04):
                for s in range(10):
                    add("injected", r2, 0.95, -0.8, s, factor=factor)
    elif design == "v3":
        for r2 in V3_R2:
            for phi, rho in CELLS:
                for s in range(20):
                    add("linear", r2, phi, rho, s, replicated=(r2 in (0.0, 0.01) and phi == 0.95 and rho == -0.8))
        for s in range(30):
            add("persistent_null", 0.0, 0.98, -0.8, s)
    else:
        raise ValueError(design)
    worlds = pd.DataFrame(rows)
    n = len(worlds)
    worlds["signal"] = (worlds["r2"] > 0) | worlds["family"].isin(["reversal", "regime"])
    q = np.where(worlds["signal"], 0.2 + np.minimum(0.75, 20 * worlds["r2"]), 0.2)
    worlds["economic"] = rng.random(n) < q
    has_col = worlds["family"].isin(["linear", "persistent_null", "injected", "regime"]) & worlds["signal"]
    columns = [f"x{i}" for i in rng.integers(1, 9, n)]
    worlds["planted_column"] = [c if h else None for c, h in zip(columns, has_col)]
    worlds["baseline_combination"] = rng.random(n) < np.where(worlds["signal"], 0.05 + 10 * worlds["r2"], 0.05)
    worlds["baseline_hac_holm"] = rng.random(n) < np.where(worlds["signal"], 0.05 + 30 * worlds["r2"], 0.06)
    worlds["oracle_cw_stat"] = rng.normal(size=n) + 60 * worlds["r2"]
    worlds["combination_cw_stat"] = rng.normal(size=n) + 20 * worlds["r2"]
    return worlds


@dataclass(frozen=True)
class Agent:
    """A simulated agent: size, power, framing shift and replicate concentration kappa."""

    model: str = "sim"
    size: float = 0.05
    power: float = 0.6
    framing_shift: float = 0.0
    kappa: float = np.inf
    prior_effect: float = 0.0
    drift_effect: float = 0.0


def simulate_runs(worlds: pd.DataFrame, agent: Agent, rng: np.random.Generator) -> pd.DataFrame:
    """One model's run table on ``worlds``: neutral runs everywhere, optimistic and skeptical runs in
    framing worlds, replicates 1 and 2 (neutral) in replicated worlds."""
    n = len(worlds)
    mean = np.where(worlds["signal"], agent.power, agent.size)
    if np.isinf(agent.kappa):
        propensity = mean
    else:
        propensity = rng.beta(mean * agent.kappa, (1 - mean) * agent.kappa)
    units = [(i, "neutral", 0) for i in range(n)]
    units += [(int(i), f, 0) for i in np.flatnonzero(worlds["framing_world"]) for f in ("optimistic", "skeptical")]
    units += [(int(i), "neutral", r) for i in np.flatnonzero(worlds["replicated"]) for r in (1, 2)]
    idx = np.array([u[0] for u in units])
    framing = np.array([u[1] for u in units])
    shift = np.select([framing == "optimistic", framing == "skeptical"], [agent.framing_shift, -agent.framing_shift], 0.0)
    prior = np.clip(rng.uniform(0.1, 0.4, idx.size) + 0.5 * shift, 0.01, 0.99)
    pi = propensity[idx]
    if agent.prior_effect:
        q = np.clip(pi, 1e-6, 1 - 1e-6)
        logit_pi = np.log(q) - np.log1p(-q) + agent.prior_effect * (np.log(prior) - np.log1p(-prior) - np.log(1 / 3))
        pi = 1 / (1 + np.exp(-logit_pi))
    pi = np.clip(pi + shift, 0.0, 1.0)
    claim = rng.random(idx.size) < pi
    probability = np.round(np.where(claim, rng.uniform(0.5, 0.95, idx.size), rng.uniform(0.05, 0.5, idx.size)), 2)
    drift = rng.exponential(2.0, idx.size)
    test_r2 = rng.normal(worlds["r2"].to_numpy()[idx] - 0.005, 0.01)
    in_sample = np.abs(rng.normal(0.01, 0.005, idx.size)) + agent.drift_effect * drift + 0.01 * rng.normal(size=idx.size)
    planted = worlds["planted_column"].to_numpy()[idx]
    predictors = []
    for c, p in zip(claim, planted):
        chosen = [p] if (c and isinstance(p, str) and rng.random() < 0.85) else []
        chosen += [f"x{j}" for j in rng.choice(np.arange(1, 9), size=rng.integers(0, 3), replace=False)]
        predictors.append(json.dumps(sorted(set(chosen))))
    runs = worlds.iloc[idx].reset_index(drop=True).drop(columns=["framing_world", "replicated"])
    runs.insert(0, "run_id", [f"{w}__{f}__r{r}__{agent.model}" for w, (_, f, r) in zip(runs["world_id"], units)])
    runs["framing"] = framing
    runs["replicate"] = [u[2] for u in units]
    runs["model"] = agent.model
    runs["status"] = "ok"
    runs["claim"] = claim
    runs["probability"] = probability
    runs["prior_probability"] = np.round(prior, 2)
    runs["test_oos_r2"] = np.where(claim | (rng.random(idx.size) < 0.5), test_r2, np.nan)
    runs["in_sample_r2_final"] = in_sample
    runs["complexity_slope"] = drift
    runs["predictors"] = predictors
    return runs


def study(design: str, agents: list[Agent], seed: int) -> pd.DataFrame:
    """Run table of several simulated models on one grid (common worlds)."""
    rng = np.random.default_rng(seed)
    worlds = make_worlds(design, rng)
    return pd.concat([simulate_runs(worlds, a, rng) for a in agents], ignore_index=True)
