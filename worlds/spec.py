"""World specifications: the validated, hashable description of one cell of a design.

A :class:`WorldSpec` says which family a world belongs to and the parameters the SPEC lets a cell
vary. Everything else (sigma = 3% per month, mu = 0.3%, burn-in 300, 700 training and 360 test
months, the distractor persistences) is a fixed constant of the family, recorded in every world's
metadata. Validation happens on construction, before any random number is drawn.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from planted._typing import FACTORS, FAMILIES, SHOCKS

SIGMA = 0.03
"""Monthly return standard deviation of simulated worlds (decimal)."""
MU = 0.003
"""Monthly mean return of simulated worlds (decimal)."""
BURN_IN = 300
"""Months simulated and discarded before the first training month."""
N_TRAIN = 700
"""Training months visible to the agent (simulated worlds)."""
N_TEST = 360
"""Sealed test months (simulated worlds; injected worlds have at most this many)."""
N_TRAIN_INJECTED = 480
"""Training months of injected (real-data) worlds: the earliest months of the residual series."""
N_CANDIDATES = 8
"""Candidate predictor columns x1..x8 shown to the agent."""
DISTRACTOR_PERSISTENCES = (0.3, 0.6, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99)
"""AR(1) coefficients of distractors, drawn without replacement."""
MEAN_BLOCK_LENGTH = 12
"""Mean block length of the stationary bootstrap of return shocks."""

LINEAR_R2 = (0.0, 0.0025, 0.005, 0.01, 0.02, 0.04)
LINEAR_PHI = (0.5, 0.95)
LINEAR_RHO = (0.0, -0.8)
INJECTED_R2 = (0.0, 0.01, 0.04)

PERSISTENT_NULL = {"phi": 0.98, "rho": -0.8, "r2": 0.0}
MOMENTUM_GARCH = {"arch": 0.10, "garch": 0.85, "threshold_t": 2.0, "hac_lags": 12, "max_tries": 500}
REVERSAL_R2 = 0.01
REGIME = {"stay": 0.95, "vol_ratio": 2.0, "phi": 0.9, "r2": 0.01}
INJECTED_PREDICTOR = {"phi": 0.95, "rho": -0.8}

_TAKES = {
    "linear": {"r2", "phi", "rho", "shocks"},
    "persistent_null": {"shocks"},
    "momentum_null": {"shocks"},
    "reversal": {"shocks"},
    "regime": {"shocks"},
    "injected": {"factor", "r2"},
}


class WorldSpecError(ValueError):
    """A world specification that cannot be built; the message names the field and the fix."""


class WorldBuildError(RuntimeError):
    """A valid spec whose construction failed for some seeds (``failed``: their batch positions)."""

    def __init__(self, message: str, failed: list[int]):
        super().__init__(message)
        self.failed = list(failed)


@dataclass(frozen=True)
class WorldSpec:
    """One cell of a world design.

    Parameters
    ----------
    family : str
        ``linear``, ``persistent_null``, ``momentum_null``, ``reversal``, ``regime`` or ``injected``.
    r2 : float, optional
        Population R2 of r[t+1] on the planted x[t] in [0, 1): required for ``linear`` and
        ``injected``; fixed by the SPEC (not accepted) for the trap families.
    phi : float, optional
        Persistence of the planted predictor, |phi| < 1 (``linear`` only).
    rho : float, optional
        Correlation of the return and predictor innovations, |rho| < 1 (``linear`` only).
    shocks : str
        ``bootstrap`` (stationary bootstrap from the HML residual pool) or ``gaussian``. Not used by
        ``injected`` worlds, whose return shocks are the real residuals.
    factor : str, optional
        ``HML`` or ``RMW`` (``injected`` only).
    """

    family: str
    r2: float | None = None
    phi: float | None = None
    rho: float | None = None
    shocks: str | None = "bootstrap"
    factor: str | None = field(default=None)

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise WorldSpecError(
                f"unknown world family {self.family!r}; choose one of {', '.join(FAMILIES)}"
            )
        takes = _TAKES[self.family]
        # Injected worlds carry no shock choice; accept the class default silently.
        if self.family == "injected" and self.shocks == "bootstrap":
            object.__setattr__(self, "shocks", None)
        for name in ("r2", "phi", "rho", "shocks", "factor"):
            if getattr(self, name) is not None and name not in takes:
                raise WorldSpecError(
                    f"family {self.family!r} does not take {name}={getattr(self, name)!r}: its value "
                    f"is fixed by the SPEC; it takes only {', '.join(sorted(takes))}"
                )
        for name in sorted(takes):
            if getattr(self, name) is None:
                raise WorldSpecError(f"family {self.family!r} needs {name}: pass --{name} on the command line "
                                     f"({name}: in a study's cells)")
        if "shocks" in takes and self.shocks not in SHOCKS:
            raise WorldSpecError(f"unknown shocks {self.shocks!r}; choose one of {', '.join(SHOCKS)}")
        if "factor" in takes and self.factor not in FACTORS:
            raise WorldSpecError(f"unknown factor {self.factor!r}; choose one of {', '.join(FACTORS)}")
        if self.r2 is not None:
            object.__setattr__(self, "r2", float(self.r2))
            if not 0.0 <= self.r2 < 1.0:
                raise WorldSpecError(f"r2 must lie in [0, 1), got {self.r2}; give it as a share (0.01 = 1%)")
        for name in ("phi", "rho"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, float(value))
                if not abs(value) < 1.0:
                    raise WorldSpecError(f"|{name}| must be below 1, got {value}")

    @property
    def needs_factor_file(self) -> bool:
        """Whether building needs the Fama-French 5-factor file (RMW is not in the embedded data)."""
        return self.family == "injected" and self.factor == "RMW"

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dict (``None`` for parameters the family does not take)."""
        return asdict(self)

    def seed_key(self) -> int:
        """Stable 32-bit integer naming this cell in seed trees (first 8 hex digits of SHA-256 of the label)."""
        return int(hashlib.sha256(self.label().encode()).hexdigest()[:8], 16)

    def world_type(self) -> str:
        """The world type a report shows (paper Table D.1 rows): :func:`world_type_label` of this spec."""
        return world_type_label(self.family, self.r2, self.factor)

    def label(self) -> str:
        """Return a short, stable, human-readable name such as ``linear_r2=0.01_phi=0.95_rho=-0.8_gaussian``."""
        parts = [self.family]
        for name in ("factor", "r2", "phi", "rho", "shocks"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{value}")
        return "_".join(parts)


TRAP_NAMES = {"persistent_null": "Persistent null", "momentum_null": "Momentum-looking null",
              "reversal": "Reversal (R2=1%)", "regime": "Regime (R2=1%)"}
"""How the trap families are named in tables."""


def world_type_label(family: str, r2: float | None, factor: str | None) -> str:
    """The one world-type label: ``Linear, R2=0.5%``, the trap's name, ``Injected HML, R2=1%``.

    R2 is written in percent without trailing zeros (``0.0025`` -> ``0.25``).
    """
    percent = "" if r2 is None or r2 != r2 else f"{100 * float(r2):g}"
    if family == "linear":
        return f"Linear, R2={percent}%"
    if family == "injected":
        return f"Injected {factor or ''}, R2={percent}%"
    return TRAP_NAMES.get(family, family)


def world_group(family: str, factor: str | None) -> str:
    """The coarse world category of H6's controls: the family, injected worlds split by factor."""
    return f"injected_{factor or ''}" if family == "injected" else family


def linear_cells(shocks: str = "bootstrap", r2_levels: tuple[float, ...] = LINEAR_R2) -> list[WorldSpec]:
    """Return the 24 planted-linear cells (R2 x phi x rho) of SPEC 1.1 in a fixed order."""
    return [
        WorldSpec(family="linear", r2=r2, phi=phi, rho=rho, shocks=shocks)
        for r2 in r2_levels
        for phi in LINEAR_PHI
        for rho in LINEAR_RHO
    ]
