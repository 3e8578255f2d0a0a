"""Readable text about worlds: the family table, a world directory's summary, and the tour.

The tour is the command-line job that builds one world of every family, writes it, and prints a
table; it is how a new user sees what the worlds look like before running anything on them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from planted.worlds import spec as S
from planted.worlds.files import write_world
from planted.worlds.processes import trailing_mean
from planted.worlds.spec import WorldSpec
from planted.worlds.world import World, build

FAMILY_NOTES = {
    "linear": "r[t+1] = mu + beta x[t] + eps; takes --r2 --phi --rho --shocks "
    f"(paper grid: r2 {', '.join(f'{v:g}' for v in S.LINEAR_R2)}; phi {S.LINEAR_PHI}; rho {S.LINEAR_RHO})",
    "persistent_null": f"linear with beta = 0, phi {S.PERSISTENT_NULL['phi']}, rho {S.PERSISTENT_NULL['rho']}; takes --shocks",
    "momentum_null": "GARCH(1,1) 0.10/0.85, redrawn until trailing-12m momentum has NW t > 2; takes --shocks",
    "reversal": "r[t+1] - mu = -b (m12[t] - mu) + eps, population R2 1%; takes --shocks",
    "regime": "2-state Markov (stay 0.95, vol ratio 2), x (phi 0.9) active in the high state, R2 1%; takes --shocks",
    "injected": "real HML/RMW residuals + planted x (phi 0.95, rho -0.8); takes --factor --r2 "
    f"(paper: {', '.join(f'{v:g}' for v in S.INJECTED_R2)}); RMW needs --path",
}


def family_table() -> str:
    """One line per world family with its parameters."""
    width = max(map(len, FAMILY_NOTES))
    return "\n".join(f"{name.ljust(width)}  {note}" for name, note in FAMILY_NOTES.items())


def describe_meta(meta: dict) -> str:
    """Summary of a world from its sealed metadata (what ``planted world show`` prints)."""
    lines = [
        f"world {meta['label']}",
        f"  seed: entropy={meta['seed']['entropy']} spawn_key={meta['seed']['spawn_key']}",
        f"  train months: {meta['n_train']}   test months (sealed): {meta['n_test']}",
        f"  planted column: {meta['planted_column'] or 'none'}",
        "  persistence: " + ", ".join(f"{k}={v:g}" for k, v in sorted(meta["persistence"].items())),
        f"  repeated returns in training window: {meta['repeated_share']:.1%}",
        f"  content sha256: {meta['content_sha256']}",
    ]
    if "pool_sha256" in meta["params"]:
        lines.append(f"  shock pool: {meta['params']['pool_source']}, sha256 {meta['params']['pool_sha256']}")
    return "\n".join(lines)


def in_sample_oracle_r2(world: World) -> float:
    """R2 of r[t+1] on the true regressor (planted x, regime signal or m12) over the training window."""
    truth = world.truth
    n = truth.n_train
    if truth.signal is not None:
        regressor = truth.signal[: n - 1]
    elif truth.planted is not None:
        regressor = truth.planted[: n - 1]
    else:  # momentum_null and reversal: the trailing 12-month mean return
        m12 = trailing_mean(truth.returns[:n], 12)
        return float(np.corrcoef(m12[11 : n - 1], truth.returns[12:n])[0, 1] ** 2)
    return float(np.corrcoef(regressor, truth.returns[1:n])[0, 1] ** 2)


def tour_specs(include_rmw: bool) -> list[WorldSpec]:
    """One spec of every family (and both shock types for the linear one)."""
    specs = [
        WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks="bootstrap"),
        WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks="gaussian"),
        WorldSpec(family="linear", r2=0.0, phi=0.5, rho=0.0, shocks="bootstrap"),
        WorldSpec(family="persistent_null", shocks="bootstrap"),
        WorldSpec(family="momentum_null", shocks="bootstrap"),
        WorldSpec(family="reversal", shocks="bootstrap"),
        WorldSpec(family="regime", shocks="gaussian"),
        WorldSpec(family="injected", factor="HML", r2=0.04, shocks=None),
    ]
    if include_rmw:
        specs.append(WorldSpec(family="injected", factor="RMW", r2=0.04, shocks=None))
    return specs


def tour(out: Path, seed: int = 2026, factor_file: Path | None = None) -> str:
    """Build and write one world of every family under ``out`` and return a summary table."""
    rows = []
    for index, spec in enumerate(tour_specs(include_rmw=factor_file is not None)):
        world = build(spec, seed=seed + index, factor_file=factor_file)
        directory = write_world(world, out / f"{index:02d}_{spec.label()}")
        rows.append(
            (
                spec.label(),
                world.planted_column or "-",
                f"{in_sample_oracle_r2(world):.2%}",
                f"{world.meta['repeated_share']:.1%}",
                world.meta["content_sha256"][:12],
                str(directory),
            )
        )
    header = ("world", "planted", "oracle R2 (train)", "repeated", "sha256", "directory")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*row) for row in rows]
    if factor_file is None:
        lines.append("(injected RMW skipped: it needs the 5-factor file; run `planted data fetch` or pass --path)")
    return "\n".join(lines)

