"""The evaluator of a submitted final model on the sealed test window (SPEC 2.4).

Conventions (the same as :mod:`planted.baselines.forecasts`):

* The test window has P months ``m_0 .. m_{P-1}`` (the rows of ``test``), following the training
  months. The forecast for month ``m_k`` is made at the end of month ``m_k - 1`` with the data through
  that month: the training rows and the first k test rows.
* ``fit`` is called on all the data available at the start of the window and again every
  ``refit_every`` months (k = 0, 12, 24, ...); ``predict(state, history)`` is called every month
  with the state of the latest fit and all the data available then, for next month's ``asset_A``.
* The benchmark is the expanding historical mean of ``asset_A`` over every month through ``m_k - 1``
  (training and test months), updated monthly.
* Out-of-sample R2 (Campbell-Thompson) ``1 - SSE_model / SSE_benchmark``; Clark-West: the
  t-statistic of ``f = (r - rbar)^2 - [(r - rhat)^2 - (rbar - rhat)^2]`` on a constant (variance
  divisor P - 1), one-sided p-value ``1 - Phi(stat)``; positive favours the model.

Anti-look-ahead design: the model runs in a separate sandbox (no network, no agent workspace, no
data file; the model file is a read-only copy) in a harness process (``eval_harness.py``) that
receives data only through the pipe, **one month at a time**: the rows of month ``m_k - 1`` are sent
only after the forecast for month ``m_k - 1`` has been returned, and the last test row is never sent.
At no time does the sandbox hold a row beyond the month it is forecasting from, whatever the
model does (inspect the stack, read stdin or the pipe, list or open files).

A model is *not evaluable* (``evaluable=False``, ``error`` says why; never silently zeroed) when the
file is missing, is not a regular file (a link, a FIFO: it is opened without following links) or
is larger than 1 MiB, it fails to import or lacks ``fit``/``predict``, a call raises, a call exceeds the
per-call time limit or the evaluation exceeds the total time limit, a process limit of the sandbox
or the host's watch of the whole process tree (memory, workspace bytes) stops it, ``predict``
returns something that is not one finite real number, or the scores are not finite (forecasts so
large that their squared errors overflow).
"""

from __future__ import annotations

import json
import math
import os
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Callable

import numpy as np
import pandas as pd

from planted._typing import Float64Array, Int64Array
from planted.agents.calls import exit_status, finish, kill_process_tree, stage_file, watch_tree
from planted.agents.limits import KIB, MIB, SandboxLimits
from planted.agents.sandbox import BwrapSandbox, UnsafeLocalSandbox
from planted.agents.tools import encodable
from planted.agents.watchdog import TreeWatch
from planted.agents.workspace_files import MODEL_FILE_CAP, WorkspaceFileError, read_workspace_file, remove_tree
from planted.baselines.forecasts import compare_forecasts, expanding_mean_forecasts

HARNESS = Path(__file__).with_name("eval_harness.py")
_REPLY_CAP = 1 * MIB
_STDERR_TAIL = 8 * KIB


@dataclass(frozen=True)
class EvaluatorLimits:
    """Time and resource limits of one evaluation.

    Attributes
    ----------
    call_seconds : float
        Wall time of one call: loading the model file, one ``fit`` or one ``predict``.
    sandbox : SandboxLimits
        Limits of the evaluator's sandbox. Its ``wall_seconds`` is the total time of the
        evaluation, ``cpu_seconds`` the CPU time of the harness process over all calls, and
        ``output_bytes`` how much the model may print (to stderr; the last 8 KiB are quoted in errors).
    """

    call_seconds: float = 60.0
    sandbox: SandboxLimits = SandboxLimits(cpu_seconds=1800, wall_seconds=1800.0, output_bytes=16 * MIB)

    def __post_init__(self) -> None:
        if not self.call_seconds > 0:
            raise ValueError(f"EvaluatorLimits.call_seconds must be positive, got {self.call_seconds!r}")


