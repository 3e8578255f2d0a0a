"""The one place where integer seeds become random generators.

Every stochastic function in planted takes ``rng: numpy.random.Generator``. Public entry points
turn a user's integer seed into a :class:`numpy.random.SeedSequence` with :func:`as_seed_sequence`
and derive named, independent sub-streams with :func:`substream`. Sub-streams are derived from the
parent's entropy and spawn key, never with ``SeedSequence.spawn`` (which mutates its parent), so
deriving the same stream twice gives the same numbers, whatever was derived before.
"""

from __future__ import annotations

import numpy as np

SeedLike = int | np.random.SeedSequence


def as_seed_sequence(seed: SeedLike) -> np.random.SeedSequence:
    """Return the :class:`~numpy.random.SeedSequence` for an integer seed or pass one through.

    Parameters
    ----------
    seed : int or numpy.random.SeedSequence
        A non-negative integer, or an existing seed sequence (returned unchanged).

    Returns
    -------
    numpy.random.SeedSequence
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be a non-negative integer or a SeedSequence, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return np.random.SeedSequence(int(seed))


def substream(parent: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """Derive the child seed sequence at ``key`` below ``parent`` without mutating it.

    Parameters
    ----------
    parent : numpy.random.SeedSequence
        The seed sequence of a world (or study, replicate, ...).
    *key : int
        Path of non-negative integers naming the sub-stream.

    Returns
    -------
    numpy.random.SeedSequence
        ``SeedSequence(parent.entropy, spawn_key=parent.spawn_key + key)``, the same sequence that
        ``parent.spawn`` would hand out for a one-element key.
    """
    return np.random.SeedSequence(parent.entropy, spawn_key=tuple(parent.spawn_key) + tuple(key))


def generator(parent: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """Return a PCG64 :class:`~numpy.random.Generator` on the sub-stream ``key`` of ``parent``."""
    return np.random.Generator(np.random.PCG64(substream(parent, *key)))


def named_generator(parent: np.random.SeedSequence, *names: str) -> np.random.Generator:
    """A PCG64 generator on the sub-stream named by ``names`` below ``parent``.

    Each name becomes the key ``zlib.crc32(name.encode("utf-8"))``, so a stream depends only on its
    own names (a model's name, a design, a label), never on what else is drawn or in what order:
    adding a model to a report leaves the other models' bootstrap intervals unchanged.
    """
    import zlib

    return generator(parent, *(zlib.crc32(name.encode("utf-8")) for name in names))


def describe(seq: np.random.SeedSequence) -> dict[str, object]:
    """Return a JSON-ready description (entropy, spawn key) from which ``seq`` can be rebuilt."""
    entropy = seq.entropy
    if entropy is None:  # pragma: no cover - a constructed SeedSequence always has entropy
        raise ValueError("seed sequence without entropy")
    return {
        "entropy": int(entropy) if isinstance(entropy, (int, np.integer)) else [int(e) for e in entropy],
        "spawn_key": [int(k) for k in seq.spawn_key],
    }
