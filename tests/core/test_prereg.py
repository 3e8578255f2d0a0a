"""Freezing and verifying a study in a scratch git repository; confirmatory runs refuse drift."""

import json
import subprocess

import pytest

from planted.cli import main
from planted.prereg import PreregistrationError, analysis_label, file_hashes, freeze, verify


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@example.org"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    (root / "README").write_text("scratch\n")
    subprocess.run(["git", "-C", str(root), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "start"], check=True)
    return root


def test_freeze_writes_the_manifest_commits_and_tags(repo):
    target = freeze("smoke", prereg_dir=repo / "prereg", repo=repo)
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["n_runs"] == 11 and manifest["n_worlds"] == 9
    assert manifest["files"] == file_hashes()
    assert "planted.worlds/simulate.py" in manifest["files"] and "planted.conf/prompts.yaml" in manifest["files"]
    assert (target / "run_order.csv").read_text().count("\n") == 12
    tags = subprocess.run(["git", "-C", str(repo), "tag"], capture_output=True, text=True).stdout.split()
    assert tags == ["smoke"]
    assert verify("smoke", prereg_dir=repo / "prereg").ok
    with pytest.raises(PreregistrationError, match="already frozen"):
        freeze("smoke", prereg_dir=repo / "prereg", repo=repo)


def test_drift_is_listed_and_blocks_confirmatory_runs(repo, capsys, monkeypatch):
    target = freeze("smoke", prereg_dir=repo / "prereg", repo=repo)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["files"]["planted.baselines/procedures.py"] = "0" * 64  # as if the code had changed since
    manifest["files"]["planted.worlds/gone.py"] = "1" * 64
    (target / "manifest.json").write_text(json.dumps(manifest))
    drift = verify("smoke", prereg_dir=repo / "prereg")
    assert drift.changed == ["planted.baselines/procedures.py"] and drift.missing == ["planted.worlds/gone.py"]
    with pytest.raises(PreregistrationError, match="procedures.py"):
        analysis_label("smoke", exploratory=False, prereg_dir=repo / "prereg")
    assert analysis_label("smoke", exploratory=True, prereg_dir=repo / "prereg")[0] == "exploratory"
    assert main(["prereg", "verify", "smoke", "--prereg-dir", str(repo / "prereg")]) == 1
    assert "changed: planted.baselines/procedures.py" in capsys.readouterr().out
    monkeypatch.setenv("PLANTED_PREREG_DIR", str(repo / "prereg"))
    assert main(["run", "--study", "smoke", "--out", str(repo / "runs"), "--dry-run"]) == 2
    assert "procedures.py" in capsys.readouterr().err


def test_unfrozen_studies_run_as_exploratory(tmp_path):
    assert analysis_label("smoke", exploratory=False, prereg_dir=tmp_path) == ("exploratory", None)
    with pytest.raises(PreregistrationError, match="not frozen"):
        verify("smoke", prereg_dir=tmp_path)
