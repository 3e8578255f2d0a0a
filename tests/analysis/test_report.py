"""``write_report`` end to end: the real smoke study (scripted agent in the sandbox), and simulated
multi-model studies with Monte Carlo tables, on disk."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planted.analysis.loading import StudyDataError, load_study_data
from planted.analysis.report import write_report

from .simulate import Agent
from .study_files import mc_table, simulated_study, write_mc


@pytest.fixture(scope="session")
def smoke_study(tmp_path_factory) -> Path:
    """The smoke study run once per session with the scripted agent (or ``PLANTED_SMOKE_STUDY``, a finished one)."""
    given = os.environ.get("PLANTED_SMOKE_STUDY")
    if given:
        return Path(given)
    from planted.agents.runner import prepare_run
    from planted.agents.sandbox import SandboxUnavailableError

    out = tmp_path_factory.mktemp("smoke")
    try:
        prepared = prepare_run(study="smoke", model="scripted", out=out, concurrency=2 * (os.cpu_count() or 1),
                               progress=False)
    except SandboxUnavailableError as exc:
        if os.environ.get("CI"):  # CI installs bubblewrap: never hide a broken sandbox there
            raise
        pytest.skip(f"the smoke study needs the bubblewrap sandbox: {exc}")
    prepared.execute()
    return out / "smoke"


def _listed_files(index: str) -> list[str]:
    return re.findall(r"\]\(([^)]+)\)", index)


def _check_index(out: Path, outputs) -> str:
    index = (out / "index.md").read_text()
    listed = _listed_files(index)
    for name in listed:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    written = {f for o in outputs if o.status == "written" for f in o.files}
    assert written <= set(listed)
    on_disk = {p.name for p in out.iterdir()} - {"index.md", "index.html", "episodes", "outputs.json"}
    assert on_disk == written | {"report.md"}
    for o in outputs:
        for qualified in o.functions:  # every named function exists
            module, _, name = qualified.rpartition(".")
            assert callable(getattr(importlib.import_module(module), name)), qualified
        if o.status == "written":
            assert o.role.startswith(("confirmatory", "exploratory")) and o.functions
    return index


def test_smoke_report_lists_only_files_it_wrote(smoke_study, tmp_path):
    out = tmp_path / "report"
    outputs = write_report(smoke_study, out, strict=True)
    index = _check_index(out, outputs)
    written = {o.paper for o in outputs if o.status == "written"}
    assert {"Table 3", "Table D.1", "Table D.4", "Table D.5", "Figure 2", "Figure 3", "Table E.1"} <= written
    skipped = {o.paper: o.note for o in outputs if o.status == "skipped"}
    assert "one model only" in skipped["Model agreement (section 4.2)"]
    assert "no Gaussian-shock runs" in skipped["Table 4"]
    assert "no replicates" in skipped["Replicates (F.1, F.2)"]
    assert "--mc" in skipped["Table D.2"]
    # without a simulation, Figure 1 is drawn from the baselines' decisions on the agent's own worlds, and
    # says so; the agent's 0 of 2 null claims cannot anchor panel B, which is greyed with that reason
    figure1 = next(o for o in outputs if o.paper.startswith("Figure 1"))
    assert "agent's own linear worlds" in figure1.description and "planted mc" in figure1.description
    assert "panel B greyed: the agent's 0 of 2 null runs cannot anchor a match" in figure1.note
    assert {"Table 1", "Table 2"} <= written and "--probe" in skipped["Table 5"]
    assert "C1-C3 not computed" in index and "## Skipped" in index
    # the smoke study is not frozen: the grid labels its runs exploratory, and so is every output
    assert all(o.role.startswith("exploratory") for o in outputs if o.status == "written")
    # the scripted agent is the HAC-Holm test at 5%: its claim rates equal the baseline's on every world type
    d1 = pd.read_csv(out / "table_D1_claim_rates.csv")
    np.testing.assert_allclose(d1["agent"], d1["hac_holm"])
    assert not [o for o in outputs if o.status == "failed"]


def test_smoke_report_with_a_simulation_adds_power_curves_and_frontiers(smoke_study, tmp_path):
    mc = write_mc(tmp_path / "mc", mc_table("bootstrap", per_cell=25, procedures=("oracle", "combination", "hac_holm")))
    outputs = write_report(smoke_study, tmp_path / "report", [mc], strict=True, n_boot=200)
    _check_index(tmp_path / "report", outputs)
    written = {o.paper for o in outputs if o.status == "written"}
    assert {"Figure 1: scripted", "Table D.2", "Figure D.1"} <= written


@pytest.fixture(scope="module")
def multi_model(tmp_path_factory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("multi")
    simulated_study(root / "runs", "bootstrap", [Agent("opus", 0.2, 0.6, 0.15), Agent("sol", 0.18, 0.45, 0.2)], seed=1)
    simulated_study(root / "runs", "gaussian", [Agent("opus", 0.3, 0.6, kappa=3.0), Agent("qwen", 0.35, 0.4, kappa=0.5)],
                    seed=2, backends={"qwen": "openai_compat"})
    mcs = [write_mc(root / "mc-b", mc_table("bootstrap", per_cell=25))]
    return root / "runs", mcs


def test_multi_model_report_has_every_table_and_figure(multi_model, tmp_path):
    runs, mcs = multi_model
    out = tmp_path / "report"
    outputs = write_report(runs, out, mcs, models=["opus", "sol", "qwen"], strict=True, n_boot=100)
    _check_index(out, outputs)
    written = {o.paper for o in outputs if o.status == "written"}
    expected = {"Table 3", "Table 4", "Table D.1", "Table D.1 (Gaussian)", "Table D.2", "Appendix D.3 anchors",
                "Figure 1: opus", "Figure 1: sol", "Figure 2", "Figure 2 (Gaussian)", "Figure 3", "Figure 4", "Figure D.1",
                "Table F.1", "Table F.2", "Table E.1", "Table E.2", "Calibration (D.4)", "Model agreement (section 4.2)",
                "Replicates (F.1, F.2)", "Appendix D.7"}
    assert expected <= written
    skipped = {o.paper: o.note for o in outputs if o.status == "skipped"}
    assert skipped["Table D.4"] == "no transcripts on disk to code"
    assert "--shocks gaussian" in skipped["Table D.2 (Gaussian)"]  # the simulation given is of bootstrap worlds
    t3 = pd.read_csv(out / "table3_prespecified_tests.csv")
    assert set(t3.loc[t3["model"] == "all models", "name"]) == {"C1", "C2", "C3"}
    t4 = pd.read_csv(out / "table4_gaussian_tests.csv")
    assert set(t4.loc[t4["model"] == "qwen", "family"]) == {"qwen: G1, G3"}
    roles = {o.paper: o.role for o in outputs}
    assert roles["Table 3"].startswith("confirmatory") and roles["Table D.2"] == "exploratory"
    assert roles["Table 4"] == "confirmatory"


def test_report_is_reproducible_and_labels_exploratory_runs(multi_model, tmp_path):
    runs, mcs = multi_model
    studies = [runs / "bootstrap-opus"]
    one = write_report(studies, tmp_path / "one", mcs[:1], n_boot=50, seed=7, figures=False)
    two = write_report(studies, tmp_path / "two", mcs[:1], n_boot=50, seed=7, exploratory=True, figures=False)
    for name in ("table_D2_matched_power.csv", "table_calibration.csv", "tableE1_models_compared.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert {o.paper: o.role for o in one}["Table 3"].startswith("confirmatory")
    assert all(o.role.startswith("exploratory") for o in two if o.status == "written")
    assert not [o for o in one if o.paper.startswith("Figure") and o.status == "written"]
    assert "figures not asked for (figures=False, --no-figures)" in {o.note for o in one if o.paper.startswith("Figure 2")}



def test_loading_a_subset_of_models_says_which_studies_it_left_out(multi_model):
    runs, _ = multi_model
    data = load_study_data(runs, models=["sol", "opus"], code=False)
    assert data.models == ("sol", "opus")  # the order asked for
    assert {s.name for s in data.studies} == {"bootstrap-opus", "bootstrap-sol", "gaussian-opus"}
    assert any("gaussian-qwen" in note and "left out" in note for note in data.notes)
    assert any("no transcript" in note for note in data.notes)
    with pytest.raises(StudyDataError, match="no runs"):
        load_study_data(runs, models=["gpt-7"], code=False)


def test_a_run_table_of_a_newer_schema_fails_naming_both_versions(tmp_path):
    import pandas as pd

    from planted.analysis.loading import StudyDataError, load_study_data
    from planted.records import RUNS_SCHEMA_VERSION

    directory = tmp_path / "future"
    directory.mkdir()
    pd.DataFrame({"run_id": ["r"], "status": ["ok"], "schema_version": [RUNS_SCHEMA_VERSION + 1]}).to_parquet(
        directory / "runs.parquet")
    with pytest.raises(StudyDataError, match=f"schema version {RUNS_SCHEMA_VERSION + 1}, newer than the {RUNS_SCHEMA_VERSION}"):
        load_study_data([directory])


def test_the_grid_writes_every_column_of_the_run_record(tmp_path):
    """runs.parquet holds RunRow's columns (and the joined labels), with the schema version; a
    result.json round-trips through RunRecord unchanged; a newer or damaged record fails naming the file."""
    import json

    from planted.records import RUNS_SCHEMA_VERSION, run_columns, run_row
    from planted.run_record import RESULT_SCHEMA_VERSION, RunRecord, RunRecordError, SchemaVersionError, read_run_record

    result = {"run_id": "r", "world_id": "w", "group": "g", "framing": "neutral", "replicate": 0, "status": "ok",
              "spec": {"family": "linear", "r2": 0.01, "phi": 0.95, "rho": -0.8, "shocks": "gaussian", "factor": None},
              "seed": {"entropy": [1, 2**100], "spawn_key": [0, 1, 2]}, "predictors": ["x1"],
              "evaluation": {"evaluable": True, "oos_r2": 0.01, "cw_stat": 1.0, "cw_pvalue": 0.2, "error": None},
              "usage": {"input_tokens": 5}}
    record = RunRecord.from_json(result)
    row = run_row(record)
    assert row.schema_version == RUNS_SCHEMA_VERSION and row.test_oos_r2 == 0.01 and row.holdout_cw_p == 0.2
    assert row.input_tokens == 5 and row.output_tokens == 0 and row.predictors == '["x1"]'
    assert json.loads(row.seed_entropy) == [1, 2**100] and list(vars(row)) == run_columns()
    assert RunRecord.from_json(json.loads(json.dumps(record.to_json()))) == record  # one JSON path, both ways
    with pytest.raises(SchemaVersionError, match=f"schema version {RESULT_SCHEMA_VERSION + 1}"):
        RunRecord.from_json(result | {"schema_version": RESULT_SCHEMA_VERSION + 1}, "runs/r/result.json")
    damaged = tmp_path / "result.json"
    damaged.write_text(json.dumps(result)[:40])
    with pytest.raises(RunRecordError, match=f"{damaged} cannot be read.*planted run` redoes the run"):
        read_run_record(damaged)
    damaged.write_text(json.dumps({k: v for k, v in result.items() if k != "replicate"}))
    with pytest.raises(RunRecordError, match="is not a run record"):
        read_run_record(damaged)


def test_removing_an_output_changes_no_other_outputs_bytes(multi_model, tmp_path):
    """The report is a registry with a named random stream per output: leaving Table D.2 out (or the
    calibration table, which draws per model) moves no byte of any other output."""
    runs, mcs = multi_model
    full = write_report(runs, tmp_path / "full", mcs, models=["opus", "sol", "qwen"], n_boot=50, seed=3)
    for left_out in ("Table D.2", "Calibration (D.4)"):
        part = write_report(runs, tmp_path / left_out, mcs, models=["opus", "sol", "qwen"], n_boot=50, seed=3,
                            exclude=[left_out])
        gone = {f for o in full if o.paper == left_out for f in o.files}
        assert gone and not gone & {f for o in part for f in o.files}
        listings = {"index.md", "index.html", "report.md", "outputs.json"}
        names = {p.name for p in (tmp_path / "full").iterdir()} - gone - listings
        assert names == {p.name for p in (tmp_path / left_out).iterdir()} - listings
        for name in sorted(names):
            assert (tmp_path / "full" / name).read_bytes() == (tmp_path / left_out / name).read_bytes(), name


def test_a_truncated_run_record_is_one_line_naming_the_file(smoke_study, tmp_path, capsys):
    import shutil

    from planted.cli import main

    study = tmp_path / "smoke"
    shutil.copytree(smoke_study, study)
    record = sorted((study / "runs").glob("*/result.json"))[0]
    record.write_bytes(record.read_bytes()[:50])
    assert main(["report", "--runs", str(study), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(record) in err[0] and "`planted run` redoes the run" in err[0], err


def _chromium() -> str:
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        if os.environ.get("CI"):  # .ci/run installs Debian's chromium: never hide a broken page there
            pytest.fail("chromium is not installed (CI must provide it)")
        pytest.skip("the browser check of index.html needs chromium (apt-get install chromium)")
    return found


def test_the_html_report_renders_in_a_real_browser(smoke_study, tmp_path):
    """index.html in headless chromium: every image loads (naturalWidth > 0 after load), every table has
    rows, every local link resolves, outputs come in the paper's order, episode pages exist."""
    import re
    import subprocess
    from html.parser import HTMLParser

    from planted.analysis.report_html import paper_order

    out = tmp_path / "report"
    write_report(smoke_study, out, n_boot=50)
    page = (out / "index.html").read_text()
    assert "<script" not in page

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.targets, self.tables, self.rows, self.sections = [], 0, [], []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag in ("a", "img"):
                self.targets.append(attrs.get("href") or attrs.get("src"))
            if tag == "table":
                self.tables += 1
                self.rows.append(0)
            if tag == "tr" and self.rows:
                self.rows[-1] += 1
            if tag == "section":
                self.sections.append(attrs["id"])

    parsed = Links()
    parsed.feed(page)
    local = [t for t in parsed.targets if t and not t.startswith(("#", "http"))]
    assert local and all((out / t).is_file() for t in local), [t for t in local if not (out / t).is_file()]
    episodes = [t for t in local if t.startswith("episodes/")]
    assert episodes and "<!DOCTYPE html>" in (out / episodes[0]).read_text()
    assert parsed.tables >= 10 and min(parsed.rows) >= 2  # a header row and at least one body row each
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    outputs = [h for h in headings if h not in ("Inputs", "Contents")]
    assert outputs[:3] == ["Table 1", "Table 2", "Table 3"]
    assert [paper_order(h) for h in outputs] == sorted(paper_order(h) for h in outputs)

    probe = out / "probe.html"  # the page plus a check script, for the browser only
    probe.write_text(page.replace("</body>", "<script>window.addEventListener('load', () => { document.title = "
                                  "'broken=' + [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
                                  ".length + ' images=' + document.images.length; });</script></body>"))
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
    title = re.search(r"<title>(.*?)</title>", dom).group(1)
    n_images = page.count("<img ")
    assert n_images >= 3 and title == f"broken=0 images={n_images}", title
