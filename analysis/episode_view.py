"""One agent episode rendered readably: in the terminal (rich) or as one self-contained HTML page.

Both renderers show an :class:`~planted.analysis.episode_loading.EpisodeView` (from
:func:`load_episode`, re-exported here) in the same order: header (run, world, framing, model,
analysis label and reason, status), prior, every tool call with its code and output, the
``record_spec`` entries, the accepted ``final_model.py``, the verdict and the test-window evaluation
(OOS R2 in percent, the Clark-West statistic and its one-sided p-value).

Conventions
-----------
* The view's strings are already cleaned and bounded (:mod:`planted.analysis.episode_loading`); they
  are still agent text. The terminal renderer passes them only as :class:`rich.text.Text` or
  :class:`rich.syntax.Syntax`, never as markup (titles and table cells included). The HTML renderer
  escapes every one with :func:`html.escape`, puts none in an attribute, writes no script and loads
  nothing (inline CSS only; its Content-Security-Policy forbids scripts and every external resource).
* Code is highlighted by pygments (``HtmlFormatter(noclasses=True)``) when it is importable.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Iterable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from planted.analysis.episode_loading import (
    MAX_BLOCK_CHARS, EpisodeView, EpisodeViewError, Note, SpecEntry, Step, clean_text, finite_number, load_episode,
)
from planted.run_record import EvaluationSummary
from planted.study_layout import MODEL_FILE

# ---------------------------------------------------------------- wording shared by both renderers

SPEC_COLUMNS = ("#", "description", "predictors", "parameters", "in-sample R2", "statistics")


def _fmt(value: Any, spec: str) -> str:
    number = finite_number(value)
    return "n/a" if number is None else format(number, spec)


def _percent(value: Any) -> str:
    number = finite_number(value)
    return "n/a" if number is None else f"{100 * number:.2f}%"


def _header_lines(view: EpisodeView) -> list[str]:
    status = "unfinished (no result.json)" if view.status == "unfinished" else view.status
    backend = f" ({view.backend})" if view.backend else ""
    lines = [
        f"run {view.run_id}",
        f"world {view.world_id or 'unknown'} · framing {view.framing or 'unknown'} · model {view.model or 'unknown'}"
        f"{backend}",
        f"label {view.analysis_label or 'unknown'}" + (f": {view.analysis_reason}" if view.analysis_reason else ""),
        f"status {status}" + (f": {view.error}" if view.error else "") + (f" · stop {view.stop}" if view.stop else ""),
    ]
    if view.input_tokens is not None:
        lines.append(f"tokens {_fmt(view.input_tokens, ',.0f')} in, {_fmt(view.output_tokens, ',.0f')} out · "
                     f"cost ${_fmt(view.cost_usd, '.2f')} · wall {_fmt(view.wall_seconds, '.1f')} s")
    return lines


def _prior_line(view: EpisodeView) -> str:
    if view.prior_verdict is None:
        return "no prior recorded"
    return f"{view.prior_verdict}, probability {_fmt(view.prior_probability, '.2f')}"


def _evaluation_line(evaluation: EvaluationSummary | None) -> str:
    if evaluation is None:
        return "evaluation: none (no accepted model file)"
    if not evaluation.evaluable:
        return f"evaluation: not evaluable: {evaluation.error}"
    return (f"evaluation: test-window OOS R2 {_percent(evaluation.oos_r2)} · Clark-West statistic "
            f"{_fmt(evaluation.cw_stat, '.3f')}, p-value {_fmt(evaluation.cw_pvalue, '.4f')} · "
            f"{_fmt(evaluation.n_forecasts, '.0f')} forecasts")


def _verdict_lines(view: EpisodeView) -> list[str]:
    if view.verdict is None:
        lines = ["verdict: none submitted"]
    else:
        lines = [f"verdict: {view.verdict}, probability {_fmt(view.probability, '.2f')}"]
    if view.predictors is not None:
        lines.append(f"predictors: {', '.join(view.predictors) or '(none)'}")
    if view.rationale is not None:
        lines.append(f"rationale: {view.rationale}")
    return [*lines, _evaluation_line(view.evaluation)]


def _spec_cells(number: int, spec: SpecEntry) -> list[str]:
    statistics = "; ".join(f"{name} = {_fmt(value, '.4g')}" for name, value in spec.statistics)
    return [str(number), spec.description, ", ".join(spec.predictors), _fmt(spec.n_parameters, ".0f"),
            _fmt(spec.in_sample_r2, ".4f"), statistics]


def _step_title(number: int, step: Step) -> str:
    return f"call {number} · {step.tool}" + (" · error" if step.is_error else "")


def _numbered(entries: Iterable[Step | Note]) -> Iterable[tuple[int, Step | Note]]:
    """Each entry with the number of the last tool call so far (tool calls are numbered from 1)."""
    number = 0
    for entry in entries:
        number += isinstance(entry, Step)
        yield number, entry


# ---------------------------------------------------------------- terminal


def _lines_panel(lines: list[str], title: str) -> Panel:
    return Panel(Text("\n".join(lines)), title=Text(title), title_align="left")


def _step_panel(number: int, step: Step) -> Panel:
    parts: list[RenderableType] = []
    if step.code is not None:
        parts.append(Syntax(step.code, "python", word_wrap=True))
    if step.arguments:
        parts.append(Text(step.arguments))
    output = step.observation if step.observation is not None else "(no observation logged)"
    parts += [Text("output:", style="bold"), Text(output, style="red" if step.is_error else "")]
    return Panel(Group(*parts), title=Text(_step_title(number, step)), title_align="left",
                 border_style="red" if step.is_error else "blue")


def _entry_renderable(number: int, entry: Step | Note) -> RenderableType:
    if isinstance(entry, Step):
        return _step_panel(number, entry)
    if entry.kind == "model":
        return Panel(Text(entry.text), title=Text("model text"), title_align="left", border_style="dim")
    return Text(f"· {entry.text}", style="dim")


def _spec_table(specs: tuple[SpecEntry, ...]) -> Table:
    table = Table(title=Text("record_spec entries"), title_justify="left")
    for column in SPEC_COLUMNS:
        table.add_column(Text(column))
    for number, spec in enumerate(specs, start=1):
        table.add_row(*(Text(cell) for cell in _spec_cells(number, spec)))
    return table


def render_terminal(view: EpisodeView, console: Console) -> None:
    """Print the episode to ``console``: header, prior, tool calls, specs, final model, verdict.

    Parameters
    ----------
    view : EpisodeView
        From :func:`load_episode`.
    console : rich.console.Console
        Where to print; agent text reaches it only as ``Text`` or ``Syntax``, never as markup.
    """
    console.print(_lines_panel(_header_lines(view), "episode"))
    console.print(_lines_panel([_prior_line(view)], "prior"))
    for number, entry in _numbered(view.entries):
        console.print(_entry_renderable(number, entry))
    console.print(_spec_table(view.specs) if view.specs else Text("no record_spec entries"))
    if view.final_model is None:
        console.print(Text("no final_model.py"))
    else:
        console.print(Panel(Syntax(view.final_model, "python", word_wrap=True), title=Text(MODEL_FILE),
                            title_align="left"))
    console.print(_lines_panel(_verdict_lines(view), "verdict and evaluation"))


# ---------------------------------------------------------------- HTML

_CSP = "default-src 'none'; style-src 'unsafe-inline'"
_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:.5rem;border-radius:4px}"
    ".step{border-left:4px solid #36c;padding-left:.75rem;margin:1rem 0}.step.error{border-color:#c33}"
    ".model{border-left:4px solid #999;padding-left:.75rem}.note{color:#666;font-size:.9em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;"
    "vertical-align:top}"
)


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def _python(code: str) -> str:
    """``code`` highlighted by pygments (inline styles only), or escaped in a ``<pre>`` without it."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return _pre(code)
    return str(highlight(code, PythonLexer(), HtmlFormatter(noclasses=True)))


