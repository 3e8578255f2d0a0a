"""The study secret: world seeds that nobody can derive before the study is published (commit-reveal).

A study's configuration, its public ``seed`` included, lives in a public repository. If world seeds
came from that seed alone, anyone (an agent with a copy of planted in its sandbox, or a model that
read the repository) could rebuild every world, the sealed test window included. So each study gets
a random 128-bit **secret** (``secrets.randbits``) and the world seeds come from both:

``SeedSequence([study_seed, secret], spawn_key=(AGENT_DOMAIN, cell key, j))``

(:func:`planted.agents.study.study_grid`). The secret is kept in the study's sealed area,
``OUT/<study>/sealed/study_secret.json`` (mode 0600, beside the worlds' sealed files; never in the
repository, never mounted into a sandbox). A frozen study's manifest records only its SHA-256
(:func:`secret_sha256`, of the 32 lowercase hex digits); after the runs, ``planted prereg reveal``
publishes the secret in ``prereg/<study>/secret.json``, and anyone can check it against the
committed hash and rebuild every world bit for bit. The run order is derived from the public seed
alone, so it can be committed before the runs. A demonstration study (``smoke``) may publish its
secret in its YAML (``secret: <32 hex digits>``) so that its worlds are the same on every machine;
such a study cannot be frozen.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from planted.study_layout import SECRET_FILE  # where a study's secret lives, relative to its directory
REVEALED_FILE = "secret.json"
"""The revealed secret's file name inside ``prereg/<study>/``."""


class StudySecretError(RuntimeError):
    """A secret file is damaged, or does not match the hash a manifest committed to."""


def secret_hex(secret: int) -> str:
    """The canonical text of a secret: 32 lowercase hex digits."""
    return f"{secret:032x}"


def secret_sha256(secret: int) -> str:
    """SHA-256 (hex) of :func:`secret_hex`: what a manifest commits to."""
    return hashlib.sha256(secret_hex(secret).encode("ascii")).hexdigest()


def read_secret(path: Path) -> int:
    """The secret stored in ``path`` (a JSON object with ``secret`` as 32 hex digits)."""
    try:
        text = json.loads(Path(path).read_text(encoding="utf-8"))["secret"]
        if len(text) != 32:
            raise ValueError(text)
        return int(text, 16)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StudySecretError(f"{path} does not hold a study secret ({exc}); restore it from a backup") from None


def write_secret(path: Path, secret: int, study: str) -> None:
    """Write ``secret`` to ``path`` (mode 0600, created exclusively: an existing secret is never replaced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps({"study": study, "secret": secret_hex(secret), "sha256": secret_sha256(secret)}, indent=2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(payload + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def parse_secret(text: object, where: str) -> int:
    """A secret written as 32 hex digits (``secret:`` in a study YAML)."""
    try:
        value = str(text)
        if len(value) != 32:
            raise ValueError(value)
        return int(value, 16)
    except ValueError:
        raise StudySecretError(f"{where}: a study secret is 32 hex digits, got {text!r}") from None


def study_secret(study_dir: Path, study: str, *, committed_sha256: str | None = None,
                 revealed: Path | None = None, published: int | None = None) -> int:
    """The secret of the study whose output directory is ``study_dir``, created on first use.

    Parameters
    ----------
    study_dir : Path
        ``OUT/<study>``.
    study : str
        The study's name (recorded beside the secret).
    committed_sha256 : str, optional
        The hash a frozen manifest committed to. Then the secret is never created here (it was
        made at freeze time): it must exist in ``study_dir`` or be ``revealed``, and must match.
    revealed : Path, optional
        A published ``prereg/<study>/secret.json``, used when ``study_dir`` holds no secret
        (rebuilding a study after its reveal).
    published : int, optional
        A secret the study configuration publishes (``secret:``; demonstrations and tests, whose
        worlds anyone may rebuild): used as it is, and nothing is written.

    Raises
    ------
    StudySecretError
        A frozen study whose secret is missing, or a secret that does not match the commitment.
    """
    path = Path(study_dir) / SECRET_FILE
    if published is not None:
        if path.is_file() and read_secret(path) != published:
            raise StudySecretError(f"{path} holds another secret than the one study {study!r} publishes")
        return published
    if path.is_file():
        secret = read_secret(path)
    elif revealed is not None and revealed.is_file():
        secret = read_secret(revealed)
    elif committed_sha256 is not None:
        raise StudySecretError(
            f"study {study!r} is frozen, but its secret is not in {path}: run it with the --out directory that "
            "`planted prereg freeze` wrote the secret to (or restore the secret there)"
        )
    else:
        secret = secrets.randbits(128)
        write_secret(path, secret, study)
    if committed_sha256 is not None and secret_sha256(secret) != committed_sha256:
        raise StudySecretError(
            f"the secret of study {study!r} does not match the SHA-256 its manifest committed to "
            f"({secret_sha256(secret)[:12]} vs {committed_sha256[:12]}); the worlds would not be the preregistered ones"
        )
    return secret


__all__ = ["REVEALED_FILE", "SECRET_FILE", "StudySecretError", "parse_secret", "read_secret", "secret_hex", "secret_sha256",
           "study_secret", "write_secret"]
