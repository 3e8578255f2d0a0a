"""Prompts as data: load ``conf/prompts.yaml``, fill in the run's numbers, and hash the file.

The user message is the brief plus the framing sentence (nothing for neutral); the system prompt
has the budget and the refit interval filled in; the data note, returned when the prior is
recorded, states the file name, its rows and the column meanings (SPEC 2.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from planted.hashing import sha256_file

FRAMINGS = ("neutral", "optimistic", "skeptical")


def default_prompts_file() -> Path:
    """``conf/prompts.yaml`` of the installed package's configuration tree."""
    from planted.config import conf_dir

    return conf_dir() / "prompts.yaml"


@dataclass(frozen=True)
class Prompts:
    """The prompt texts of one study, with the SHA-256 of the file they came from."""

    version: str
    brief: str
    framings: dict[str, str]
    system: str
    data_note: str
    nudge: str
    sha256: str

    def user_message(self, framing: str) -> str:
        """The brief followed by the framing sentence (the neutral framing adds nothing)."""
        if framing not in self.framings:
            raise ValueError(f"unknown framing {framing!r}; choose from {', '.join(self.framings)}")
        sentence = self.framings[framing].strip()
        return f"{self.brief.strip()} {sentence}".strip()

    def system_prompt(self, budget: int, refit_every: int) -> str:
        """The system prompt with the budget and refit interval filled in."""
        return self.system.format(budget=budget, refit_every=refit_every)

    def data_note_for(self, n_rows: int, file_name: str = "/workspace/data/data.csv") -> str:
        """The observation returned by ``report_prior``."""
        return self.data_note.format(file_name=file_name, n_rows=n_rows, last_month=n_rows - 1)


def load_prompts(path: str | Path | None = None) -> Prompts:
    """Load and check a prompts file (default: the package's ``conf/prompts.yaml``)."""
    file = Path(path) if path is not None else default_prompts_file()
    data = yaml.safe_load(file.read_text(encoding="utf-8"))
    missing = {"version", "brief", "framings", "system", "data_note", "nudge"} - set(data)
    if missing:
        raise ValueError(f"{file}: missing keys {sorted(missing)}")
    absent = set(FRAMINGS) - set(data["framings"])
    if absent:
        raise ValueError(f"{file}: framings {sorted(absent)} missing")
    return Prompts(
        version=str(data["version"]), brief=data["brief"], framings=dict(data["framings"]), system=data["system"],
        data_note=data["data_note"], nudge=data["nudge"], sha256=sha256_file(file),
    )
