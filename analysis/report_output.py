"""What a report writes and how: each table as CSV and Markdown, each figure as PNG and PDF, and the
record (:class:`Output`) of every output written, skipped or failed, for ``index.md``."""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Sequence

import pandas as pd

from planted.analysis.tables import Table

Status = Literal["written", "skipped", "failed"]
PNG_DPI = 200


@dataclass(frozen=True)
class Output:
    """One output of a report (or one that was skipped).

    Attributes
    ----------
    paper : str
        What it reproduces ("Table D.1", "Figure 1", ...).
    description : str
    files : tuple of str
        Paths relative to the report directory (empty when skipped).
    functions : tuple of str
        Qualified names of the functions that computed and drew it.
    role : str
        ``confirmatory``, ``exploratory``, or confirmatory with its exploratory parts named.
    status : {"written", "skipped", "failed"}
    note : str
        Sample notes, or why it was skipped / how it failed.
    """

    paper: str
    description: str
    files: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    role: str = ""
    status: Status = "written"
    note: str = ""


@dataclass(frozen=True, eq=False)
class Shown:
    """What the HTML index shows of a written output: its table cells or its image, and its runs."""

    output: Output
    table: pd.DataFrame | None = None
    """The formatted cells (:meth:`Table.formatted`), for a table."""
    image: str | None = None
    """The PNG's file name, for a figure."""
    run_keys: tuple[tuple[str, str], ...] = ()
    """(study directory, run id) of every run in the data the output was built from."""


def _name(func: Callable[..., object]) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def slug(text: str) -> str:
    """A file-name-safe form of ``text`` (a model's name)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "model"


class ReportWriter:
    """Writes files and keeps the list of outputs."""

    def __init__(self, out: Path, *, forced_exploratory: bool, strict: bool, figures: bool = True):
        self.out = out
        self.figures = figures
        self.forced = forced_exploratory
        self.strict = strict
        self.outputs: list[Output] = []
        self.sections: list[str] = []
        self.shown: list[Shown] = []
        self.current_runs: tuple[tuple[str, str], ...] = ()
        """The runs of the entry being written (set by the report before each entry)."""

    def role(self, base: str, runs: pd.DataFrame) -> str:
        labels = set(runs["analysis_label"].dropna().astype(str)) if "analysis_label" in runs.columns else set()
        if self.forced or "exploratory" in labels:
            reasons = sorted(set(runs["analysis_reason"].dropna().astype(str))) if "analysis_reason" in runs.columns else []
            why = "report run with exploratory=True" if self.forced else \
                "run table labelled exploratory" + (f": {'; '.join(reasons)}" if reasons else "")
            return "exploratory" if base == "exploratory" else f"exploratory ({why})"
        return base

    def skip(self, paper: str, description: str, reason: str) -> None:
        self.outputs.append(Output(paper=paper, description=description, status="skipped", note=reason))

    def attempt(self, paper: str, description: str, action: Callable[[], None]) -> None:
        """Run ``action``; a failure is recorded (or raised when strict) instead of stopping the report."""
        try:
            action()
        except Exception as exc:  # a report with one broken output is still worth writing
            if self.strict:
                raise
            detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
            self.outputs.append(Output(paper=paper, description=description, status="failed", note=detail))

    def draw(self, paper: str, description: str, action: Callable[[], None]) -> None:
        """Like :meth:`attempt` for a figure; skipped when figures were not asked for."""
        if not self.figures:
            self.skip(paper, description, "figures not asked for (figures=False, --no-figures)")
            return
        self.attempt(paper, description, action)

    def table(self, paper: str, table: Table, functions: Sequence[Callable[..., object]], role: str, note: str = "",
              empty: str = "no runs in the sample this table needs") -> None:
        if table.data.empty:
            self.skip(paper, table.title, empty)
            return
        csv, md = f"{table.key}.csv", f"{table.key}.md"
        table.data.to_csv(self.out / csv, index=False, float_format="%.6g")
        text = table.to_markdown()
        extra = []
        if table.exploratory_columns and not role.startswith("exploratory"):
            extra.append(f"Exploratory columns: {', '.join(table.exploratory_columns)}.")
        if note:
            extra.append(note)
        text += ("\n" + " ".join(extra) + "\n") if extra else ""
        (self.out / md).write_text(f"{text}\nLabel: {role}.\n", encoding="utf-8")
        if table.exploratory_columns and role == "confirmatory":
            role = f"confirmatory; exploratory columns: {', '.join(table.exploratory_columns)}"
        output = Output(paper=paper, description=table.title, files=(csv, md),
                        functions=tuple(_name(f) for f in functions), role=role, note=note)
        self.outputs.append(output)
        self.shown.append(Shown(output, table=table.formatted(), run_keys=self.current_runs))
        self.sections.append(f"### {paper}\n\n{text}\nLabel: {role}.\n")

    def figure(self, paper: str, stem: str, fig: object, description: str, functions: Sequence[Callable[..., object]],
               role: str, data: Table | None = None, note: str = "") -> None:
        files = []
        for ext in ("png", "pdf"):
            metadata = {"CreationDate": None} if ext == "pdf" else {}  # no timestamp: the same logs give the same bytes
            fig.savefig(self.out / f"{stem}.{ext}", dpi=PNG_DPI, metadata=metadata)  # type: ignore[attr-defined]
            files.append(f"{stem}.{ext}")
        if data is not None and not data.data.empty:
            data.data.to_csv(self.out / f"{stem}_data.csv", index=False, float_format="%.6g")
            files.append(f"{stem}_data.csv")
        output = Output(paper=paper, description=description, files=tuple(files),
                        functions=tuple(_name(f) for f in functions), role=role, note=note)
        self.outputs.append(output)
        self.shown.append(Shown(output, image=f"{stem}.png", run_keys=self.current_runs))
        self.sections.append(f"### {paper}\n\n![{paper}]({stem}.png)\n\n{description}\n\nLabel: {role}.\n")


__all__ = ["Output", "PNG_DPI", "ReportWriter", "Shown", "Status", "slug"]
