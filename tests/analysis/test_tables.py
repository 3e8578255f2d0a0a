"""Report tables against hand computations on small run tables with a known content."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from planted.analysis import behaviour, summaries, tables
from planted.analysis.artifact import artifact_flags, lookup_flag
from planted.analysis.hypotheses import confirmatory_tests, local_model_tests
from planted.analysis.loading import final_in_sample_r2, transcript_texts

from .simulate import Agent, study


def _wilson(k: int, n: int) -> tuple[float, float]:
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def _run(world: str, *, family: str = "linear", r2: float = 0.0, claim: bool = False, framing: str = "neutral",
         replicate: int = 0, model: str = "m", status: str = "ok", **extra) -> dict:
    row = {"run_id": f"{world}_{framing}_{replicate}_{model}", "world_id": world, "family": family, "r2": r2,
           "phi": 0.95, "rho": -0.8, "factor": None, "framing": framing, "replicate": replicate, "model": model,
           "status": status, "claim": claim, "design": "bootstrap", "signal": r2 > 0, "probability": 0.3,
           "prior_probability": 0.2, "test_oos_r2": 0.0, "evaluable": True, "holdout_cw_p": 0.5,
           "baseline_hac_holm": False, "baseline_combination": False}
    row.update(extra)
    return row


@pytest.fixture()
def hand_table() -> pd.DataFrame:
    """10 linear null worlds (3 claims), 8 worlds at R2 = 1% (6 claims), 4 persistent nulls (1 claim), plus runs
    that must not count: optimistic reruns, second replicates and an errored run."""
    rows = [_run(f"n{i}", claim=i < 3, baseline_hac_holm=i == 0) for i in range(10)]
    rows += [_run(f"s{i}", r2=0.01, claim=i < 6, baseline_hac_holm=i < 4) for i in range(8)]
    rows += [_run(f"p{i}", family="persistent_null", r2=float("nan"), claim=i == 0) for i in range(4)]
    rows += [_run(f"n{i}", claim=True, framing="optimistic") for i in range(10)]
    rows += [_run(f"n{i}", claim=True, replicate=1) for i in range(10)]
    rows += [_run("n0", claim=True, replicate=0, status="error", model="m")]
    return pd.DataFrame(rows)


def test_claim_rates_by_world_equal_hand_counts_and_wilson(hand_table):
    t = tables.claim_rates_by_world(hand_table, procedures=["hac_holm"])
    d = t.data.set_index("world")
    assert list(d.index) == ["Linear, R2=0%", "Linear, R2=1%", "Persistent null"]
    for world, k, n, base_k in (("Linear, R2=0%", 3, 10, 1), ("Linear, R2=1%", 6, 8, 4), ("Persistent null", 1, 4, 0)):
        row = d.loc[world]
        assert row["n"] == n and row["agent_k"] == k and row["agent"] == pytest.approx(k / n)
        assert (row["agent_low"], row["agent_high"]) == pytest.approx(_wilson(k, n), abs=1e-12)
        assert row["hac_holm"] == pytest.approx(base_k / n)
        assert (row["hac_holm_low"], row["hac_holm_high"]) == pytest.approx(_wilson(base_k, n), abs=1e-12)
    md = t.formatted()
    assert md.loc[0, "Agent (%)"] == f"30 [{100 * _wilson(3, 10)[0]:.0f}, {100 * _wilson(3, 10)[1]:.0f}]"
    assert t.exploratory_columns == ("hac_holm",)


def test_errored_runs_and_replicates_do_not_count(hand_table):
    # the errored run of world n0 says "claim"; its replicate-0 sibling ("ok") is the one that counts
    d = tables.claim_rates_by_world(hand_table, procedures=[]).data.set_index("world")
    assert d.loc["Linear, R2=0%", "agent_k"] == 3 and d.loc["Linear, R2=0%", "n"] == 10


def test_persistence_table_pools_weak_signal_levels():
    rows = [_run(f"a{i}", r2=r2, claim=i % 2 == 0) for i, r2 in enumerate([0.0025, 0.005, 0.01, 0.01])]
    rows += [_run("b0", r2=0.0, claim=True, phi=0.5, rho=0.0)]
    d = tables.claim_rates_by_persistence(pd.DataFrame(rows), procedures=[]).data
    weak = d[d["signal"].str.startswith("Weak")].iloc[0]
    assert weak["n"] == 4 and weak["agent"] == pytest.approx(0.5)
    null = d[d["signal"].str.startswith("No signal")].iloc[0]
    assert (null["phi"], null["rho"], null["agent"]) == (0.5, 0.0, 1.0)


def test_deployed_oos_r2_counts_the_benchmark_as_zero_and_leaves_out_unevaluable_claims():
    rows = [_run("w0", r2=0.01, claim=True, test_oos_r2=0.02), _run("w1", r2=0.01, claim=False, test_oos_r2=-0.5),
            _run("w2", r2=0.01, claim=True, test_oos_r2=float("nan")), _run("w3", r2=0.01, claim=True, test_oos_r2=0.04)]
    baselines = pd.DataFrame({"world_id": ["w0", "w1", "w2", "w3"], "procedure": "hac_holm", "kind": "exploratory",
                              "decision_p": 0.01, "statistic": 0.0, "test_oos_r2": [0.01, 0.03, -0.02, 0.05],
                              "claim_5pct": [True, False, True, True]})
    d = tables.deployed_oos_r2(pd.DataFrame(rows), baselines, procedures=["hac_holm"]).data.iloc[0]
    assert d["agent"] == pytest.approx((0.02 + 0.0 + 0.04) / 3) and d["agent_n"] == 3 and d["agent_missing"] == 1
    assert d["agent_se"] == pytest.approx(np.std([0.02, 0.0, 0.04], ddof=1) / np.sqrt(3))
    assert d["hac_holm"] == pytest.approx((0.01 + 0.0 - 0.02 + 0.05) / 4)


def test_holdout_rule_and_thresholds_by_hand():
    rows = [_run(f"n{i}", claim=i < 4, holdout_cw_p=0.01 if i < 1 else 0.5, probability=0.55 if i < 4 else 0.2)
            for i in range(10)]
    rows += [_run(f"s{i}", r2=0.01, claim=i < 5, holdout_cw_p=0.01 if i < 3 else 0.3, probability=[0.9, 0.75, 0.65, 0.55, 0.5, 0.3][i],
                  evaluable=i != 0) for i in range(6)]
    runs = pd.DataFrame(rows)
    h = tables.holdout_rule(runs).data.set_index("world")
    assert h.loc["Linear, R2=0%", "agent"] == pytest.approx(0.4) and h.loc["Linear, R2=0%", "holdout_cw"] == pytest.approx(0.1)
    # run s0 has a small p-value but no evaluable model: no claim
    assert h.loc["Linear, R2=1%", "holdout_cw_k"] == 2
    th = tables.probability_thresholds(runs, thresholds=(0.5, 0.6, 0.7)).data.set_index("rule")
    assert th.loc["verdict", "no_signal"] == pytest.approx(0.4) and th.loc["verdict", "r2_1pct"] == pytest.approx(5 / 6)
    assert th.loc["p >= 0.5", "r2_1pct_k"] == 5 and th.loc["p >= 0.6", "r2_1pct_k"] == 3
    assert th.loc["p >= 0.7", "r2_1pct_k"] == 2 and th.loc["p >= 0.6", "no_signal_k"] == 0
    assert (th.loc["p >= 0.6", "r2_1pct_low"], th.loc["p >= 0.6", "r2_1pct_high"]) == pytest.approx(_wilson(3, 6))


def test_framing_rates_use_worlds_run_under_all_three_framings():
    rows = []
    for i in range(6):
        signal = i >= 3
        for framing, claim in (("skeptical", i == 5), ("neutral", i >= 4), ("optimistic", i >= 2)):
            rows.append(_run(f"w{i}", r2=0.01 if signal else 0.0, claim=claim, framing=framing,
                             probability={"skeptical": 0.2, "neutral": 0.4, "optimistic": 0.6}[framing]))
    rows.append(_run("lonely", claim=True))  # neutral only: not a framing world
    d = tables.framing_rates(pd.DataFrame(rows)).data.set_index("framing")
    assert list(d["worlds"]) == [6, 6, 6]
    assert d.loc["skeptical", "claim"] == pytest.approx(1 / 6) and d.loc["optimistic", "claim"] == pytest.approx(4 / 6)
    assert d.loc["optimistic", "no_signal"] == pytest.approx(1 / 3) and d.loc["optimistic", "signal"] == pytest.approx(1.0)
    assert d.loc["neutral", "probability"] == pytest.approx(0.4)


def test_gaussian_against_bootstrap_rows():
    rows = [_run(f"g{i}", design="gaussian", claim=i < 2, baseline_hac_holm=i == 0) for i in range(5)]
    rows += [_run(f"b{i}", claim=i < 1) for i in range(4)]
    rows += [_run(f"p{i}", family="persistent_null", r2=float("nan"), design="gaussian", claim=i < 3) for i in range(3)]
    d = tables.gaussian_vs_bootstrap(pd.DataFrame(rows)).data.set_index("world")
    assert d.loc["Linear, R2=0%", "gauss"] == pytest.approx(0.4) and d.loc["Linear, R2=0%", "boot"] == pytest.approx(0.25)
    assert d.loc["Linear, R2=0%", "hac_holm"] == pytest.approx(0.2)
    assert d.loc["No-signal worlds pooled", "gauss_k"] == 5 and d.loc["No-signal worlds pooled", "gauss_n"] == 8
    assert np.isnan(d.loc["Linear, R2=1%", "gauss"])  # no runs: NaN rate, not an error


def test_calibration_bins_by_hand():
    p = [0.05, 0.15, 0.15, 0.95, 1.0, 0.3]
    y = [False, True, False, True, True, False]
    runs = pd.DataFrame([_run(f"w{i}", probability=pi, economic=yi) for i, (pi, yi) in enumerate(zip(p, y))])
    d = tables.calibration_bins(runs).data.set_index("bin_index")
    assert list(d["runs"]) == [1, 2, 0, 1, 0, 0, 0, 0, 0, 2]
    assert d.loc[1, "mean_p"] == pytest.approx(0.15) and d.loc[1, "outcome"] == pytest.approx(0.5)
    assert d.loc[9, "outcome"] == 1.0 and np.isnan(d.loc[2, "mean_p"])


def test_markdown_folds_intervals_and_standard_errors():
    table = tables.Table(key="t", title="T", data=pd.DataFrame({"x": [0.5], "x_low": [0.2], "x_high": [0.8], "x_n": [10],
                                                                  "m": [0.012], "m_se": [0.003], "p": [0.0004]}),
                         formats=(("x", "pct0"), ("m", "pct2"), ("p", "p")))
    shown = table.formatted()
    assert list(shown.columns) == ["x (%)", "m (%)", "p"]
    assert shown.iloc[0].tolist() == ["50 [20, 80]", "1.20 (0.30)", "<0.001"]
    assert table.to_markdown().startswith("**T**")


# ---------------------------------------------------------------- tests and families


@pytest.fixture(scope="module")
def two_models() -> pd.DataFrame:
    runs = study("v1", [Agent("a", 0.2, 0.6, 0.15), Agent("b", 0.1, 0.4, 0.1)], seed=3)
    return runs.assign(design="bootstrap")


def test_table3_reports_the_holm_family_of_each_model_and_the_cross_model_tests(two_models):
    t = summaries.prespecified_tests(two_models, models=["a", "b"])
    for model in ("a", "b"):
        family = confirmatory_tests(two_models[two_models["model"] == model])
        rows = t.data[t.data["model"] == model].set_index("name")
        for test, adjusted in zip(family.tests, family.adjusted):
            assert rows.loc[test.name, "p_adjusted"] == pytest.approx(adjusted, nan_ok=True)
        assert rows.loc["H1'", "role"] == "exploratory"
    assert set(t.data.loc[t.data["model"] == "all models", "name"]) == {"C1", "C2", "C3"}
    assert list(t.display.columns) == ["prediction", "a", "b", "all models"]
    single = summaries.prespecified_tests(two_models[two_models["model"] == "a"])
    assert "all models" not in set(single.data["model"])


def test_table4_keeps_the_local_model_in_its_own_family():
    runs = study("v3", [Agent("a", 0.3, 0.6), Agent("b", 0.15, 0.5), Agent("q", 0.35, 0.4)], seed=4)
    runs = runs.assign(design="gaussian")
    t = summaries.gaussian_tests_table(runs, local_models=["q"]).data
    assert set(t.loc[t["model"] == "q", "family"]) == {"q: G1, G3"}
    assert set(t.loc[t["model"] != "q", "family"]) == {"G1-G3"}
    assert (t["test"] == "G2").sum() == 1
    local = local_model_tests(runs, model="q")
    q = t[(t["model"] == "q")].set_index("test")
    assert q.loc["G1", "p_holm"] == pytest.approx(local.adjusted[0]) and q.loc["G3", "p_holm"] == pytest.approx(local.adjusted[1])
    k, n = int(q.loc["G1", "statistic"]), int(q.loc["G1", "n"])
    assert (q.loc["G1", "agent_low"], q.loc["G1", "agent_high"]) == pytest.approx(_wilson(k, n))
    lone = summaries.gaussian_tests_table(runs[runs["model"] == "a"]).data
    assert set(lone["test"]) == {"G1", "G3"} and set(lone["family"]) == {"a: G1, G3"}


# ---------------------------------------------------------------- search behaviour and artifact


def test_search_behaviour_by_outcome():
    rows = [
        _run("s0", r2=0.01, claim=True, n_candidates=2, planted_retained=True, gauge=1 / 7, most_persistent_included=False,
             multiple_testing=True, persistence=False, forecast_test=True, benchmark=False, n_specs=6),
        _run("s1", r2=0.01, claim=True, n_candidates=4, planted_retained=False, gauge=4 / 7, most_persistent_included=True,
             multiple_testing=False, persistence=False, forecast_test=None, benchmark=False, n_specs=8),
        _run("n0", claim=True, n_candidates=1, planted_retained=None, gauge=1 / 8, most_persistent_included=True,
             multiple_testing=True, persistence=True, forecast_test=False, benchmark=False, n_specs=9),
        _run("n1", claim=False, n_candidates=0, planted_retained=None, gauge=0.0, most_persistent_included=False,
             multiple_testing=False, persistence=False, forecast_test=False, benchmark=True, n_specs=3),
    ]
    d = behaviour.search_behaviour(pd.DataFrame(rows)).data.set_index("outcome")
    correct = d.loc["Claim, signal (correct)"]
    assert correct["runs"] == 2 and correct["candidates"] == pytest.approx(3.0) and correct["planted"] == pytest.approx(0.5)
    assert correct["gauge"] == pytest.approx(2.5 / 7) and correct["median_specs"] == pytest.approx(7.0)
    assert correct["forecast_test"] == 1.0 and correct["forecast_test_n"] == 1  # an uncoded transcript is left out
    false = d.loc["Claim, no signal (false)"]
    assert false["multiple_testing"] == 1.0 and np.isnan(false["planted"])
    assert d.loc["No claim, no signal (correct)", "benchmark"] == 1.0
    assert d.loc["No claim, signal (missed)", "runs"] == 0


def test_lookup_screen_and_artifact_flags():
    lookup = "def predict(state, history):\n    r = history['asset_A'].to_numpy()\n    hits = np.where(r[:-1] == r[-1])[0]\n"
    assert lookup_flag(lookup.replace("np.where(r[:-1] == r[-1])", "np.flatnonzero(np.isclose(r[:-1], r[-1]))"))
    assert lookup_flag("# nearest neighbour lookup of asset_A patterns\n")
    assert not lookup_flag("def fit(train):\n    return ols(train['asset_A'], train['x3'])\n")
    assert lookup_flag(None) is None
    runs = pd.DataFrame({"lookup_model": [True, False, None, False], "test_oos_r2": [0.0, 0.2, np.nan, 0.05]})
    assert artifact_flags(runs).tolist() == [True, True, False, False]


def test_final_in_sample_r2_rules():
    specs = [{"predictors": ["x1"], "in_sample_r2": 0.01}, {"predictors": ["x2", "x3"], "in_sample_r2": 0.03},
             {"predictors": ["x1"], "in_sample_r2": 0.02}, {"predictors": ["x5"], "in_sample_r2": None}]
    assert final_in_sample_r2(specs, ["x1"]) == 0.02  # the last matching specification
    assert final_in_sample_r2(specs, '["x3", "x2"]') == 0.03
    assert final_in_sample_r2(specs, ["x7"]) == 0.02  # no match: the last one that reports a value
    assert final_in_sample_r2(specs, []) == 0.0  # the benchmark
    assert np.isnan(final_in_sample_r2([], ["x1"]))


def test_transcript_texts_keep_the_models_words_only():
    events = [
        {"event": "episode_start", "system": "multiple testing in the prompt does not count"},
        {"event": "model_turn", "text": "I worry about data snooping",
         "tool_calls": [{"name": "run_python", "arguments": '{"code": "holm"}'}]},
        {"event": "observation", "content": "Stambaugh in an observation does not count"},
        {"event": "api_response", "reasoning": "persistence matters"},
    ]
    assert transcript_texts(events) == ["I worry about data snooping", '{"code": "holm"}', "persistence matters"]


def test_event_reader_skips_lines_it_does_not_code(tmp_path):
    from planted.agents.transcript import EventLog
    from planted.analysis.loading import _read_events

    with EventLog(tmp_path / "t.jsonl") as log:
        log.write("api_request", body={"messages": ["data snooping in a prompt"]})
        log.write("api_response", reasoning="the Holm adjustment", body={"content": "x"})
        log.write("model_turn", text="", tool_calls=[{"arguments": '{"code": "print(1)"}'}])
        log.write("observation", content="Stambaugh")
    with open(tmp_path / "t.jsonl", "a") as handle:
        handle.write('{"event": "model_turn", "text": "a line in another layout", "tool_calls": []}\n{"broken')
    events = _read_events(tmp_path / "t.jsonl")
    assert [e["event"] for e in events] == ["api_response", "model_turn", "model_turn"]
    assert transcript_texts(events) == ["the Holm adjustment", '{"code": "print(1)"}', "a line in another layout"]


def test_the_calibration_table_shows_a_decomposition_that_adds_up(two_models):
    """Brier = REL - RES + UNC + WBV - 2 WBC for every row, to 1e-12 (each term from the table's own columns)."""
    table = summaries.calibration_table(two_models, seed=np.random.SeedSequence(0), n_boot=50)
    data = table.data
    assert len(data) > 0 and {"within_variance", "within_covariance"} <= set(data.columns)
    rhs = data["reliability"] - data["resolution"] + data["uncertainty"] + data["within_variance"] - 2 * data["within_covariance"]
    np.testing.assert_allclose(data["brier"], rhs, rtol=0, atol=1e-12)
    three_terms = data["reliability"] - data["resolution"] + data["uncertainty"]
    assert np.max(np.abs(data["brier"] - three_terms)) > 1e-6  # the within-bin terms matter on these runs
    assert "within_variance" not in table.hidden and "| WBV" in table.to_markdown()


def test_adding_a_model_leaves_the_other_models_bootstrap_intervals_unchanged(two_models):
    """Each model draws from its own named stream (calibration table and Table E.1)."""
    seed = np.random.SeedSequence(4)
    alone = two_models[two_models["model"] == "a"]
    both = summaries.calibration_table(two_models, seed=seed, n_boot=50).data
    single = summaries.calibration_table(alone, seed=seed, n_boot=50).data
    columns = [c for c in single.columns if c.startswith("ece")]
    pd.testing.assert_frame_equal(both[both["model"] == "a"][columns].reset_index(drop=True),
                                  single[columns].reset_index(drop=True))
    flagged = two_models.assign(artifact_flag=False)
    e1_both = summaries.models_compared(flagged, seed=seed, n_boot=50).data
    e1_single = summaries.models_compared(flagged[flagged["model"] == "a"], seed=seed, n_boot=50).data
    rows_of_a = e1_both[e1_both["model"] == "a"].reset_index(drop=True)
    assert len(rows_of_a) > 0 and rows_of_a["low"].notna().any()
    pd.testing.assert_frame_equal(rows_of_a, e1_single.reset_index(drop=True))


def test_a_deployed_model_that_follows_the_lookup_is_flagged():
    """Forecasts that move with the exact lookup's (a model of the pool's repeats) correlate above the
    threshold and flag the run; a model that submits the benchmark, or a world without repeats, does not."""
    from planted.analysis.artifact import LOOKUP_CORRELATION, lookup_correlation
    from planted.baselines.detectors import Window, lookup_exact
    from planted.baselines.forecasts import expanding_mean_forecasts

    rng = np.random.default_rng(4)
    r = rng.choice(rng.normal(size=40), size=600)  # a small pool: the lookup finds repeats
    months = np.arange(400, 600)
    bench = expanding_mean_forecasts(r, 1, r.size)[months]
    lookup = lookup_exact(r, 1, Window(400, 600))[months]
    follows = pd.DataFrame({"month": months, "benchmark": bench,
                            "forecast": bench + 0.8 * (lookup - bench) + 0.01 * rng.normal(size=months.size)})
    assert lookup_correlation(follows, r) > 0.99
    benchmark_only = follows.assign(forecast=bench)
    assert np.isnan(lookup_correlation(benchmark_only, r))
    smooth = rng.normal(size=600)  # no repeats: the lookup is the benchmark
    smooth_bench = expanding_mean_forecasts(smooth, 1, smooth.size)[months]
    model = pd.DataFrame({"month": months, "benchmark": smooth_bench, "forecast": smooth_bench + rng.normal(size=200)})
    assert np.isnan(lookup_correlation(model, smooth))
    runs = pd.DataFrame({"lookup_model": [False, False], "test_oos_r2": [0.0, 0.0],
                         "lookup_correlation": [LOOKUP_CORRELATION + 0.01, np.nan]})
    assert artifact_flags(runs).tolist() == [True, False]
