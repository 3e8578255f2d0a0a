"""Benchmark: world construction against the cost of merely drawing its random variates.

For each shock type, build N linear worlds with ``build_batch`` (arrays, as the Monte Carlo engine
uses them) and, in the same run, time a naive reference that only creates each world's generators
and draws the same number of variates (return shocks, planted-predictor normals, distractor
normals, the anonymisation draws) with numpy. Prints worlds per second, the ratio, and, last, the
machine-readable line ``world_cost_ratio=<build time / draw time>`` (worst over shock types).

Usage: ``python benchmarks/bench_worlds.py [--worlds 2000] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from planted.seeding import generator
from planted.worlds import WorldSpec, build_batch, default_pool
from planted.worlds import spec as S


def draw_only(seeds: list[np.random.SeedSequence], shocks: str, pool_size: int) -> float:
    """Generate every world's random variates and nothing else; return a checksum."""
    length = S.BURN_IN + S.N_TRAIN + S.N_TEST
    total = 0.0
    for seq in seeds:
        rng = generator(seq, 0)
        if shocks == "gaussian":
            total += rng.standard_normal(length)[0]
        else:
            total += rng.integers(pool_size, size=length)[0] + rng.random(length)[0]
        rng = generator(seq, 1)
        total += rng.standard_normal() + rng.standard_normal(length)[0]
        rng = generator(seq, 2)
        total += rng.choice(8, size=7, replace=False)[0] + rng.standard_normal(7)[0]
        total += rng.standard_normal((7, length))[0, 0]
        rng = generator(seq, 3)
        total += rng.permutation(8)[0] + rng.uniform() + rng.uniform(size=8)[0]
        total += rng.integers(0, 2, size=8)[0] + rng.uniform(size=8)[0]
    return total


def best_of(repeats: int, func) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    pool = default_pool()
    ratios = []
    for shocks in ("gaussian", "bootstrap"):
        spec = WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks=shocks)
        seeds = [np.random.SeedSequence(i) for i in range(args.worlds)]
        build_batch(spec, seeds[:10], pool=pool)  # warm caches (pool, imports)
        build_time = best_of(args.repeats, lambda: build_batch(spec, seeds, pool=pool))
        draw_time = best_of(args.repeats, lambda: draw_only(seeds, shocks, pool.size))
        ratio = build_time / draw_time
        ratios.append(ratio)
        print(
            f"{shocks:9s}  worlds={args.worlds}  build {args.worlds / build_time:8.0f} worlds/s  "
            f"draws only {args.worlds / draw_time:8.0f} worlds/s  ratio {ratio:.2f}"
        )
    print(f"world_cost_ratio={max(ratios):.2f}")


if __name__ == "__main__":
    main()
