"""``index.html`` of a report: every table and figure in the paper's order, and a page per episode.

The page shows each written output with its caption (what the rows are, the sample, the units),
the functions that made it, its label (confirmatory or exploratory), its notes, the table itself or
the figure, and links to the episode pages (:mod:`planted.analysis.episode_view`) of the runs it is
built from; then every skipped output with the reason and what would produce it. The order is the
paper's: Tables 1-5, Figures 1-4, then the appendix (D, E, F), then the section-level extras
(:func:`paper_order`). Everything shown is escaped; the page has no script and no external
resource, and the same logs give the same bytes.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from planted.analysis.loading import StudyData
from planted.analysis.matching import UNRELIABLE
from planted.analysis.report_output import Output, Shown, slug
from planted.study_layout import StudyLayout

EPISODES_DIR = "episodes"
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-top: 1px solid #ccc; padding-top: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
.caption { font-style: italic; } .meta { color: #555; font-size: 0.85em; } code { font-size: 0.9em; }
img { max-width: 100%; border: 1px solid #eee; } .skipped td { text-align: left; }
details { font-size: 0.85em; } details a { margin-right: 0.8em; }
.unreliable { opacity: 0.45; }
"""


def paper_order(paper: str) -> tuple[int, str, float]:
    """Sort key of an output name in the paper's order: Tables 1-5, Figures 1-4, appendix D-G, the rest."""
    main = re.match(r"(Table|Figure) (\d+)\b", paper)
    if main:
        return (0 if main.group(1) == "Table" else 1, "", float(main.group(2)))
    appendix = re.search(r"\b([D-G])\.?(\d+)", paper)
    if appendix:
        return (2, appendix.group(1), float(appendix.group(2)))
    return (3, "", 0.0)


def _study_keys(data: StudyData) -> dict[str, str]:
    """A stable directory name per study (its position and name, never its path on this machine)."""
    return {s.path: f"s{i}-{slug(s.name)}" for i, s in enumerate(data.studies)}


def episode_page(study_key: str, run_id: str) -> str:
    """The episode page of a run, relative to the report directory."""
    return f"{EPISODES_DIR}/{study_key}/{slug(run_id)}.html"


def write_episode_pages(out: Path, data: StudyData) -> dict[tuple[str, str], str]:
    """Write a page for every run with a transcript on disk; return (study directory, run id) -> page."""
    from planted.analysis.episode_view import EpisodeViewError, write_episode_page

    keys = _study_keys(data)
    pages: dict[tuple[str, str], str] = {}
    for study_dir, run_id in zip(data.runs["study_dir"].astype(str), data.runs["run_id"].astype(str)):
        run_dir = StudyLayout(Path(study_dir)).run_dir(run_id)
        if not (run_dir / "transcript.jsonl").is_file() or study_dir not in keys:
            continue
        page = episode_page(keys[study_dir], run_id)
        try:
            write_episode_page(run_dir, out / page)
        except EpisodeViewError:
            continue
        pages[(study_dir, run_id)] = page
    return pages


def _table_html(cells: pd.DataFrame) -> str:
    return cells.to_html(index=False, escape=True, na_rep="–", border=0)


def _section(shown: Shown, pages: dict[tuple[str, str], str]) -> str:
    o = shown.output
    parts = [f'<section id="{html.escape(slug(o.paper))}">', f"<h2>{html.escape(o.paper)}</h2>",
             f'<p class="caption">{html.escape(o.description)}</p>']
    greyed = UNRELIABLE in o.note  # a size match without a sound anchor: shown, but not as a result
    if shown.table is not None:
        table = _table_html(shown.table)
        parts.append(f'<div class="unreliable">{table}</div>' if greyed else table)
    if shown.image is not None:
        parts.append(f'<img src="{html.escape(shown.image)}" alt="{html.escape(o.paper)}">')
    made = ", ".join(f"<code>{html.escape(f)}</code>" for f in o.functions)
    files = " ".join(f'<a href="{html.escape(f)}">{html.escape(f)}</a>' for f in o.files)
    parts.append(f'<p class="meta">Label: <b>{html.escape(o.role)}</b>. Made by {made}. Files: {files}.</p>')
    if o.note:
        parts.append(f'<p class="meta">Note: {html.escape(o.note)}</p>')
    linked = [(run_id, pages[(study, run_id)]) for study, run_id in shown.run_keys if (study, run_id) in pages]
    if linked:
        links = " ".join(f'<a href="{html.escape(page)}">{html.escape(run_id)}</a>' for run_id, page in linked)
        parts.append(f"<details><summary>Episodes of the {len(linked)} runs this output is built from (its sample is "
                     f"the subset its caption names)</summary>{links}</details>")
    parts.append("</section>")
    return "\n".join(parts)


def _inputs(data: StudyData) -> str:
    rows = [{"Study": s.name, "Models": ", ".join(s.models), "Runs": s.n_runs, "Errors": s.n_errors,
             "Designs": ", ".join(s.designs), "Shock pool": s.pool,
             "Label": ", ".join(s.labels) + (f" ({'; '.join(s.reasons)})" if s.reasons else ""),
             "Transcripts": s.transcripts} for s in data.studies]
    return _table_html(pd.DataFrame(rows))


def _skipped(outputs: Iterable[Output]) -> str:
    rows = [{"Output": o.paper, "Status": o.status, "Why, and what would produce it": o.note}
            for o in outputs if o.status != "written"]
    if not rows:
        return ""
    return '<h2 id="skipped">Skipped and failed outputs</h2>\n<div class="skipped">' + _table_html(pd.DataFrame(rows)) + "</div>"


def write_html_index(out: Path, data: StudyData, shown: Sequence[Shown], outputs: Sequence[Output], *,
                     episodes: bool = True) -> Path:
    """Write ``out/index.html`` (and, with ``episodes``, the episode pages); return its path."""
    pages = write_episode_pages(out, data) if episodes else {}
    ordered = sorted(shown, key=lambda s: paper_order(s.output.paper))  # stable: registry order within a rank
    toc = "".join(f'<li><a href="#{html.escape(slug(s.output.paper))}">{html.escape(s.output.paper)}</a></li>'
                  for s in ordered)
    body = "\n".join(_section(s, pages) for s in ordered)
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>planted report</title>\n"
        f"<style>{STYLE}</style>\n</head>\n<body>\n<h1>planted report</h1>\n"
        "<p>Every table and figure the logged runs support, regenerated from the logs without model calls "
        "(<code>planted.analysis.report.write_report</code>), in the paper's order. Rates are shares of worlds with "
        "Wilson 95% intervals unless a caption says otherwise; each output names its sample, the functions that "
        "made it and whether it is confirmatory or exploratory. The same content as Markdown: "
        '<a href="index.md">index.md</a>, <a href="report.md">report.md</a>.</p>\n'
        f"<h2 id=\"inputs\">Inputs</h2>\n{_inputs(data)}\n"
        f"<h2 id=\"contents\">Contents</h2>\n<ol>{toc}</ol>\n{body}\n{_skipped(outputs)}\n</body>\n</html>\n"
    )
    target = out / "index.html"
    target.write_text(page, encoding="utf-8")
    return target


__all__ = ["EPISODES_DIR", "episode_page", "paper_order", "write_episode_pages", "write_html_index"]
