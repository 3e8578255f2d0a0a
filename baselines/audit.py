"""``planted audit``: can a legitimate-looking forecaster beat the benchmark in worlds that should be unpredictable?

The paper's costliest flaw was found after two studies had been paid for: a finite shock pool makes
returns repeat, and a lookup of past returns forecasts worlds with no signal (paper 5.1; its
protocol, section 7.1 item 7, asks that benchmark worlds "themselves be audited for unintended
structure"). The audit simulates **null** worlds of each family and shock type (a signal family's
R2 set to 0; the reversal and regime traps always plant a signal and are not audited; seeds in their own domain, :data:`AUDIT_DOMAIN`, disjoint from agent and Monte Carlo
worlds) and runs every detector of :mod:`planted.baselines.detectors`, plus the scripted
researcher's own procedure (HAC-Holm) as a sanity row. Each is decided like the pre-specified
baselines: the one-sided Clark-West p-value against the expanding mean on the pseudo-out-of-sample
window (second half of training) **and** on the sealed test window, because structure shared by
both windows is what a holdout does not catch.

A family is **flagged** when some detector, in some window, claims at 5% more often than 5% allows:
the one-sided exact binomial test of its claim count against 5%, Holm-adjusted across the
(detector, window) pairs of the family, below ``level``. The momentum-looking null is selected to
look predictable in sample, so only its test window counts (:data:`SELECTED_IN_SAMPLE`). Diagnostics explain a flag: the share of
returns repeating an earlier value and of repeated (previous, current) pairs, the BDS test of
independence on the returns and on the residuals of the planted linear model, and Ljung-Box on
squared returns. A passing audit is not proof that no artifact exists (``docs/audit.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from joblib import Parallel, delayed, parallel_config
from scipy import stats
from tqdm.auto import tqdm

import planted
from planted.baselines.detectors import DETECTORS, Window
from planted.baselines.engine import build_panel
from planted.baselines.multiple import holm
from planted.baselines.panel import Panel, has_signal
from planted.baselines.procedures import Workspace, run_procedures
from planted.baselines.rates import share_of_claims
from planted.seeding import substream
from planted.worlds import PoolChoice, WorldSpec
from planted.worlds.artifact import repeated_follower_share, repeated_share

AUDIT_DOMAIN = 2
"""First spawn-key element of audit worlds (agent worlds 0, Monte Carlo worlds 1)."""
NOMINAL = 0.05
SANITY = "scripted_hac_holm"
"""The scripted researcher's procedure (the HAC-Holm screen), as a row that should not be flagged."""
WINDOWS = ("pseudo", "test")
SELECTED_IN_SAMPLE = ("momentum_null",)
"""Families whose worlds are selected on in-sample predictability (SPEC 1.3): only their test window
can flag them (their pseudo-OOS window lies inside the sample the selection looked at)."""
CHUNK = 25


class AuditError(ValueError):
    """An audit that cannot run as asked (the message names the option and the fix)."""


def null_spec(spec: WorldSpec) -> WorldSpec | None:
    """The family's null world: the same spec with R2 = 0 (the null traps as they are); None for a
    family that always plants a signal (reversal, regime), which has no null world to audit."""
    null = replace(spec, r2=0.0) if spec.r2 is not None else spec
    return None if has_signal(null.family, null.r2) else null


def family_specs(specs: Sequence[WorldSpec]) -> tuple[WorldSpec, ...]:
    """One null spec per family, shock type and factor of ``specs`` (the first cell of each: the audit asks
    whether a family's null worlds carry structure, not how each phi and rho changes it); families that
    always plant a signal are left out."""
    first: dict[tuple[str, str | None, str | None], WorldSpec] = {}
    for spec in specs:
        null = null_spec(spec)
        if null is not None:
            first.setdefault((spec.family, spec.shocks, spec.factor), null)
    return tuple(first.values())


def audit_seed(seed: int, spec: WorldSpec, index: int) -> np.random.SeedSequence:
    """Seed of audit world ``index`` of ``spec``."""
    return substream(np.random.SeedSequence(seed), AUDIT_DOMAIN, spec.seed_key(), index)


