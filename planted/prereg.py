"""Preregistration: freeze a study (manifest of hashes, run order, seeds, git tag) and verify it later.

``planted prereg freeze NAME`` writes ``prereg/NAME/`` in the researcher's project
(:mod:`planted.project`; never inside the installed package):

* ``study.yaml``    the resolved study configuration as frozen;
* ``run_order.csv`` every run in run order with its world and seed spawn key (the seeds' entropy
  holds the study secret, so it is not written);
* ``manifest.json`` SHA-256 of every hash-controlled file: the project's study YAML, prompts and
  model configs (``conf/...``) and the **installed** planted code that decides outcomes (the world
  builders, the agent protocol, sandbox and evaluator, the baseline procedures, the analysis code
  and the shared kernels, hashed from the files Python imports, ``planted.worlds/spec.py`` ...);
  the installed version and, for an editable install, its checkout's git commit
  (:mod:`planted.provenance`); the SHA-256 of the study and of the run order, the project's git
  commit, the SHA-256 of the study secret (:mod:`planted.agents.secret`; the secret itself goes to ``OUT/NAME/sealed/``, never into
  the repository) and the agent's Python environment (interpreter and package versions: part of
  the treatment);

then commits those files and creates the git tag ``NAME`` in the project's repository (refused when
the project is not a git repository, has uncommitted changes to hash-controlled files, or the tag
exists). ``planted prereg verify NAME`` recomputes every hash and lists the files that drifted (the
agent environment included), and checks that the manifest is committed under its tag. After the runs,
``planted prereg reveal NAME`` writes the secret to ``prereg/NAME/secret.json`` (checked against the
committed hash) and commits it, so that anyone can rebuild every world bit for bit. A run is **confirmatory** only when the study's
manifest is committed under its tag in the project repository and verifies; a drifted manifest makes
``planted run`` refuse unless ``--exploratory`` is given; every other run is exploratory, and every
record says why (``analysis_reason``). Studies ship unfrozen: freezing is the researcher's act just
before a confirmatory run (a manifest committed earlier would drift with every later code change).
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

import planted
from planted.hashing import canonical_json, sha256_bytes
from planted.prereg_audit import AUDIT_FILES, study_audit
from planted.prereg_git import PreregistrationError, commit_problem, git, repository, tracked_problems, uncommitted
from planted.project import CONF_FILES, Project
from planted.provenance import code_provenance
from planted.study_layout import StudyLayout, atomic_write_bytes, atomic_write_json

CONTROLLED_PACKAGES = ("planted", "planted.worlds", "planted.agents", "planted.baselines", "planted.analysis")
"""Every module of these installed packages is hash-controlled: the code that decides outcomes and the
code that composes the configuration and labels runs (command line, projects, preregistration)."""
CODE_SUFFIXES = (".py", ".so", ".pyd")
"""Python modules and compiled extensions (the C kernels of the random-features ridge and the lasso)."""
STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Drift:
    """Result of verifying a frozen study: files whose hash changed, disappeared or appeared, and the rest."""

    study: str
    changed: list[str]
    missing: list[str]
    added: list[str]
    study_changed: bool
    environment_changed: bool = False
    not_committed: str | None = None
    """Why the manifest does not count as committed under its tag (None: it does)."""
    runtime: tuple[str, ...] = ()
    """What differs in the run being prepared: the composed model configuration, the shock pool."""

    @property
    def ok(self) -> bool:
        """Whether every hash matches the manifest (nothing drifted)."""
        return not (self.changed or self.missing or self.added or self.study_changed or self.environment_changed
                    or self.runtime)

    @property
    def confirmatory(self) -> bool:
        """Whether runs now are confirmatory: nothing drifted and the manifest is committed under its tag."""
        return self.ok and self.not_committed is None

    def summary(self) -> str:
        """Readable verification report."""
        if self.confirmatory:
            return f"{self.study}: every hash-controlled file matches the manifest committed under tag {self.study!r} " \
                   "(confirmatory runs allowed)"
        lines = []
        if not self.ok:
            lines.append(f"{self.study}: the code or configuration drifted from the frozen manifest:")
            lines += [f"  changed: {p}" for p in self.changed]
            lines += [f"  missing: {p}" for p in self.missing]
            lines += [f"  added:   {p}" for p in self.added]
            if self.study_changed:
                lines.append("  changed: the study configuration itself")
            if self.environment_changed:
                lines.append("  changed: the agent's Python environment (interpreter or package versions)")
            lines += [f"  changed: {what}" for what in self.runtime]
        if self.not_committed:
            lines.append(f"{self.study}: {self.not_committed}; runs are exploratory")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class AnalysisLabel:
    """A run's label and, for an exploratory run, why it is not confirmatory."""

    label: str
    reason: str | None
    drift: Drift | None = None


