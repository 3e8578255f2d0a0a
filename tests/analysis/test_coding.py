"""Transcript coding on hand-written examples."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from planted.analysis import coding as co

REASONING = [
    "I tested all eight candidates; with 8 tests some will look significant by chance, so this is a "
    "multiple-testing problem. A Bonferroni or Holm correction is needed.",
    "x4 is extremely persistent (AR(1) of 0.99), so the Stambaugh bias may inflate its t-statistic.",
    "import statsmodels.api as sm\n# Clark-West test of the final model against the historical mean\n",
]


@pytest.mark.parametrize(
    "text,family",
    [
        ("Beware of data snooping here", "multiple_testing"),
        ("data-mining concerns", "multiple_testing"),
        ("control the family-wise error rate", "multiple_testing"),
        ("Benjamini-Hochberg FDR at 10%", "multiple_testing"),
        ("White's reality check", "multiple_testing"),
        ("near unit root predictor", "persistence"),
        ("use IVX to be robust", "persistence"),
        ("the predictor's persistence", "persistence"),
        ("Diebold-Mariano statistic", "forecast_test"),
        ("clark and west (2007)", "forecast_test"),
        ("compute the CW stat", "forecast_test"),
        ("a DM test on the losses", "forecast_test"),
        ("ENC-NEW and MSE-F", "forecast_test"),
    ],
)
def test_each_family_matches_its_vocabulary(text, family):
    flags = co.keyword_flags([text])
    assert flags[family]
    assert sum(flags.values()) == 1


def test_keyword_flags_over_chunks_and_non_matches():
    flags = co.keyword_flags(REASONING)
    assert flags == {"multiple_testing": True, "persistence": True, "forecast_test": True}
    assert co.keyword_flags(["The model beats the benchmark.", "", "holmes", "we persist state in files"]) == {
        "multiple_testing": False, "persistence": False, "forecast_test": False,
    }
    matches = co.keyword_matches(REASONING)
    assert matches["multiple_testing"] == ["multiple-testing", "Bonferroni", "Holm"]
    assert matches["forecast_test"] == ["Clark-West"]


@pytest.mark.parametrize(
    "predictors,expected",
    [
        (["x3"], {"x3"}),
        (["X3", "x5"], {"x3", "x5"}),
        (["x1-x3"], {"x1", "x2", "x3"}),
        (["x1 - x3"], {"x1", "x2", "x3"}),
        (["x2..x4"], {"x2", "x3", "x4"}),
        (["x6–x8"], {"x6", "x7", "x8"}),
        (["x2 to x4", "x8"], {"x2", "x3", "x4", "x8"}),
        (["x5...x3"], {"x3", "x4", "x5"}),
        (["log(x5)"], {"x5"}),
        (["x7_lag2"], {"x7"}),
        (["x3^2", "zscore(x2)"], {"x2", "x3"}),
        (["x1*x4"], {"x1", "x4"}),
        (["x3_rolling_mean_12"], {"x3"}),
        (["m12"], {"m12"}),
        (["momentum"], {"m12"}),
        (["trailing 12-month mean return"], {"m12"}),
        (["mom_12", "x1"], {"m12", "x1"}),
        (["asset_A_lag1"], {"asset_A"}),
        (["lagged return"], {"asset_A"}),
        (["x10", "x0", "ax1"], set()),
        (["const", "historical mean"], set()),
        (["all candidates"], set(co.CANDIDATES)),
        ([], set()),
        (None, set()),
        ('["x2", "log(x8)"]', {"x2", "x8"}),
        ("x1", {"x1"}),
    ],
)
def test_parse_predictors(predictors, expected):
    assert co.parse_predictors(predictors) == frozenset(expected)


def test_benchmark_detection():
    assert co.is_benchmark([])
    assert co.is_benchmark(["historical mean"])
    assert co.is_benchmark("[]")
    assert not co.is_benchmark(["x1"])
    assert not co.is_benchmark(["m12"])
    mean_model = "def fit(train):\n    return train['asset_A'].mean()\n\ndef predict(state, history):\n    return history['asset_A'].mean()\n"
    assert co.is_benchmark([], mean_model)
    sneaky = "def fit(train):\n    return ols(train['asset_A'].shift(-1), train['x3'])\n"
    assert not co.is_benchmark([], sneaky)


def test_persistence_helpers():
    rng = np.random.default_rng(0)
    n = 700
    frame = {}
    for i, phi in enumerate((0.3, 0.6, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99), start=1):
        x = np.zeros(n)
        for t in range(1, n):
            x[t] = phi * x[t - 1] + rng.normal()
        frame[f"x{i}"] = -3.0 * x + 5.0  # anonymised: sign flip and shift
    ac = co.first_order_autocorrelations(pd.DataFrame(frame))
    assert co.most_persistent(ac) == "x8"
    assert ac["x1"] == pytest.approx(0.3, abs=0.1)
    assert co.most_persistent({"x1": 0.5, "x2": 0.9, "x3": 0.9}) == "x2"


def test_code_run_and_selection_measures():
    ac = {f"x{i}": 0.1 * i for i in range(1, 9)}  # x8 most persistent
    run = co.code_run(["x2", "log(x8)", "m12"], planted="x2", autocorrelations=ac)
    assert run.candidates == {"x2", "x8", "m12"}
    assert run.n_candidates == 3 and run.planted_retained is True
    assert run.gauge == pytest.approx(1 / 7) and run.most_persistent_included is True and not run.benchmark
    null = co.code_run(["x1-x4"], planted=None)
    assert null.planted_retained is None and null.gauge == pytest.approx(4 / 8) and null.most_persistent_included is None
    runs = pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "world_id": ["w1", "w2", "w3", "w4"],
            "predictors": [json.dumps(["x2"]), json.dumps(["x1", "x3"]), json.dumps([]), json.dumps(["x5", "x6"])],
            "planted_column": ["x2", "x3", "x4", None],
            "claim": [True, True, False, True],
        }
    )
    coded = co.code_runs(runs, texts={"a": REASONING, "b": ["nothing to see"]},
                         autocorrelations={"w1": ac, "w2": ac, "w3": ac, "w4": ac})
    assert list(coded["planted_retained"]) == [True, True, False, None]
    assert list(coded["multiple_testing"]) == [True, False, False, False]
    assert list(coded["benchmark"]) == [False, False, True, False]
    claims = runs["claim"].to_numpy()
    assert co.potency(coded, claims) == pytest.approx(1.0)  # a and b retain the planted column
    assert co.gauge(coded, claims) == pytest.approx((0 / 7 + 1 / 7 + 2 / 8) / 3)
    assert co.potency(coded, np.array([False, False, True, True])) == pytest.approx(0.0)
