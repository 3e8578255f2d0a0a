"""Decision rules on agent runs against independent computations (the evaluator's own output, statsmodels)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from planted.analysis.decision_rules import RULES, run_evidence, rule_pvalues, used_candidates

STUDY = {"name": "rules", "seed": 3, "budget": 40, "refit_every": 12, "procedures": ["oracle", "hac_holm"],
         "groups": [{"name": "linear", "cells": {"family": "linear", "r2": [0.0, 0.04], "phi": 0.95, "rho": -0.8,
                                                 "shocks": "gaussian"}, "seeds": 2}]}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from planted.agents.runner import prepare_run

    root = tmp_path_factory.mktemp("rules")
    (root / "rules.yaml").write_text(yaml.safe_dump(STUDY))
    prepare_run(study=str(root / "rules.yaml"), model="scripted", out=root / "runs", progress=False,
                unsafe_no_sandbox=True).execute()
    directory = root / "runs" / "rules"
    return directory, pd.read_parquet(directory / "runs.parquet")


def test_holdout_cw_is_the_evaluators_clark_west(study):
    directory, runs = study
    table = rule_pvalues(runs, directory).pivot(index="run_id", columns="rule", values="decision_p")
    evaluable = runs.set_index("run_id")["holdout_cw_p"].dropna()
    assert len(evaluable) >= 2
    np.testing.assert_allclose(table.loc[evaluable.index, "holdout_cw"], evaluable, rtol=1e-10, atol=1e-12)
    claims = runs.set_index("run_id")["claim"].astype(bool)
    assert ((table["agent"] == 0) == claims.reindex(table.index)).all()
    probability = runs.set_index("run_id")["probability"].reindex(table.index)
    np.testing.assert_allclose(table["probability"], 1 - probability)


def test_search_adjusted_is_statsmodels_hac_with_holm_over_nine(study):
    import statsmodels.api as sm
    from statsmodels.stats.multitest import multipletests

    directory, runs = study
    checked = 0
    for _, run in runs.iterrows():
        evidence = run_evidence(directory, run)
        used = used_candidates(evidence.predictors)
        if not used:
            assert RULES["search_adjusted"](evidence) == 1.0
            continue
        r, x = evidence.returns, evidence.candidates
        pvalues = []
        for j in range(9):
            fit = sm.OLS(r[13:], sm.add_constant(x[j, 12:-1])).fit(cov_type="HAC", cov_kwds={"maxlags": 12})
            pvalues.append(fit.pvalues[1])
        adjusted = multipletests(pvalues, method="holm")[1]
        assert RULES["search_adjusted"](evidence) == pytest.approx(min(adjusted[used]), rel=1e-8)
        checked += 1
    assert checked >= 1


def test_what_counts_as_a_used_candidate():
    assert used_candidates(("x3", "X7", "m12")) == [2, 6, 8]
    assert used_candidates(("asset_A lag 1", "momentum_12")) == [8]
    assert used_candidates(("constant", "x9")) == []
    assert json.dumps(used_candidates(())) == "[]"


def test_the_rules_table_reads_every_rule_on_the_same_worlds(study):
    """The scripted agent's verdict is the HAC-Holm screen at 5%: its `agent` row equals the baseline's."""
    from planted.analysis.decision_rules import rules_table
    from planted.analysis.loading import load_study_data

    directory, _ = study
    runs = load_study_data([directory]).runs
    pvalues = rule_pvalues(runs, directory).assign(study_dir=str(directory))
    table = rules_table(runs, pvalues).data.set_index("rule")
    assert set(table.index) == {"agent", "probability", "holdout_cw", "search_adjusted", "hac_holm"}
    assert table.loc["agent", "no_signal_n"] == 2 and table.loc["agent", "no_signal"] == table.loc["hac_holm", "no_signal"]
