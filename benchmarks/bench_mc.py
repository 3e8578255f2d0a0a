"""Benchmark: the Monte Carlo battery against a naive per-world loop, and the Figure 1 workload.

Part 1 (always): time the vectorised in-sample tests (best9, hac_holm, ivx_holm) per world on a
batch of bootstrap linear worlds and, in the same run, a naive reference on a few of the same worlds
(a per-world, per-candidate loop calling statsmodels OLS / HAC fits, statsmodels' Holm and the
single-series IVX); check that both give the same decision p-values; print the speed-up.

Part 2 (always): time the whole battery per world (every procedure, lasso included).

Part 3 (without ``--quick``): the Figure 1 workload through the engine: 24,000 bootstrap linear
worlds (1,000 per cell) with every procedure but the lasso, plus 4,800 (200 per cell) with the
lasso, on ``--n-jobs`` workers, with wall time and peak memory (the largest total resident set of
this process and its workers, sampled every half second).

The last line is ``speedup_in_sample=<x> worlds_per_second=<y>`` (y: whole battery but the lasso, per
second of wall time, from part 2 or part 3).

Usage: ``python benchmarks/bench_mc.py --quick`` (under 2 minutes) or ``python benchmarks/bench_mc.py --n-jobs 2``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import statsmodels.api as sm
from statsmodels.stats.multitest import multipletests

from planted.baselines.engine import SimulationConfig, linear_grid, simulate
from planted.baselines.ivx import ivx_wald_multi
from planted.baselines.panel import panel_from_batch
from planted.baselines.procedures import PROCEDURES, run_procedures
from planted.worlds import WorldSpec, build_batch

IN_SAMPLE = ["best9", "hac_holm", "ivx_holm"]


def naive_in_sample(returns: np.ndarray, candidates: np.ndarray) -> dict[str, float]:
    """Decision p-values of best9, hac_holm and ivx_holm for one world with per-candidate library calls."""
    n = 700
    m12 = np.array([np.nan] * 11 + [returns[t - 11 : t + 1].mean() for t in range(11, returns.size)])
    cands = np.vstack([candidates, m12])
    ols_p, hac_p, ivx_p = [], [], []
    for k in range(9):
        design = sm.add_constant(cands[k, 12 : n - 1])
        ols_p.append(sm.OLS(returns[13:n], design).fit().pvalues[1])
        hac_p.append(sm.OLS(returns[13:n], design).fit(cov_type="HAC", cov_kwds={"maxlags": 12}).pvalues[1])
        ivx_p.append(ivx_wald_multi(returns[12:n], cands[k, 12:n]).pvalue)
    return {
        "best9": min(ols_p),
        "hac_holm": multipletests(hac_p, method="holm")[1].min(),
        "ivx_holm": multipletests(ivx_p, method="holm")[1].min(),
    }


class TreeMemory(threading.Thread):
    """Samples the resident set size of this process and all its descendants (the workers).

    Linux only (reads ``/proc``). ``peak_total_mb`` is the largest sum over the process tree at one
    sampling instant, ``peak_single_mb`` the largest single process.
    """

    def __init__(self, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.interval, self.peak_total_mb, self.peak_single_mb = interval, 0.0, 0.0
        self._stop_event = threading.Event()

    @staticmethod
    def _tree_rss_mb() -> list[float]:
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                parents[int(stat.parent.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
        tree, frontier = {os.getpid()}, [os.getpid()]
        while frontier:
            children = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
            tree.update(children)
            frontier = children
        sizes = []
        for pid in tree:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]) / 1024.0)
        return sizes

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            sizes = self._tree_rss_mb()
            self.peak_total_mb = max(self.peak_total_mb, sum(sizes))
            self.peak_single_mb = max(self.peak_single_mb, max(sizes, default=0.0))

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="parts 1 and 2 only (under 2 minutes)")
    parser.add_argument("--worlds", type=int, default=500, help="worlds in the vectorised timing of parts 1-2")
    parser.add_argument("--naive-worlds", type=int, default=8)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()

    spec = WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks="bootstrap")
    batch = build_batch(spec, range(args.worlds))
    panel = panel_from_batch(batch)
    run_procedures(panel_from_batch(build_batch(spec, range(5))), IN_SAMPLE)  # warm up
    fast_times = []
    for _ in range(3):
        start = time.perf_counter()
        fast = run_procedures(panel, IN_SAMPLE)
        fast_times.append(time.perf_counter() - start)
    fast_per_world = min(fast_times) / args.worlds
    start = time.perf_counter()
    naive = [naive_in_sample(batch.returns[i], batch.candidates[i]) for i in range(args.naive_worlds)]
    naive_per_world = (time.perf_counter() - start) / args.naive_worlds
    worst = max(
        abs(naive[i][name] - fast[name].decision_p[i]) / max(naive[i][name], 1e-300)
        for i in range(args.naive_worlds) for name in IN_SAMPLE
    )
    speedup = naive_per_world / fast_per_world
    print(f"in-sample tests: vectorised {fast_per_world * 1e3:.3f} ms/world, naive {naive_per_world * 1e3:.1f} ms/world, "
          f"speed-up {speedup:.0f}x, largest relative p-value difference {worst:.1e}")
    if worst > 1e-8:
        raise SystemExit("vectorised and naive decision p-values differ")

    battery = [name for name in PROCEDURES if name != "lasso"]
    cheap = [name for name in battery if name != "rf_ridge"]
    start = time.perf_counter()
    run_procedures(panel, cheap)
    cheap_per_world = (time.perf_counter() - start) / args.worlds
    small = panel_from_batch(build_batch(spec, range(min(args.worlds, 40))))
    per_world = {}
    for name in ("rf_ridge", "lasso"):
        start = time.perf_counter()
        run_procedures(small, [name])
        per_world[name] = (time.perf_counter() - start) / len(small)
    battery_per_world = cheap_per_world + per_world["rf_ridge"]
    print(f"per world on one core: {', '.join(cheap)} together {cheap_per_world * 1e3:.1f} ms; "
          f"rf_ridge {per_world['rf_ridge'] * 1e3:.0f} ms; lasso {per_world['lasso'] * 1e3:.0f} ms")
    worlds_per_second = 1.0 / battery_per_world

    if not args.quick:
        memory = TreeMemory()
        memory.start()
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            grid = linear_grid([0.0, 0.0025, 0.005, 0.01, 0.02, 0.04], "bootstrap")
            simulate(SimulationConfig(cells=grid, worlds_per_cell=1000, procedures=battery, seed=1, n_jobs=args.n_jobs), f"{tmp}/main")
            main_time = time.perf_counter() - start
            start = time.perf_counter()
            if "lasso" in PROCEDURES:
                simulate(SimulationConfig(cells=grid, worlds_per_cell=200, procedures=["lasso"], seed=1, n_jobs=args.n_jobs), f"{tmp}/lasso")
            lasso_time = time.perf_counter() - start
        memory.stop()
        total = main_time + lasso_time
        worlds_per_second = 24_000 / main_time
        print(f"Figure 1 workload on {args.n_jobs} workers: 24,000 worlds without lasso {main_time / 60:.1f} min, "
              f"4,800 with lasso {lasso_time / 60:.1f} min, total {total / 60:.1f} min; peak memory "
              f"{memory.peak_total_mb:.0f} MB over all processes (largest process {memory.peak_single_mb:.0f} MB)")
    print(f"speedup_in_sample={speedup:.1f} worlds_per_second={worlds_per_second:.1f}")


if __name__ == "__main__":
    main()
