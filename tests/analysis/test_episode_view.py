"""The episode viewer on a real (scripted, unsandboxed) run directory, and on hostile edits of it."""

from __future__ import annotations

import ast
import html
import io
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from planted.agents.transcript import EventLog, read_events
from planted.analysis.episode_view import (
    MAX_BLOCK_CHARS, EpisodeViewError, clean_text, load_episode, render_html, render_terminal, write_episode_page,
)
from planted.run_record import read_run_record

STUDY = {"name": "tiny", "seed": 11, "budget": 40, "refit_every": 12, "procedures": ["oracle", "hac_holm"],
         "groups": [{"name": "linear", "cells": {"family": "linear", "r2": 0.04, "phi": 0.95, "rho": -0.8,
                                                 "shocks": "gaussian"}, "seeds": 1}]}
HOSTILE = "</pre><script>alert(1)</script> \x1b[2J [bold red]x[/] \x9b31m"
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """One finished run of the scripted agent (unsandboxed, one world)."""
    from planted.agents.runner import prepare_run

    root = tmp_path_factory.mktemp("episode_view")
    study = root / "tiny.yaml"
    study.write_text(yaml.safe_dump(STUDY))
    prepare_run(study=str(study), model="scripted", out=root / "runs", progress=False,
                unsafe_no_sandbox=True).execute(limit=1)
    (found,) = (root / "runs" / "tiny" / "runs").iterdir()
    return found


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


def _terminal_text(run_dir: Path, width: int = 120) -> str:
    console = Console(record=True, width=width)
    render_terminal(load_episode(run_dir), console)
    return console.export_text()


