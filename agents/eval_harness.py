"""The evaluator's harness: runs INSIDE the evaluator sandbox and imports nothing from planted.

``python -I eval_harness.py MODEL_FILE`` imports ``MODEL_FILE`` (which defines ``fit(train)`` and
``predict(state, history)``) and serves the host's requests, one JSON object per line. At start it
takes stdin and stdout over as the protocol channel: the model reads an empty stdin and its prints
go to stderr. The host (``planted.agents.evaluator``) sends the data month by month, so this process
never holds a row beyond the month being forecast.

Requests (each may carry ``"append": {"dtypes": {column: dtype}, "values": {column: [...]}}``,
rows appended to the history before the operation):

* ``{"op": "load"}``: import the model file, check that ``fit`` and ``predict`` are callable.
* ``{"op": "fit"}``: ``state = fit(history)``.
* ``{"op": "predict"}``: ``value = predict(state, history)``, which must be one real number.

Replies: ``{"ok": true}`` (with ``"value"`` for predict), or ``{"ok": false, "error": "<type>:
<message>", "traceback": "..."}``. One unrequested ``{"ok": true}`` comes first, once the harness
has started (so that start-up time is not charged to the model's first call). ``fit`` and ``predict`` get a fresh copy of the history each
call (a DataFrame with a RangeIndex), so the model cannot alter the data it is given later.
"""

from __future__ import annotations

import importlib.util
import json
import numbers
import os
import sys
import traceback
import types

import numpy as np
import pandas as pd


def as_forecast(value: object) -> float:
    """One real number from what ``predict`` returned (a number, or a one-element array/Series)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("predict must return a number, got a bool")
    if isinstance(value, numbers.Real):
        return float(value)
    array = np.asarray(value)
    if array.size == 1 and array.dtype.kind in "fiu":
        return float(array.reshape(-1)[0])
    what = f"{type(value).__name__} (shape {array.shape}, dtype {array.dtype})"
    raise TypeError(f"predict must return one number, got {what}")


class Session:
    """The model and the history received so far."""

    def __init__(self, model_path: str) -> None:
        self.model_path = model_path
        self.model: types.ModuleType | None = None
        self.state: object = None
        self.columns: dict[str, np.ndarray] = {}

    def append(self, block: dict) -> None:
        for name, values in block["values"].items():
            new = np.asarray(values, dtype=block["dtypes"][name])
            old = self.columns.get(name)
            self.columns[name] = new if old is None else np.concatenate([old, new])

    def history(self) -> pd.DataFrame:
        return pd.DataFrame({name: values.copy() for name, values in self.columns.items()})

    def handle(self, request: dict) -> dict:
        if "append" in request:
            self.append(request["append"])
        op = request["op"]
        if op == "load":
            spec = importlib.util.spec_from_file_location("final_model", self.model_path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {self.model_path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules["final_model"] = module
            spec.loader.exec_module(module)
            missing = [name for name in ("fit", "predict") if not callable(getattr(module, name, None))]
            if missing:
                raise AttributeError(f"the model file does not define {' and '.join(missing)}")
            self.model = module
            return {"ok": True}
        if self.model is None:
            raise RuntimeError(f"{op!r} before the model was loaded")
        if op == "fit":
            self.state = self.model.fit(self.history())
            return {"ok": True}
        if op == "predict":
            return {"ok": True, "value": as_forecast(self.model.predict(self.state, self.history()))}
        raise ValueError(f"unknown request {op!r}")


def main(argv: list[str]) -> None:
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    empty = os.open(os.devnull, os.O_RDONLY)
    os.dup2(empty, 0)
    os.close(empty)
    os.dup2(2, 1)
    session = Session(argv[1])
    owner = os.getpid()
    replies.write(b'{"ok": true}\n')  # ready: the interpreter and pandas are up
    replies.flush()
    while True:
        os.set_blocking(requests.fileno(), True)  # in case the model changed the mode of its fds
        line = requests.readline()
        if not line:
            break
        try:
            reply = session.handle(json.loads(line))
        except BaseException as exc:  # the model's failure, reported to the host; the loop goes on
            error, trace = f"{type(exc).__name__}: {exc}", traceback.format_exc()[-4000:]
            reply = {"ok": False, "error": error, "traceback": trace}
        if os.getpid() != owner:  # a process the model forked returned here: only the harness replies
            os._exit(0)
        replies.write(json.dumps(reply).encode() + b"\n")
        replies.flush()


if __name__ == "__main__":
    main(sys.argv)
