"""The paper's descriptive tables: Table 1 (the pre-specified hypotheses), Table 2 (the studies) and
Table 5 panel A (the memorization probe).

Table 1 is built from :data:`PRESPECIFIED`, the one list of the hypotheses with the function that
tests each, so the table cannot drift from the code. Table 2 describes the study directories
given to the report. Table 5 panel A reads the directories written by ``planted probe
memorization`` (``scores.csv`` and ``probe.json``, :func:`planted.agents.memorization.save_probe`);
its panel B (agent runs on the real factor series) is not a planted world and is not produced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from planted.analysis import hypotheses
from planted.analysis.table_type import Table


@dataclass(frozen=True)
class Hypothesis:
    """One pre-specified hypothesis: what it says, on which sample, by which test, and its role."""

    name: str
    statement: str
    sample: str
    test: str
    role: str
    function: Callable[..., object]


PRESPECIFIED: tuple[Hypothesis, ...] = (
    Hypothesis("H1", "The agent is less powerful than the primary baseline (combination)",
               "weak-signal worlds: neutral linear R2 of 0.25, 0.5, 1%, first replicate",
               "exact McNemar, one-sided (H1': the reverse direction, exploratory)", "confirmatory", hypotheses.h1_power),
    Hypothesis("H2", "The agent's false-claim rate exceeds 5%",
               "no-signal worlds: neutral linear R2=0 and persistent null, first replicate",
               "exact binomial against 5%, one-sided", "confirmatory", hypotheses.h2_size),
    Hypothesis("H3", "The stated probabilities are miscalibrated against the economic label",
               "all runs of the model", "logistic regression of the label on the log-odds of the stated probability; "
               "Wald test of intercept 0 and slope 1", "confirmatory", hypotheses.h3_calibration),
    Hypothesis("H4", "The verdict depends on the framing of the brief",
               "worlds run under all three framings, first replicate", "Cochran's Q", "confirmatory",
               hypotheses.h4_framing),
    Hypothesis("H5", "Complexity drift widens the gap between in-sample and test-window R2",
               "all runs of the model with both R2s", "OLS slope, one-sided, world-clustered", "confirmatory",
               hypotheses.h5_drift),
    Hypothesis("H6", "The prior predicts the verdict beyond the evidence",
               "all runs of the model", "logistic regression of the verdict on the prior's log-odds, controlling for "
               "the oracle's and the combination's Clark-West statistics and world type", "exploratory",
               hypotheses.h6_prior),
)
"""The hypotheses of the first study (paper Table 1, SPEC 6); Holm across H1-H5 within each model."""


def hypotheses_table() -> Table:
    """Table 1: the pre-specified hypotheses, each with its sample, its test and the function that runs it."""
    rows = [{"hypothesis": h.name, "statement": h.statement, "sample": h.sample, "test": h.test, "role": h.role,
             "function": f"{h.function.__module__}.{h.function.__qualname__}"} for h in PRESPECIFIED]
    return Table(
        key="table1_hypotheses",
        title="Table 1: pre-specified hypotheses of the first study; H1-H5 confirmatory with a Holm adjustment across "
              "them within each model, H6 exploratory (designated before the confirmatory runs)",
        data=pd.DataFrame(rows), formats=tuple((c, "text") for c in ("hypothesis", "statement", "sample", "test", "role",
                                                                    "function")),
    )


def _framings(framings: pd.Series) -> str:
    present = set(framings.astype(str))
    return "".join(letter for name, letter in (("neutral", "N"), ("optimistic", "O"), ("skeptical", "S")) if name in present)


def studies_table(runs: pd.DataFrame) -> Table:
    """Table 2: the studies given to the report: models, shocks, worlds, runs, framings, replicates, label."""
    rows = []
    for (study, model), g in runs.groupby(["study", "model"], sort=False, dropna=False):
        rows.append({
            "study": study, "model": model, "design": ", ".join(sorted(pd.unique(g["design"].astype(str)))),
            "worlds": int(g["world_id"].nunique()), "runs": len(g), "finished": int((g["status"] == "ok").sum()),
            "framings": _framings(g["framing"]), "replicates": int(pd.to_numeric(g["replicate"]).max()) + 1,
            "label": ", ".join(sorted(pd.unique(g["analysis_label"].dropna().astype(str)))) or "unlabelled",
        })
    return Table(
        key="table2_studies",
        title="Table 2: the studies in this report, per model: shock design, worlds, runs (and finished runs), "
              "framings (N neutral, O optimistic, S skeptical), runs per world and framing, and the analysis label",
        data=pd.DataFrame(rows),
        formats=(("study", "text"), ("model", "text"), ("design", "text"), ("worlds", "int"), ("runs", "int"),
                 ("finished", "int"), ("framings", "text"), ("replicates", "int"), ("label", "text")),
    )


def audit_table(paths: Sequence[Path]) -> Table:
    """The world audits found in the study directories (``OUT/NAME/audit/audit.csv``,
    :func:`planted.baselines.audit.write_audit`): each detector's claim rate in null worlds and the flags."""
    data = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True).drop_duplicates(["family", "detector", "window"])
    return Table(
        key="table_world_audit",
        title="World audit (protocol 7.1, item 7): claim rates (%) at 5% of each detector in null worlds of each family "
              "(Wilson 95% intervals), mean OOS R2 (%), exact binomial p against 5%, Holm across a family's detectors "
              "and windows; a flagged family has a forecaster that beats the benchmark without a signal",
        data=data, formats=(("worlds", "int"), ("claims", "int"), ("rate", "pct1"), ("mean_oos_r2", "pct2"),
                            ("p_binomial", "p"), ("p_holm", "p"), ("family", "text"), ("detector", "text"),
                            ("window", "text")),
    )


