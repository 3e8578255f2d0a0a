"""The study directory: every path named once, and the one way files in it are written.

``planted run`` writes a study directory (``OUT/<study>/``) and ``planted report`` reads it; both go
through :class:`StudyLayout`, so a file's name lives here and nowhere else::

    study.json                the resolved configuration and its hash
    sealed/study_secret.json  the study secret (planted.agents.secret)
    worlds/<world_id>/        each world's files (visible/ for the agent, sealed/ for evaluation)
    baselines.parquet         every baseline procedure on every world
    runs/<run_id>/            transcript.jsonl, final_model.py, evaluation.csv, result.json,
                              workspace.txt; attempts/<n>/ holds earlier attempts' files
    ws/<random>/              each run's agent workspace (a random name: its path is visible to the agent)
    ledger.jsonl              append-only log of run starts and ends (informational)
    runs.parquet              one row per run

Every file that must never be seen half-written goes through :func:`atomic_write_bytes` (or its
JSON and Parquet forms): written to a temporary name beside the target, flushed and fsynced,
renamed over the target, then the directory fsynced, so that a crash leaves the old file or the
new one, never a mixture, and the rename itself survives a power cut.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STUDY_FILE = "study.json"
RUNS_TABLE = "runs.parquet"
BASELINES_TABLE = "baselines.parquet"
LEDGER_FILE = "ledger.jsonl"
RESULT_FILE = "result.json"
TRANSCRIPT_FILE = "transcript.jsonl"
MODEL_FILE = "final_model.py"
EVALUATION_FILE = "evaluation.csv"
WORKSPACE_POINTER = "workspace.txt"
ATTEMPTS_DIR = "attempts"
SECRET_FILE = Path("sealed") / "study_secret.json"


@dataclass(frozen=True)
class StudyLayout:
    """The paths of one study directory ``root`` (``OUT/<study>``)."""

    root: Path

    @property
    def study_file(self) -> Path:
        """``study.json``: the resolved configuration and its hash."""
        return self.root / STUDY_FILE

    @property
    def secret_file(self) -> Path:
        """``sealed/study_secret.json``."""
        return self.root / SECRET_FILE

    @property
    def runs_table(self) -> Path:
        """``runs.parquet``."""
        return self.root / RUNS_TABLE

    @property
    def baselines_table(self) -> Path:
        """``baselines.parquet``."""
        return self.root / BASELINES_TABLE

    @property
    def ledger(self) -> Path:
        """``ledger.jsonl``."""
        return self.root / LEDGER_FILE

    @property
    def worlds_dir(self) -> Path:
        """``worlds/``."""
        return self.root / "worlds"

    @property
    def runs_dir(self) -> Path:
        """``runs/``."""
        return self.root / "runs"

    @property
    def workspaces_dir(self) -> Path:
        """``ws/``: the agents' workspaces."""
        return self.root / "ws"

    def world_dir(self, world_id: str) -> Path:
        """``worlds/<world_id>/``."""
        return self.worlds_dir / world_id

    def run_dir(self, run_id: str) -> Path:
        """``runs/<run_id>/``."""
        return self.runs_dir / run_id

    def result_file(self, run_id: str) -> Path:
        """``runs/<run_id>/result.json``: written last, atomically; a run is done when it says so."""
        return self.run_dir(run_id) / RESULT_FILE

    def workspace(self, name: str) -> Path:
        """``ws/<name>/``."""
        return self.workspaces_dir / name


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically and durably (file and directory fsynced)."""
    path = Path(path)
    partial = path.with_name(path.name + ".part")
    with open(partial, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
    _fsync_directory(path.parent)


def atomic_write_json(path: Path, payload: Any) -> None:
    """:func:`atomic_write_bytes` of ``payload`` as strict, ASCII-escaped, indented JSON with sorted keys."""
    text = json.dumps(payload, indent=2, sort_keys=True, default=str, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode("ascii"))


def atomic_write_parquet(path: Path, frame: Any) -> None:
    """Write a DataFrame to ``path`` as Parquet, atomically and durably."""
    path = Path(path)
    partial = path.with_name(path.name + ".part")
    frame.to_parquet(partial, index=False)
    with open(partial, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, path)
    _fsync_directory(path.parent)


__all__ = ["ATTEMPTS_DIR", "BASELINES_TABLE", "EVALUATION_FILE", "LEDGER_FILE", "MODEL_FILE", "RESULT_FILE",
           "RUNS_TABLE", "SECRET_FILE", "STUDY_FILE", "TRANSCRIPT_FILE", "WORKSPACE_POINTER", "StudyLayout",
           "atomic_write_bytes", "atomic_write_json", "atomic_write_parquet"]
