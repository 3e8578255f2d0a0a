"""Decision rules on agent runs: the agent searches, a rule fixed in advance decides (paper section 7.1).

Each rule maps one logged run to a **decision p-value** (the rule claims at level alpha when it is
at most alpha), stored like the baselines' p-values so that any level, size matching and frontiers
come afterwards:

* ``agent``: the agent's own verdict, p = 0 for a claim and 1 otherwise (a rule with no level);
* ``probability``: the stated probability as a statistic, p = 1 - p_stated, so that claiming at
  level alpha is claiming when p_stated >= 1 - alpha (a run without a probability: p = 1);
* ``holdout_cw``: the one-sided Clark-West test of the submitted model against the expanding mean on
  the sealed test window, from the evaluator's month-by-month forecasts (refit every 12 months;
  ``evaluation.csv``), the paper's Appendix F.2 rule (no evaluable model: p = 1);
* ``search_adjusted``: the search paid for: Newey-West (12 lags, Bartlett) t-tests of the slope of
  r[t+1] on each of the nine candidates over the training pairs t = 12 .. n_train - 2, two-sided
  normal p-values, Holm-adjusted across all nine, and the smallest adjusted p-value among the
  candidates the submitted model **uses**: the submitted predictors whose names are candidates
  (``x1`` .. ``x8``, case-insensitive) and ``m12`` for any name that refers to the asset's own
  past (``m12``, ``asset_a``, ``lag``, ``momentum``); a model that uses none: p = 1.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd
from scipy import stats

from planted.baselines.forecasts import compare_forecasts
from planted.baselines.multiple import holm
from planted.baselines.panel import CANDIDATE_NAMES, IN_SAMPLE_FIRST_PAIR
from planted.regression import newey_west_slope_t
from planted.study_layout import EVALUATION_FILE, StudyLayout
from planted.worlds.files import VISIBLE_FILE

if TYPE_CHECKING:
    from planted.analysis.tables import Table

HAC_LAGS = 12
OWN_PAST = re.compile(r"m12|asset_a|lag|momentum", re.IGNORECASE)


@dataclass(frozen=True)
class RunEvidence:
    """What the rules read of one run: its verdict and probability, the evaluator's forecasts, the world."""

    claim: bool
    probability: float | None
    evaluation: pd.DataFrame | None
    """``evaluation.csv``: month, forecast, benchmark, realised (None: no evaluable model)."""
    returns: np.ndarray
    """The world's training returns (the agent's file)."""
    candidates: np.ndarray
    """(9, n_train): x1 .. x8 and m12 (the 12-month mean of the returns, NaN for the first 11 months)."""
    predictors: tuple[str, ...]


def used_candidates(predictors: tuple[str, ...]) -> list[int]:
    """Indices into :data:`~planted.baselines.panel.CANDIDATE_NAMES` of the candidates a model uses."""
    used = set()
    for name in predictors:
        text = str(name).strip().lower()
        if text in CANDIDATE_NAMES[:8]:
            used.add(CANDIDATE_NAMES.index(text))
        elif OWN_PAST.search(text):
            used.add(CANDIDATE_NAMES.index("m12"))
    return sorted(used)


def agent_rule(run: RunEvidence) -> float:
    return 0.0 if run.claim else 1.0


def probability_rule(run: RunEvidence) -> float:
    p = run.probability
    return 1.0 if p is None or not np.isfinite(p) else float(np.clip(1.0 - p, 0.0, 1.0))


def holdout_cw_rule(run: RunEvidence) -> float:
    e = run.evaluation
    if e is None or e.empty or not np.isfinite(e["forecast"].to_numpy(float)).all():
        return 1.0
    comparison = compare_forecasts(e["realised"].to_numpy(float), e["benchmark"].to_numpy(float),
                                   e["forecast"].to_numpy(float), 0, len(e))
    p = float(comparison.cw_pvalue)
    return p if np.isfinite(p) else 1.0


def search_adjusted_rule(run: RunEvidence) -> float:
    used = used_candidates(run.predictors)
    if not used:
        return 1.0
    t0, n = IN_SAMPLE_FIRST_PAIR, run.returns.size
    y = run.returns[None, t0 + 1 : n]
    x = run.candidates[:, t0 : n - 1]
    t = newey_west_slope_t(y, x, HAC_LAGS)[1]
    adjusted = holm(2.0 * stats.norm.sf(np.abs(t)))
    return float(np.min(adjusted[used]))


RULES: dict[str, Callable[[RunEvidence], float]] = {
    "agent": agent_rule, "probability": probability_rule, "holdout_cw": holdout_cw_rule,
    "search_adjusted": search_adjusted_rule,
}
"""Every decision rule, by name."""


