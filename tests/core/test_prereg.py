"""Freezing and verifying a study in a scratch git repository; confirmatory runs refuse drift."""

import json
import subprocess

import pytest

from planted.cli import main
from planted.agents.secret import read_secret, secret_hex, secret_sha256
from planted.prereg import PreregistrationError, analysis_label, file_hashes, freeze, reveal, verify


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
    target = freeze("prereg-v3", out=repo / "runs", prereg_dir=repo / "prereg", repo=repo)
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["n_runs"] == 430 and manifest["n_worlds"] == 350
    assert manifest["files"] == file_hashes()
    assert "planted.worlds/simulate.py" in manifest["files"] and "planted.conf/prompts.yaml" in manifest["files"]
    assert (target / "run_order.csv").read_text().count("\n") == 431
    tags = subprocess.run(["git", "-C", str(repo), "tag"], capture_output=True, text=True).stdout.split()
    assert tags == ["prereg-v3"]
    assert verify("prereg-v3", prereg_dir=repo / "prereg").ok
    with pytest.raises(PreregistrationError, match="already frozen"):
        freeze("prereg-v3", out=repo / "runs", prereg_dir=repo / "prereg", repo=repo)
    # the secret: only its hash is committed, the secret itself is in the study's sealed area
    secret = read_secret(repo / "runs" / "prereg-v3" / "sealed" / "study_secret.json")
    assert manifest["secret_sha256"] == secret_sha256(secret)
    assert manifest["agent_environment"]["packages"]["lightgbm"]
    committed = subprocess.run(["git", "-C", str(repo), "grep", "-I", secret_hex(secret), "prereg-v3"], capture_output=True)
    assert committed.returncode == 1  # the secret is nowhere in the tagged tree


def test_a_study_that_publishes_its_secret_cannot_be_frozen(repo):
    with pytest.raises(PreregistrationError, match="publishes its secret"):
        freeze("smoke", out=repo / "runs", prereg_dir=repo / "prereg", repo=repo)


def test_reveal_publishes_the_secret_that_rebuilds_the_worlds(repo):
    """Commit-reveal: revealing before the runs is refused; after, the revealed secret matches the hash."""
    from planted.agents.study import study_grid
    from planted.config import compose_study

    freeze("prereg-v3", out=repo / "runs", prereg_dir=repo / "prereg", repo=repo)
    with pytest.raises(PreregistrationError, match="still pending"):
        reveal("prereg-v3", out=repo / "runs", prereg_dir=repo / "prereg", repo=repo)
    target = reveal("prereg-v3", out=repo / "runs", prereg_dir=repo / "prereg", repo=repo, force=True)
    revealed = read_secret(target)
    manifest = json.loads((target.parent / "manifest.json").read_text())
    assert secret_sha256(revealed) == manifest["secret_sha256"]
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s", "-1"], capture_output=True, text=True).stdout
    assert log.strip() == "Reveal the secret of study prereg-v3"
    config = compose_study("prereg-v3", "scripted")["study"]
    from_sealed = study_grid(config, read_secret(repo / "runs" / "prereg-v3" / "sealed" / "study_secret.json"))
    from_revealed = study_grid(config, revealed)
    assert [u.seed.entropy for u in from_sealed.worlds.values()] == [u.seed.entropy for u in from_revealed.worlds.values()]


def test_drift_is_listed_and_blocks_confirmatory_runs(repo, capsys, monkeypatch):
    target = freeze("prereg-v3", out=repo / "runs", prereg_dir=repo / "prereg", repo=repo)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["files"]["planted.baselines/procedures.py"] = "0" * 64  # as if the code had changed since
    manifest["files"]["planted.worlds/gone.py"] = "1" * 64
    (target / "manifest.json").write_text(json.dumps(manifest))
    drift = verify("prereg-v3", prereg_dir=repo / "prereg")
    assert drift.changed == ["planted.baselines/procedures.py"] and drift.missing == ["planted.worlds/gone.py"]
    with pytest.raises(PreregistrationError, match="procedures.py"):
        analysis_label("prereg-v3", exploratory=False, prereg_dir=repo / "prereg")
    assert analysis_label("prereg-v3", exploratory=True, prereg_dir=repo / "prereg")[0] == "exploratory"
    assert main(["prereg", "verify", "prereg-v3", "--prereg-dir", str(repo / "prereg")]) == 1
    assert "changed: planted.baselines/procedures.py" in capsys.readouterr().out
    monkeypatch.setenv("PLANTED_PREREG_DIR", str(repo / "prereg"))
    assert main(["run", "--study", "prereg-v3", "--out", str(repo / "runs"), "--dry-run"]) == 2
    assert "procedures.py" in capsys.readouterr().err


def test_unfrozen_studies_run_as_exploratory(tmp_path):
    assert analysis_label("smoke", exploratory=False, prereg_dir=tmp_path) == ("exploratory", None)
    with pytest.raises(PreregistrationError, match="not frozen"):
        verify("smoke", prereg_dir=tmp_path)


def test_a_freeze_that_cannot_be_committed_leaves_nothing_frozen(tmp_path):
    """Outside a git repository (the installed package's own directory, say) freeze refuses before
    writing; a commit that fails takes the manifest and the secret back, so nothing verifies as frozen."""
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    with pytest.raises(PreregistrationError, match="not a git repository"):
        freeze("prereg-v3", out=tmp_path / "runs", prereg_dir=plain / "prereg")
    assert not (plain / "prereg").exists() and not (tmp_path / "runs").exists()
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@example.org"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / ".gitignore").write_text("prereg/\n")  # git add of the manifest fails
    subprocess.run(["git", "-C", str(repo), "add", ".gitignore"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "start"], check=True)
    with pytest.raises(PreregistrationError, match="git add"):
        freeze("prereg-v3", out=tmp_path / "runs", prereg_dir=repo / "prereg", repo=repo)
    assert not (repo / "prereg" / "prereg-v3" / "manifest.json").exists()
    assert not (tmp_path / "runs" / "prereg-v3" / "sealed" / "study_secret.json").exists()
    with pytest.raises(PreregistrationError, match="not frozen"):
        verify("prereg-v3", prereg_dir=repo / "prereg")
