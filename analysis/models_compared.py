"""Table E.1: the models side by side (false claims, the repeated-value artifact, detection, size
matching against HAC-Holm, calibration), one column per model, each with its own bootstrap stream.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from planted.analysis.calibration import calibration_summary, label_sample
from planted.analysis.hypotheses import (
    framing_table,
    h4_framing,
)
from planted.analysis.samples import claims_of, first_replicate, linear_at, neutral_first, no_signal_runs, usable, weak_signal_runs
from planted.analysis.matching import simulated_linear
from planted.worlds.spec import world_type_label
from planted.baselines.rates import matched_difference
from planted.seeding import named_generator
from planted.analysis.tables import (
    Table,
    format_value,
    models_of,
    rate_cells,
)
from planted.baselines.rates import matched_alpha


def _rate_row(block: str, measure: str, claims: np.ndarray) -> dict[str, object]:
    c = rate_cells(claims, "v")
    return {"block": block, "measure": measure, "value": c["v"], "low": c["v_low"], "high": c["v_high"],
            "n": c["v_n"], "format": "pct0"}


def _num_row(block: str, measure: str, value: float, fmt: str = "num3", low: float = float("nan"),
             high: float = float("nan"), n: float = float("nan")) -> dict[str, object]:
    return {"block": block, "measure": measure, "value": value, "low": low, "high": high, "n": n, "format": fmt}


def models_compared(runs: pd.DataFrame, *, mc: pd.DataFrame | None = None, seed: np.random.SeedSequence,
                    n_boot: int = 2000, models: Sequence[str] | None = None) -> Table:
    """Table E.1: the models side by side, per design (exploratory).

    Blocks: false claims (neutral no-signal worlds pooled, linear null, persistent null,
    momentum-looking null); the repeated-value artifact (flagged runs, false claims without them);
    detection (linear worlds by R2, the pooled weak-signal worlds of H1); HAC-Holm at the model's
    matched size at R2 = 1% and the difference (when a simulation of the design is given);
    calibration against the economic label (all runs); framing (claim rates under each framing in
    the framing worlds); transcripts (share of false claims naming multiple testing); and how often
    the verdict is a claim exactly when the stated probability is at least one half.
    """
    rows = []
    base_all = runs
    for design in sorted(pd.unique(runs["design"])):
        d = base_all[base_all["design"] == design]
        sim = simulated_linear(mc, design) if mc is not None and not mc.empty else pd.DataFrame()
        for model in [m for m in (models or models_of(d)) if m in set(d["model"])]:
            m = d[d["model"] == model]
            rng = named_generator(seed, model, str(design))  # the model's own stream: other models never move it
            ok = usable(m)
            n1 = neutral_first(m)
            null = no_signal_runs(m)
            out: list[dict[str, object]] = []
            out.append(_rate_row("False claims", "No-signal worlds pooled (H2 sample)", claims_of(null["claim"])))
            out.append(_rate_row("False claims", world_type_label("linear", 0.0, None), claims_of(linear_at(n1, [0.0])["claim"])))
            for fam, label in (("persistent_null", "Persistent null"), ("momentum_null", "Momentum-looking null")):
                g = n1[n1["family"] == fam]
                if not g.empty:
                    out.append(_rate_row("False claims", label, claims_of(g["claim"])))
            flagged = ok["artifact_flag"].astype(bool)
            out.append(_num_row("Repeated-value artifact", "Flagged runs (all runs)", float(flagged.sum()), "int"))
            nf = null["artifact_flag"].astype(bool).to_numpy()
            nc = claims_of(null["claim"])
            out.append(_num_row("Repeated-value artifact", "Flagged false claims", float(np.sum(nc & nf)), "int"))
            out.append(_rate_row("Repeated-value artifact", "False claims without flagged runs", nc[~nf]))
            linear = n1[n1["family"] == "linear"]
            for r2 in sorted(pd.to_numeric(linear["r2"]).dropna().unique()):
                if r2 > 0:
                    out.append(_rate_row("Detection", world_type_label("linear", r2, None), claims_of(linear_at(n1, [r2])["claim"])))
            weak = weak_signal_runs(m)
            if not weak.empty:
                out.append(_rate_row("Detection", "Weak signal pooled (H1 sample)", claims_of(weak["claim"])))
            agent_null = claims_of(linear_at(n1, [0.0])["claim"])
            agent_signal = claims_of(linear_at(n1, [0.01])["claim"])
            if not sim.empty and agent_null.size and agent_signal.size and "hac_holm" in set(sim["procedure"]):
                r2 = pd.to_numeric(sim["r2"]).to_numpy()
                hp = sim["procedure"].to_numpy() == "hac_holm"
                null_p = sim.loc[hp & np.isclose(r2, 0.0), "decision_p"].to_numpy(float)
                signal_p = sim.loc[hp & np.isclose(r2, 0.01), "decision_p"].to_numpy(float)
                if null_p.size and signal_p.size:
                    alpha = matched_alpha(null_p, float(agent_null.mean()))
                    out.append(_rate_row("Matched size", "HAC-Holm at the agent's size, R2=1%", signal_p <= alpha))
                    diff = matched_difference(agent_null, agent_signal, null_p, signal_p, rng=rng, n_boot=n_boot)
                    out.append(_num_row("Matched size", "Agent minus matched HAC-Holm, R2=1% (pp)", diff.difference,
                                        "pp0", diff.low, diff.high))
            p, y, claim, worlds = label_sample(ok, "economic")
            if p.size >= 2:
                cal = calibration_summary(ok, label="economic", rng=rng, n_boot=n_boot)
                out.append(_rate_row("Calibration (economic label, all runs)", "Base rate", y))
                out += [
                    _num_row("Calibration (economic label, all runs)", "Mean stated probability", cal.mean_probability, "num2"),
                    _num_row("Calibration (economic label, all runs)", "Brier score", cal.brier, "dec3"),
                    _num_row("Calibration (economic label, all runs)", "ECE", cal.ece.value, "dec3", cal.ece.low, cal.ece.high),
                    _num_row("Calibration (economic label, all runs)", "AUC", cal.auc, "num2"),
                    _num_row("Calibration (economic label, all runs)", "Calibration slope", cal.slope, "num2"),
                    _num_row("Calibration (economic label, all runs)", "Calibration intercept", cal.intercept, "num2"),
                ]
                consistent = claim == (p >= 0.5)
                out.append(_rate_row("Calibration (economic label, all runs)", "Verdict is a claim exactly when p >= 0.5",
                                     consistent))
            wide = framing_table(first_replicate(ok))
            if len(wide):
                for framing in ("skeptical", "neutral", "optimistic"):
                    out.append(_rate_row("Framing", f"Claim rate, {framing}", wide[framing].to_numpy()))
                h4 = h4_framing(m)
                out.append(_num_row("Framing", "Worlds whose verdict differs across framings", h4.detail("discordant"), "int"))
            if "multiple_testing" in null.columns:
                coded = null[nc & null["multiple_testing"].notna().to_numpy()]
                if not coded.empty:
                    out.append(_rate_row("Transcripts", "False claims naming multiple testing",
                                         coded["multiple_testing"].astype(bool).to_numpy()))
            rows += [{"design": design, "model": model, **r} for r in out]
    data = pd.DataFrame(rows)
    return Table(
        key="tableE1_models_compared",
        title="Table E.1: the models compared (exploratory). False claims: neutral runs (first replicate) in worlds without a signal; "
              "artifact: finished runs flagged by the lookup screen or a test-window R2 above 10%; detection: neutral "
              "first-replicate runs in linear worlds; matched size: HAC-Holm at the level giving it the model's false-positive rate in simulated "
              "linear null worlds; calibration against the economic label, all runs; framing: worlds run under all "
              "three framings (first replicate). Rates (%) with Wilson 95% intervals",
        data=data, display=_e1_display(data) if not data.empty else None,
    )


def _e1_display(data: pd.DataFrame) -> pd.DataFrame:
    designs = pd.unique(data["design"])
    key = (lambda r: f"{r['model']} ({r['design']})") if len(designs) > 1 else (lambda r: str(r["model"]))
    data = data.assign(column=data.apply(key, axis=1))
    order = list(dict.fromkeys(zip(data["block"], data["measure"])))
    columns = list(dict.fromkeys(data["column"]))
    out = []
    for block, measure in order:
        row = {"block": block, "measure": measure}
        for col in columns:
            hit = data[(data["block"] == block) & (data["measure"] == measure) & (data["column"] == col)]
            if hit.empty:
                row[col] = "–"
                continue
            r = hit.iloc[0]
            cell = format_value(r["value"], r["format"])
            if np.isfinite(r["low"]):
                cell += f" [{format_value(r['low'], r['format'])}, {format_value(r['high'], r['format'])}]"
            if r["format"] == "pct0" and np.isfinite(r["n"]):
                cell += f" (n={int(r['n'])})"
            row[col] = cell
        out.append(row)
    return pd.DataFrame(out)
