"""Benchmark: the cost of one ``run_python`` call and of one evaluation.

* ``run_python("print(1)")`` in a :class:`BwrapSandbox` with the default limits, from starting the
  sandbox to the result (mount setup, supervisor fork, interpreter start, output collection,
  waiting for the namespace to be gone), median over ``--calls`` calls after two warm-up calls;
  next to a plain ``subprocess.run([sys.executable, "-c", "print(1)"])`` timed in the same run.
* The evaluator on a 700 + 360-month linear world with an OLS final model (refit every 12 months):
  wall time of ``evaluate``, which starts its sandbox, imports pandas in it and makes 30 fits and
  360 predictions over the pipe protocol.

The last line is the machine-readable ``run_python_overhead_ms=<median run_python call, ms>``
(the whole call, not the difference to the plain subprocess, which is printed above it).

Usage: ``python benchmarks/bench_sandbox.py [--calls 20]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from planted.agents.evaluator import evaluate
from planted.agents.sandbox import BwrapSandbox
from planted.worlds import WorldSpec, build

OLS_MODEL = """\
import numpy as np

def fit(train):
    x = train["x1"].to_numpy()[:-1]
    y = train["asset_A"].to_numpy()[1:]
    return np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)[0]

def predict(state, history):
    return state[0] + state[1] * history["x1"].iloc[-1]
"""


def median_ms(calls: int, func) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


EPISODE_STUDY = {
    "name": "bench",
    "seed": 5,
    "budget": 40,
    "refit_every": 12,
    "procedures": ["hac_holm"],
    "groups": [{"name": "linear", "seeds": 3,
                "cells": {"family": "linear", "r2": [0.0, 0.01], "phi": 0.95, "rho": -0.8, "shocks": "gaussian"}}],
}


def episodes_per_minute(tmp: str, concurrency: int) -> float:
    """Wall-clock episodes per minute of the scripted agent over a 6-run study (worlds and baselines excluded)."""
    from planted.agents.runner import prepare_run

    study = Path(tmp, "bench.yaml")
    study.write_text(yaml.safe_dump(EPISODE_STUDY))
    prepared = prepare_run(study=str(study), model="scripted", out=Path(tmp, f"runs-{concurrency}"),
                           concurrency=concurrency, progress=False)
    prepared.execute(limit=0)  # worlds and baselines only
    start = time.perf_counter()
    prepared.execute()
    return 6 * 60.0 / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    world = build(WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks="gaussian"), seed=7)
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        data = Path(tmp, "data.csv")
        world.visible.to_csv(data, index=False)
        sandbox = BwrapSandbox(Path(tmp, "workspace"), data)

        def call() -> None:
            result = sandbox.run_python("print(1)")
            assert result.stdout == "1\n", result.observation()

        def plain() -> None:
            subprocess.run([sys.executable, "-c", "print(1)"], check=True, capture_output=True)

        for _ in range(2):
            call()
            plain()
        sandboxed = median_ms(args.calls, call)
        unsandboxed = median_ms(args.calls, plain)
        print(f"run_python('print(1)')          median {sandboxed:7.1f} ms over {args.calls} calls")
        print(f"subprocess.run(python -c ...)   median {unsandboxed:7.1f} ms over {args.calls} calls")
        print(f"sandbox cost over plain python         {sandboxed - unsandboxed:7.1f} ms")

        model = Path(tmp, "final_model.py")
        model.write_text(OLS_MODEL)
        start = time.perf_counter()
        result = evaluate(model, world.visible, world.test)
        seconds = time.perf_counter() - start
        assert result.evaluable, result.error
        print(
            f"evaluate(OLS, {len(world.visible)} + {len(world.test)} months)  {seconds:7.2f} s  "
            f"(OOS R2 {result.oos_r2:.4f}, CW {result.cw_stat:.3f})"
        )
        for concurrency in (1, 2):
            rate = episodes_per_minute(tmp, concurrency)
            print(f"scripted episodes per minute at concurrency {concurrency}: {rate:5.1f}")
    print(f"run_python_overhead_ms={sandboxed:.1f}")


if __name__ == "__main__":
    main()
