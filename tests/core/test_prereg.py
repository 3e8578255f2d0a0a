"""Preregistration in a researcher's project (a scratch git repository made by `planted init`).

The tests run against the installed package (CI installs it with `pip install .`, as users do), so
the code files a manifest hashes are the ones in site-packages, and the project's files are the
researcher's own copies.
"""

import json
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from planted.agents.secret import read_secret, secret_hex, secret_sha256
from planted.cli import main
from planted.prereg import PreregistrationError, analysis_label, code_files, file_hashes, freeze, reveal, verify
from planted.project import Project, init_project
from planted.provenance import code_provenance, provenance_from


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def _commit_all(root: Path, message: str = "edit") -> None:
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", message)


AUDITED = (("linear", dict(r2=0.0, phi=0.5, rho=0.0, shocks="gaussian")), ("persistent_null", dict(shocks="gaussian")),
           ("linear", dict(r2=0.0, phi=0.95, rho=-0.8, shocks="gaussian")),
           ("linear", dict(r2=0.0, phi=0.95, rho=-0.8, shocks="bootstrap")))
"""The families of prereg-v3 and of the tiny studies below, audited once per session on a few worlds."""


@pytest.fixture(scope="session")
def audit_dir(tmp_path_factory):
    from planted.baselines.audit import AuditConfig, run_audit, write_audit
    from planted.worlds import WorldSpec

    out = tmp_path_factory.mktemp("audit")
    specs = tuple(WorldSpec(family=f, **kw) for f, kw in AUDITED)
    write_audit(run_audit(AuditConfig(specs=specs, worlds=8, detectors=("lookup_exact_1", "knn_lags")), progress=False), out)
    return out


AUDIT: list = []


@pytest.fixture(autouse=True)
def _audit(audit_dir):
    AUDIT[:] = [audit_dir]


