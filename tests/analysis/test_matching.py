"""Size-matched comparisons against hand computations with fixed p-values and against the resampling loop."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planted.analysis import matching
from planted.baselines.rates import matched_alpha, matched_difference


def _sim(null_p: np.ndarray, signal_p: np.ndarray, procedure: str = "hac_holm", r2: float = 0.01) -> pd.DataFrame:
    rows = [pd.DataFrame({"family": "linear", "r2": 0.0, "shocks": "bootstrap", "procedure": procedure,
                          "kind": "exploratory", "decision_p": null_p}),
            pd.DataFrame({"family": "linear", "r2": r2, "shocks": "bootstrap", "procedure": procedure,
                          "kind": "exploratory", "decision_p": signal_p})]
    return pd.concat(rows, ignore_index=True)


def _runs(null_claims: int, n_null: int, signal_claims: int, n_signal: int) -> pd.DataFrame:
    rows = [{"world_id": f"n{i}", "r2": 0.0, "claim": i < null_claims} for i in range(n_null)]
    rows += [{"world_id": f"s{i}", "r2": 0.01, "claim": i < signal_claims} for i in range(n_signal)]
    runs = pd.DataFrame(rows)
    return runs.assign(run_id=runs["world_id"], model="m", family="linear", framing="neutral", replicate=0, status="ok",
                       design="bootstrap")


def test_matched_power_with_fixed_p_values():
    # null p-values 0.005, 0.015, ..., 0.995 (100 worlds); the agent claims in 3 of 20 null worlds (c = 15%), so
    # alpha* is the 15th smallest null p-value, 0.145; signal p-values 0.0025, 0.0075, ... (200 worlds): 58 <= 0.145.
    null_p = (np.arange(100) + 0.5) / 100
    signal_p = (np.arange(200) + 0.5) / 400
    table = matching.matched_power(_runs(3, 20, 12, 20), _sim(null_p, signal_p), rng=np.random.default_rng(0),
                                   n_boot=500).data
    row = table[(table["procedure"] == "hac_holm") & np.isclose(table["r2"], 0.01)].iloc[0]
    assert row["alpha"] == pytest.approx(0.145)
    assert row["rate_k"] == 58 and row["rate_n"] == 200 and row["rate"] == pytest.approx(0.29)
    assert row["difference"] == pytest.approx(0.6 - 0.29)
    null_row = table[(table["procedure"] == "hac_holm") & np.isclose(table["r2"], 0.0)].iloc[0]
    assert null_row["rate"] == pytest.approx(0.15)
    agent = table[(table["procedure"] == "agent") & np.isclose(table["r2"], 0.01)].iloc[0]
    assert agent["rate"] == pytest.approx(0.6) and agent["target_rate"] == pytest.approx(0.15)


def loop_matched_difference(agent_null, agent_signal, null_p, signal_p, *, rng, n_boot):
    """Independent reference: resample the agent's worlds, re-derive c and alpha* in every draw."""
    base_signal = np.sort(signal_p)

    def diff(null, signal):
        alpha = matched_alpha(null_p, float(null.mean()))
        base = np.searchsorted(base_signal, alpha, side="right") / base_signal.size
        return float(signal.mean()) - base, alpha, base

    point, alpha, base = diff(agent_null, agent_signal)
    draws = [
        diff(agent_null[rng.integers(agent_null.size, size=agent_null.size)],
             agent_signal[rng.integers(agent_signal.size, size=agent_signal.size)])[0]
        for _ in range(n_boot)
    ]
    low, high = np.quantile(draws, [0.025, 0.975])
    return point, alpha, base, low, high


def test_closed_form_bootstrap_matches_the_resampling_loop():
    rng = np.random.default_rng(1)
    null_p, signal_p = rng.random(2000), rng.random(2000) ** 3
    agent_null = np.r_[np.ones(6, bool), np.zeros(34, bool)]
    agent_signal = np.r_[np.ones(49, bool), np.zeros(31, bool)]
    fast = matched_difference(agent_null, agent_signal, null_p, signal_p, rng=np.random.default_rng(2), n_boot=4000)
    point, alpha, base, low, high = loop_matched_difference(
        agent_null, agent_signal, null_p, signal_p, rng=np.random.default_rng(3), n_boot=3000
    )
    assert (fast.alpha, fast.baseline_rate, fast.difference) == (alpha, base, point)
    # Monte Carlo error of two independent percentile intervals from 3,000-4,000 draws: well under 0.025
    assert fast.low == pytest.approx(low, abs=0.025) and fast.high == pytest.approx(high, abs=0.025)
    again = matched_difference(agent_null, agent_signal, null_p, signal_p, rng=np.random.default_rng(2), n_boot=4000)
    assert (again.low, again.high) == (fast.low, fast.high)


def test_power_curves_nominal_and_matched():
    null_p = (np.arange(100) + 0.5) / 100
    signal_p = (np.arange(200) + 0.5) / 400
    sim = _sim(null_p, signal_p)
    nominal = matching.power_curves(sim).set_index("r2")
    assert nominal.loc[0.0, "rate"] == pytest.approx(0.05) and nominal.loc[0.01, "rate"] == pytest.approx(20 / 200)
    matched = matching.power_curves(sim, matched_rates={"m": 0.15})
    assert set(matched["model"]) == {"m"} and matched["alpha"].iloc[0] == pytest.approx(0.145)
    ct = matching.power_curves(_sim(null_p, signal_p, procedure="combination_ct"), matched_rates={"m": 0.15})
    assert ct.empty  # the CT combination is not size-matched (paper Figure 1B)


def test_frontier_curves_and_framing_points():
    null_p = (np.arange(100) + 0.5) / 100
    signal_p = (np.arange(200) + 0.5) / 400
    curves = matching.frontier_curves(_sim(null_p, signal_p), max_points=50)
    nominal = curves[curves["nominal"]].iloc[0]
    assert (nominal["null_rate"], nominal["signal_rate"]) == pytest.approx((0.05, 0.10))
    assert (~curves["nominal"]).sum() <= 50
    runs = _runs(3, 20, 12, 20)
    framed = pd.concat([runs.assign(framing=f, run_id=runs["run_id"] + f, claim=runs["claim"] | (f == "optimistic"))
                        for f in ("skeptical", "optimistic")])
    points = matching.framing_points(pd.concat([runs, framed], ignore_index=True)).set_index("framing")
    assert list(points.index) == ["skeptical", "neutral", "optimistic"] and set(points["sample"]) == {"framing worlds"}
    assert points.loc["optimistic", "null_rate"] == 1.0 and points.loc["neutral", "signal_rate"] == pytest.approx(0.6)
