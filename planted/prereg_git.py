"""The git side of preregistration: the project's repository, what is committed, tracked and tagged.

Every call runs ``git -C <dir> ...`` as a child process and turns a failure into a
:class:`PreregistrationError` naming the command; the checks answer the questions a freeze and a
verification ask (is this a repository, which hash-controlled files are uncommitted or would not
be in the tag, is the manifest on disk the one under ``refs/tags/NAME``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from planted.project import Project


class PreregistrationError(RuntimeError):
    """Freezing or verifying failed; the message says why and what to do."""


def git(repo: Path, *args: str, check: bool = True) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if result.returncode != 0 and check:
        raise PreregistrationError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout.strip() if result.returncode == 0 else ""


def repository(project: Project) -> Path:
    """The top of the git work tree holding the project (refused when there is none)."""
    if project.root is None:
        raise PreregistrationError(
            "no planted project here (no conf/study/ in the current directory): create one with `planted init DIR`, "
            "make it a git repository, and freeze from inside it (or pass --project DIR)"
        )
    top = git(project.root, "rev-parse", "--show-toplevel", check=False)
    if not top:
        raise PreregistrationError(
            f"the project {project.root} is not a git repository, so a freeze could not be committed and tagged: "
            "run `git init && git add -A && git commit -m 'planted project'` there first"
        )
    return Path(top).resolve()


def uncommitted(repo: Path, paths: list[Path]) -> list[str]:
    """Those of ``paths`` inside ``repo`` with uncommitted changes or never committed."""
    inside = [str(p.resolve().relative_to(repo)) for p in paths if p.resolve().is_relative_to(repo)]
    if not inside:
        return []
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "-z", "--untracked-files=all", "--", *inside],
                            capture_output=True, text=True)
    if status.returncode != 0:
        raise PreregistrationError(f"git status failed in {repo}: {status.stderr.strip()}")
    return [entry[3:] for entry in status.stdout.split("\0") if len(entry) > 3]


def tracked_problems(repo: Path, paths: list[Path]) -> list[str]:
    """Those of the project's hash-controlled ``paths`` that the tag would not hold: links, files outside
    the repository, files git does not track."""
    problems = []
    for path in paths:
        if path.is_symlink():
            problems.append(f"{path} is a symbolic link (commit the file itself)")
        elif not path.resolve().is_relative_to(repo):
            problems.append(f"{path} is outside the repository {repo}")
        elif git(repo, "ls-files", "--error-unmatch", "--", str(path.resolve().relative_to(repo)), check=False) == "":
            problems.append(f"{path} is not tracked by git (git add it, or remove it from .gitignore)")
    return problems


def commit_problem(study: str, path: Path) -> str | None:
    """Why ``path`` (the manifest) does not count as committed under tag ``study`` (None: it does)."""
    repo = git(path.parent, "rev-parse", "--show-toplevel", check=False)
    if not repo:
        return f"the manifest {path} is not in a git repository"
    if not git(Path(repo), "rev-parse", "-q", "--verify", f"refs/tags/{study}", check=False):
        return f"the manifest is not tagged: no git tag {study!r} in {repo}"
    relative = path.resolve().relative_to(Path(repo).resolve()).as_posix()
    tagged = subprocess.run(["git", "-C", repo, "show", f"refs/tags/{study}:{relative}"], capture_output=True)
    if tagged.returncode != 0:
        return f"tag {study!r} does not hold {relative}"
    if tagged.stdout != path.read_bytes():
        return f"{relative} differs from the version committed under tag {study!r}"
    return None


__all__ = ["PreregistrationError", "commit_problem", "git", "repository", "tracked_problems", "uncommitted"]