def _freeze(study, **kwargs):
    """A freeze that uses the session's audit (running one per test would take minutes)."""
    return freeze(study, audit_dir=AUDIT[0], **kwargs)


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A fresh project (`planted init`), committed in its own git repository; the current directory is elsewhere."""
    root = tmp_path / "proj"
    init_project(root)
    for args in (["init", "-q"], ["config", "user.email", "t@example.org"], ["config", "user.name", "t"]):
        _git(root, *args)
    _commit_all(root, "planted project")
    monkeypatch.chdir(tmp_path)
    return Project.find(root)


def test_freeze_writes_the_manifest_in_the_project_commits_and_tags(project):
    target = _freeze("prereg-v3", project=project, out=project.root / "runs")
    assert target == project.root / "prereg" / "prereg-v3"
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["n_runs"] == 430 and manifest["n_worlds"] == 350
    assert manifest["files"] == file_hashes(project, "prereg-v3")
    # the project's own configuration and the installed code that decides outcomes
    assert {"conf/study/prereg-v3.yaml", "conf/prompts.yaml", "conf/model/opus.yaml"} <= set(manifest["files"])
    assert {"planted.worlds/simulate.py", "planted.agents/sandbox.py", "planted.agents/evaluator.py",
            "planted.baselines/procedures.py", "planted.analysis/hypotheses.py"} <= set(manifest["files"])
    import planted.worlds.simulate

    assert code_files()["planted.worlds/simulate.py"] == Path(planted.worlds.simulate.__file__)  # what Python imports
    assert manifest["planted_code"] == asdict(code_provenance())
    assert (target / "run_order.csv").read_text().count("\n") == 431
    assert _git(project.root, "tag").split() == ["prereg-v3"]
    assert _git(project.root, "status", "--porcelain").strip() == ""
    drift = verify("prereg-v3", project=project)
    assert drift.ok and drift.confirmatory, drift.summary()
    assert analysis_label("prereg-v3", exploratory=False, project=project).label == "confirmatory"
    with pytest.raises(PreregistrationError, match="already frozen"):
        _freeze("prereg-v3", project=project, out=project.root / "runs")
    secret = read_secret(project.root / "runs" / "prereg-v3" / "sealed" / "study_secret.json")
    assert manifest["secret_sha256"] == secret_sha256(secret)
    assert manifest["agent_environment"]["packages"]["lightgbm"]
    committed = subprocess.run(["git", "-C", str(project.root), "grep", "-I", secret_hex(secret), "prereg-v3"],
                               capture_output=True)
    assert committed.returncode == 1  # the secret is nowhere in the tagged tree (runs/ is ignored)


def test_editing_the_projects_study_changes_the_run_and_is_caught_by_verify(project, capsys):
    _freeze("prereg-v3", project=project, out=project.root / "runs")
    study = project.root / "conf" / "study" / "prereg-v3.yaml"
    config = yaml.safe_load(study.read_text())
    config["budget"] = 20
    study.write_text(yaml.safe_dump(config))
    from planted.config import study_section

    assert study_section("prereg-v3", project=project)["budget"] == 20  # the project's file is what runs
    drift = verify("prereg-v3", project=project)
    assert drift.changed == ["conf/study/prereg-v3.yaml"] and drift.study_changed and not drift.confirmatory
    with pytest.raises(PreregistrationError, match="conf/study/prereg-v3.yaml"):
        analysis_label("prereg-v3", exploratory=False, project=project)
    assert analysis_label("prereg-v3", exploratory=True, project=project).label == "exploratory"
    assert main(["prereg", "verify", "prereg-v3", "--project", str(project.root)]) == 1
    assert "changed: conf/study/prereg-v3.yaml" in capsys.readouterr().out
    assert main(["run", "--study", "prereg-v3", "--project", str(project.root), "--out", str(project.root / "runs"),
                 "--dry-run"]) == 2
    assert "conf/study/prereg-v3.yaml" in capsys.readouterr().err


def test_a_changed_code_hash_is_listed(project):
    target = _freeze("prereg-v3", project=project, out=project.root / "runs")
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["files"]["planted.baselines/procedures.py"] = "0" * 64  # as if the installed code had changed since
    manifest["files"]["planted.worlds/gone.py"] = "1" * 64
    (target / "manifest.json").write_text(json.dumps(manifest))
    drift = verify("prereg-v3", project=project)
    assert drift.changed == ["planted.baselines/procedures.py"] and drift.missing == ["planted.worlds/gone.py"]


def test_freeze_refuses_before_writing_anything(project, tmp_path):
    runs = project.root / "runs"
    study = project.root / "conf" / "study" / "prereg-v3.yaml"
    study.write_text(study.read_text() + "\n# edited\n")  # uncommitted change to a hash-controlled file
    with pytest.raises(PreregistrationError, match="commit these hash-controlled files.*conf/study/prereg-v3.yaml"):
        _freeze("prereg-v3", project=project, out=runs)
    _commit_all(project.root)
    _git(project.root, "tag", "prereg-v3")
    with pytest.raises(PreregistrationError, match="git tag 'prereg-v3' exists already"):
        _freeze("prereg-v3", project=project, out=runs)
    (project.root / "conf" / "study" / "prereg-v2.yaml").unlink()
    _commit_all(project.root)
    with pytest.raises(PreregistrationError, match="shipped template"):  # only the project's studies are frozen
        _freeze("prereg-v2", project=project, out=runs)
    plain = tmp_path / "plain"
    init_project(plain)  # a project that is not a git repository
    with pytest.raises(PreregistrationError, match="not a git repository"):
        _freeze("prereg-v3", project=Project.find(plain), out=plain / "runs")
    with pytest.raises(PreregistrationError, match="no planted project here"):
        _freeze("prereg-v3", project=Project(None), out=runs)
    assert not (project.root / "prereg" / "prereg-v3").exists() and not runs.exists()
    assert not (plain / "prereg" / "prereg-v3").exists() and not (plain / "runs").exists()


def test_a_manifest_not_committed_under_its_tag_is_exploratory_and_says_why(project):
    _freeze("prereg-v3", project=project, out=project.root / "runs", tag=False)
    drift = verify("prereg-v3", project=project)
    assert drift.ok and not drift.confirmatory and "no git tag 'prereg-v3'" in drift.not_committed
    label = analysis_label("prereg-v3", exploratory=False, project=project)
    assert label.label == "exploratory" and "no git tag" in label.reason
    _commit_all(project.root)
    _git(project.root, "tag", "prereg-v3")
    assert verify("prereg-v3", project=project).confirmatory
    manifest = project.root / "prereg" / "prereg-v3" / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"n_runs": 430', b'"n_runs": 431'))  # edited after tagging
    assert "differs from the version committed under tag" in verify("prereg-v3", project=project).not_committed


def test_without_a_project_only_shipped_templates_run_and_nothing_is_frozen(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLANTED_PROJECT", raising=False)
    project = Project.find()
    assert project.root is None and project.require("study", "smoke").shipped
    label = analysis_label("prereg-v3", exploratory=False, project=project)
    assert label.label == "exploratory" and "shipped template" in label.reason
    with pytest.raises(PreregistrationError, match="not frozen"):
        verify("prereg-v3", project=project)
    assert main(["prereg", "verify", "prereg-v3"]) == 2


def test_reveal_publishes_the_secret_that_rebuilds_the_worlds(project):
    """Commit-reveal: revealing before the runs is refused; after, the revealed secret matches the hash."""
    from planted.agents.study import study_grid
    from planted.config import study_section

    runs = project.root / "runs"
    _freeze("prereg-v3", project=project, out=runs)
    with pytest.raises(PreregistrationError, match="still pending"):
        reveal("prereg-v3", project=project, out=runs)
    target = reveal("prereg-v3", project=project, out=runs, force=True)
    revealed = read_secret(target)
    manifest = json.loads((target.parent / "manifest.json").read_text())
    assert secret_sha256(revealed) == manifest["secret_sha256"]
    assert _git(project.root, "log", "--format=%s", "-1").strip() == "Reveal the secret of study prereg-v3"
    config = study_section("prereg-v3", project=project)
    from_sealed = study_grid(config, read_secret(runs / "prereg-v3" / "sealed" / "study_secret.json"))
    from_revealed = study_grid(config, revealed)
    assert [u.seed.entropy for u in from_sealed.worlds.values()] == [u.seed.entropy for u in from_revealed.worlds.values()]


def test_a_freeze_whose_commit_fails_leaves_nothing_frozen(project):
    (project.root / ".gitignore").write_text("prereg/\nruns/\n")  # git add of the manifest fails
    _commit_all(project.root)
    with pytest.raises(PreregistrationError, match="git add"):
        _freeze("prereg-v3", project=project, out=project.root / "runs")
    assert not (project.root / "prereg" / "prereg-v3" / "manifest.json").exists()
    assert not (project.root / "runs" / "prereg-v3" / "sealed" / "study_secret.json").exists()


def test_the_provenance_of_an_editable_install_is_its_checkouts_commit(project):
    head = _git(project.root, "rev-parse", "HEAD").strip()
    editable = json.dumps({"url": project.root.as_uri(), "dir_info": {"editable": True}})
    assert provenance_from(editable, "9.9").commit == head
    copied = json.dumps({"url": project.root.as_uri(), "dir_info": {}})  # `pip install .`: the copy, not the checkout
    assert provenance_from(copied, "9.9").commit is None and not provenance_from(copied, "9.9").editable
    assert provenance_from(None, "9.9").commit is None


def test_init_refuses_a_file_and_an_existing_project(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["init", str(tmp_path / "file")]) == 2
    assert main(["init", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "conf" / "study" / "smoke.yaml").is_file() and (tmp_path / "p" / ".gitignore").is_file()
    assert main(["init", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and "exists already" in err and "Traceback" not in err


def test_a_frozen_study_runs_confirmatory_and_an_unfrozen_one_says_why_not(project, capsys):
    """Through the CLI in a fresh project: freeze, verify, a confirmatory run (real sandbox, scripted
    agent); the shipped smoke study run from outside any project is exploratory, naming the template."""
    import pandas as pd

    tiny = {"name": "tiny", "seed": 5, "budget": 40, "refit_every": 12, "procedures": ["oracle", "hac_holm"],
            "groups": [{"name": "linear", "cells": {"family": "linear", "r2": 0.04, "phi": 0.95, "rho": -0.8,
                                                    "shocks": "gaussian"}, "seeds": 1}]}
    (project.root / "conf" / "study" / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    _commit_all(project.root, "add the tiny study")
    where = ["--project", str(project.root)]
    runs = project.root / "runs"
    assert main(["prereg", "freeze", "tiny", *where, "--out", str(runs), "--audit", str(AUDIT[0])]) == 0
    assert main(["prereg", "verify", "tiny", *where]) == 0
    assert "confirmatory runs allowed" in capsys.readouterr().out
    assert main(["run", "--study", "tiny", *where, "--out", str(runs), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "analysis label: confirmatory" in out
    table = pd.read_parquet(runs / "tiny" / "runs.parquet")
    assert list(table["analysis_label"]) == ["confirmatory"] and table["analysis_reason"].isna().all()
    assert main(["run", "--study", "smoke", "--out", str(project.root.parent / "elsewhere"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "analysis label: exploratory (study 'smoke' is not frozen (shipped template smoke.yaml" in out


def _tiny(project, name="tiny", **extra):
    study = {"name": name, "seed": 5, "budget": 40, "refit_every": 12, "procedures": ["oracle", "hac_holm"],
             "groups": [{"name": "linear", "cells": {"family": "linear", "r2": 0.04, "phi": 0.95, "rho": -0.8,
                                                     "shocks": "gaussian"}, "seeds": 1}]} | extra
    (project.root / "conf" / "study" / f"{name}.yaml").write_text(yaml.safe_dump(study))
    _commit_all(project.root, f"add {name}")


def test_what_runs_is_what_was_frozen(project, monkeypatch):
    """The composed model (an environment variable it reads), the shock pool, --base-url and the
    sandbox all decide whether a run is confirmatory, not only the files' bytes."""
    model = project.root / "conf" / "model" / "scripted.yaml"
    model.write_text(model.read_text().replace("model_id: scripted", "model_id: ${oc.env:PLANTED_TEST_MID,scripted}"))
    _tiny(project)
    _freeze("tiny", project=project, out=project.root / "runs")
    assert analysis_label("tiny", exploratory=False, project=project, model="scripted").label == "confirmatory"
    monkeypatch.setenv("PLANTED_TEST_MID", "swapped")
    with pytest.raises(PreregistrationError, match="composed configuration of model 'scripted'"):
        analysis_label("tiny", exploratory=False, project=project, model="scripted")
    monkeypatch.delenv("PLANTED_TEST_MID")
    with pytest.raises(PreregistrationError, match="the shock pool"):
        analysis_label("tiny", exploratory=False, project=project, model="scripted", pool_sha256="0" * 64)
    label = analysis_label("tiny", exploratory=False, project=project, model="scripted", base_url="http://elsewhere",
                           sandboxed=False)
    assert label.label == "exploratory" and "--base-url http://elsewhere" in label.reason and "sandbox" in label.reason
    manifest = json.loads((project.root / "prereg" / "tiny" / "manifest.json").read_text())
    assert manifest["pool"]["residuals"] == 644 and set(manifest["models"]) >= {"scripted", "opus"}
    assert any(name.endswith(".so") for name in manifest["files"])  # the compiled kernels are hashed too
    assert {"planted/cli.py", "planted/config.py", "planted/project.py"} <= set(manifest["files"])


