"""planted: score LLM research agents as statistical tests on worlds with a planted truth.

The subpackages follow the data's journey (see ``docs/architecture.md``):
``planted.worlds`` builds seeded worlds, ``planted.agents`` and ``planted.baselines`` decide on
them, and ``planted.analysis`` reads what those two logged. This top-level package only holds the
command line and the small pieces every stage shares (types, seeding, hashing, regression kernels).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("planted")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

__all__ = ["__version__"]
