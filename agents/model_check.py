"""The static check of a submitted ``final_model.py``, bounded: agent source never parsed in the host process.

``ast.parse`` of hostile source is a denial of service on the host: a few MiB of source take
gigabytes (8 MiB: 6.3 GB and 105 s), and deep nesting raises ``MemoryError`` or
``RecursionError``. The file is read without following links and capped at
:data:`~planted.agents.workspace_files.MODEL_FILE_CAP` (1 MiB); the parse runs in a child
interpreter (``python -I -S``, which imports nothing of planted) under ``prlimit`` (address space
:data:`CHECK_MEMORY_BYTES`, CPU :data:`CHECK_CPU_SECONDS`) and a wall-time limit, and answers one
JSON line. Nothing is executed: the child only parses. Any failure of the child (a limit, a crash)
is a reason the agent reads, never an exception in the host.
"""

from __future__ import annotations

import json
import subprocess
import sys

from planted.agents.sandbox import require_program

CHECK_MEMORY_BYTES = 1024 * 1024 * 1024
CHECK_CPU_SECONDS = 20
CHECK_WALL_SECONDS = 30.0

_CHECKER = """\
import ast, json, sys
source = sys.stdin.buffer.read()
try:
    tree = ast.parse(source)
except SyntaxError as exc:
    print(json.dumps({"syntax_error": [exc.lineno, exc.msg]}))
except (MemoryError, RecursionError) as exc:
    print(json.dumps({"too_complex": type(exc).__name__}))
else:
    defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    print(json.dumps({"defined": defined}))
"""


def model_source_problem(source: bytes, shown_name: str) -> str | None:
    """Why ``source`` is not an acceptable final model (None when it is), by a bounded static check.

    The source must parse as Python and define top-level functions ``fit`` and ``predict`` (the
    evaluator's contract).

    Parameters
    ----------
    source : bytes
        The model file's bytes (already capped in size).
    shown_name : str
        How the file is named in the reason (``/workspace/final_model.py``).
    """
    prlimit = require_program("prlimit", "util-linux")
    limits = [prlimit, f"--as={CHECK_MEMORY_BYTES}", f"--cpu={CHECK_CPU_SECONDS}", "--core=0", "--"]
    try:
        done = subprocess.run([*limits, sys.executable, "-I", "-S", "-c", _CHECKER], input=source,
                              capture_output=True, timeout=CHECK_WALL_SECONDS)
    except subprocess.TimeoutExpired:
        return f"{shown_name} could not be parsed within {CHECK_WALL_SECONDS:g} s; simplify the file"
    try:
        answer = json.loads(done.stdout.decode("ascii", errors="replace"))
    except ValueError:
        answer = {"too_complex": f"exit status {done.returncode}"}
    if "syntax_error" in answer:
        line, message = answer["syntax_error"]
        return f"{shown_name} has a syntax error (line {line}: {message})"
    if "too_complex" in answer:
        return (f"{shown_name} could not be parsed within the checker's limits ({answer['too_complex']}): "
                "it is too large or too deeply nested; simplify the file")
    missing = [name for name in ("fit", "predict") if name not in answer["defined"]]
    if missing:
        return f"{shown_name} does not define {' and '.join(missing)} at top level"
    return None


__all__ = ["model_source_problem"]
