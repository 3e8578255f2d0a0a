"""The agent's Python environment: the interpreter, its standard library and only the promised packages.

The brief promises pandas, numpy, scipy, statsmodels, scikit-learn and lightgbm (SPEC 2.1). The
sandbox must offer exactly those and their dependencies, and never planted, its configuration, the
LLM SDKs or anything else the host has installed: with planted importable, agent code could rebuild
its own world and read the sealed window (issue #10).

Mechanism (a synthetic site-packages, no second installation to keep in step):

* the host interpreter's real executable (``sys._base_executable`` resolved) and its library
  directory (``LIBDIR``: the standard library and ``libpython``) are mounted read-only at their host
  paths; a virtual environment's prefix is never mounted;
* every ``site-packages`` / ``dist-packages`` directory that any Python under ``/usr`` or the base
  prefix would read, and the standard library's bundled pip wheel (``ensurepip/_bundled``), are
  covered by an empty read-only tmpfs;
* the distributions of :data:`PROMISED` and the transitive closure of their unconditional
  requirements (``importlib.metadata``; markers evaluated with no extra) are found where the host
  imports them from, and each top-level entry their ``RECORD`` lists (the package directory, a
  single-file module, a ``.libs`` directory of vendored shared libraries, the ``.dist-info``
  directory) is bind-mounted read-only into the first of those directories, the interpreter's own
  site-packages.

Inside, ``sys.executable`` is the base interpreter, ``sys.prefix`` its prefix, and
``importlib.metadata.distributions()`` lists exactly :attr:`AgentEnvironment.packages`. The sandbox
checks this once per process by importing nothing but asking for the forbidden modules
(:data:`FORBIDDEN_MODULES`); see :meth:`planted.agents.sandbox.BwrapSandbox`.
"""

from __future__ import annotations

import functools
import glob
import importlib.metadata as metadata
import os
import platform
import site
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROMISED = ("pandas", "numpy", "scipy", "statsmodels", "scikit-learn", "lightgbm")
"""The packages the agent's brief names (conf/prompts.yaml)."""

FORBIDDEN_MODULES = ("planted", "anthropic", "openai", "hydra", "omegaconf", "httpx", "yaml", "vllm", "pip")
"""Modules that must not be importable in the sandbox; checked in the sandbox's trial run."""


class AgentEnvironmentError(RuntimeError):
    """A promised package is not installed, or its files cannot be located."""


@dataclass(frozen=True)
class AgentEnvironment:
    """What the sandbox mounts for the agent's Python.

    Attributes
    ----------
    executable : str
        The real interpreter binary (host path, also its path inside).
    library_dir : str
        The interpreter's ``LIBDIR`` (standard library, ``libpython``), mounted read-only.
    site_dir : str
        The interpreter's own site-packages inside the sandbox, where the packages are mounted.
    hidden_site_dirs : tuple of str
        Every directory covered by an empty tmpfs (``site_dir`` first; the other site directories
        and ``ensurepip/_bundled``).
    entries : tuple of (str, str)
        ``(host path, name)`` of each top-level entry mounted at ``site_dir/name``.
    packages : dict
        ``{canonical distribution name: version}`` of every mounted distribution.
    python : str
        Interpreter version (``platform.python_version()``).
    """

    executable: str
    library_dir: str
    site_dir: str
    hidden_site_dirs: tuple[str, ...]
    entries: tuple[tuple[str, str], ...]
    packages: dict[str, str]
    python: str

    def describe(self) -> dict[str, object]:
        """JSON-ready record of the environment (part of the treatment: stamped into every run)."""
        return {"python": self.python, "packages": dict(sorted(self.packages.items()))}

    def bwrap_arguments(self, made: set[str]) -> list[str]:
        """bwrap arguments that mount the environment (``made`` tracks directories already created)."""
        from planted.agents.sandbox import parent_directories

        argv: list[str] = []
        for path in (self.library_dir, self.executable):
            if not path.startswith("/usr/"):
                argv += parent_directories(path, made) + ["--ro-bind", path, path]
        for directory in self.hidden_site_dirs:
            argv += parent_directories(directory, made) + ["--perms", "0755", "--tmpfs", directory]
        for host, name in self.entries:
            argv += ["--ro-bind", host, f"{self.site_dir}/{name}"]
        for directory in self.hidden_site_dirs:
            argv += ["--remount-ro", directory]
        return argv


