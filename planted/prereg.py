"""Preregistration: freeze a study (manifest of hashes, run order, seeds, git tag) and verify it later.

``planted prereg freeze NAME`` writes ``prereg/NAME/``:

* ``study.yaml``    the resolved study configuration as frozen;
* ``run_order.csv`` every run in run order with its world and seed spawn key (the seeds' entropy
  holds the study secret, so it is not written);
* ``manifest.json`` SHA-256 of every hash-controlled file (prompts, study and model configs, the
  world builders, the agent protocol and evaluator, the baseline procedures and the analysis code,
  the shared kernels), of the study and of the run order, the git commit, the SHA-256 of the study
  secret (:mod:`planted.agents.secret`; the secret itself goes to ``OUT/NAME/sealed/``, never into
  the repository) and the agent's Python environment (interpreter and package versions: part of
  the treatment);

then commits those files and creates the git tag ``NAME``. ``planted prereg verify NAME`` recomputes
every hash and lists the files that drifted (the agent environment included). After the runs,
``planted prereg reveal NAME`` writes the secret to ``prereg/NAME/secret.json`` (checked against the
committed hash) and commits it, so that anyone can rebuild every world bit for bit. A run of a frozen study is **confirmatory** only when
the manifest verifies; ``planted run`` refuses otherwise unless ``--exploratory`` is given, and every
output of an exploratory run says so. Studies ship unfrozen: freezing is the researcher's act just
before a confirmatory run (a manifest committed earlier would drift with every later code change).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

import planted
from planted.hashing import canonical_json, sha256_bytes
from planted.study_layout import StudyLayout, atomic_write_bytes, atomic_write_json

CONTROLLED_PACKAGES = ("planted.worlds", "planted.agents", "planted.baselines", "planted.analysis")
CONTROLLED_CORE = ("regression.py", "seeding.py", "hashing.py", "_typing.py")
CONTROLLED_CONF = ("prompts.yaml", "config.yaml")


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

    @property
    def ok(self) -> bool:
        """Whether the manifest verifies (nothing drifted)."""
        return not (self.changed or self.missing or self.added or self.study_changed or self.environment_changed)

    def summary(self) -> str:
        """Readable verification report."""
        if self.ok:
            return f"{self.study}: every hash-controlled file matches the frozen manifest (confirmatory runs allowed)"
        lines = [f"{self.study}: the code or configuration drifted from the frozen manifest:"]
        lines += [f"  changed: {p}" for p in self.changed]
        lines += [f"  missing: {p}" for p in self.missing]
        lines += [f"  added:   {p}" for p in self.added]
        if self.study_changed:
            lines.append("  changed: the study configuration itself")
        if self.environment_changed:
            lines.append("  changed: the agent's Python environment (interpreter or package versions)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def controlled_files() -> dict[str, Path]:
    """Every hash-controlled file, keyed by a location-independent name (``planted.worlds/spec.py``)."""
    files: dict[str, Path] = {}
    for package in CONTROLLED_PACKAGES:
        root = Path(str(resources.files(package)))
        for path in sorted(root.glob("*.py")):
            files[f"{package}/{path.name}"] = path
    core = Path(str(resources.files("planted")))
    for name in CONTROLLED_CORE:
        files[f"planted/{name}"] = core / name
    conf = Path(str(resources.files("planted.conf")))
    for name in CONTROLLED_CONF:
        files[f"planted.conf/{name}"] = conf / name
    for group in ("study", "model"):
        for path in sorted((conf / group).glob("*.yaml")):
            files[f"planted.conf/{group}/{path.name}"] = path
    return files


def file_hashes() -> dict[str, str]:
    """SHA-256 of every controlled file's bytes."""
    return {name: sha256_bytes(path.read_bytes()) for name, path in controlled_files().items()}


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


def default_prereg_dir() -> Path:
    """``$PLANTED_PREREG_DIR`` if set, else ``prereg/`` of the source checkout that holds the package."""
    if os.environ.get("PLANTED_PREREG_DIR"):
        return Path(os.environ["PLANTED_PREREG_DIR"])
    return Path(planted.__file__).resolve().parent.parent / "prereg"


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise PreregistrationError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout.strip()


