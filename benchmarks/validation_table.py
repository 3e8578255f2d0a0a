"""Regenerate ``docs/validation.md``: claim rates at the nominal 5% level of every baseline procedure.

Linear worlds: 1,000 per cell (4,000 per R2 level) for every procedure but the lasso and the
random-features ridge, ``--small-per-cell`` (default 200: 800 per level) for those two, whose cost per
world is 10-100 times larger; with gaussian and with bootstrap shocks; trap worlds: 1,000 each
(``--small-per-cell`` for the two). Wilson 95% intervals. Simulation results are kept under ``--out``
(resumable: rerunning the same command continues where it stopped).

Usage: ``python benchmarks/validation_table.py --n-jobs 2 --out mc-validation`` (about 45 minutes on
2 cores); ``--small-per-cell 1000`` gives every procedure 4,000 worlds per level (about 4 hours).
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
EXPENSIVE = ("lasso", "rf_ridge")
LEVELS = [0.0, 0.0025, 0.005, 0.01, 0.02, 0.04]


def run(cells: list[WorldSpec], per_cell: int, procedures: list[str], out: Path, n_jobs: int, seed: int) -> pd.DataFrame:
    return simulate(SimulationConfig(cells=cells, worlds_per_cell=per_cell, procedures=procedures, seed=seed, n_jobs=n_jobs), out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("mc-validation"))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--per-cell", type=int, default=1000)
    parser.add_argument("--small-per-cell", type=int, default=200, help="worlds per cell for the lasso and rf_ridge")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--doc", type=Path, default=Path("docs/validation.md"))
    args = parser.parse_args()
    main_procs = [p for p in PROCEDURES if p not in EXPENSIVE]
    small = [p for p in EXPENSIVE if p in PROCEDURES]
    n_small = f"{', '.join(small)}: {4 * args.small_per_cell:,}"
    sections = []
    for shocks in ("gaussian", "bootstrap"):
        tables = [run(linear_grid(LEVELS, shocks), args.per_cell, main_procs, args.out / f"linear-{shocks}", args.n_jobs, args.seed)]
        tables.append(run(linear_grid(LEVELS, shocks), args.small_per_cell, small, args.out / f"linear-{shocks}-small", args.n_jobs, args.seed))
        table = rate_table(pd.concat(tables, ignore_index=True))
        table.columns = [f"R2={float(c):.2%}" for c in table.columns]
        sections.append((f"Linear worlds, {shocks} shocks ({4 * args.per_cell:,} worlds per R2 level; {n_small})", table))
        traps = [WorldSpec(family=f, shocks=shocks) for f in TRAPS]
        trap_tables = [run(traps, args.per_cell, main_procs, args.out / f"traps-{shocks}", args.n_jobs, args.seed),
                       run(traps, args.small_per_cell, small, args.out / f"traps-{shocks}-small", args.n_jobs, args.seed)]
        sections.append((f"Trap worlds, {shocks} shocks ({args.per_cell:,} worlds each; {', '.join(small)}: "
                         f"{args.small_per_cell:,})", rate_table(pd.concat(trap_tables, ignore_index=True))))
    lines = [
        "# Validation: claim rates of the baseline procedures at the nominal 5% level",
        "",
        "Share of simulated worlds in which each procedure claims (decision p-value <= 0.05), with Wilson",
        "95% intervals, pooled over the phi and rho cells. Rows: procedures; columns: population R2 of the",
        "planted predictor (R2 = 0 columns are sizes, the others powers). Regenerate with",
        "",
        f"    python benchmarks/validation_table.py --n-jobs {args.n_jobs} --out {args.out} --small-per-cell {args.small_per_cell}",
        "",
        f"(seed {args.seed} of the simulation domain, disjoint from agent worlds).",
    ]
    for title, table in sections:
        lines += ["", f"## {title}", "", table.to_markdown()]
    args.doc.write_text("\n".join(lines) + "\n")
    print(args.doc.read_text())


if __name__ == "__main__":
    main()