class _Page(HTMLParser):
    """Checks that every element is closed in order; keeps attribute names and the final model's text."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.attributes: set[str] = set()
        self.model_depth: int | None = None
        self.model_text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.attributes |= {name for name, _ in attrs}
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag == "section" and ("id", "final-model") in attrs:
            self.model_depth = len(self.stack)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        if self.model_depth == len(self.stack):
            self.model_depth = None
        self.stack.pop()

    def handle_data(self, data):
        if self.model_depth is not None:
            self.model_text.append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.stack == [], parser.stack
    return parser


def test_terminal_shows_prior_every_run_python_call_verdict_and_evaluation(run_dir):
    outcome = read_run_record(run_dir / "result.json").outcome
    calls = [c for e in read_events(run_dir / "transcript.jsonl") if e["event"] == "model_turn"
             for c in e["tool_calls"]]
    n_run_python = sum(c["name"] == "run_python" for c in calls)
    text = _terminal_text(run_dir)
    assert outcome is not None and outcome.evaluation is not None and n_run_python >= 2
    assert f"{outcome.prior_verdict}, probability {outcome.prior_probability:.2f}" in text
    assert len(re.findall(r"call \d+ · run_python", text)) == n_run_python
    assert re.findall(r"call (\d+) · ", text) == [str(n) for n in range(1, len(calls) + 1)]
    assert f"verdict: {outcome.verdict}, probability {outcome.probability:.2f}" in text
    assert f"test-window OOS R2 {100 * outcome.evaluation.oos_r2:.2f}%" in text
    assert f"p-value {outcome.evaluation.cw_pvalue:.4f}" in text


def test_each_accepted_record_spec_call_carries_its_logged_entry(run_dir):
    outcome = read_run_record(run_dir / "result.json").outcome
    view = load_episode(run_dir)
    shown = [s.spec.description for s in view.steps if s.tool == "record_spec" and s.spec is not None]
    assert outcome is not None and len(shown) == outcome.n_specs > 0
    assert shown == [s["description"] for s in outcome.record["specs"]] == [s.description for s in view.specs]


def test_html_page_holds_every_observation_and_the_final_model_and_is_self_contained(run_dir, tmp_path):
    observations = [e["content"] for e in read_events(run_dir / "transcript.jsonl") if e["event"] == "observation"]
    functions = [node.name for node in ast.parse((run_dir / "final_model.py").read_text()).body
                 if isinstance(node, ast.FunctionDef)]
    page = write_episode_page(run_dir, tmp_path / "new" / "page.html").read_text(encoding="utf-8")
    assert page == render_html(load_episode(run_dir))
    assert page.startswith("<!DOCTYPE html>") and re.search(r"<title>Episode [^<]+</title>", page)
    assert observations and all(html.escape(text) in page for text in observations)
    parsed = _parse(page)
    model_text = "".join(parsed.model_text)
    assert {"fit", "predict"} <= set(functions)
    assert all(f"def {name}(" in model_text for name in functions)
    assert "<script" not in page.lower()
    assert not parsed.attributes & {"src", "href", "action", "srcset"} and not any(
        a.startswith("on") for a in parsed.attributes)


def test_hostile_text_is_escaped_in_html_and_inert_in_the_terminal(run_dir, tmp_path):
    hostile = _copy(run_dir, tmp_path)
    with EventLog(hostile / "transcript.jsonl") as log:
        calls = [{"call_id": "evil-1", "name": "run_python", "arguments": json.dumps({"code": HOSTILE})},
                 {"call_id": "evil-2", "name": "submit_final", "arguments": json.dumps({"verdict": HOSTILE})}]
        log.write("model_turn", stop_reason="tool_use", text=HOSTILE, tool_calls=calls, served_model="x")
        log.write("observation", call_id="evil-1", tool="run_python", is_error=True, content=HOSTILE)
        log.write("observation", call_id="evil-2", tool="submit_final", is_error=True, content="Error: rejected")
        log.write("observation", call_id="no-such-call", tool=HOSTILE, is_error=False, content=HOSTILE)
        log.write("retry", backend="x", turn=1, attempt=1, status=529, error_type="e", message=HOSTILE, delay_s=1)
    view = load_episode(hostile)
    assert view.steps[-1].observation == view.steps[-3].observation == view.steps[-3].code
    page = render_html(view)
    assert "<script" not in page.lower() and "\x1b" not in page and "\x9b" not in page
    assert page.count("&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;") >= 4
    _parse(page)
    text = _terminal_text(hostile, width=250)  # wide: no hostile line is wrapped
    hostile_lines = [line for line in text.splitlines() if "alert(1)" in line]
    assert re.findall(r"call (\d+) · ", text) == [str(n) for n in range(1, len(view.steps) + 1)]
    assert len(hostile_lines) >= 6 and all("[bold red]x[/]" in line for line in hostile_lines)
    assert "\x1b" not in text and "\x9b" not in text and "\\x1b[2J" in text  # shown as its escape text
    stream = io.StringIO()  # a real terminal stream, styles on: only rich's own escapes are written
    render_terminal(view, Console(file=stream, force_terminal=True, color_system="truecolor", width=120))
    assert "\x1b[2J" not in stream.getvalue() and "\x9b" not in stream.getvalue()


def test_an_unfinished_run_is_shown_from_its_transcript(run_dir, tmp_path):
    outcome = read_run_record(run_dir / "result.json").outcome
    unfinished = _copy(run_dir, tmp_path)
    (unfinished / "result.json").unlink()
    view = load_episode(unfinished)
    assert outcome is not None and view.status == "unfinished"
    assert (view.prior_verdict, view.verdict, len(view.specs)) == (outcome.prior_verdict, outcome.verdict,
                                                                   outcome.n_specs)
    assert "status unfinished" in _terminal_text(unfinished)
    assert "unfinished" in render_html(view)


@pytest.mark.parametrize("make", [lambda d: d.mkdir(), lambda d: None], ids=["no transcript", "no directory"])
def test_a_directory_that_is_not_a_run_is_refused_in_one_line(tmp_path, make):
    directory = tmp_path / "not_a_run"
    make(directory)
    with pytest.raises(EpisodeViewError) as caught:
        load_episode(directory)
    message = str(caught.value)
    assert "\n" not in message and str(directory) in message and "not a run directory" in message


def test_a_long_block_is_cut_with_a_note_of_how_much():
    shown = clean_text("a" * (MAX_BLOCK_CHARS + 12_345))
    assert shown.startswith("a" * MAX_BLOCK_CHARS) and len(shown) < MAX_BLOCK_CHARS + 100
    assert f"{12_345:,} of {MAX_BLOCK_CHARS + 12_345:,} characters cut" in shown
    assert clean_text("ok\n\tfine") == "ok\n\tfine" and clean_text("\r\x00\x85\u202e") == "\\x0d\\x00\\x85\\u202e"


def test_planted_view_through_the_command_line(run_dir, tmp_path, capsys):
    from planted.cli import main

    assert main(["view", str(run_dir)]) == 0
    shown = capsys.readouterr().out
    outcome = read_run_record(run_dir / "result.json").outcome
    assert outcome.verdict in shown and "run_python" in shown
    page = tmp_path / "page" / "episode.html"
    assert main(["view", str(run_dir), "--html", str(page)]) == 0
    assert page.is_file() and str(page) in capsys.readouterr().out
    assert main(["view", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("planted: error:")
