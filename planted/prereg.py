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
import subprocess
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

import planted
from planted.hashing import canonical_json, sha256_bytes
from planted.project import CONF_FILES, Project
from planted.provenance import code_provenance
from planted.study_layout import StudyLayout, atomic_write_bytes, atomic_write_json

CONTROLLED_PACKAGES = ("planted.worlds", "planted.agents", "planted.baselines", "planted.analysis")
CONTROLLED_CORE = ("regression.py", "seeding.py", "hashing.py", "_typing.py", "run_record.py", "records.py",
                   "study_config.py", "study_layout.py")
MANIFEST = "manifest.json"


class PreregistrationError(RuntimeError):
    """Freezing or verifying failed; the message says why and what to do."""


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

    @property
    def ok(self) -> bool:
        """Whether every hash matches the manifest (nothing drifted)."""
        return not (self.changed or self.missing or self.added or self.study_changed or self.environment_changed)

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
    """The installed planted code that decides outcomes, keyed ``planted.worlds/spec.py`` (the files Python imports)."""
    files: dict[str, Path] = {}
    for package in CONTROLLED_PACKAGES:
        root = Path(str(resources.files(package)))
        for path in sorted(root.glob("*.py")):
            files[f"{package}/{path.name}"] = path
    core = Path(str(resources.files("planted")))
    for name in CONTROLLED_CORE:
        files[f"planted/{name}"] = core / name
    return files


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


def _git(repo: Path, *args: str, check: bool = True) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if result.returncode != 0 and check:
        raise PreregistrationError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout.strip() if result.returncode == 0 else ""


def _repository(project: Project) -> Path:
    """The top of the git work tree holding the project (refused when there is none)."""
    if project.root is None:
        raise PreregistrationError(
            "no planted project here (no conf/study/ in the current directory): create one with `planted init DIR`, "
            "make it a git repository, and freeze from inside it (or pass --project DIR)"
        )
    top = _git(project.root, "rev-parse", "--show-toplevel", check=False)
    if not top:
        raise PreregistrationError(
            f"the project {project.root} is not a git repository, so a freeze could not be committed and tagged: "
            "run `git init && git add -A && git commit -m 'planted project'` there first"
        )
    return Path(top).resolve()


def _uncommitted(repo: Path, paths: list[Path]) -> list[str]:
    """Those of ``paths`` inside ``repo`` with uncommitted changes or never committed."""
    inside = [str(p.resolve().relative_to(repo)) for p in paths if p.resolve().is_relative_to(repo)]
    if not inside:
        return []
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "-z", "--untracked-files=all", "--", *inside],
                            capture_output=True, text=True)
    if status.returncode != 0:
        raise PreregistrationError(f"git status failed in {repo}: {status.stderr.strip()}")
    return [entry[3:] for entry in status.stdout.split("\0") if len(entry) > 3]


def _prereg_root(project: Project) -> Path:
    if project.prereg_dir is None:
        raise PreregistrationError("no planted project here: frozen studies live in a project's prereg/ "
                                   "(create one with `planted init DIR`, or pass --project DIR)")
    return project.prereg_dir


def manifest_path(study: str, project: Project) -> Path | None:
    """``prereg/NAME/manifest.json`` of the project (None without a project)."""
    return None if project.prereg_dir is None else project.prereg_dir / study / MANIFEST


def committed_secret(study: str, project: Project) -> str | None:
    """The SHA-256 of the secret a frozen study's manifest committed to (None when not frozen)."""
    path = manifest_path(study, project)
    return json.loads(path.read_text())["secret_sha256"] if path is not None and path.is_file() else None


def revealed_secret_file(study: str, project: Project) -> Path | None:
    """Where ``planted prereg reveal`` publishes a study's secret (``prereg/NAME/secret.json``)."""
    from planted.agents.secret import REVEALED_FILE

    path = manifest_path(study, project)
    return None if path is None else path.with_name(REVEALED_FILE)


