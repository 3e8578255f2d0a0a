"""The command line's argument types: each refuses bad input with one line naming the option's problem.

argparse calls them while parsing, so a bad value fails before any work (and :class:`OneLineParser`
prints that one line, not the usage block).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn, Sequence


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the problem (the usage is in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def positive(text: str) -> int:
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def n_jobs(text: str) -> int:
    value = integer(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 workers cannot run anything: pass 1 or more, or -1 for every core")
    return value


def procedure_names(text: str) -> list[str]:
    from planted.baselines.procedures import PROCEDURES

    given = names(text)
    unknown = [n for n in given if n not in PROCEDURES]
    if unknown or not given:
        raise argparse.ArgumentTypeError(f"unknown procedures {unknown or [text]}; choose from {', '.join(PROCEDURES)}")
    return given


def output_dir(text: str) -> Path:
    """A directory to write into: refused when it is a file or cannot be created or written (checked before any work)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a file, not a directory: pass a directory to write into")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{existing} is a file, so {path} cannot be created: pass another directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{existing} is not writable: pass a directory you can write to")
    return path


def warn_large_r2(family: str, levels: Sequence[float]) -> None:
    """R2 is a share (0.01 = 1%); a level above 10% for a linear or injected world is almost surely a percentage."""
    large = [r for r in levels if r is not None and r > 0.10]
    if family in ("linear", "injected") and large:
        print(f"planted: warning: R2 {large[0]:g} is {large[0]:.0%} of the return variance, far outside the studied "
              f"0-4%; R2 is a share: {large[0] / 100:g} is {large[0]:g}%", file=sys.stderr)


def non_negative(text: str) -> int:
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


__all__ = ["OneLineParser", "floats", "integer", "n_jobs", "names", "non_negative", "output_dir", "positive", "procedure_names", "warn_large_r2"]