def test_a_study_named_like_a_git_ref_is_checked_against_its_tag(project):
    """`git show HEAD:...` would read the branch; the manifest is compared with refs/tags/NAME."""
    _tiny(project, "HEAD")
    _freeze("HEAD", project=project, out=project.root / "runs")
    manifest = project.root / "prereg" / "HEAD" / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"n_runs": 1', b'"n_runs": 2'))
    _commit_all(project.root, "re-commit an edited manifest without re-tagging")
    assert "differs from the version committed under tag 'HEAD'" in verify("HEAD", project=project).not_committed


@pytest.mark.parametrize("name", ["../study/tiny", "t.lock", "a..b", "-x", "x/y"])
def test_names_that_cannot_be_a_directory_and_a_tag_are_refused(project, name):
    with pytest.raises(PreregistrationError, match="cannot name a frozen study"):
        _freeze(name, project=project, out=project.root / "runs")
    assert _git(project.root, "status", "--porcelain").strip() == "" and not (project.root / "runs").exists()


def test_freeze_refuses_files_the_tag_would_not_hold(project, tmp_path):
    _tiny(project)
    outside = tmp_path / "prompts-elsewhere.yaml"
    prompts = project.root / "conf" / "prompts.yaml"
    outside.write_bytes(prompts.read_bytes())
    prompts.unlink()
    prompts.symlink_to(outside)
    _commit_all(project.root, "prompts as a link")
    with pytest.raises(PreregistrationError, match="prompts.yaml is a symbolic link"):
        _freeze("tiny", project=project, out=project.root / "runs")
    prompts.unlink()
    prompts.write_bytes(outside.read_bytes())
    _commit_all(project.root, "prompts as a file")
    _git(project.root, "rm", "-q", "--cached", "conf/study/tiny.yaml")
    (project.root / ".git" / "info" / "exclude").write_text("conf/study/tiny.yaml\n")
    _git(project.root, "commit", "-qm", "untrack the study")
    with pytest.raises(PreregistrationError, match="tiny.yaml is not tracked by git"):
        _freeze("tiny", project=project, out=project.root / "runs")
    assert not (project.root / "prereg" / "tiny").exists()