def _list(lines: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def _section(name: str, title: str, body: str) -> str:
    return f'<section id="{name}"><h2>{html.escape(title)}</h2>\n{body}\n</section>'


def _entry_html(number: int, entry: Step | Note) -> str:
    if isinstance(entry, Note):
        if entry.kind == "model":
            return f'<article class="model"><h3>model text</h3>{_pre(entry.text)}</article>'
        return f'<p class="note">{html.escape(entry.text)}</p>'
    parts = [f'<article class="step{" error" if entry.is_error else ""}">',
             f"<h3>{html.escape(_step_title(number, entry))}</h3>"]
    if entry.code is not None:
        parts.append(_python(entry.code))
    if entry.arguments:
        parts.append(_pre(entry.arguments))
    output = entry.observation if entry.observation is not None else "(no observation logged)"
    return "".join([*parts, "<h4>output</h4>", _pre(output), "</article>"])


def _spec_table_html(specs: tuple[SpecEntry, ...]) -> str:
    if not specs:
        return "<p>no record_spec entries</p>"
    head = "".join(f"<th>{html.escape(column)}</th>" for column in SPEC_COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in _spec_cells(number, spec)) + "</tr>"
                   for number, spec in enumerate(specs, start=1))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def render_html(view: EpisodeView) -> str:
    """The episode as one self-contained HTML5 page (no script, no external resource).

    Parameters
    ----------
    view : EpisodeView
        From :func:`load_episode`.

    Returns
    -------
    str
        The page: the same sections as :func:`render_terminal`, every agent string escaped.
    """
    steps = "\n".join(_entry_html(number, entry) for number, entry in _numbered(view.entries))
    model = _pre("no final_model.py") if view.final_model is None else _python(view.final_model)
    body = "\n".join([
        f"<header><h1>Episode</h1>{_list(_header_lines(view))}</header>",
        _section("prior", "Prior", f"<p>{html.escape(_prior_line(view))}</p>"),
        _section("steps", "Tool calls", steps),
        _section("specs", "record_spec entries", _spec_table_html(view.specs)),
        _section("final-model", MODEL_FILE, model),
        _section("verdict", "Verdict and evaluation", _list(_verdict_lines(view))),
    ])
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            f"<title>Episode {html.escape(view.run_id)}</title>\n<style>{_CSS}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n")


def write_episode_page(run_dir: Path, out: Path) -> Path:
    """Write :func:`render_html` of the run in ``run_dir`` to ``out`` (parents created); return ``out``.

    Raises
    ------
    EpisodeViewError
        As :func:`load_episode`.
    """
    page = render_html(load_episode(Path(run_dir)))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


__all__ = ["EpisodeView", "EpisodeViewError", "MAX_BLOCK_CHARS", "Note", "SpecEntry", "Step", "clean_text",
           "load_episode", "render_html", "render_terminal", "write_episode_page"]
