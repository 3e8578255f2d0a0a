"""A study grid from its configuration: worlds x framings x replicates, in a fixed run order.

A study configuration (``conf/study/*.yaml``) lists groups; each group crosses world cells (a dict
whose list values are crossed, or a list of such dicts) with a number of seeds, framings and
replicate indices. World j of a cell is the same world in every group that names that cell, so a
framing group can rerun worlds of the neutral group. Seeds come from one tree:
``SeedSequence([study_seed, secret], spawn_key=(AGENT_DOMAIN, cell.seed_key(), j))``, where
``secret`` is the study's 128-bit secret (:mod:`planted.agents.secret`: without it nobody can
rebuild a world from the public configuration); the Monte Carlo engine uses another domain and no
secret, so simulated and agent worlds never coincide. The run order is the listed order permuted
once by ``SeedSequence(study_seed, spawn_key=(ORDER_DOMAIN,))`` (public: it is committed before
the runs) so that a partial grid is a random subset of the whole.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from planted.seeding import generator, substream
from planted.study_config import StudyConfig
from planted.worlds import WorldSpec

AGENT_DOMAIN = 0
ORDER_DOMAIN = 2


@dataclass(frozen=True)
class WorldUnit:
    """One world of a study."""

    world_id: str
    spec: WorldSpec
    index: int
    seed: np.random.SeedSequence


@dataclass(frozen=True)
class RunUnit:
    """One episode of a study: a world under a framing, replicate r."""

    run_id: str
    world_id: str
    framing: str
    replicate: int
    group: str


@dataclass(frozen=True)
class StudyGrid:
    """The worlds and the runs (in run order) of a study."""

    name: str
    seed: int
    worlds: dict[str, WorldUnit]
    runs: list[RunUnit]


def _cells(cells: Any) -> list[WorldSpec]:
    """Expand a cell dict (list values are crossed) or a sequence of them into specs."""
    if isinstance(cells, (list, tuple)):
        return [spec for item in cells for spec in _cells(item)]
    keys = list(cells)
    values = [v if isinstance(v, list) else [v] for v in cells.values()]
    return [WorldSpec(**dict(zip(keys, combo))) for combo in itertools.product(*values)]


def world_id(spec: WorldSpec, index: int) -> str:
    """Identifier of world ``index`` of a cell, e.g. ``linear_r2=0.01_phi=0.95_rho=-0.8_bootstrap__s007``."""
    return f"{spec.label()}__s{index:03d}"


def study_grid(config: StudyConfig | Mapping[str, Any], secret: int) -> StudyGrid:
    """Expand a study configuration into its worlds and runs.

    Parameters
    ----------
    config : StudyConfig or mapping
        The study (a mapping is checked by :meth:`StudyConfig.from_dict`).
    secret : int
        The study's secret (:func:`planted.agents.secret.study_secret`); world seeds depend on it,
        the run order does not.
    """
    study = config if isinstance(config, StudyConfig) else StudyConfig.from_dict(config, "study configuration")
    seed = study.seed
    root = np.random.SeedSequence([seed, int(secret)])
    worlds: dict[str, WorldUnit] = {}
    runs: list[RunUnit] = []
    for group in study.groups:
        for spec in _cells(group.cells):
            for index in range(group.seeds):
                wid = world_id(spec, index)
                worlds.setdefault(wid, WorldUnit(wid, spec, index, substream(root, AGENT_DOMAIN, spec.seed_key(), index)))
                for framing in group.framings:
                    for replicate in group.replicates:
                        run_id = f"{wid}__{framing}__r{replicate}"
                        runs.append(RunUnit(run_id, wid, framing, replicate, group.name))
    ids = [r.run_id for r in runs]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise ValueError(f"study {study.name!r} lists runs twice: {duplicated[:5]}")
    order = generator(np.random.SeedSequence(seed, spawn_key=(ORDER_DOMAIN,))).permutation(len(runs))
    return StudyGrid(name=study.name, seed=seed, worlds=worlds, runs=[runs[i] for i in order])