def _uncommitted_controlled(repo: Path) -> list[str]:
    """Controlled files inside ``repo`` with uncommitted changes (none when they live elsewhere)."""
    repo = repo.resolve()
    inside = [str(p.resolve().relative_to(repo)) for p in controlled_files().values() if p.resolve().is_relative_to(repo)]
    if not inside:
        return []
    status = _git(repo, "status", "--porcelain", "--", *inside)
    return [line[3:] for line in status.splitlines() if line.strip()]


def _manifest_path(study: str, prereg_dir: Path | None) -> Path:
    return (Path(prereg_dir) if prereg_dir is not None else default_prereg_dir()) / study / "manifest.json"


def committed_secret(study: str, prereg_dir: Path | None = None) -> str | None:
    """The SHA-256 of the secret a frozen study's manifest committed to (None when not frozen)."""
    path = _manifest_path(study, prereg_dir)
    return json.loads(path.read_text())["secret_sha256"] if path.is_file() else None


def revealed_secret_file(study: str, prereg_dir: Path | None = None) -> Path:
    """Where ``planted prereg reveal`` publishes a study's secret (``prereg/NAME/secret.json``)."""
    from planted.agents.secret import REVEALED_FILE

    return _manifest_path(study, prereg_dir).with_name(REVEALED_FILE)


def freeze(study: str, *, out: Path = Path("runs"), prereg_dir: Path | None = None, repo: Path | None = None,
           tag: bool = True) -> Path:
    """Freeze a study: write ``prereg/NAME/`` and (by default) commit it and create the git tag NAME.

    Parameters
    ----------
    study : str
        Study name (``conf/study/NAME.yaml``).
    out : Path, default ``runs``
        The ``--out`` directory its runs will use: the study's new secret is written to
        ``out/NAME/sealed/study_secret.json`` (refused if one exists there already).
    prereg_dir : Path, optional
        Where frozen studies live (default: ``prereg/`` of the source checkout).
    repo : Path, optional
        Git repository to commit and tag in (default: the one containing ``prereg_dir``).
    tag : bool
        Commit and tag; ``False`` only writes the files.

    Raises
    ------
    PreregistrationError
        Already frozen, a secret already in ``out``, uncommitted changes to controlled files, or a
        git failure.
    """
    import secrets

    from planted.agents.agent_env import agent_environment
    from planted.agents.secret import SECRET_FILE, secret_sha256, write_secret
    from planted.agents.study import study_grid
    from planted.config import compose_study

    target_root = Path(prereg_dir) if prereg_dir is not None else default_prereg_dir()
    target = target_root / study
    if (target / "manifest.json").is_file():
        raise PreregistrationError(f"{study} is already frozen ({target / 'manifest.json'}); verify it instead")
    repo = Path(repo) if repo is not None else target_root.parent
    if tag:
        _check_inside_repository(target_root, repo)
        dirty = _uncommitted_controlled(repo)
        if dirty:
            raise PreregistrationError(f"commit these hash-controlled files before freezing: {', '.join(dirty)}")
        if _git(repo, "tag", "--list", study):
            raise PreregistrationError(f"git tag {study!r} exists already in {repo}")
    config = compose_study(study, "scripted")["study"]
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
    commit = _git(repo, "rev-parse", "HEAD") if tag else None
    manifest = {
        "study": study,
        "planted_version": planted.__version__,
        "git_commit": commit,
        "study_sha256": sha256_bytes(canonical_json(config).encode()),
        "run_order_sha256": sha256_bytes(order.encode()),
        "n_runs": len(grid.runs),
        "n_worlds": len(grid.worlds),
        "study_seed": int(config["seed"]),
        "secret_sha256": secret_sha256(secret),
        "agent_environment": agent_environment().describe(),
        "files": file_hashes(),
    }
    target.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target / "study.yaml", yaml.safe_dump(config, sort_keys=False).encode("utf-8"))
    atomic_write_bytes(target / "run_order.csv", order.encode("utf-8"))
    atomic_write_json(target / "manifest.json", manifest)
    write_secret(secret_path, secret, study)
    if tag:
        relative = target.resolve().relative_to(repo.resolve())
        try:
            _git(repo, "add", str(relative))
            _git(repo, "commit", "-m", f"Freeze study {study} (preregistration manifest)", "--", str(relative))
            _git(repo, "tag", "-a", study, "-m", f"Preregistered study {study}")
        except PreregistrationError:
            # a manifest that was never committed must not look frozen: take everything back
            for name in ("manifest.json", "run_order.csv", "study.yaml"):
                (target / name).unlink(missing_ok=True)
            secret_path.unlink(missing_ok=True)
            raise
    return target