class ProbeDataError(ValueError):
    """A directory given as a memorization probe holds no readable ``scores.csv`` and ``probe.json``."""


def memorization_table(probe_dirs: Sequence[str | Path]) -> Table:
    """Table 5 panel A: recall of published factor returns without tools, per probe and period.

    Raises
    ------
    ProbeDataError
        A directory without the files ``planted probe memorization`` writes (naming it).
    """
    rows = []
    for directory in map(Path, probe_dirs):
        try:
            scores = pd.read_csv(directory / "scores.csv")
            meta = json.loads((directory / "probe.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ProbeDataError(f"{directory} is not a memorization probe directory ({type(exc).__name__}); pass a "
                                 "directory written by `planted probe memorization`") from None
        model = ", ".join(meta.get("served_models") or []) or str((meta.get("model") or {}).get("model_id", "?"))
        for s in scores.itertuples(index=False):
            rows.append({
                "model": model, "factor": meta.get("factor"), "cutoff": meta.get("cutoff"), "period": s.period,
                "asked": int(s.asked), "answered": s.answered / s.asked if s.asked else float("nan"),
                "answered_low": s.answered_low, "answered_high": s.answered_high, "spearman": s.spearman,
                "correct_sign": s.correct_sign / s.answered if s.answered else float("nan"),
                "correct_sign_low": s.sign_low, "correct_sign_high": s.sign_high, "mae": s.mae, "mae_guess": s.mae_guess,
            })
    return Table(
        key="table5_memorization",
        title="Table 5 panel A: memorization probe, recall of published monthly factor returns without tools or data: "
              "share of months answered and answered months with the published sign (%, Wilson 95% intervals), "
              "Spearman rank correlation with the published returns, mean absolute error (percentage points) and that "
              "of a no-knowledge guess (the historical mean up to the month before)",
        data=pd.DataFrame(rows),
        formats=(("model", "text"), ("factor", "text"), ("cutoff", "text"), ("period", "text"), ("asked", "int"),
                 ("answered", "pct0"), ("spearman", "num2"), ("correct_sign", "pct0"), ("mae", "num2"),
                 ("mae_guess", "num2")),
    )


__all__ = ["audit_table", "Hypothesis", "PRESPECIFIED", "ProbeDataError", "hypotheses_table", "memorization_table", "studies_table"]