def code_files() -> dict[str, Path]:
    """The installed planted code, keyed ``planted.worlds/spec.py`` (the files Python imports, compiled
    extensions included)."""
    files: dict[str, Path] = {}
    for package in CONTROLLED_PACKAGES:
        root = Path(str(resources.files(package)))
        for path in sorted(root.iterdir()):
            if path.is_file() and path.name.endswith(CODE_SUFFIXES):
                files[f"{package}/{path.name}"] = path
    return files


def check_study_name(study: str) -> str:
    """``study``, if it can name a directory under ``prereg/`` and a git tag (else one line saying why)."""
    if len(study) > 100 or not STUDY_NAME.fullmatch(study) or study.endswith(".lock"):
        raise PreregistrationError(
            f"study name {study!r} cannot name a frozen study: use letters, digits, '-', '_' and single dots "
            "(it becomes a directory under prereg/ and a git tag)"
        )
    return study


def project_files(project: Project, study: str) -> dict[str, Path]:
    """The configuration that decides outcomes, keyed by its path in a project (``conf/study/NAME.yaml``):
    the study, the prompts, ``config.yaml`` and every model config, each as the project resolves it."""
    files = {"conf/study/" + f"{study}.yaml": project.require("study", study).path}
    for name in CONF_FILES:
        found = project.config_file(None, name)
        if found is not None:
            files[f"conf/{name}"] = found.path
    for model in project.available("model"):
        files[f"conf/model/{model}.yaml"] = project.require("model", model).path
    return files


def controlled_files(project: Project, study: str) -> dict[str, Path]:
    """Every hash-controlled file of ``study``: :func:`project_files` and :func:`code_files`."""
    return project_files(project, study) | code_files()


def file_hashes(project: Project, study: str) -> dict[str, str]:
    """SHA-256 of every controlled file's bytes."""
    return {name: sha256_bytes(path.read_bytes()) for name, path in controlled_files(project, study).items()}


def run_order_csv(grid: Any) -> str:
    """The study's runs in run order with their worlds' seed spawn keys, as CSV text (no entropy: it holds the secret)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["position", "run_id", "world_id", "group", "framing", "replicate", "seed_spawn_key"])
    for position, run in enumerate(grid.runs):
        seed = grid.worlds[run.world_id].seed
        writer.writerow([position, run.run_id, run.world_id, run.group, run.framing, run.replicate,
                         json.dumps([int(k) for k in seed.spawn_key])])
    return buffer.getvalue()


def _prereg_root(project: Project) -> Path:
    if project.prereg_dir is None:
        raise PreregistrationError("no planted project here: frozen studies live in a project's prereg/ "
                                   "(create one with `planted init DIR`, or pass --project DIR)")
    return project.prereg_dir


def manifest_path(study: str, project: Project) -> Path | None:
    """``prereg/NAME/manifest.json`` of the project (None without a project)."""
    return None if project.prereg_dir is None else project.prereg_dir / check_study_name(study) / MANIFEST


def model_hashes(project: Project) -> dict[str, str]:
    """SHA-256 of every model's composed section (what runs: files, defaults and interpolations resolved)."""
    from planted.config import compose_model

    return {name: sha256_bytes(canonical_json(compose_model(name, project=project)).encode())
            for name in project.available("model")}


def read_manifest(path: Path) -> dict[str, Any]:
    """A frozen study's manifest (:class:`PreregistrationError` naming the file when it is damaged)."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or not {"files", "study_sha256", "secret_sha256"} <= set(manifest):
            raise ValueError("keys missing")
    except (OSError, ValueError) as exc:
        raise PreregistrationError(f"{path} is damaged ({exc}); restore it from the study's tag: "
                                   f"git checkout {path.parent.name} -- {path.name} (in {path.parent})") from None
    return manifest


def committed_secret(study: str, project: Project) -> str | None:
    """The SHA-256 of the secret a frozen study's manifest committed to (None when not frozen)."""
    path = manifest_path(study, project)
    return str(read_manifest(path)["secret_sha256"]) if path is not None and path.is_file() else None


def revealed_secret_file(study: str, project: Project) -> Path | None:
    """Where ``planted prereg reveal`` publishes a study's secret (``prereg/NAME/secret.json``)."""
    from planted.agents.secret import REVEALED_FILE

    path = manifest_path(study, project)
    return None if path is None else path.with_name(REVEALED_FILE)


