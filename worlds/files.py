"""World files on disk: the agent's directory and the sealed directory.

Layout written by :func:`write_world`::

    DIR/visible/data.csv    the agent's file and nothing else (mounted read-only into the sandbox)
    DIR/sealed/test.csv     the sealed test window (never mounted into the agent's sandbox)
    DIR/sealed/meta.json    sealed metadata (sorted keys, no timestamps)
    DIR/sealed/truth.csv    un-anonymised arrays over training and test months

Every file is written to a temporary name and renamed, so a crash never leaves half a world.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from planted.study_layout import atomic_write_bytes

from planted.hashing import sha256_bytes

VISIBLE_FILE = Path("visible") / "data.csv"
TEST_FILE = Path("sealed") / "test.csv"
META_FILE = Path("sealed") / "meta.json"
TRUTH_FILE = Path("sealed") / "truth.csv"


class WorldFileError(RuntimeError):
    """A world directory is missing a file or its content does not match its recorded hash."""


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))


def truth_frame(world: Any) -> pd.DataFrame:
    """The un-anonymised truth of a world as a frame (month, r, source candidates, signal, regime)."""
    truth = world.truth
    frame = pd.DataFrame({"month": range(truth.returns.size), "r": truth.returns})
    for j in range(truth.candidates.shape[0]):
        frame[f"source{j}"] = truth.candidates[j]
    for name in ("signal", "regime", "shock_ids"):
        values = getattr(truth, name)
        if values is not None:
            frame[name] = values
    return frame


def write_world(world: Any, directory: str | Path, *, replace: bool = False) -> Path:
    """Write ``world`` under ``directory`` (layout in the module docstring) and return the directory.

    Raises
    ------
    WorldFileError
        ``directory`` already holds another world (a different ``content_sha256``, or files that
        cannot be read as a world) and ``replace`` is not set; nothing is written.
    """
    from planted.worlds.world import frame_to_csv

    root = Path(directory)
    if not replace and (root / META_FILE).exists():
        try:
            recorded = json.loads((root / META_FILE).read_text(encoding="utf-8")).get("content_sha256")
        except (OSError, ValueError, AttributeError):
            recorded = None
        if recorded != world.meta["content_sha256"]:
            raise WorldFileError(f"{root} holds another world (content sha256 {str(recorded)[:12]}); "
                                 "pass --force to replace it, or another --out directory")
    _atomic_write(root / TRUTH_FILE, frame_to_csv(truth_frame(world)))
    _atomic_write(root / TEST_FILE, world.test_csv())
    _atomic_write(root / META_FILE, json.dumps(world.meta, sort_keys=True, indent=2) + "\n")
    _atomic_write(root / VISIBLE_FILE, world.visible_csv())
    return root


def read_meta(directory: str | Path) -> dict[str, Any]:
    """Read a world directory's sealed metadata, checking the data files against their hashes."""
    root = Path(directory)
    meta_path = root / META_FILE
    if not meta_path.is_file():
        raise WorldFileError(
            f"{meta_path} not found: {root} is not a world directory (create one with `planted world build`)"
        )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    try:
        visible = (root / VISIBLE_FILE).read_bytes()
        test = (root / TEST_FILE).read_bytes()
    except FileNotFoundError as exc:
        raise WorldFileError(f"{exc.filename} missing; rebuild the world with `planted world build`") from None
    if sha256_bytes(visible + test) != meta["content_sha256"]:
        raise WorldFileError(
            f"{root}: data files do not match content_sha256 in meta.json (edited or truncated); rebuild the world"
        )
    return meta


def read_visible(directory: str | Path) -> pd.DataFrame:
    """Read the agent's data file of a world directory."""
    return pd.read_csv(Path(directory) / VISIBLE_FILE)


def read_test(directory: str | Path) -> pd.DataFrame:
    """Read the sealed test window of a world directory."""
    return pd.read_csv(Path(directory) / TEST_FILE)