@dataclass(frozen=True, eq=False)
class Evaluation:
    """A final model's forecasts on the test window, scored against the expanding mean.

    Attributes
    ----------
    months : ndarray of int64, shape (P,)
        Target months.
    forecasts : ndarray, shape (P,)
        The model's forecast of each target month's ``asset_A``; NaN from the month at which the
        evaluation failed.
    benchmark : ndarray, shape (P,)
        Expanding historical mean through the month before each target.
    realised : ndarray, shape (P,)
        ``asset_A`` of the target months.
    oos_r2, cw_stat, cw_pvalue : float
        Campbell-Thompson OOS R2, Clark-West statistic and one-sided p-value (NaN when not evaluable).
    evaluable : bool
    error : str or None
        ``"not evaluable: <reason>"`` (with the model's traceback or stderr when there is one).
    refit_every : int
    sandboxed : bool
        False when run with the development-only unsafe sandbox.
    wall_seconds : float
    """

    months: Int64Array
    forecasts: Float64Array
    benchmark: Float64Array
    realised: Float64Array
    oos_r2: float
    cw_stat: float
    cw_pvalue: float
    evaluable: bool
    error: str | None
    refit_every: int
    sandboxed: bool
    wall_seconds: float = field(repr=False)

    @cached_property
    def n_forecasts(self) -> int:
        """P, the number of target months."""
        return int(self.months.size)

    def to_frame(self) -> pd.DataFrame:
        """One row per target month: month, forecast, benchmark, realised."""
        columns = {"month": self.months, "forecast": self.forecasts, "benchmark": self.benchmark}
        return pd.DataFrame({**columns, "realised": self.realised})

    def summary(self) -> str:
        """A short text: the scores, or the reason the model is not evaluable."""
        head = f"Evaluation over {self.n_forecasts} test months (refit every {self.refit_every})"
        if not self.sandboxed:
            head += " [UNSANDBOXED]"
        if not self.evaluable:
            return f"{head}\n{(self.error or '').splitlines()[0]}"
        return (
            f"{head}\nOOS R2 {self.oos_r2:.4%}  Clark-West {self.cw_stat:.3f} (one-sided p {self.cw_pvalue:.4f})"
        )

    def __str__(self) -> str:
        return self.summary()


class _NotEvaluable(Exception):
    """The model failed; the message is the reason."""


class _Harness:
    """The host's end of the pipe protocol with ``eval_harness.py``."""

    def __init__(
        self, proc: subprocess.Popen, limits: EvaluatorLimits, started: float, tasks: Callable[[], int] | None,
        watch: TreeWatch,
    ) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.proc, self.tasks, self.watch = proc, tasks, watch
        self.streams: tuple[IO[bytes], IO[bytes], IO[bytes]] = (proc.stdin, proc.stdout, proc.stderr)
        self.limits = limits
        self.deadline = started + limits.sandbox.wall_seconds
        self.stderr_tail = bytearray()
        self.stderr_total = 0
        self.stderr_open = True
        self.selector = selectors.DefaultSelector()
        for stream in self.streams:
            os.set_blocking(stream.fileno(), False)

    def request(self, payload: dict | None, what: str) -> dict:
        """Send one request, return the model's successful reply; raise _NotEvaluable otherwise.

        ``payload=None`` sends nothing and waits for the harness's ready line, within the total
        time limit only (start-up is not the model's call).
        """
        if payload is None:
            reply = self._exchange(b"", self.deadline, what)
        else:
            call_deadline = min(time.monotonic() + self.limits.call_seconds, self.deadline)
            reply = self._exchange(json.dumps(payload).encode() + b"\n", call_deadline, what)
        try:
            answer = json.loads(reply)
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            raise _NotEvaluable(f"{what}: malformed reply (the model wrote to the protocol channel)")
        if not answer["ok"]:
            raise _NotEvaluable(f"{what} raised {answer.get('error')}\n{answer.get('traceback', '')}".rstrip())
        return answer

    def _exchange(self, message: bytes, call_deadline: float, what: str) -> bytes:
        stdin, stdout, stderr = (stream.fileno() for stream in self.streams)
        pending, reply = memoryview(message), bytearray()
        if pending:
            self.selector.register(stdin, selectors.EVENT_WRITE)
        self.selector.register(stdout, selectors.EVENT_READ)
        if self.stderr_open:
            self.selector.register(stderr, selectors.EVENT_READ)
        try:
            while True:
                remaining = call_deadline - time.monotonic()
                if remaining <= 0:
                    if call_deadline >= self.deadline:
                        total = self.limits.sandbox.wall_seconds
                        raise _NotEvaluable(f"{what}: the evaluation exceeded its total time limit of {total:g} s")
                    raise _NotEvaluable(f"{what} timed out (limit {self.limits.call_seconds:g} s per call)")
                for key, _ in self.selector.select(remaining):
                    if key.fd == stdin:
                        try:
                            pending = pending[os.write(stdin, pending) :]
                        except BrokenPipeError:
                            raise _NotEvaluable(self._died(what)) from None
                        if not pending:
                            self.selector.unregister(stdin)
                        continue
                    chunk = os.read(key.fd, 64 * KIB)
                    if key.fd == stderr:
                        self._stderr(chunk, what)
                        continue
                    if not chunk:
                        raise _NotEvaluable(self._died(what))
                    reply += chunk
                    if b"\n" in reply:
                        line, _, rest = bytes(reply).partition(b"\n")
                        if rest or pending:
                            raise _NotEvaluable(f"{what}: extra reply (the model wrote to the protocol channel)")
                        return line
                    if len(reply) > _REPLY_CAP:
                        raise _NotEvaluable(f"{what}: oversized reply (the model wrote to the protocol channel)")
        finally:
            for fd in list(self.selector.get_map()):
                self.selector.unregister(fd)

    def _stderr(self, chunk: bytes, what: str) -> None:
        if not chunk:
            self.stderr_open = False
            self.selector.unregister(self.streams[2].fileno())
            return
        self.stderr_total += len(chunk)
        self.stderr_tail = (self.stderr_tail + chunk)[-_STDERR_TAIL:]
        if self.stderr_total > self.limits.sandbox.output_bytes:
            raise _NotEvaluable(f"{what}: the model printed more than {self.limits.sandbox.output_bytes} bytes")

    def _died(self, what: str) -> str:
        """The reason when the harness closed its reply channel: how its process ended."""
        self.watch.stop()  # before the process is reaped: the watch signals its process group
        if self.watch.breach == "memory":
            limit = self.limits.sandbox.memory_bytes
            return f"{what}: the model's processes used more than {limit} bytes of memory together and were killed"
        if self.watch.breach == "disk":
            limits = self.limits.sandbox
            return (f"{what}: the model passed the workspace limits ({limits.disk_bytes} bytes, {limits.files} files and "
                    "directories, nested at most 64 deep) and was killed")
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            kill_process_tree(self.proc)
            return f"{what}: the model closed the evaluator's reply channel\n{self.stderr_text()}".rstrip()
        code = exit_status(self.proc)
        cpu = self.limits.sandbox.cpu_seconds
        if code == 128 + signal.SIGXCPU:
            cause = f"killed at the CPU-time limit of {cpu} s"
        elif code == 128 + signal.SIGKILL:
            cause = f"killed by SIGKILL: the CPU-time hard limit of {cpu + 1} s or the out-of-memory killer"
        elif code > 128:
            cause = f"killed by signal {code - 128}: {signal.strsignal(code - 128)}"
        else:
            cause = f"exit code {code}"
        return f"{what}: the model's process ended ({cause})\n{self.stderr_text()}".rstrip()

    def stderr_text(self) -> str:
        """The last 8 KiB the model printed."""
        return self.stderr_tail.decode("utf-8", errors="replace")

    def close(self) -> None:
        """End the harness (EOF on its input) and make sure its whole process tree is gone."""
        self.watch.stop()
        self.selector.close()
        try:
            self.streams[0].close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        finish(self.proc, self.tasks)
        self.streams[1].close()
        self.streams[2].close()


