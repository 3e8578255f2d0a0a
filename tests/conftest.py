"""Shared fixtures: the reference data directory beside the repository (``../shared/data``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data_dir() -> Path | None:
    candidates = [os.environ.get("PLANTED_SHARED_DATA"), REPO.parent / "shared" / "data"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def _missing(reason: str) -> None:
    """Skip outside CI; in CI (which lays ``shared/`` beside the clone) a missing fixture is an error."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must provide it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Directory of the reference data files; skips the test (with the reason) when absent."""
    found = _shared_data_dir()
    if found is None:
        _missing("reference data ../shared/data not found beside the repository (set PLANTED_SHARED_DATA)")
    return found


def _reference_file(shared_data: Path, name: str) -> Path:
    path = shared_data / name
    if not path.is_file():
        _missing(f"{path} not found")
    return path


@pytest.fixture(scope="session")
def ff5_file(shared_data: Path) -> Path:
    """The Fama-French 5-factor CSV of the reference data (CRSP 202408 vintage)."""
    return _reference_file(shared_data, "F-F_Research_Data_5_Factors_2x3.csv")


@pytest.fixture(scope="session")
def kms_file(shared_data: Path) -> Path:
    """The Kostakis-Magdalinos-Stamatogiannis (2015) monthly data of the R package ivx."""
    return _reference_file(shared_data, "kms-monthly.csv")