def freeze(study: str, *, project: Project, out: Path = Path("runs"), tag: bool = True) -> Path:
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

    Raises
    ------
    PreregistrationError
        No project, a shipped template, already frozen, a secret already in ``out``, not a git
        repository, uncommitted changes to hash-controlled files, an existing tag, or a git failure.
    """
    import secrets

    from planted.agents.agent_env import agent_environment
    from planted.agents.secret import SECRET_FILE, secret_sha256, write_secret
    from planted.agents.study import study_grid
    from planted.config import study_section

    target = _prereg_root(project) / study
    if (target / MANIFEST).is_file():
        raise PreregistrationError(f"{study} is already frozen ({target / MANIFEST}); verify it instead")
    source = project.require("study", study)
    if source.shipped:
        raise PreregistrationError(
            f"study {study!r} is a {source.describe()}; only a study in the project's conf/study/ can be frozen: "
            f"copy it to {project.conf_dir / 'study' / (study + '.yaml')} and commit it"  # type: ignore[operator]
        )
    repo = _repository(project) if tag else None
    if repo is not None:
        dirty = _uncommitted(repo, list(controlled_files(project, study).values()))
        if dirty:
            raise PreregistrationError(f"commit these hash-controlled files before freezing: {', '.join(dirty)}")
        if _git(repo, "tag", "--list", study):
            raise PreregistrationError(f"git tag {study!r} exists already in {repo}; choose another study name")
    config = study_section(study, project=project)
    if config.get("secret") is not None:
        raise PreregistrationError(
            f"study {study!r} publishes its secret (`secret:` in its YAML), so anyone can rebuild its worlds: "
            "remove the key to preregister it"
        )
    secret_path = Path(out) / str(config["name"]) / SECRET_FILE
    if secret_path.exists():
        raise PreregistrationError(
            f"{secret_path} exists already: the study has been run before freezing; freeze with a new --out directory"
        )
    secret = secrets.randbits(128)
    grid = study_grid(config, secret)
    order = run_order_csv(grid)
    manifest = {
        "study": study,
        "planted_version": planted.__version__,
        "planted_code": asdict(code_provenance()),
        "git_commit": _git(repo, "rev-parse", "HEAD") if repo is not None else None,
        "study_sha256": sha256_bytes(canonical_json(config).encode()),
        "run_order_sha256": sha256_bytes(order.encode()),
        "n_runs": len(grid.runs),
        "n_worlds": len(grid.worlds),
        "study_seed": int(config["seed"]),
        "secret_sha256": secret_sha256(secret),
        "agent_environment": agent_environment().describe(),
        "files": file_hashes(project, study),
    }
    target.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target / "study.yaml", yaml.safe_dump(config, sort_keys=False).encode("utf-8"))
    atomic_write_bytes(target / "run_order.csv", order.encode("utf-8"))
    atomic_write_json(target / MANIFEST, manifest)
    write_secret(secret_path, secret, study)
    if repo is not None:
        relative = target.resolve().relative_to(repo)
        try:
            _git(repo, "add", str(relative))
            _git(repo, "commit", "-m", f"Freeze study {study} (preregistration manifest)", "--", str(relative))
            _git(repo, "tag", "-a", study, "-m", f"Preregistered study {study}")
        except PreregistrationError:
            # a manifest that was never committed must not look frozen: take everything back
            for name in (MANIFEST, "run_order.csv", "study.yaml"):
                (target / name).unlink(missing_ok=True)
            secret_path.unlink(missing_ok=True)
            raise
    return target


def _commit_problem(study: str, project: Project, path: Path) -> str | None:
    """Why ``path`` (the manifest) does not count as committed under tag ``study`` (None: it does)."""
    repo = _git(path.parent, "rev-parse", "--show-toplevel", check=False)
    if not repo:
        return f"the manifest {path} is not in a git repository"
    if not _git(Path(repo), "rev-parse", "-q", "--verify", f"refs/tags/{study}", check=False):
        return f"the manifest is not tagged: no git tag {study!r} in {repo}"
    relative = path.resolve().relative_to(Path(repo).resolve()).as_posix()
    tagged = subprocess.run(["git", "-C", repo, "show", f"{study}:{relative}"], capture_output=True)
    if tagged.returncode != 0:
        return f"tag {study!r} does not hold {relative}"
    if tagged.stdout != path.read_bytes():
        return f"{relative} differs from the version committed under tag {study!r}"
    return None


def verify(study: str, *, project: Project) -> Drift:
    """Compare the current controlled files and study configuration with the frozen manifest, and check
    that the manifest is the one committed under the study's tag.

    Raises
    ------
    PreregistrationError
        When the study has no frozen manifest in the project.
    """
    from planted.agents.agent_env import agent_environment
    from planted.config import study_section

    path = manifest_path(study, project)
    if path is None or not path.is_file():
        where = f"{path} not found" if path is not None else project.describe()
        raise PreregistrationError(f"{study} is not frozen ({where}); freeze it with `planted prereg freeze {study}`")
    manifest = json.loads(path.read_text())
    frozen, current = manifest["files"], file_hashes(project, study)
    config = study_section(study, project=project)
    environment = manifest.get("agent_environment")
    return Drift(
        study=study,
        changed=sorted(name for name in frozen.keys() & current.keys() if frozen[name] != current[name]),
        missing=sorted(frozen.keys() - current.keys()),
        added=sorted(current.keys() - frozen.keys()),
        study_changed=sha256_bytes(canonical_json(config).encode()) != manifest["study_sha256"],
        environment_changed=environment is not None and environment != agent_environment().describe(),
        not_committed=_commit_problem(study, project, path),
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
        repo = _repository(project)
        relative = target.resolve().relative_to(repo)
        _git(repo, "add", str(relative))
        _git(repo, "commit", "-m", f"Reveal the secret of study {study}", "--", str(relative))
    return target


def analysis_label(study: str, *, exploratory: bool, project: Project, overrides: bool = False) -> AnalysisLabel:
    """Label of a run of ``study``: ``confirmatory`` (frozen, committed under its tag, verified) or
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
    drift = verify(study, project=project)
    if not drift.ok and not exploratory:
        raise PreregistrationError(
            drift.summary() + "\nA confirmatory run needs the frozen code: check out the tag, or pass --exploratory "
            "to run anyway (every output is then labelled exploratory)."
        )
    if not drift.ok:
        return AnalysisLabel("exploratory", "run with --exploratory although the manifest does not verify", drift)
    if drift.not_committed:
        return AnalysisLabel("exploratory", drift.not_committed, drift)
    if exploratory:
        return AnalysisLabel("exploratory", "run with --exploratory", drift)
    if overrides:
        return AnalysisLabel("exploratory", "run with configuration overrides", drift)
    return AnalysisLabel("confirmatory", None, drift)
