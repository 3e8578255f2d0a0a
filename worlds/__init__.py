"""planted.worlds: seeded worlds with a planted truth (SPEC section 1).

>>> from planted.worlds import WorldSpec, build
>>> w = build(WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks="gaussian"), seed=7)

``w.visible`` is the agent's data, ``w.test`` the sealed test window, ``w.meta`` the sealed metadata
and ``w.truth`` the un-anonymised arrays. :func:`build_batch` builds many worlds of one spec at once
for the Monte Carlo engine. This package imports no other planted subpackage.
"""

from planted.worlds.data import FactorDataError
from planted.worlds.files import WorldFileError, read_meta, read_test, read_visible, write_world
from planted.worlds.pool import PoolChoice, ShockPool, default_pool, pool_from_factor, repeated_value_share
from planted.worlds.spec import WorldBuildError, WorldSpec, WorldSpecError, linear_cells
from planted.worlds.world import World, WorldBatch, WorldTruth, build, build_batch

__all__ = [
    "FactorDataError",
    "ShockPool",
    "World",
    "WorldBatch",
    "WorldBuildError",
    "WorldFileError",
    "WorldSpec",
    "WorldSpecError",
    "WorldTruth",
    "build",
    "build_batch",
    "default_pool",
    "PoolChoice",
    "repeated_value_share",
    "linear_cells",
    "pool_from_factor",
    "read_meta",
    "read_test",
    "read_visible",
    "write_world",
]