def _block(frame: pd.DataFrame) -> dict:
    return {
        "dtypes": {name: str(frame[name].dtype) for name in frame.columns},
        "values": {name: frame[name].tolist() for name in frame.columns},
    }


def _forecast_loop(
    harness: _Harness, train: pd.DataFrame, test: pd.DataFrame, refit_every: int, out: Float64Array
) -> None:
    """Drive load, fit and predict month by month, filling ``out``; raise _NotEvaluable on failure."""
    harness.request(None, "starting the evaluator")
    harness.request({"op": "load"}, "loading the model file")
    for k in range(len(test)):
        month = int(test["month"].iloc[k])
        new_rows = train if k == 0 else test.iloc[k - 1 : k]
        payload: dict = {"append": _block(new_rows)}
        if k % refit_every == 0:
            harness.request({"op": "fit", **payload}, f"fit before target month {month}")
            payload = {}
        value = harness.request({"op": "predict", **payload}, f"predict for target month {month}").get("value")
        if not isinstance(value, float) or not math.isfinite(value):
            raise _NotEvaluable(f"predict for target month {month} returned a non-finite forecast ({value!r})")
        out[k] = value


def evaluate(
    model_file: Path,
    train: pd.DataFrame,
    test: pd.DataFrame,
    *,
    refit_every: int = 12,
    limits: EvaluatorLimits = EvaluatorLimits(),
    unsafe_no_sandbox: bool = False,
) -> Evaluation:
    """Evaluate a submitted ``final_model.py`` on the sealed test window (see the module conventions).

    Parameters
    ----------
    model_file : Path
        The agent's ``final_model.py`` (host path). It is copied; the agent's workspace is not mounted.
    train, test : DataFrame
        The visible training data and the sealed test window, with the same columns, including
        ``month`` and ``asset_A``; rows in time order, test months following the training months.
    refit_every : int, default 12
        Months between refits of ``fit``.
    limits : EvaluatorLimits
    unsafe_no_sandbox : bool, default False
        Development only: run the model in a plain subprocess (recorded as ``sandboxed=False``).

    Returns
    -------
    Evaluation
        ``evaluable=False`` with the reason in ``error`` when the model cannot be evaluated.

    Raises
    ------
    ValueError
        When the frames do not fit the contract (a caller's error, not the model's).
    SandboxUnavailableError
        When bubblewrap is missing or cannot run (an infrastructure error, never recorded as the
        model's failure).

    References
    ----------
    Campbell, J. Y. and Thompson, S. B. (2008). Predicting excess stock returns out of sample: can
    anything beat the historical average? Review of Financial Studies 21(4), 1509-1531.
    doi:10.1093/rfs/hhm055
    Clark, T. E. and West, K. D. (2007). Approximately normal tests for equal predictive accuracy in
    nested models. Journal of Econometrics 138(1), 291-311. doi:10.1016/j.jeconom.2006.05.023
    """
    if refit_every < 1:
        raise ValueError(f"refit_every must be at least 1, got {refit_every}")
    if list(train.columns) != list(test.columns) or not {"month", "asset_A"} <= set(train.columns):
        raise ValueError("train and test must have the same columns, including 'month' and 'asset_A'")
    if len(test) == 0 or len(train) == 0:
        raise ValueError("train and test must both have rows")
    train = train.reset_index(drop=True)
    test = test.reset_index(drop=True)
    returns = np.concatenate([train["asset_A"].to_numpy(float), test["asset_A"].to_numpy(float)])
    first, last = len(train), len(train) + len(test)
    benchmark = expanding_mean_forecasts(returns, first, last)[first:]
    forecasts = np.full(len(test), np.nan)
    started = time.monotonic()
    model_file = Path(model_file)
    oos_r2 = cw_stat = cw_pvalue = math.nan
    try:
        source = read_workspace_file(model_file.parent, model_file.name, MODEL_FILE_CAP)
    except WorkspaceFileError as exc:
        error: str | None = f"model file {exc}"
    else:
        error = _run(source, train, test, refit_every, limits, unsafe_no_sandbox, forecasts)
    if error is None:
        model = np.full(last, np.nan)
        model[first:] = forecasts
        bench = np.full(last, np.nan)
        bench[first:] = benchmark
        with np.errstate(over="ignore", invalid="ignore"):  # overflowing forecasts are caught just below
            scores = compare_forecasts(returns, bench, model, first, last)
        oos_r2, cw_stat, cw_pvalue = float(scores.oos_r2), float(scores.cw_stat), float(scores.cw_pvalue)
        if not all(math.isfinite(v) for v in (oos_r2, cw_stat, cw_pvalue)):
            largest = float(np.max(np.abs(forecasts)))
            error = (f"the forecasts cannot be scored in floating point (largest |forecast| {largest:.3g}: "
                     "squared errors overflow)")
            oos_r2 = cw_stat = cw_pvalue = math.nan
    evaluable = error is None
    return Evaluation(
        months=test["month"].to_numpy(np.int64),
        forecasts=forecasts,
        benchmark=benchmark,
        realised=returns[first:],
        oos_r2=oos_r2,
        cw_stat=cw_stat,
        cw_pvalue=cw_pvalue,
        evaluable=evaluable,
        error=None if evaluable else encodable(f"not evaluable: {error}"),
        refit_every=refit_every,
        sandboxed=not unsafe_no_sandbox,
        wall_seconds=time.monotonic() - started,
    )


