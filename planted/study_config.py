"""The typed, validated study configuration: every key documented, checked before any work.

A study YAML (``conf/study/*.yaml`` or a researcher's own file) is composed by hydra into plain
containers, then checked here into a frozen :class:`StudyConfig`. An unknown or misspelt key, a
value of the wrong type or out of range fails with one line naming the key, the file and the
closest valid key (``difflib``), before a world is built. Defaults live here and nowhere else.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from planted.config import ConfigError
from planted.worlds.pool import PoolChoice

FRAMINGS = ("neutral", "optimistic", "skeptical")
"""The briefs' framings (conf/prompts.yaml)."""
CELL_KEYS = ("family", "r2", "phi", "rho", "shocks", "factor")
"""Keys of a world cell (the fields of :class:`planted.worlds.WorldSpec`)."""


def _closest(key: str, valid: list[str]) -> str:
    match = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else f" (valid: {', '.join(valid)})"


def _check_keys(data: Mapping[str, Any], valid: list[str], where: str, source: str) -> None:
    for key in data:
        if key not in valid:
            raise ConfigError(f"{source}: unknown key {where}{key!r}{_closest(str(key), valid)}")


def _integer(value: Any, key: str, source: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{source}: {key} must be a whole number, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{source}: {key} must be at least {minimum}, got {value}")
    return value


def _names(value: Any, key: str, source: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if item not in allowed:
            raise ConfigError(f"{source}: {key} has {item!r}{_closest(str(item), list(allowed))}")
    return tuple(items)


@dataclass(frozen=True)
class GroupConfig:
    """One group of a study: world cells crossed with seeds, framings and replicates.

    Attributes
    ----------
    name : str
    cells : tuple of dict
        World cells; a list value inside a cell is crossed (``r2: [0.0, 0.04]`` is two cells).
    seeds : int
        Worlds per cell (world j of a cell is the same world in every group that names the cell).
    framings : tuple of str, default ``("neutral",)``
    replicates : tuple of int, default ``(0,)``
        Replicate indices (each reruns the same worlds under the same framing).
    """

    name: str
    cells: tuple[dict[str, Any], ...]
    seeds: int
    framings: tuple[str, ...] = ("neutral",)
    replicates: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class StudyConfig:
    """A study grid and its fixed settings.

    Attributes
    ----------
    name : str
        The study's name (its output directory ``OUT/<name>``).
    seed : int
        Public study seed (world seeds also need the study secret, :mod:`planted.agents.secret`).
    groups : tuple of GroupConfig
    budget : int, default 40
        Calls of ``run_python`` and ``record_spec`` per episode (the paper's 40).
    refit_every : int, default 12
        Months between refits of the final model on the test window (the paper's 12).
    procedures : tuple of str
        Baseline procedures run on every world of the study (names of
        :data:`planted.baselines.procedures.PROCEDURES`).
    secret : str or None
        A published study secret (32 hex digits) for demonstrations; real studies leave it out.
    sandbox : dict
        Overrides of :class:`planted.agents.sandbox.SandboxLimits` (checked when the run is prepared).
    pool : str, default ``"embedded"``
        The bootstrap worlds' shock pool (:class:`planted.worlds.PoolChoice`): ``embedded``
        (linearmodels HML 1963-07..2017-03, 644 residuals) or ``ff5`` (HML of the 5-factor file
        given by ``--path``; the paper's choice).
    pool_end : str or None
        Last month of the pool (``"YYYY-MM"``; ``2026-08`` is the paper's vintage).
    """

    name: str
    seed: int
    groups: tuple[GroupConfig, ...]
    budget: int = 40
    refit_every: int = 12
    procedures: tuple[str, ...] = ()
    secret: str | None = None
    sandbox: dict[str, Any] = field(default_factory=dict)
    pool: str = "embedded"
    pool_end: str | None = None

    @property
    def pool_choice(self) -> PoolChoice:
        """The shock pool as a :class:`planted.worlds.PoolChoice`."""
        return PoolChoice(self.pool, self.pool_end)

    @classmethod
    def from_dict(cls, data: Any, source: str) -> "StudyConfig":
        """Check a composed study section (``source`` names its file in every message).

        Raises
        ------
        planted.config.ConfigError
            One line naming the key, the file and the closest valid key.
        """
        from planted.baselines.procedures import PROCEDURES

        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: a study is a mapping of keys, got {type(data).__name__}")
        _check_keys(data, [f.name for f in fields(cls)], "", source)
        for key in ("name", "seed", "groups"):
            if key not in data:
                raise ConfigError(f"{source}: the study lacks the key {key!r}")
        groups = data["groups"]
        if not isinstance(groups, list) or not groups:
            raise ConfigError(f"{source}: groups must be a non-empty list of groups")
        return cls(
            name=str(data["name"]),
            seed=_integer(data["seed"], "seed", source, minimum=0),
            groups=tuple(_group(g, i, source) for i, g in enumerate(groups)),
            budget=_integer(data.get("budget", 40), "budget", source, minimum=1),
            refit_every=_integer(data.get("refit_every", 12), "refit_every", source, minimum=1),
            procedures=_names(list(data.get("procedures") or []), "procedures", source, tuple(PROCEDURES)),
            secret=None if data.get("secret") is None else str(data["secret"]),
            sandbox=dict(data.get("sandbox") or {}),
            **_pool(data, source),
        )


def _pool(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    pool = str(data.get("pool", "embedded"))
    end = None if data.get("pool_end") is None else str(data["pool_end"])
    try:
        PoolChoice(pool, end)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return {"pool": pool, "pool_end": end}


def _group(data: Any, index: int, source: str) -> GroupConfig:
    where = f"groups[{index}]."
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: groups[{index}] must be a mapping")
    _check_keys(data, [f.name for f in fields(GroupConfig)], where, source)
    for key in ("name", "cells", "seeds"):
        if key not in data:
            raise ConfigError(f"{source}: groups[{index}] lacks the key {key!r}")
    cells = data["cells"] if isinstance(data["cells"], list) else [data["cells"]]
    for k, cell in enumerate(cells):
        if not isinstance(cell, Mapping):
            raise ConfigError(f"{source}: {where}cells[{k}] must be a mapping of world parameters")
        _check_keys(cell, list(CELL_KEYS), f"{where}cells[{k}].", source)
    replicates = data.get("replicates", [0])
    return GroupConfig(
        name=str(data["name"]),
        cells=tuple(dict(cell) for cell in cells),
        seeds=_integer(data["seeds"], f"{where}seeds", source, minimum=1),
        framings=_names(data.get("framings", ["neutral"]), f"{where}framings", source, FRAMINGS),
        replicates=tuple(_integer(r, f"{where}replicates", source, minimum=0)
                         for r in (replicates if isinstance(replicates, list) else [replicates])),
    )


__all__ = ["CELL_KEYS", "FRAMINGS", "GroupConfig", "StudyConfig"]