@dataclass(frozen=True)
class AuditConfig:
    """What to audit: null worlds of ``specs`` (made null by :func:`null_spec`), ``worlds`` of each."""

    specs: tuple[WorldSpec, ...]
    worlds: int = 200
    seed: int = 1
    detectors: tuple[str, ...] = tuple(DETECTORS)
    level: float = 0.05
    n_jobs: int = 1
    pool: PoolChoice = field(default_factory=PoolChoice)
    factor_file: str | None = None

    def __post_init__(self) -> None:
        unknown = [d for d in self.detectors if d not in DETECTORS]
        if unknown:
            raise AuditError(f"unknown detectors {unknown}; choose from {', '.join(DETECTORS)}")
        if self.worlds < 1:
            raise AuditError("the audit needs at least one world per family (--worlds 1 or more)")
        if not 0 < self.level < 1:
            raise AuditError(f"the flag level must lie in (0, 1), got {self.level}")
        nulls = [null_spec(s) for s in self.specs]
        if any(n is None for n in nulls):
            raise AuditError("reversal and regime worlds always plant a signal: they have no null worlds to audit")
        object.__setattr__(self, "specs", tuple(dict.fromkeys(n for n in nulls if n is not None)))


def detect(panel: Panel, detectors: Sequence[str]) -> pd.DataFrame:
    """Per world, detector and window: the Clark-West decision p-value, statistic and OOS R2."""
    ws = Workspace(panel)
    windows = {"pseudo": Window(ws.pseudo_start, ws.n_train), "test": Window(ws.n_train, ws.n_months)}
    frames = []
    for name in detectors:
        for window_name, window in windows.items():
            forecasts = DETECTORS[name](panel, window)
            comparison = ws.pseudo(forecasts) if window_name == "pseudo" else ws.test(forecasts)
            frames.append(pd.DataFrame({"detector": name, "window": window_name, "decision_p": comparison.cw_pvalue,
                                        "cw_stat": comparison.cw_stat, "oos_r2": comparison.oos_r2}))
    sanity = run_procedures(panel, ["hac_holm"])["hac_holm"]
    frames.append(pd.DataFrame({"detector": SANITY, "window": "pseudo", "decision_p": sanity.decision_p,
                                "cw_stat": sanity.statistic, "oos_r2": np.nan}))
    frames.append(pd.DataFrame({"detector": SANITY, "window": "test", "decision_p": sanity.test.cw_pvalue,
                                "cw_stat": sanity.test.cw_stat, "oos_r2": sanity.test.oos_r2}))
    for frame in frames:
        frame.insert(0, "world", np.arange(len(panel)))
    return pd.concat(frames, ignore_index=True)


def diagnostics(panel: Panel) -> pd.DataFrame:
    """Per world: repeated-value shares, BDS p-values (returns, planted-model residuals), Ljung-Box on r^2."""
    from statsmodels.stats.diagnostic import acorr_ljungbox
    from statsmodels.tsa.stattools import bds

    rows = []
    for r, oracle in zip(panel.returns, panel.oracle):
        x, y = oracle[:-1], r[1:]
        keep = np.isfinite(x)
        slope, intercept = np.polyfit(x[keep], y[keep], 1) if keep.sum() > 2 and np.ptp(x[keep]) > 0 else (0.0, y.mean())
        residuals = y[keep] - (intercept + slope * x[keep])
        rows.append({
            "repeated_share": repeated_share(r), "repeated_follower_share": repeated_follower_share(r),
            "bds_p": float(np.atleast_1d(bds(r, max_dim=2)[1])[0]),
            "bds_residual_p": float(np.atleast_1d(bds(residuals, max_dim=2)[1])[0]),
            "ljung_box_sq_p": float(acorr_ljungbox(r**2, lags=[12])["lb_pvalue"].iloc[0]),
        })
    return pd.DataFrame(rows)


