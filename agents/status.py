"""``planted status DIR``: what a study directory holds, without running anything.

Every run of the study's grid (the configuration recorded in ``study.json``; run ids do not depend
on the study secret) is in exactly one state:

* ``done``: ``result.json`` says ``ok`` with an intact transcript (an agent outcome);
* ``infra_error``: the host failed it on every attempt (recorded, never an agent outcome);
* ``unfinished``: its directory exists without a finished record (interrupted; the next
  ``planted run`` redoes it, keeping the attempt's files under ``attempts/<n>/``);
* ``pending``: never started.

Tokens, cost and episode time are summed over the readable records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from planted.agents.grid import run_status
from planted.agents.study import study_grid
from planted.run_record import RunRecordError, read_run_record
from planted.study_layout import StudyLayout

STATES = ("done", "infra_error", "unfinished", "pending")


class StudyStatusError(RuntimeError):
    """The directory is not a study directory written by ``planted run``."""


@dataclass(frozen=True)
class StudyStatus:
    """Counts of a study directory's runs by state, and what the logged runs spent."""

    name: str
    directory: Path
    counts: dict[str, int]
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    episode_seconds: float = 0.0
    labels: dict[str, int] = field(default_factory=dict)
    """Finished runs by analysis label (confirmatory or exploratory)."""
    example: dict[str, str] = field(default_factory=dict)
    """One run id per state other than done (to look at)."""

    def summary(self) -> str:
        total = sum(self.counts.values())
        lines = [f"study {self.name} in {self.directory}: {total} runs"]
        for state in STATES:
            extra = f"   e.g. {self.example[state]}" if state in self.example else ""
            lines.append(f"  {state:<11} {self.counts.get(state, 0):>6}{extra}")
        if self.labels:
            lines.append("  labels:     " + ", ".join(f"{n} {label}" for label, n in sorted(self.labels.items())))
        lines.append(f"  spent:      {self.input_tokens:,} input and {self.output_tokens:,} output tokens, "
                     f"${self.cost_usd:.2f}, {self.episode_seconds / 60:.1f} episode-minutes")
        if self.counts.get("pending") or self.counts.get("unfinished"):
            lines.append("  `planted run` with the same study, model and --out does the rest")
        return "\n".join(lines)


def study_status(directory: Path) -> StudyStatus:
    """The state of every run of the study in ``directory`` (``OUT/<study>``).

    Raises
    ------
    StudyStatusError
        No readable ``study.json`` in ``directory`` (naming what to pass instead).
    """
    layout = StudyLayout(Path(directory))
    try:
        recorded = json.loads(layout.study_file.read_text(encoding="utf-8"))
        config = recorded["config"]["study"]
    except (OSError, ValueError, KeyError, TypeError):
        raise StudyStatusError(f"{layout.study_file} is missing or unreadable: pass a study directory written by "
                               "`planted run` (OUT/<study>)") from None
    grid = study_grid(config, 0)  # run ids and their order do not depend on the secret
    counts = dict.fromkeys(STATES, 0)
    example: dict[str, str] = {}
    labels: dict[str, int] = {}
    spent = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "episode_seconds": 0.0}
    for unit in grid.runs:
        run_dir = layout.run_dir(unit.run_id)
        status = run_status(run_dir)
        state = {"ok": "done", "infra_error": "infra_error"}.get(str(status), "unfinished" if run_dir.is_dir() else "pending")
        counts[state] += 1
        if state != "done":
            example.setdefault(state, unit.run_id)
        if state in ("done", "infra_error"):
            try:
                record = read_run_record(layout.result_file(unit.run_id))
            except RunRecordError:
                continue
            labels[str(record.identity.analysis_label)] = labels.get(str(record.identity.analysis_label), 0) + 1
            if record.outcome is not None:
                spent["input_tokens"] += record.outcome.usage.input_tokens
                spent["output_tokens"] += record.outcome.usage.output_tokens
                spent["cost_usd"] += record.outcome.usage.cost_usd
                spent["episode_seconds"] += record.outcome.wall_seconds
    return StudyStatus(name=grid.name, directory=layout.root, counts=counts, labels=labels, example=example,
                       input_tokens=int(spent["input_tokens"]), output_tokens=int(spent["output_tokens"]),
                       cost_usd=float(spent["cost_usd"]), episode_seconds=float(spent["episode_seconds"]))


__all__ = ["STATES", "StudyStatus", "StudyStatusError", "study_status"]