def _closure(roots: tuple[str, ...]) -> list[metadata.Distribution]:
    """The distributions of ``roots`` and of their unconditional requirements, each once."""
    found: dict[str, metadata.Distribution] = {}
    pending = list(roots)
    while pending:
        name = canonicalize_name(pending.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise AgentEnvironmentError(
                f"the agent's environment needs {name!r}, which is not installed with the interpreter "
                f"{sys.executable}; reinstall planted (`pip install .`) to bring its dependencies"
            ) from None
        found[name] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return [found[name] for name in sorted(found)]


def _top_level_entries(dist: metadata.Distribution) -> list[tuple[str, str]]:
    """``(host path, name)`` of the top-level files and directories a distribution installed."""
    if dist.files is None:
        raise AgentEnvironmentError(
            f"{dist.metadata['Name']} has no RECORD of its files, so its package directories cannot be mounted "
            "alone; reinstall it with pip"
        )
    entries: dict[str, str] = {}
    for file in dist.files:
        parts = Path(str(file)).parts
        if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(".pth"):
            continue
        host = Path(str(dist.locate_file(parts[0]))).resolve()
        if host.exists():
            entries[parts[0]] = str(host)
    return [(host, name) for name, host in sorted(entries.items())]


def _site_directories(prefix: str) -> list[str]:
    """Site directories of the interpreter at ``prefix`` and of every Python under ``/usr``."""
    ours = site.getsitepackages([prefix])
    others = glob.glob("/usr/lib/python3*/*-packages") + glob.glob("/usr/local/lib/python3*/*-packages")
    others += glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages"))
    seen: list[str] = []
    for path in [*ours, *sorted(others)]:
        real = os.path.realpath(path)
        if real not in seen and (os.path.isdir(real) or path == ours[0]):
            seen.append(real)
    return seen


@functools.lru_cache(maxsize=1)
def agent_environment(roots: tuple[str, ...] = PROMISED) -> AgentEnvironment:
    """The environment of this host interpreter (computed once per process).

    Raises
    ------
    AgentEnvironmentError
        When a promised package or one of its dependencies is missing or has no file record.
    """
    executable = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    library_dir = os.path.realpath(str(sysconfig.get_config_var("LIBDIR") or Path(sys.base_prefix, "lib")))
    stdlib = os.path.realpath(sysconfig.get_paths(vars={"installed_base": sys.base_prefix, "base": sys.base_prefix})["stdlib"])
    if not stdlib.startswith(library_dir.rstrip("/") + "/"):
        library_dir = os.path.dirname(stdlib)
    sites = _site_directories(sys.base_prefix)
    bundled = os.path.join(stdlib, "ensurepip", "_bundled")  # pip's wheel: importable by hand otherwise
    hidden = [*sites, bundled] if os.path.isdir(bundled) else sites
    dists = _closure(roots)
    entries: list[tuple[str, str]] = []
    for dist in dists:
        entries += _top_level_entries(dist)
    names = [name for _, name in entries]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise AgentEnvironmentError(f"two distributions install the same top-level entries: {clashes}")
    return AgentEnvironment(
        executable=executable,
        library_dir=library_dir,
        site_dir=sites[0],
        hidden_site_dirs=tuple(hidden),
        entries=tuple(entries),
        packages={canonicalize_name(d.metadata["Name"]): d.version for d in dists},
        python=platform.python_version(),
    )


__all__ = ["FORBIDDEN_MODULES", "PROMISED", "AgentEnvironment", "AgentEnvironmentError", "agent_environment"]
