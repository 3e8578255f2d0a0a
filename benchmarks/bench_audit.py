"""Benchmark: the world audit of one family at 200 null worlds, every detector, 2 workers (target: 2 minutes).

Part 1: per-world time of each detector on 25 bootstrap linear null worlds, next to the cost of the
pre-specified baselines (oracle, combination, combination CT, random-features ridge) on the same
worlds, and the exact lookup against a naive reference in the same run (rescanning the history
for every target month) with the speed-up.

Part 2 (without ``--quick``): ``run_audit`` of one family (linear, bootstrap shocks, embedded pool) at
``--worlds`` null worlds on ``--n-jobs`` workers, wall time.

The last line is ``audit_seconds=<s> lookup_speedup=<x>``.

Usage: ``python benchmarks/bench_audit.py`` or ``python benchmarks/bench_audit.py --quick``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from planted.baselines.audit import AuditConfig, audit_seed, run_audit
from planted.baselines.detectors import DETECTORS, Window, lookup_exact
from planted.baselines.engine import build_panel
from planted.baselines.procedures import Workspace, run_procedures
from planted.worlds import PoolChoice, WorldSpec

SPEC = WorldSpec(family="linear", r2=0.0, phi=0.95, rho=-0.8, shocks="bootstrap")
PRESPECIFIED = ["oracle", "combination", "combination_ct", "rf_ridge"]


def naive_lookup(r: np.ndarray, k: int, window: Window) -> np.ndarray:
    """The exact lookup by rescanning every earlier k-tuple for each target month."""
    out = np.full(r.size, np.nan)
    tuples = np.lib.stride_tricks.sliding_window_view(r, k)
    for m in range(window.first, window.last):
        same = np.flatnonzero((tuples[: m - k] == r[m - k : m]).all(axis=1))
        out[m] = r[same + k].mean() if same.size else r[:m].mean()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, default=200)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="part 1 only")
    args = parser.parse_args()

    indices = list(range(25))
    seeds = [audit_seed(1, SPEC, j) for j in indices]
    panel, _ = build_panel(SPEC, indices, seeds, PoolChoice().load(None), None)
    assert panel is not None
    ws = Workspace(panel)
    windows = (Window(ws.pseudo_start, ws.n_train), Window(ws.n_train, ws.n_months))
    print(f"per-world seconds on {len(panel)} bootstrap linear null worlds (both windows):")
    for name, detector in DETECTORS.items():
        started = time.perf_counter()
        for window in windows:
            detector(panel, window)
        print(f"  {name:<18} {(time.perf_counter() - started) / len(panel):8.4f}")
    started = time.perf_counter()
    run_procedures(panel, PRESPECIFIED)
    print(f"  {'pre-specified':<18} {(time.perf_counter() - started) / len(panel):8.4f}  ({', '.join(PRESPECIFIED)})")

    r = panel.returns[0]
    started = time.perf_counter()
    fast = [lookup_exact(r, 1, w) for w in windows]
    fast_s = time.perf_counter() - started
    started = time.perf_counter()
    slow = [naive_lookup(r, 1, w) for w in windows]
    slow_s = time.perf_counter() - started
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a[np.isfinite(b)], b[np.isfinite(b)], atol=1e-14)
    speedup = slow_s / fast_s
    print(f"exact lookup, one world: {fast_s * 1e3:.1f} ms vs naive rescan {slow_s * 1e3:.1f} ms (x{speedup:.1f})")

    seconds = float("nan")
    if not args.quick:
        started = time.perf_counter()
        result = run_audit(AuditConfig(specs=(SPEC,), worlds=args.worlds, n_jobs=args.n_jobs), progress=True)
        seconds = time.perf_counter() - started
        print(f"audit of one family, {args.worlds} null worlds, {args.n_jobs} workers: {seconds:.1f} s; {result.summary()}")
    print(f"audit_seconds={seconds:.1f} lookup_speedup={speedup:.1f}")


if __name__ == "__main__":
    main()
