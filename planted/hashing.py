"""SHA-256 helpers for files, arrays and JSON-ready objects (canonical, machine independent)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def sha256_bytes(data: bytes) -> str:
    """Return the hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Return the hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_array(values: np.ndarray) -> str:
    """Return the hex SHA-256 of an array's little-endian float64 bytes (C order)."""
    canonical = np.ascontiguousarray(values, dtype="<f8")
    return sha256_bytes(canonical.tobytes())


def canonical_json(obj: object) -> str:
    """Serialise ``obj`` as JSON with sorted keys and fixed separators (stable for hashing)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