def _check_inside_repository(prereg_dir: Path, repo: Path) -> None:
    """Refuse, before anything is written, a prereg directory outside a git work tree ``repo``."""
    result = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if result.returncode != 0:
        raise PreregistrationError(
            f"{repo} is not a git repository, so a freeze there could not be committed and tagged; pass "
            "--prereg-dir inside your project's git repository (e.g. --prereg-dir prereg from its top directory)"
        )
    top = Path(result.stdout.strip()).resolve()
    if not Path(prereg_dir).resolve().is_relative_to(top) or "site-packages" in Path(prereg_dir).resolve().parts:
        raise PreregistrationError(
            f"{prereg_dir} is not inside the git work tree {top}; pass --prereg-dir inside your project's repository"
        )


def verify(study: str, *, prereg_dir: Path | None = None) -> Drift:
    """Compare the current controlled files and study configuration with the frozen manifest.

    Raises
    ------
    PreregistrationError
        When the study has no frozen manifest.
    """
    from planted.agents.agent_env import agent_environment
    from planted.config import compose_study

    path = _manifest_path(study, prereg_dir)
    if not path.is_file():
        raise PreregistrationError(f"{study} is not frozen ({path} not found); freeze it with `planted prereg freeze {study}`")
    manifest = json.loads(path.read_text())
    frozen, current = manifest["files"], file_hashes()
    config = compose_study(study, "scripted")["study"]
    environment = manifest.get("agent_environment")
    return Drift(
        study=study,
        changed=sorted(name for name in frozen.keys() & current.keys() if frozen[name] != current[name]),
        missing=sorted(frozen.keys() - current.keys()),
        added=sorted(current.keys() - frozen.keys()),
        study_changed=sha256_bytes(canonical_json(config).encode()) != manifest["study_sha256"],
        environment_changed=environment is not None and environment != agent_environment().describe(),
    )


def reveal(study: str, *, out: Path = Path("runs"), prereg_dir: Path | None = None, repo: Path | None = None,
           commit: bool = True, force: bool = False) -> Path:
    """Publish a frozen study's secret in ``prereg/NAME/secret.json`` (after its runs) and commit it.

    Parameters
    ----------
    study : str
    out : Path, default ``runs``
        The ``--out`` directory of the study's runs (where ``NAME/sealed/study_secret.json`` is).
    prereg_dir, repo : Path, optional
        As for :func:`freeze`.
    commit : bool
        Commit the file in ``repo``.
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
    from planted.config import compose_study

    committed = committed_secret(study, prereg_dir)
    if committed is None:
        raise PreregistrationError(f"{study} is not frozen; only a frozen study's secret is revealed")
    config = compose_study(study, "scripted")["study"]
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
    target = revealed_secret_file(study, prereg_dir)
    if not target.exists():
        write_secret(target, secret, study)
    if commit:
        repo = Path(repo) if repo is not None else target.parent.parent.parent
        relative = target.resolve().relative_to(repo.resolve())
        _git(repo, "add", str(relative))
        _git(repo, "commit", "-m", f"Reveal the secret of study {study}", "--", str(relative))
    return target


def analysis_label(study: str, *, exploratory: bool, prereg_dir: Path | None = None) -> tuple[str, Drift | None]:
    """Label of a run of ``study``: ``confirmatory`` (frozen and verified) or ``exploratory``.

    Raises
    ------
    PreregistrationError
        A frozen study whose manifest does not verify, unless ``exploratory`` is set.
    """
    root = Path(prereg_dir) if prereg_dir is not None else default_prereg_dir()
    if not (root / study / "manifest.json").is_file():
        return "exploratory", None
    drift = verify(study, prereg_dir=root)
    if drift.ok and not exploratory:
        return "confirmatory", drift
    if not drift.ok and not exploratory:
        raise PreregistrationError(
            drift.summary() + "\nA confirmatory run needs the frozen code: check out the tag, or pass --exploratory "
            "to run anyway (every output is then labelled exploratory)."
        )
    return "exploratory", drift
