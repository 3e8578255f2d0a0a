"""Which planted code is running: its version, whether it is an editable install, and its git commit.

The installer records how a distribution was installed in ``direct_url.json`` (PEP 610): an
editable install (``pip install -e``) has ``dir_info.editable`` true and a ``file://`` URL of the
source checkout, whose git commit then identifies the code. A regular install (``pip install .``,
a wheel) runs the files copied into site-packages; its identity is the version and the hashes of
those files (:mod:`planted.prereg`), never the git state of whatever directory encloses the
environment (a ``.venv`` inside the researcher's project would otherwise report the project's
commit as planted's).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

import planted


@dataclass(frozen=True)
class CodeProvenance:
    """The running planted: ``version``, ``editable`` and, for an editable install, the checkout's ``commit``."""

    version: str
    editable: bool
    source: str | None
    """The editable checkout's directory (None for a regular install)."""
    commit: str | None
    """``git rev-parse HEAD`` of the editable checkout (None otherwise, or outside git)."""

    def describe(self) -> str:
        if not self.editable:
            return f"planted {self.version} (installed copy)"
        return f"planted {self.version} (editable install of {self.source} at {self.commit or 'no git commit'})"


def provenance_from(direct_url: str | None, version: str) -> CodeProvenance:
    """The provenance described by a ``direct_url.json`` text (None: installed from an index or unknown)."""
    info = json.loads(direct_url) if direct_url else {}
    editable = bool((info.get("dir_info") or {}).get("editable"))
    url = str(info.get("url") or "")
    if not editable or not url.startswith("file://"):
        return CodeProvenance(version=version, editable=False, source=None, commit=None)
    source = Path(unquote(urlparse(url).path))
    try:
        result = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return CodeProvenance(version=version, editable=True, source=str(source), commit=None)
    return CodeProvenance(version=version, editable=True, source=str(source),
                          commit=result.stdout.strip() if result.returncode == 0 else None)


def code_provenance() -> CodeProvenance:
    """The provenance of the planted that is running."""
    try:
        text = metadata.distribution("planted").read_text("direct_url.json")
    except metadata.PackageNotFoundError:  # a source tree on sys.path without an install
        return CodeProvenance(version=planted.__version__, editable=False, source=None, commit=None)
    return provenance_from(text, planted.__version__)


__all__ = ["CodeProvenance", "code_provenance", "provenance_from"]