def run_evidence(study_dir: Path, run: pd.Series) -> RunEvidence | None:
    """The evidence of one row of ``runs.parquet`` from its study directory (None without world files)."""
    layout = StudyLayout(Path(study_dir))
    visible = layout.world_dir(str(run["world_id"])) / VISIBLE_FILE
    if not visible.is_file():
        return None
    train = pd.read_csv(visible)
    returns = train["asset_A"].to_numpy(float)
    m12 = pd.Series(returns).rolling(12).mean().to_numpy()
    candidates = np.vstack([train[f"x{j}"].to_numpy(float) for j in range(1, 9)] + [m12])
    evaluation_file = layout.run_dir(str(run["run_id"])) / EVALUATION_FILE
    evaluation = pd.read_csv(evaluation_file) if evaluation_file.is_file() else None
    predictors = json.loads(run["predictors"]) if isinstance(run.get("predictors"), str) else None
    probability = pd.to_numeric(pd.Series([run.get("probability")]), errors="coerce").iloc[0]
    return RunEvidence(claim=bool(run.get("claim")) if pd.notna(run.get("claim")) else False,
                       probability=None if pd.isna(probability) else float(probability), evaluation=evaluation,
                       returns=returns, candidates=candidates, predictors=tuple(predictors or ()))


def rule_pvalues(runs: pd.DataFrame, study_dir: Path, rules: tuple[str, ...] = tuple(RULES)) -> pd.DataFrame:
    """Per finished run and rule: the decision p-value (long format: ``run_id``, ``rule``, ``decision_p``)."""
    rows = []
    for _, run in runs[runs["status"] == "ok"].iterrows():
        evidence = run_evidence(study_dir, run)
        if evidence is None:
            continue
        rows += [{"run_id": run["run_id"], "rule": name, "decision_p": RULES[name](evidence)} for name in rules]
    return pd.DataFrame(rows, columns=["run_id", "rule", "decision_p"])


def rules_table(runs: pd.DataFrame, pvalues: pd.DataFrame, *, alpha: float = 0.05) -> "Table":
    """Appendix F.2's reading for every rule: claim rates at ``alpha`` in the no-signal worlds and in
    linear worlds with R2 = 1% (neutral runs, first replicate; Wilson intervals), next to HAC-Holm at
    its nominal level on the same worlds.

    ``pvalues`` is :func:`rule_pvalues` with a ``study_dir`` column (run ids repeat across studies).
    """
    from planted.analysis.samples import linear_at, neutral_first, no_signal_runs
    from planted.analysis.tables import Table, models_of, rate_cells

    wide = pvalues.pivot_table(index=["study_dir", "run_id"], columns="rule", values="decision_p", aggfunc="first")
    base = neutral_first(runs)
    rows = []
    for model in models_of(base):
        for design in sorted(pd.unique(base.loc[base["model"] == model, "design"])):
            m = base[(base["model"] == model) & (base["design"] == design)]
            samples = {"no_signal": no_signal_runs(m), "r2_1pct": linear_at(m, [0.01])}
            for rule in [r for r in RULES if r in wide.columns] + ["hac_holm"]:
                row: dict[str, object] = {"model": model, "design": design, "rule": rule}
                for column, sample in samples.items():
                    if rule == "hac_holm":
                        claims = sample["baseline_hac_holm"].fillna(False).astype(bool).to_numpy() \
                            if "baseline_hac_holm" in sample.columns else np.zeros(0, bool)
                    else:
                        keys = list(zip(sample["study_dir"].astype(str), sample["run_id"].astype(str)))
                        p = wide[rule].reindex(keys).to_numpy(float)
                        claims = np.nan_to_num(p, nan=1.0) <= alpha
                    row |= rate_cells(claims, column)
                rows.append(row)
    return Table(
        key="table_decision_rules",
        title=f"Decision rules (section 7.1, Appendix F.2): claim rates (%) at {alpha:.0%} of each rule applied to the "
              "agent's runs, in the no-signal worlds and in linear worlds with R2=1% (neutral runs, first replicate, "
              "Wilson 95% intervals); agent: its own verdict; probability: stated probability >= 1 - alpha; "
              "holdout_cw: Clark-West of the submitted model on the test window; search_adjusted: HAC-Holm over the "
              "nine candidates, the smallest adjusted p among those the model uses; hac_holm: the baseline at 5%",
        data=pd.DataFrame(rows), formats=(("no_signal", "pct0"), ("r2_1pct", "pct0"), ("rule", "text")),
    )


__all__ = ["rules_table", "RULES", "RunEvidence", "agent_rule", "holdout_cw_rule", "probability_rule", "rule_pvalues", "run_evidence",
           "search_adjusted_rule", "used_candidates"]