def freeze(study: str, *, project: Project, out: Path = Path("runs"), tag: bool = True,
           factor_file: Path | None = None, audit_dir: Path | None = None, audit_worlds: int = 200,
           audit_jobs: int = 1, accept_audit_flags: bool = False) -> Path:
    """Freeze a study: write ``prereg/NAME/`` in the project and (by default) commit it and tag it NAME.

    Parameters
    ----------
    study : str
        Study name (``conf/study/NAME.yaml`` of the project; a shipped template must be copied first).
    project : Project
    out : Path, default ``runs``
        The ``--out`` directory its runs will use: the study's new secret is written to
        ``out/NAME/sealed/study_secret.json`` (refused if one exists there already).
    tag : bool
        Commit and tag; ``False`` only writes the files (such a manifest never makes a run confirmatory).
    factor_file : Path, optional
        The 5-factor CSV of a study whose shock pool is ``ff5`` (its pool's SHA-256 is frozen).
    audit_dir : Path, optional
        An existing world audit (``planted audit --study NAME --out DIR``) covering the study's
        families and pool; without it the audit is run (``audit_worlds`` null worlds per family on
        ``audit_jobs`` workers) into ``OUT/NAME/audit/``.
    accept_audit_flags : bool
        Freeze although the audit flags a family (the flags and the acceptance go into the manifest).

    Raises
    ------
    PreregistrationError
        No project, a bad name, a shipped template, already frozen, a secret already in ``out``,
        not a git repository or no git identity, hash-controlled files that are uncommitted,
        untracked, links or outside the repository, an existing tag, a world audit that flags a
        family (without ``accept_audit_flags``), or a git failure. Every check is made before
        anything is written to the project (the audit's own files go to ``OUT/NAME/audit/``); a
        failure after that takes everything back.
    """
    import secrets

    from planted.agents.agent_env import agent_environment
    from planted.agents.secret import SECRET_FILE, secret_sha256, write_secret
    from planted.agents.study import study_grid
    from planted.config import study_section
    from planted.study_config import StudyConfig

    target = _prereg_root(project) / check_study_name(study)
    if (target / MANIFEST).is_file():
        raise PreregistrationError(f"{study} is already frozen ({target / MANIFEST}); verify it instead")
    source = project.require("study", study)
    if source.shipped:
        raise PreregistrationError(
            f"study {study!r} is a {source.describe()}; only a study in the project's conf/study/ can be frozen: "
            f"copy it to {Path(str(project.conf_dir)) / 'study' / (study + '.yaml')} and commit it"
        )
    repo = repository(project) if tag else None
    if repo is not None:
        if not git(repo, "var", "GIT_COMMITTER_IDENT", check=False):
            raise PreregistrationError(f"git has no identity in {repo} to commit with: set git config user.name "
                                       "and user.email")
        problems = tracked_problems(repo, list(project_files(project, study).values()))
        if problems:
            raise PreregistrationError("the tag would not hold every hash-controlled file: " + "; ".join(problems))
        dirty = uncommitted(repo, list(controlled_files(project, study).values()))
        if dirty:
            raise PreregistrationError(f"commit these hash-controlled files before freezing: {', '.join(dirty)}")
        if git(repo, "tag", "--list", study):
            raise PreregistrationError(f"git tag {study!r} exists already in {repo}; choose another study name")
        if subprocess.run(["git", "check-ref-format", f"refs/tags/{study}"], capture_output=True).returncode != 0:
            raise PreregistrationError(f"{study!r} is not a valid git tag name; choose another study name")
    config = study_section(study, project=project)
    if config.get("secret") is not None:
        raise PreregistrationError(
            f"study {study!r} publishes its secret (`secret:` in its YAML), so anyone can rebuild its worlds: "
            "remove the key to preregister it"
        )
    pool = StudyConfig.from_dict(config, source.describe()).pool_choice.load(factor_file)
    secret_path = Path(out) / str(config["name"]) / SECRET_FILE
    if secret_path.exists():
        raise PreregistrationError(
            f"{secret_path} exists already: the study has been run before freezing; freeze with a new --out directory"
        )
    audit_dir, audit_verdict, flagged = study_audit(study, config, out=Path(out), factor_file=factor_file,
                                                    audit_dir=audit_dir, worlds=audit_worlds, n_jobs=audit_jobs)
    if flagged and not accept_audit_flags:
        raise PreregistrationError(
            "the world audit flags " + "; ".join(f"{f} ({', '.join(v['detectors'][:3])})" for f, v in flagged.items())
            + f": a forecaster beats the benchmark in worlds without a signal (see {audit_dir / 'audit.md'}); change the "
            "worlds, or pass --accept-audit-flags to freeze anyway (recorded in the manifest)"
        )
    secret = secrets.randbits(128)
    grid = study_grid(config, secret)
    order = run_order_csv(grid)
    manifest = {
        "study": study,
        "planted_version": planted.__version__,
        "planted_code": asdict(code_provenance()),
        "git_commit": git(repo, "rev-parse", "HEAD") if repo is not None else None,
        "study_sha256": sha256_bytes(canonical_json(config).encode()),
        "run_order_sha256": sha256_bytes(order.encode()),
        "n_runs": len(grid.runs),
        "n_worlds": len(grid.worlds),
        "study_seed": int(config["seed"]),
        "secret_sha256": secret_sha256(secret),
        "pool": {"source": pool.source, "sha256": pool.sha256, "residuals": pool.size},
        "models": model_hashes(project),
        "agent_environment": agent_environment().describe(),
        "audit": {"sha256": sha256_bytes((audit_dir / "audit.json").read_bytes()), "worlds": audit_verdict.get("worlds"),
                  "flagged": flagged, "accepted_flags": bool(flagged and accept_audit_flags)},
        "files": file_hashes(project, study),
    }
    created = [d for d in (target, secret_path.parent) if not d.exists()]
    try:
        target.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target / "study.yaml", yaml.safe_dump(config, sort_keys=False).encode("utf-8"))
        atomic_write_bytes(target / "run_order.csv", order.encode("utf-8"))
        atomic_write_json(target / MANIFEST, manifest)
        for name in AUDIT_FILES:
            atomic_write_bytes(target / name, (audit_dir / name).read_bytes())
        write_secret(secret_path, secret, study)
        if repo is not None:
            relative = str(target.resolve().relative_to(repo))
            git(repo, "add", relative)
            git(repo, "commit", "-m", f"Freeze study {study} (preregistration manifest)", "--", relative)
            git(repo, "tag", "-a", study, "-m", f"Preregistered study {study}")
    except BaseException:
        _take_back(repo, target, secret_path, created)  # a manifest never committed must not look frozen
        raise
    return target


