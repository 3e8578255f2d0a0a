"""Preregistration: freeze a study (manifest of hashes, run order, seeds, git tag) and verify it later.

``planted prereg freeze NAME`` writes ``prereg/NAME/``:

* ``study.yaml``    the resolved study configuration as frozen;
* ``run_order.csv`` every run in run order with its world and seed (entropy, spawn key);
* ``manifest.json`` SHA-256 of every hash-controlled file (prompts, study and model configs, the
  world builders, the agent protocol and evaluator, the baseline procedures and the analysis code,
  the shared kernels), of the study and of the run order, and the git commit;

then commits those files and creates the git tag ``NAME``. ``planted prereg verify NAME`` recomputes
every hash and lists the files that drifted. A run of a frozen study is **confirmatory** only when
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

CONTROLLED_PACKAGES = ("planted.worlds", "planted.agents", "planted.baselines", "planted.analysis")
CONTROLLED_CORE = ("regression.py", "seeding.py", "hashing.py", "_typing.py")
CONTROLLED_CONF = ("prompts.yaml", "config.yaml")


class PreregistrationError(RuntimeError):
    """Freezing or verifying failed; the message says why and what to do."""


@dataclass(frozen=True)
class Drift:
    """Result of verifying a frozen study: files whose hash changed, disappeared or appeared."""

    study: str
    changed: list[str]
    missing: list[str]
    added: list[str]
    study_changed: bool

    @property
    def ok(self) -> bool:
        """Whether the manifest verifies (nothing drifted)."""
        return not (self.changed or self.missing or self.added or self.study_changed)

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
    """The study's runs in run order with their world seeds, as CSV text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["position", "run_id", "world_id", "group", "framing", "replicate", "seed_entropy", "seed_spawn_key"])
    for position, run in enumerate(grid.runs):
        seed = grid.worlds[run.world_id].seed
        writer.writerow([position, run.run_id, run.world_id, run.group, run.framing, run.replicate,
                         seed.entropy, json.dumps([int(k) for k in seed.spawn_key])])
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


def freeze(study: str, *, prereg_dir: Path | None = None, repo: Path | None = None, tag: bool = True) -> Path:
    """Freeze a study: write ``prereg/NAME/`` and (by default) commit it and create the git tag NAME.

    Parameters
    ----------
    study : str
        Study name (``conf/study/NAME.yaml``).
    prereg_dir : Path, optional
        Where frozen studies live (default: ``prereg/`` of the source checkout).
    repo : Path, optional
        Git repository to commit and tag in (default: the one containing ``prereg_dir``).
    tag : bool
        Commit and tag; ``False`` only writes the files.

    Raises
    ------
    PreregistrationError
        Already frozen, uncommitted changes to controlled files, or a git failure.
    """
    from planted.agents.study import study_grid
    from planted.config import compose_study

    target_root = Path(prereg_dir) if prereg_dir is not None else default_prereg_dir()
    target = target_root / study
    if (target / "manifest.json").is_file():
        raise PreregistrationError(f"{study} is already frozen ({target / 'manifest.json'}); verify it instead")
    repo = Path(repo) if repo is not None else target_root.parent
    if tag:
        dirty = _uncommitted_controlled(repo)
        if dirty:
            raise PreregistrationError(f"commit these hash-controlled files before freezing: {', '.join(dirty)}")
        if _git(repo, "tag", "--list", study):
            raise PreregistrationError(f"git tag {study!r} exists already in {repo}")
    config = compose_study(study, "scripted")["study"]
    grid = study_grid(config)
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
        "files": file_hashes(),
    }
    target.mkdir(parents=True, exist_ok=True)
    (target / "study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (target / "run_order.csv").write_text(order)
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    if tag:
        relative = target.resolve().relative_to(repo.resolve())
        _git(repo, "add", str(relative))
        _git(repo, "commit", "-m", f"Freeze study {study} (preregistration manifest)", "--", str(relative))
        _git(repo, "tag", "-a", study, "-m", f"Preregistered study {study}")
    return target


def verify(study: str, *, prereg_dir: Path | None = None) -> Drift:
    """Compare the current controlled files and study configuration with the frozen manifest.

    Raises
    ------
    PreregistrationError
        When the study has no frozen manifest.
    """
    from planted.config import compose_study

    path = (Path(prereg_dir) if prereg_dir is not None else default_prereg_dir()) / study / "manifest.json"
    if not path.is_file():
        raise PreregistrationError(f"{study} is not frozen ({path} not found); freeze it with `planted prereg freeze {study}`")
    manifest = json.loads(path.read_text())
    frozen, current = manifest["files"], file_hashes()
    config = compose_study(study, "scripted")["study"]
    return Drift(
        study=study,
        changed=sorted(name for name in frozen.keys() & current.keys() if frozen[name] != current[name]),
        missing=sorted(frozen.keys() - current.keys()),
        added=sorted(current.keys() - frozen.keys()),
        study_changed=sha256_bytes(canonical_json(config).encode()) != manifest["study_sha256"],
    )


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
