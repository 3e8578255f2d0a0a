"""Append-only JSONL event logs, flushed and synced per line, and a reader that detects damage.

Every event of an episode (requests and responses verbatim, tool calls, observations, limits) is one
JSON object on one line. A crash can at worst leave the last line incomplete; :func:`read_events`
reports that instead of guessing, and the grid runner redoes such a run.

One line discipline, whatever the agent sends: lines are written as ASCII-escaped JSON
(``ensure_ascii``), so no line holds a raw U+2028, U+0085, or a lone surrogate that UTF-8 cannot
encode (it is written as its ``\\udXXX`` escape, verbatim), and they are split on ``\\n`` only.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any


class TranscriptError(RuntimeError):
    """A transcript whose last line is incomplete or not JSON (the run was interrupted)."""


class EventLog:
    """Append JSON events to ``path``, one per line, each flushed and fsynced before returning.

    Each event gets ``seq`` (0, 1, ...) and ``t`` (seconds since the log was opened).
    Safe to share between the threads of one episode.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._seq = 0

    def write(self, event: str, **fields: Any) -> None:
        """Append one event of type ``event`` with its fields."""
        with self._lock:
            line = json.dumps(
                {"seq": self._seq, "t": round(time.monotonic() - self._start, 4), "event": event, **fields},
                default=str, ensure_ascii=True,
            )
            self._handle.write(line + "\n")
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._seq += 1

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._handle.close()

    def __enter__(self) -> "EventLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_events(path: str | Path, *, complete: bool = True) -> list[dict[str, Any]]:
    """Read every event of a transcript (lines split on ``\\n`` only).

    Parameters
    ----------
    complete : bool, default True
        Require an intact transcript. With False, a damaged last line (an interrupted run) is left
        out and the events before it are returned; damage anywhere else still raises.

    Raises
    ------
    TranscriptError
        When the file does not end with a newline or a line is not a JSON object.
    """
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    if tail and complete:
        raise TranscriptError(f"{path}: the last line is incomplete (the run was interrupted)")
    events = []
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8
            raise TranscriptError(f"{path}, line {number}: not JSON (the run was interrupted)") from None
        if not isinstance(event, dict):
            raise TranscriptError(f"{path}, line {number}: not a JSON object")
        events.append(event)
    return events
