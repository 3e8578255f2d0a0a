"""Regenerate ``docs/validation.md``: claim rates at the nominal 5% level of every baseline procedure.

Linear worlds: ``--per-cell`` (default 1,000: 4,000 per R2 level) for every procedure but the lasso,
``--lasso-per-cell`` (default 200: 800 per level) for the lasso, whose cost per world is ten times
that of the others together; with gaussian and with bootstrap shocks; trap worlds: ``--per-cell``
each (``--lasso-per-cell`` for the lasso). Wilson 95% intervals. The simulations of the cheap
procedures, of the random-features ridge and of the lasso are kept in separate directories under
``--out`` (resumable: rerunning the same command continues where it stopped, and a cheaper table
can be regenerated without redoing the ridge).

Usage: ``python benchmarks/validation_table.py --n-jobs 2 --out mc-validation`` (about an hour on 2
cores, most of it the random-features ridge).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from planted.baselines.engine import SimulationConfig, linear_grid, simulate
from planted.baselines.procedures import PROCEDURES
from planted.baselines.summary import rate_table
from planted.worlds import WorldSpec

TRAPS = ("persistent_null", "momentum_null", "reversal", "regime")
SEPARATE = ("rf_ridge", "lasso")
"""Procedures simulated in directories of their own (their cost per world dwarfs the others')."""
LEVELS = [0.0, 0.0025, 0.005, 0.01, 0.02, 0.04]


def run(cells: list[WorldSpec], per_cell: int, procedures: list[str], out: Path, n_jobs: int, seed: int) -> pd.DataFrame:
    return simulate(SimulationConfig(cells=cells, worlds_per_cell=per_cell, procedures=procedures, seed=seed, n_jobs=n_jobs), out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("mc-validation"))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--per-cell", type=int, default=1000)
    parser.add_argument("--lasso-per-cell", type=int, default=200, help="worlds per cell for the lasso")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--doc", type=Path, default=Path("docs/validation.md"))
    args = parser.parse_args()
    groups = [("", [p for p in PROCEDURES if p not in SEPARATE], args.per_cell),
              ("-rf", ["rf_ridge"], args.per_cell), ("-lasso", ["lasso"], args.lasso_per_cell)]
    sections = []
    for shocks in ("gaussian", "bootstrap"):
        linear = linear_grid(LEVELS, shocks)
        per_level = len(linear) // len(LEVELS)  # the phi x rho cells pooled in a column
        traps = [WorldSpec(family=f, shocks=shocks) for f in TRAPS]
        titles = {
            "linear": f"Linear worlds, {shocks} shocks ({per_level * args.per_cell:,} worlds per R2 level; "
                      f"lasso: {per_level * args.lasso_per_cell:,})",
            "traps": f"Trap worlds, {shocks} shocks ({args.per_cell:,} worlds each; lasso: {args.lasso_per_cell:,})",
        }
        for family, cells in (("linear", linear), ("traps", traps)):
            tables = [run(cells, per_cell, procedures, args.out / f"{family}-{shocks}{suffix}", args.n_jobs, args.seed)
                      for suffix, procedures, per_cell in groups]
            table = rate_table(pd.concat(tables, ignore_index=True))
            if family == "linear":
                table.columns = [f"R2={float(c):.2%}" for c in table.columns]
            sections.append((titles[family], table))
    lines = [
        "# Validation: claim rates of the baseline procedures at the nominal 5% level",
        "",
        "Share of simulated worlds in which each procedure claims (decision p-value <= 0.05), with Wilson",
        "95% intervals, pooled over the phi and rho cells. Rows: procedures; columns: population R2 of the",
        "planted predictor (R2 = 0 columns are sizes, the others powers). Regenerate with",
        "",
        f"    python benchmarks/validation_table.py --n-jobs {args.n_jobs} --out mc-validation --per-cell {args.per_cell} "
        f"--lasso-per-cell {args.lasso_per_cell}",
        "",
        f"(seed {args.seed} of the simulation domain, disjoint from agent worlds; about an hour on 2 cores,",
        "most of it the random-features ridge, see `docs/performance.md`).",
        "",
        "Reading the table: the Holm-adjusted in-sample tests hold their size near 5% in linear null worlds",
        "(HAC-Holm slightly above, as Newey-West with 12 lags is with persistent regressors; IVX near 5%),",
        "the unadjusted best of nine claims in about 1 - 0.95^9 = 37% of them, and every procedure except",
        "the random-features ridge gains power with R2. The ridge (12-month window, penalty 1,000, no",
        "intercept) shrinks its forecast towards zero and claims in 5-11% of worlds whatever the signal.",
    ]
    for title, table in sections:
        lines += ["", f"## {title}", "", table.to_markdown()]
    args.doc.write_text("\n".join(lines) + "\n")
    print(args.doc.read_text())


if __name__ == "__main__":
    main()