def test_a_failed_commit_takes_everything_back(project, monkeypatch):
    _tiny(project)
    monkeypatch.setenv("GIT_COMMITTER_NAME", "")  # git refuses an empty identity at commit time
    monkeypatch.setenv("GIT_AUTHOR_NAME", "")
    with pytest.raises(PreregistrationError):
        _freeze("tiny", project=project, out=project.root / "runs")
    assert _git(project.root, "status", "--porcelain").strip() == ""  # nothing staged, nothing left
    assert not (project.root / "prereg" / "tiny").exists() and not (project.root / "runs").exists()


def test_damaged_manifests_and_projects_without_config_are_one_line(project, capsys):
    _tiny(project)
    _freeze("tiny", project=project, out=project.root / "runs")
    (project.root / "prereg" / "tiny" / "manifest.json").write_text("{")
    where = ["--project", str(project.root)]
    assert main(["prereg", "verify", "tiny", *where]) == 2
    assert main(["run", "--study", "tiny", *where, "--out", str(project.root / "runs"), "--dry-run"]) == 2
    (project.root / "conf" / "config.yaml").unlink()
    assert main(["run", "--study", "smoke", *where, "--out", str(project.root / "runs"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("planted: error:") for line in err), err
    assert "manifest.json is damaged" in err[0] and "config.yaml is missing" in err[2]


def test_a_study_whose_audit_flags_a_family_is_refused_unless_accepted(project, tmp_path):
    """Bootstrap worlds from the embedded pool repeat values: the audit's lookup flags them; freeze
    refuses, and with --accept-audit-flags records the flags and the acceptance in the manifest."""
    _tiny(project, "boot", groups=[{"name": "linear", "cells": {"family": "linear", "r2": 0.04, "phi": 0.95,
                                                                "rho": -0.8, "shocks": "bootstrap"}, "seeds": 1}])
    with pytest.raises(PreregistrationError, match="world audit flags linear_r2=0_phi=0.95_rho=-0.8_bootstrap"):
        _freeze("boot", project=project, out=project.root / "runs")
    assert not (project.root / "prereg" / "boot").exists()
    target = _freeze("boot", project=project, out=project.root / "runs", accept_audit_flags=True)
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["audit"]["accepted_flags"] is True
    assert "lookup_exact_1 (pseudo)" in manifest["audit"]["flagged"]["linear_r2=0_phi=0.95_rho=-0.8_bootstrap"]["detectors"]
    assert (target / "audit.json").read_bytes() == (AUDIT[0] / "audit.json").read_bytes()
    assert "audit.json" in _git(project.root, "show", "--stat", "--format=", "boot")
    _tiny(project, "other", seed=9)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PreregistrationError, match="holds no readable audit.json"):
        freeze("other", project=project, out=project.root / "runs", audit_dir=tmp_path / "empty")