def _take_back(repo: Path | None, target: Path, secret_path: Path, created: list[Path]) -> None:
    """Undo a freeze that failed after writing: unstage and remove its files and the directories it made."""
    if repo is not None and target.exists():
        git(repo, "reset", "-q", "--", str(target.resolve().relative_to(repo)), check=False)
    for name in (MANIFEST, "run_order.csv", "study.yaml", *AUDIT_FILES):
        (target / name).unlink(missing_ok=True)
    secret_path.unlink(missing_ok=True)
    for directory in sorted(created, key=lambda d: len(d.parts), reverse=True):
        for leftover in (directory, *directory.parents):
            try:
                leftover.rmdir()  # only while empty: never anything that was there before
            except OSError:
                break


def verify(study: str, *, project: Project, model: str | None = None, pool_sha256: str | None = None) -> Drift:
    """Compare the current controlled files and study configuration with the frozen manifest, and check
    that the manifest is the one committed under the study's tag.

    Parameters
    ----------
    study : str
    project : Project
    model : str, optional
        The model of the run being prepared: its composed configuration must be the frozen one.
    pool_sha256 : str, optional
        The shock pool of the run being prepared: it must be the frozen one.

    Raises
    ------
    PreregistrationError
        When the study has no frozen manifest in the project, or the manifest is damaged.
    """
    from planted.agents.agent_env import agent_environment
    from planted.config import compose_model, study_section

    path = manifest_path(study, project)
    if path is None or not path.is_file():
        where = f"{path} not found" if path is not None else project.describe()
        raise PreregistrationError(f"{study} is not frozen ({where}); freeze it with `planted prereg freeze {study}`")
    manifest = read_manifest(path)
    frozen, current = manifest["files"], file_hashes(project, study)
    config = study_section(study, project=project)
    environment = manifest.get("agent_environment")
    runtime = []
    models = manifest.get("models") or {}
    if model is not None and model not in models:
        runtime.append(f"model {model!r} was not frozen with the study (frozen: {', '.join(sorted(models)) or 'none'})")
    elif model is not None:
        composed = sha256_bytes(canonical_json(compose_model(model, project=project)).encode())
        if composed != models[model]:
            runtime.append(f"the composed configuration of model {model!r} (its file, a defaults entry or an "
                           "environment variable it reads)")
    frozen_pool = (manifest.get("pool") or {}).get("sha256")
    if pool_sha256 is not None and frozen_pool is not None and pool_sha256 != frozen_pool:
        runtime.append(f"the shock pool (sha256 {pool_sha256[:12]}, frozen {frozen_pool[:12]})")
    return Drift(
        study=study,
        changed=sorted(name for name in frozen.keys() & current.keys() if frozen[name] != current[name]),
        missing=sorted(frozen.keys() - current.keys()),
        added=sorted(current.keys() - frozen.keys()),
        study_changed=sha256_bytes(canonical_json(config).encode()) != manifest["study_sha256"],
        environment_changed=environment is not None and environment != agent_environment().describe(),
        not_committed=commit_problem(study, path),
        runtime=tuple(runtime),
    )


