"""The grid runner end to end with the scripted agent in the real sandbox: resumable, honest, consistent.

These tests run real episodes (bubblewrap, the evaluator); a small study keeps them to about a minute.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from planted.agents.grid import RESULT_FILE, StudyConfigMismatch
from planted.agents.runner import prepare_run
from planted.agents.transcript import read_events

STUDY = {
    "name": "tiny",
    "seed": 11,
    "budget": 40,
    "refit_every": 12,
    "procedures": ["hac_holm", "oracle", "combination"],
    "groups": [
        {"name": "linear", "cells": {"family": "linear", "r2": [0.0, 0.04], "phi": 0.95, "rho": -0.8, "shocks": "bootstrap"}, "seeds": 2},
        {"name": "trap", "cells": {"family": "reversal", "shocks": "gaussian"}, "seeds": 1},
    ],
}


@pytest.fixture(scope="module")
def study_file(tmp_path_factory):
    import yaml

    path = tmp_path_factory.mktemp("study") / "tiny.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    return path


def _prepare(study_file, out, **kwargs):
    return prepare_run(study=str(study_file), model="scripted", out=out, progress=False, **kwargs)


@pytest.fixture(scope="module")
def completed(study_file, tmp_path_factory):
    """One complete run of the tiny study (copied by the tests that change it) and its printed summary."""
    out = tmp_path_factory.mktemp("completed") / "runs"
    text = _prepare(study_file, out, concurrency=2).execute()
    return out, text


def _copy(completed, tmp_path):
    import shutil

    shutil.copytree(completed[0], tmp_path / "runs")
    return tmp_path / "runs"


def test_scripted_agent_matches_the_hac_holm_baseline_and_a_rerun_does_nothing(study_file, completed, tmp_path):
    out, text = completed
    runs = pd.read_parquet(out / "tiny" / "runs.parquet")
    assert len(runs) == 5 and runs["run_id"].is_unique and (runs["status"] == "ok").all()
    assert (runs["claim"] == runs["baseline_hac_holm"]).all()
    assert runs["sandboxed"].all() and runs["evaluable"].all()
    assert "Table D.1" in text and "neutral runs (first replicate)" in text and "HAC-Holm" in text
    for run_dir in (out / "tiny" / "runs").iterdir():  # the agent sees its workspace path: it must be neutral
        workspace = json.loads((run_dir / RESULT_FILE).read_text())["workspace"]
        assert workspace.startswith("ws/") and "r2" not in workspace and "neutral" not in workspace
    copy = _copy(completed, tmp_path)
    mtimes = {p: p.stat().st_mtime_ns for p in (copy / "tiny" / "runs").glob("*/result.json")}
    _prepare(study_file, copy).execute()
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # nothing redone


def test_a_damaged_transcript_or_errored_run_is_redone(study_file, completed, tmp_path):
    root = _copy(completed, tmp_path) / "tiny" / "runs"
    damaged, errored, *_ = sorted(root.iterdir())
    with open(damaged / "transcript.jsonl", "ab") as handle:
        handle.write(b'{"seq": 99, "event": "model_tu')
    result = json.loads((errored / RESULT_FILE).read_text())
    (errored / RESULT_FILE).write_text(json.dumps(result | {"status": "error", "error": "RuntimeError: disk"}))
    before = {p.name: (p / RESULT_FILE).stat().st_mtime_ns for p in root.iterdir()}
    _prepare(study_file, tmp_path / "runs").execute()
    after = {p.name: (p / RESULT_FILE).stat().st_mtime_ns for p in root.iterdir()}
    assert {name for name in before if before[name] != after[name]} == {damaged.name, errored.name}
    read_events(damaged / "transcript.jsonl")  # intact again
    for redone in (damaged, errored):  # nothing logged is lost: the earlier attempt is kept
        kept = redone / "attempts" / "1"
        assert (kept / "transcript.jsonl").is_file() and (kept / RESULT_FILE).is_file()
    assert json.loads((errored / "attempts" / "1" / RESULT_FILE).read_text())["error"] == "RuntimeError: disk"
    runs = pd.read_parquet(tmp_path / "runs" / "tiny" / "runs.parquet")
    assert len(runs) == 5 and runs["run_id"].is_unique and (runs["status"] == "ok").all()


def test_a_changed_configuration_is_refused_unless_a_new_directory_is_asked_for(study_file, completed, tmp_path):
    _copy(completed, tmp_path)
    with pytest.raises(StudyConfigMismatch, match="another configuration"):
        _prepare(study_file, tmp_path / "runs", overrides=["study.budget=20"])
    fresh = _prepare(study_file, tmp_path / "runs", overrides=["study.budget=20"], new_dir=True)
    assert fresh.context.out == tmp_path / "runs" / "tiny-2"


def test_sigkill_mid_grid_then_rerun_logs_every_run_exactly_once(study_file, tmp_path):
    out = tmp_path / "runs"
    command = [sys.executable, "-m", "planted", "run", "--study", str(study_file), "--out", str(out),
               "--concurrency", "1", "--quiet"]
    # from a neutral directory: in the checkout, `-m planted` would import the source tree, not the install
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tmp_path)
    ledger = out / "tiny" / "ledger.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ledger.is_file() and ledger.read_text().count('"run_end"') >= 1 and ledger.read_text().count('"run_start"') >= 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the grid and its sandboxes, mid-episode
    proc.wait()
    done_before = [p for p in (out / "tiny" / "runs").iterdir() if (p / RESULT_FILE).is_file()]
    assert 1 <= len(done_before) < 5
    assert subprocess.run(command, capture_output=True, cwd=tmp_path).returncode == 0
    runs = pd.read_parquet(out / "tiny" / "runs.parquet")
    assert len(runs) == 5 and runs["run_id"].is_unique and (runs["status"] == "ok").all()
    for path in (out / "tiny" / "runs").iterdir():
        events = read_events(path / "transcript.jsonl")
        assert sum(e["event"] == "episode_start" for e in events) == 1  # interrupted runs restarted from scratch


class FailingAfter:
    """A backend whose sessions work (as the scripted researcher) until ``allowed`` episodes have
    started, then fail as an exhausted API credit would."""

    name = "failing"

    def __init__(self, allowed: int):
        from planted.agents.scripted import ScriptedBackend

        self.inner, self.allowed, self.started = ScriptedBackend(), allowed, 0

    def open_session(self, **kwargs):
        from planted.agents.backend import FatalBackendError

        self.started += 1
        if self.started > self.allowed:
            raise FatalBackendError("credit balance is too low (HTTP 400): add credit or wait")
        return self.inner.open_session(**kwargs)


def test_a_fatal_backend_error_stops_the_grid_and_keeps_finished_runs(study_file, tmp_path):
    from planted.agents.backend import FatalBackendError

    prepared = _prepare(study_file, tmp_path / "runs", concurrency=1)
    prepared.context.backend = FailingAfter(allowed=2)
    with pytest.raises(FatalBackendError, match="credit balance"):
        prepared.execute()
    root = tmp_path / "runs" / "tiny" / "runs"
    finished = [p for p in root.iterdir() if (p / RESULT_FILE).is_file()]
    assert len(finished) == 2  # the grid stopped at once; nothing recorded the fatal error as an agent failure
    _prepare(study_file, tmp_path / "runs").execute()
    runs = pd.read_parquet(tmp_path / "runs" / "tiny" / "runs.parquet")
    assert len(runs) == 5 and runs["run_id"].is_unique and (runs["status"] == "ok").all()


def test_the_run_summary_is_table_d1_on_the_same_sample(study_file, completed, tmp_path):
    """The summary `planted run` prints is Table D.1 of the report, neutral first replicates only."""
    from planted.analysis.tables import claim_rates_by_world

    out, text = completed
    runs = pd.read_parquet(out / "tiny" / "runs.parquet")
    table = claim_rates_by_world(runs, ["hac_holm", "combination", "oracle"])
    assert table.formatted().to_string(index=False) in text
    extra = runs.iloc[[0]].assign(framing="optimistic", claim=not bool(runs.iloc[0]["claim"]))
    assert claim_rates_by_world(pd.concat([runs, extra]), ["hac_holm"]).data.equals(
        claim_rates_by_world(runs, ["hac_holm"]).data)  # a run under another framing does not enter the sample


def test_the_shock_pool_is_a_study_choice(study_file, tmp_path, ff5_file, capsys):
    """pool: ff5 builds the worlds from the 5-factor file's HML (checked by the pool hash in each world's
    metadata); without --path the run fails in one line before any work; every output names the pool."""
    import yaml

    from planted.cli import main
    from planted.worlds import PoolChoice

    study = yaml.safe_load(study_file.read_text()) | {"pool": "ff5", "pool_end": "2020-12"}
    path = tmp_path / "pooled.yaml"
    path.write_text(yaml.safe_dump(study))
    assert main(["run", "--study", str(path), "--out", str(tmp_path / "none"), "--quiet"]) == 2
    assert "pass --path" in capsys.readouterr().err and not (tmp_path / "none").exists()
    prepared = prepare_run(study=str(path), model="scripted", out=tmp_path / "runs", progress=False, factor_file=ff5_file)
    expected = PoolChoice("ff5", "2020-12").load(ff5_file)
    assert "shock pool: HML 1963-07..2020-12" in prepared.plan()
    text = prepared.execute(limit=1)
    assert f"{expected.size} residuals" in text
    metas = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "tiny" / "worlds").glob("*/sealed/meta.json")]
    bootstrap = [m for m in metas if m["spec"]["shocks"] == "bootstrap"]
    assert bootstrap and all(m["params"]["pool_sha256"] == expected.sha256 for m in bootstrap)
    assert all(m["params"]["pool_size"] == expected.size for m in bootstrap)


def test_the_progress_bar_counts_this_invocation_and_status_tells_the_rest(study_file, tmp_path, capsys):
    """`--limit 1` on a fresh directory shows 0/1 then 1/1 (not k of all runs); the summary adds what was
    spent; `planted status` counts done, unfinished and pending runs and names one of each."""
    from planted.cli import main

    out = tmp_path / "runs"
    assert main(["run", "--study", str(study_file), "--out", str(out), "--limit", "1"]) == 0
    captured = capsys.readouterr()
    bars = [line for line in captured.err.replace("\r", "\n").splitlines() if line.startswith("episodes")]
    assert bars and all("/1 " in line for line in bars) and "1/1 " in bars[-1], bars
    assert "spent on the 1 logged runs:" in captured.out and "this invocation took" in captured.out
    study = out / "tiny"
    unfinished = next(p for p in sorted((study / "runs").iterdir()) if (p / "result.json").is_file())
    (unfinished / "result.json").unlink()  # as if killed before the record was written
    assert main(["status", str(study)]) == 0
    text = capsys.readouterr().out
    assert "study tiny" in text and "5 runs" in text
    counts = {line.split()[0]: int(line.split()[1]) for line in text.splitlines()[1:5]}
    assert counts == {"done": 0, "infra_error": 0, "unfinished": 1, "pending": 4}
    assert f"e.g. {unfinished.name}" in text
    assert main(["status", str(tmp_path)]) == 2
    assert "study.json is missing or unreadable" in capsys.readouterr().err