def _audit_chunk(spec: WorldSpec, start: int, stop: int, config: AuditConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    indices = list(range(start, stop))
    seeds = [audit_seed(config.seed, spec, j) for j in indices]
    panel, _failures = build_panel(spec, indices, seeds, config.pool.load(config.factor_file), config.factor_file)
    if panel is None:
        return pd.DataFrame(), pd.DataFrame()
    found = detect(panel, config.detectors)
    found["world"] = np.asarray(indices)[found["world"].to_numpy()]
    diag = diagnostics(panel).assign(world=indices)
    return found.assign(family=spec.label()), diag.assign(family=spec.label())


@dataclass(frozen=True)
class AuditResult:
    """The audit's per-world decisions and diagnostics, and its summary table."""

    config: AuditConfig
    decisions: pd.DataFrame
    diagnostics: pd.DataFrame
    table: pd.DataFrame
    """Per family, detector and window: claims, worlds, rate with Wilson interval, mean OOS R2,
    binomial and Holm p-values, flagged."""

    @property
    def flagged(self) -> dict[str, list[str]]:
        """Flagged families and, for each, the flagged ``detector (window)`` pairs."""
        out: dict[str, list[str]] = {}
        for row in self.table[self.table["flagged"]].itertuples(index=False):
            out.setdefault(str(row.family), []).append(f"{row.detector} ({row.window})")
        return out

    def explanation(self, family: str) -> str:
        """The diagnostic that explains a family's flags, in words."""
        d = self.diagnostics[self.diagnostics["family"] == family]
        parts = [f"median {d['repeated_share'].median():.0%} of returns repeat an earlier value and "
                 f"{d['repeated_follower_share'].median():.0%} of (previous, current) pairs repeat",
                 f"BDS rejects independence of the returns in {(d['bds_p'] < NOMINAL).mean():.0%} of worlds and "
                 f"of the planted model's residuals in {(d['bds_residual_p'] < NOMINAL).mean():.0%}",
                 f"Ljung-Box on squared returns rejects in {(d['ljung_box_sq_p'] < NOMINAL).mean():.0%}"]
        return "; ".join(parts)

    def summary(self) -> str:
        """One line: which families are flagged, by which detector."""
        flags = self.flagged
        if not flags:
            return (f"audit: no family flagged ({len(self.config.specs)} families x {self.config.worlds} null worlds, "
                    f"{len(self.config.detectors) + 1} detectors, level {self.config.level:g})")
        return "audit: FLAGGED " + "; ".join(f"{family}: {', '.join(pairs)}" for family, pairs in flags.items())


def summarise(decisions: pd.DataFrame, level: float) -> pd.DataFrame:
    """Claim rates at 5% per family, detector and window, and the flags (binomial vs 5%, Holm per family)."""
    rows = []
    for (family, detector, window), g in decisions.groupby(["family", "detector", "window"], sort=False):
        claims = g["decision_p"].to_numpy() <= NOMINAL
        rate = share_of_claims(claims)
        rows.append({"family": family, "detector": detector, "window": window, "worlds": rate.n, "claims": rate.claims,
                     "rate": rate.rate, "rate_low": rate.low, "rate_high": rate.high,
                     "mean_oos_r2": float(np.nanmean(g["oos_r2"])) if g["oos_r2"].notna().any() else float("nan"),
                     "p_binomial": float(stats.binomtest(rate.claims, rate.n, NOMINAL, alternative="greater").pvalue)})
    table = pd.DataFrame(rows)
    # the momentum-looking null is selected to look predictable in sample: its pseudo-OOS window (inside
    # the training sample) is shown but cannot flag it; its test window can
    table["tested"] = ~(table["family"].str.startswith(SELECTED_IN_SAMPLE) & (table["window"] == "pseudo"))
    table["p_holm"] = np.nan
    for family, g in table[table["tested"]].groupby("family", sort=False):
        table.loc[g.index, "p_holm"] = holm(g["p_binomial"].to_numpy())
    table["flagged"] = table["tested"] & (table["p_holm"] < level)
    return table


def run_audit(config: AuditConfig, *, progress: bool = True) -> AuditResult:
    """Simulate and decide every family's null worlds (chunks of :data:`CHUNK` worlds through joblib)."""
    chunks = [(spec, start, min(start + CHUNK, config.worlds)) for spec in config.specs
              for start in range(0, config.worlds, CHUNK)]
    found, diags = [], []
    bar = tqdm(total=len(chunks), desc="audit", disable=not progress)
    with parallel_config(backend="loky", n_jobs=config.n_jobs):
        for rows, diag in Parallel(return_as="generator")(delayed(_audit_chunk)(*chunk, config) for chunk in chunks):
            found.append(rows)
            diags.append(diag)
            bar.update(1)
    bar.close()
    decisions = pd.concat(found, ignore_index=True)
    return AuditResult(config=config, decisions=decisions, diagnostics=pd.concat(diags, ignore_index=True),
                       table=summarise(decisions, config.level))


def audit_code_sha256() -> str:
    """SHA-256 of the code that decides an audit (this module, the detectors, the forecast comparison)."""
    from planted.baselines import audit, detectors, forecasts
    from planted.hashing import sha256_bytes

    return sha256_bytes(b"".join(Path(str(m.__file__)).read_bytes() for m in (audit, detectors, forecasts)))


def verdict(result: AuditResult) -> dict[str, object]:
    """The machine-readable verdict (``audit.json``): flags with their explanations, detectors, pool, code."""
    from planted.provenance import code_provenance

    pool = result.config.pool.load(result.config.factor_file)
    return {
        "flagged": {family: {"detectors": pairs, "explanation": result.explanation(family)}
                    for family, pairs in result.flagged.items()},
        "families": [s.label() for s in result.config.specs], "worlds": result.config.worlds,
        "seed": result.config.seed, "level": result.config.level,
        "detectors": [*result.config.detectors, SANITY],
        "pool": {"source": pool.source, "sha256": pool.sha256, "residuals": pool.size},
        "planted_version": planted.__version__, "code_commit": code_provenance().commit,
        "code_sha256": audit_code_sha256(),
    }


def write_audit(result: AuditResult, out: Path) -> list[Path]:
    """``audit.csv``, ``audit.md``, ``audit.json``, ``audit_worlds.parquet`` and ``audit.png`` in ``out``."""
    from planted.analysis.figures import audit_figure
    from planted.analysis.table_type import Table
    from planted.study_layout import atomic_write_json, atomic_write_parquet

    out.mkdir(parents=True, exist_ok=True)
    table = Table(
        key="audit", title=f"World audit: claim rates (%) at 5% of each detector in null worlds ({result.config.worlds} "
                           "per family, Wilson 95% intervals), mean OOS R2 (%), the exact binomial p-value against 5% "
                           f"and Holm across the detectors and windows of each family; flagged below {result.config.level:g}",
        data=result.table, formats=(("worlds", "int"), ("claims", "int"), ("rate", "pct1"), ("mean_oos_r2", "pct2"),
                                    ("p_binomial", "p"), ("p_holm", "p"), ("family", "text"), ("detector", "text"),
                                    ("window", "text")))
    result.table.to_csv(out / "audit.csv", index=False, float_format="%.6g")
    lines = [table.to_markdown(), "", result.summary(), ""]
    lines += [f"- {family}: {result.explanation(family)}" for family in result.flagged]
    (out / "audit.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    atomic_write_json(out / "audit.json", verdict(result))
    atomic_write_parquet(out / "audit_worlds.parquet",
                         result.decisions.merge(result.diagnostics, on=["family", "world"], how="left"))
    figure = audit_figure(result.table)
    figure.savefig(out / "audit.png", dpi=150)
    return [out / n for n in ("audit.csv", "audit.md", "audit.json", "audit_worlds.parquet", "audit.png")]


__all__ = ["audit_code_sha256", "AUDIT_DOMAIN", "AuditConfig", "AuditError", "AuditResult", "SANITY", "audit_seed", "detect", "diagnostics",
           "family_specs",
           "null_spec", "run_audit", "summarise", "verdict", "write_audit"]