def _run(
    source: bytes,
    train: pd.DataFrame,
    test: pd.DataFrame,
    refit_every: int,
    limits: EvaluatorLimits,
    unsafe: bool,
    out: Float64Array,
) -> str | None:
    """Run the harness in a fresh sandbox; return None on success, else the reason."""
    with tempfile.TemporaryDirectory(prefix="planted-eval-") as tmp:
        files_dir = Path(tmp, "files")
        files_dir.mkdir()
        stage_file(files_dir, "final_model.py", source)
        stage_file(files_dir, "eval_harness.py", HARNESS.read_text(encoding="utf-8"))
        kind = UnsafeLocalSandbox if unsafe else BwrapSandbox
        sandbox = kind(Path(tmp, "workspace"), None, limits.sandbox)
        root = sandbox.files_root(files_dir)
        started = time.monotonic()
        proc = sandbox.spawn(
            ["-I", "-B", "-u", "-X", "utf8", f"{root}/eval_harness.py", f"{root}/final_model.py"],
            files_dir,
            stdin=subprocess.PIPE,
        )
        watch = watch_tree(sandbox, proc)
        harness = _Harness(proc, limits, started, sandbox.tasks, watch)
        with watch:
            try:
                _forecast_loop(harness, train, test, refit_every, out)
            except _NotEvaluable as failure:
                if watch.breach is None:
                    kill_process_tree(proc)
                return str(failure)
            finally:
                harness.close()
                remove_tree(sandbox.workspace)  # whatever the model wrote there, however deep
    return None
