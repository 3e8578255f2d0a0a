"""Central type aliases shared by every subpackage."""

from typing import Literal, TypeAlias

import numpy as np
import numpy.typing as npt

Float64Array: TypeAlias = npt.NDArray[np.float64]
Int64Array: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]

Family = Literal["linear", "persistent_null", "momentum_null", "reversal", "regime", "injected"]
Shocks = Literal["bootstrap", "gaussian"]
Factor = Literal["HML", "RMW"]

FAMILIES: tuple[Family, ...] = (
    "linear",
    "persistent_null",
    "momentum_null",
    "reversal",
    "regime",
    "injected",
)
SHOCKS: tuple[Shocks, ...] = ("bootstrap", "gaussian")
FACTORS: tuple[Factor, ...] = ("HML", "RMW")
