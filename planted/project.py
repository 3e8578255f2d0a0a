"""The researcher's project: where studies, models, prompts and preregistrations are read and written.

A **project** is a directory with a ``conf/study/`` folder and a ``conf/config.yaml`` (``planted init DIR`` makes one: the
shipped studies, models and prompts copied as editable files, a ``prereg/`` folder, a README and a
``.gitignore`` for run outputs). Every command resolves a name in the project first (``--project``,
else ``$PLANTED_PROJECT``, else the nearest directory at or above the current one that is a project) and falls back to the **shipped templates**
inside the installed package, which are read-only and named as such in every output. Frozen
studies live in the project's ``prereg/`` and are committed and tagged in the project's git
repository, never inside the installed package.

A source checkout of planted is itself a project (its ``conf/`` is what the package ships).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from planted.config import ConfigError

PROJECT_ENV = "PLANTED_PROJECT"
CONF_DIR = "conf"
PREREG_DIR = "prereg"
CONF_FILES = ("config.yaml", "prompts.yaml")
CONF_GROUPS = ("study", "model")
GITIGNORE = "# planted outputs: runs and reports are regenerated from the logs, worlds from the seeds\nruns/\nreport/\nmc/\n"


def shipped_conf_dir() -> Path:
    """The configuration tree installed with the package (``planted.conf``): read-only templates."""
    return Path(str(resources.files("planted.conf")))


@dataclass(frozen=True)
class ConfigSource:
    """Where a configuration file was found: in the project, or a shipped (read-only) template."""

    path: Path
    shipped: bool

    def describe(self) -> str:
        """``conf/study/smoke.yaml in project /home/me/study`` or ``shipped template smoke.yaml (read-only)``."""
        return f"shipped template {self.path.name} (read-only; `planted init` copies it into a project)" if self.shipped \
            else str(self.path)


@dataclass(frozen=True)
class Project:
    """A project directory (``root``), or none (``root is None``: only the shipped templates)."""

    root: Path | None

    @classmethod
    def find(cls, explicit: Path | str | None = None) -> "Project":
        """The project of ``explicit`` (``--project``), ``$PLANTED_PROJECT``, or else the nearest directory at
        or above the current one with a ``conf/study/`` folder.

        Raises
        ------
        ConfigError
            An explicit or environment directory that is not a project (naming ``planted init``).
        """
        given = explicit if explicit is not None else os.environ.get(PROJECT_ENV) or None
        if given is not None:
            root = Path(given).expanduser().resolve()
            if not (root / CONF_DIR / "study").is_dir():
                raise ConfigError(f"{root} is not a planted project (no conf/study/); create one with `planted init {given}`")
            return cls(root)
        here = Path.cwd().resolve()
        for directory in (here, *here.parents):  # like git: the nearest enclosing project
            if (directory / CONF_DIR / "study").is_dir():
                return cls(directory)
        return cls(None)

    @property
    def conf_dir(self) -> Path | None:
        return None if self.root is None else self.root / CONF_DIR

    @property
    def prereg_dir(self) -> Path | None:
        """``prereg/`` of the project (None without a project: nothing can be frozen there)."""
        return None if self.root is None else self.root / PREREG_DIR

    def config_file(self, group: str | None, name: str) -> ConfigSource | None:
        """``conf/<group>/<name>.yaml`` (or ``conf/<name>`` for a top-level file), project first."""
        relative = Path(name) if group is None else Path(group) / f"{name}.yaml"
        if self.conf_dir is not None and (self.conf_dir / relative).is_file():
            return ConfigSource(self.conf_dir / relative, shipped=False)
        shipped = shipped_conf_dir() / relative
        return ConfigSource(shipped, shipped=True) if shipped.is_file() else None

    def available(self, group: str) -> list[str]:
        """Names of the configs of ``group`` in the project and the shipped templates."""
        dirs = [shipped_conf_dir() / group] + ([self.conf_dir / group] if self.conf_dir is not None else [])
        return sorted({p.stem for d in dirs for p in d.glob("*.yaml")})

    def require(self, group: str, name: str) -> ConfigSource:
        """:meth:`config_file` or a :class:`ConfigError` listing what is available."""
        found = self.config_file(group, name)
        if found is None:
            where = f" in {self.conf_dir} or" if self.conf_dir is not None else ""
            raise ConfigError(f"unknown {group} {name!r}{where} among the shipped templates; available: "
                              f"{', '.join(self.available(group))}")
        return found

    def describe(self) -> str:
        return f"project {self.root}" if self.root is not None else "no project (shipped templates only)"


def init_project(directory: Path) -> list[Path]:
    """Create a project in ``directory``: ``conf/`` (the shipped studies, models and prompts, editable),
    ``prereg/``, ``README.md`` and ``.gitignore``; return the files written.

    Raises
    ------
    ConfigError
        ``directory`` is a file, or already holds a ``conf/`` folder (nothing is overwritten).
    """
    directory = Path(directory)
    for existing in (directory, *directory.parents):
        if existing.exists():
            if not existing.is_dir():
                raise ConfigError(f"{existing} is a file; pass a new or empty directory to `planted init`")
            break
    if (directory / CONF_DIR).exists():
        raise ConfigError(f"{directory / CONF_DIR} exists already: {directory} is a project (nothing overwritten)")
    shipped = shipped_conf_dir()
    written: list[Path] = []
    for group in CONF_GROUPS:
        (directory / CONF_DIR / group).mkdir(parents=True)
        for path in sorted((shipped / group).glob("*.yaml")):
            written.append(Path(shutil.copyfile(path, directory / CONF_DIR / group / path.name)))
    for name in CONF_FILES:
        written.append(Path(shutil.copyfile(shipped / name, directory / CONF_DIR / name)))
    (directory / PREREG_DIR).mkdir(exist_ok=True)
    keep = directory / PREREG_DIR / ".gitkeep"
    keep.touch()
    written.append(keep)
    readme = directory / "README.md"
    if not readme.exists():
        readme.write_text(_README.format(name=directory.resolve().name), encoding="utf-8")
        written.append(readme)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text(GITIGNORE, encoding="utf-8")
        written.append(ignore)
    return written


_README = """# {name}: a planted study project

Created by `planted init`. Everything here is yours to edit and to commit:

- `conf/study/*.yaml`: study grids (copied from the shipped templates; edit, or add your own);
- `conf/model/*.yaml`: model configurations; `conf/prompts.yaml`: the briefs;
- `prereg/`: frozen studies (`planted prereg freeze NAME` writes `prereg/NAME/`, commits it and
  tags it `NAME` in this repository).

Run from this directory (or pass `--project` to any command):

    git init && git add -A && git commit -m "planted project"
    planted run --study smoke                   # exploratory: runs/smoke/
    planted audit --study NAME --n-jobs 2       # do null worlds carry exploitable structure?
    planted prereg freeze NAME --n-jobs 2       # audit, then commit and tag the preregistration
    planted prereg verify NAME                  # confirmatory only while this verifies
    planted run --study NAME                    # confirmatory runs of the frozen study
    planted report --runs runs/NAME --out report/NAME
"""


__all__ = ["ConfigSource", "Project", "init_project", "shipped_conf_dir"]