def reveal(study: str, *, project: Project, out: Path = Path("runs"), commit: bool = True, force: bool = False) -> Path:
    """Publish a frozen study's secret in ``prereg/NAME/secret.json`` (after its runs) and commit it.

    Parameters
    ----------
    study : str
    project : Project
    out : Path, default ``runs``
        The ``--out`` directory of the study's runs (where ``NAME/sealed/study_secret.json`` is).
    commit : bool
        Commit the file in the project's repository.
    force : bool
        Reveal although runs of the study are still pending (they could no longer count as blind).

    Raises
    ------
    PreregistrationError
        Not frozen, no secret in ``out``, a secret that does not match the manifest, runs pending
        (without ``force``), or a git failure.
    """
    from planted.agents.grid import run_is_done
    from planted.agents.secret import SECRET_FILE, StudySecretError, read_secret, secret_sha256, write_secret
    from planted.agents.study import study_grid
    from planted.config import study_section

    committed = committed_secret(study, project)
    target = revealed_secret_file(study, project)
    if committed is None or target is None:
        raise PreregistrationError(f"{study} is not frozen in {project.describe()}; only a frozen study's secret is revealed")
    config = study_section(study, project=project)
    study_dir = Path(out) / str(config["name"])
    try:
        secret = read_secret(study_dir / SECRET_FILE)
    except StudySecretError as exc:
        raise PreregistrationError(f"{exc}; pass the --out directory of the study's runs") from None
    if secret_sha256(secret) != committed:
        raise PreregistrationError(f"{study_dir / SECRET_FILE} does not match the SHA-256 the manifest committed to")
    layout = StudyLayout(study_dir)
    pending = [r.run_id for r in study_grid(config, secret).runs if not run_is_done(layout.run_dir(r.run_id))]
    if pending and not force:
        raise PreregistrationError(
            f"{len(pending)} runs of {study} are still pending (e.g. {pending[0]}); reveal after the runs, or pass --force"
        )
    if not target.exists():
        write_secret(target, secret, study)
    if commit:
        repo = repository(project)
        relative = target.resolve().relative_to(repo)
        git(repo, "add", str(relative))
        git(repo, "commit", "-m", f"Reveal the secret of study {study}", "--", str(relative))
    return target


def analysis_label(study: str, *, exploratory: bool, project: Project, overrides: bool = False,
                   model: str | None = None, pool_sha256: str | None = None, base_url: str | None = None,
                   sandboxed: bool = True) -> AnalysisLabel:
    """Label of a run of ``study``: ``confirmatory`` (frozen, committed under its tag, verified, with the
    frozen model configuration and shock pool, in the sandbox, on the model's own server) or
    ``exploratory``, with the reason.

    Raises
    ------
    PreregistrationError
        A frozen study whose manifest does not verify, unless ``exploratory`` is set.
    """
    if study.endswith((".yaml", ".yml")):
        return AnalysisLabel("exploratory", "a study file given by path is never preregistered")
    path = manifest_path(study, project)
    if path is None or not path.is_file():
        source = project.config_file("study", study)
        where = source.describe() if source is not None and source.shipped else project.describe()
        return AnalysisLabel("exploratory", f"study {study!r} is not frozen ({where}; `planted prereg freeze {study}`)")
    drift = verify(study, project=project, model=model, pool_sha256=pool_sha256)
    if not drift.ok and not exploratory:
        raise PreregistrationError(
            drift.summary() + "\nA confirmatory run needs the frozen code: check out the tag, or pass --exploratory "
            "to run anyway (every output is then labelled exploratory)."
        )
    reasons = [r for r, applies in (
        ("run with --exploratory although the manifest does not verify", not drift.ok),
        (drift.not_committed, drift.ok and drift.not_committed is not None),
        ("run with --exploratory", drift.ok and exploratory),
        ("run with configuration overrides", overrides),
        (f"run against --base-url {base_url}, not the model configuration's own server", base_url is not None),
        ("run without the sandbox (--unsafe-no-sandbox)", not sandboxed),
    ) if applies and r]
    return AnalysisLabel("exploratory", "; ".join(reasons), drift) if reasons else AnalysisLabel("confirmatory", None, drift)
