"""The samples every analysis draws from: one vocabulary, defined once.

Each table, test and summary says which of these samples it is on (its title or note names it):

* **usable** runs: finished (``status == "ok"``); an ``infra_error`` run is never an agent outcome;
* the **neutral first replicate**: usable neutral runs, the first replicate of each (model, world)
  (Table D.1, the ``planted run`` summary, H1-H3);
* **no-signal** worlds: neutral first replicates in linear R2 = 0 and persistent-null worlds (H2,
  the paper's 70 of study 1);
* **weak-signal** worlds: neutral first replicates in linear worlds with R2 of 0.25, 0.5 or 1% (H1);
* **linear at R2**: runs in linear worlds whose R2 is one of the levels given;
* **claims**: a verdict of ``beats``; a missing verdict counts as no claim.

R2 levels are matched to 1e-12 (they are written as decimals).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

WEAK_R2 = (0.0025, 0.005, 0.01)
"""The weak-signal R2 levels of H1 (paper section 3.1)."""


def usable(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that finished (``status == "ok"`` when the column exists)."""
    return runs[runs["status"] == "ok"] if "status" in runs.columns else runs


def first_replicate(runs: pd.DataFrame) -> pd.DataFrame:
    """Each (model, world, framing)'s run with the smallest ``replicate``."""
    keys = [k for k in ("model", "world_id", "framing") if k in runs.columns]
    first = runs.groupby(keys, dropna=False)["replicate"].transform("min")
    return runs[runs["replicate"] == first]


def neutral_first(runs: pd.DataFrame) -> pd.DataFrame:
    """Usable neutral runs, the first replicate of each (model, world)."""
    runs = usable(runs)
    return first_replicate(runs[runs["framing"] == "neutral"])


def r2_in(runs: pd.DataFrame, levels: Sequence[float]) -> np.ndarray:
    """Whether each run's R2 is one of ``levels`` (to 1e-12)."""
    r2 = pd.to_numeric(runs["r2"], errors="coerce").to_numpy()
    return np.isclose(r2[:, None], np.asarray(levels, dtype=float)[None, :], rtol=0, atol=1e-12).any(axis=1)


def linear_at(runs: pd.DataFrame, levels: Sequence[float]) -> pd.DataFrame:
    """Runs in linear worlds whose R2 is one of ``levels``."""
    return runs[(runs["family"] == "linear").to_numpy() & r2_in(runs, levels)]


def weak_signal_runs(runs: pd.DataFrame, levels: Sequence[float] = WEAK_R2) -> pd.DataFrame:
    """Neutral first-replicate runs in linear worlds with R2 in ``levels`` (default 0.25, 0.5, 1%)."""
    return linear_at(neutral_first(runs), levels)


def no_signal_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Neutral first-replicate runs in linear R2 = 0 and persistent-null worlds."""
    base = neutral_first(runs)
    linear_null = (base["family"] == "linear").to_numpy() & r2_in(base, (0.0,))
    return base[linear_null | (base["family"] == "persistent_null").to_numpy()]


def claims_of(values: pd.Series | np.ndarray) -> np.ndarray:
    """Boolean claims; a missing verdict (None/NaN) counts as no claim."""
    return pd.Series(values).astype(float).fillna(0.0).to_numpy() > 0.5


__all__ = ["WEAK_R2", "claims_of", "first_replicate", "linear_at", "neutral_first", "no_signal_runs", "r2_in",
           "usable", "weak_signal_runs"]
