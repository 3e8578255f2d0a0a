"""The embedded default agent: a deterministic researcher that runs a HAC-Holm screen.

It goes through the same tools and the same sandbox as a language model, so a new user (and the
test suite) exercises the whole harness with no API key and no network. Its procedure is a
legitimate, documented test, identical in its decision to the ``hac_holm`` baseline at 5%:

1. ``report_prior("does_not_beat", 0.3)``.
2. ``run_python``: reads the data file the data note names, adds the trailing 12-month mean return (``m12``) to the eight
   candidates, and runs Newey-West (12 lags) t-tests of the slope of ``asset_A[t+1]`` on each
   candidate at ``t`` over t = 12..698 with statsmodels, Holm-adjusted across the nine; prints JSON.
3. ``record_spec`` for each of the nine univariate specifications (slope, t, p, adjusted p, R2).
4. ``run_python``: writes ``final_model.py`` in the workspace (the working directory): the expanding OLS forecast on the candidate
   with the smallest adjusted p-value when that p-value is at most 5%, else the benchmark (the
   expanding historical mean).
5. ``submit_final``: "beats" when the smallest adjusted p-value is at most 5%, else "does_not_beat";
   probability ``1 - min adjusted p`` clipped to [0.02, 0.98].

If a sandbox call fails, it submits "abort_no_predictability" with the error as rationale.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from planted.agents.backend import ModelTurn, Usage
from planted.agents.tools import ToolCall, ToolResult
from planted.agents.transcript import EventLog

ALPHA = 0.05
PRIOR = {"verdict": "does_not_beat", "probability": 0.3}
SCREEN_TEMPLATE = """\
import json
import numpy as np
import pandas as pd
import statsmodels.api as sm
from statsmodels.stats.multitest import multipletests

data = pd.read_csv(DATA_FILE)
r = data["asset_A"].to_numpy()
candidates = {c: data[c].to_numpy() for c in data.columns if c.startswith("x")}
candidates["m12"] = data["asset_A"].rolling(12).mean().to_numpy()
n = len(r)
rows = []
for name, x in candidates.items():
    design = sm.add_constant(x[12 : n - 1])
    fit = sm.OLS(r[13:n], design).fit(cov_type="HAC", cov_kwds={"maxlags": 12})
    rows.append({"name": name, "slope": float(fit.params[1]), "t": float(fit.tvalues[1]),
                 "p": float(fit.pvalues[1]), "r2": float(fit.rsquared)})
adjusted = multipletests([row["p"] for row in rows], method="holm")[1]
for row, p_adj in zip(rows, adjusted):
    row["p_holm"] = float(p_adj)
print("SCREEN " + json.dumps(rows))
"""
MODEL_TEMPLATE = '''\
"""Expanding OLS forecast of asset_A[t+1] on {candidate}[t] (written by the scripted researcher)."""
import numpy as np

CANDIDATE = {candidate!r}


def _regressor(frame):
    if CANDIDATE == "m12":
        return frame["asset_A"].rolling(12).mean().to_numpy()
    return frame[CANDIDATE].to_numpy()


def fit(train):
    x = _regressor(train)[:-1]
    y = train["asset_A"].to_numpy()[1:]
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return y.mean() - slope * x.mean(), slope


def predict(state, history):
    intercept, slope = state
    return float(intercept + slope * _regressor(history)[-1])
'''
BENCHMARK_MODEL = '''\
"""The benchmark itself: the expanding historical mean (written by the scripted researcher)."""


def fit(train):
    return None


def predict(state, history):
    return float(history["asset_A"].mean())
'''


def screen_code(data_note: str) -> str:
    """The screen script for the data file the data note names (``File: <path> (<n> rows)``)."""
    match = re.search(r"File: (\S+) \(", data_note)
    if match is None:
        raise ValueError(f"the data note does not name the data file: {data_note[:200]!r}")
    return f"DATA_FILE = {match.group(1)!r}\n" + SCREEN_TEMPLATE


@dataclass
class ScriptedSession:
    """The scripted researcher's side of one episode (a :class:`~planted.agents.backend.Session`)."""

    log: EventLog
    queue: list[ToolCall] = field(default_factory=list)
    screen: list[dict[str, Any]] | None = None
    step: int = 0
    done: bool = False

    def _call(self, name: str, **arguments: Any) -> ToolCall:
        self.step += 1
        return ToolCall(call_id=f"scripted-{self.step}", name=name, arguments=json.dumps(arguments))

    def next_turn(self, results: Sequence[ToolResult], user_text: str | None = None) -> ModelTurn:
        """Decide the next tool call from the last observation (deterministically)."""
        self.log.write("scripted_request", results=[vars(r) for r in results], user_text=user_text)
        calls = self._decide(results)
        turn = ModelTurn(tool_calls=calls, text="", stop_reason="tool_use" if calls else "end_turn",
                         usage=Usage(), served_model="scripted")
        self.log.write("scripted_response", tool_calls=[vars(c) for c in calls])
        return turn

    def _decide(self, results: Sequence[ToolResult]) -> list[ToolCall]:
        if self.done:
            return []
        if self.step == 0:
            return [self._call("report_prior", **PRIOR)]
        last = results[-1] if results else None
        if self.screen is None:
            if last is not None and last.content.startswith("Prior recorded"):
                return [self._call("run_python", code=screen_code(last.content))]
            return self._parse_screen(last)
        if self.queue:
            return [self.queue.pop(0)]
        if last is not None and last.is_error:
            return self._abort(f"writing the model failed: {last.content[:500]}")
        return self._submit()

    def _parse_screen(self, last: ToolResult | None) -> list[ToolCall]:
        text = "" if last is None else last.content
        line = next((ln for ln in text.splitlines() if ln.startswith("SCREEN ")), None)
        if line is None:
            return self._abort(f"the screen did not run: {text[:500]}")
        self.screen = json.loads(line[len("SCREEN "):])
        for row in self.screen:
            self.queue.append(
                self._call(
                    "record_spec",
                    description=f"univariate OLS of asset_A[t+1] on {row['name']}[t], t = 12..T-2, Newey-West (12 lags)",
                    predictors=[row["name"]], n_parameters=2, in_sample_r2=row["r2"],
                    statistics=[{"name": k, "value": row[k]} for k in ("slope", "t", "p", "p_holm")],
                )
            )
        best = min(self.screen, key=lambda row: row["p_holm"])
        code = MODEL_TEMPLATE.format(candidate=best["name"]) if best["p_holm"] <= ALPHA else BENCHMARK_MODEL
        self.queue.append(self._call("run_python", code=f"open('final_model.py', 'w').write({code!r})\nprint('written')"))
        return [self.queue.pop(0)]

    def _submit(self) -> list[ToolCall]:
        assert self.screen is not None
        best = min(self.screen, key=lambda row: row["p_holm"])
        claim = best["p_holm"] <= ALPHA
        self.done = True
        return [
            self._call(
                "submit_final",
                verdict="beats" if claim else "does_not_beat",
                probability=min(0.98, max(0.02, 1.0 - best["p_holm"])),
                rationale=(
                    f"HAC-Holm screen of nine candidates: smallest Holm-adjusted p = {best['p_holm']:.4f} "
                    f"({best['name']}); {'below' if claim else 'above'} {ALPHA:.0%}."
                ),
                predictors=[best["name"]] if claim else [],
            )
        ]

    def _abort(self, reason: str) -> list[ToolCall]:
        self.done = True
        return [self._call("submit_final", verdict="abort_no_predictability", probability=0.0,
                           rationale=reason, predictors=[])]


class ScriptedBackend:
    """Backend of the scripted researcher: no key, no network, deterministic."""

    name = "scripted"

    def open_session(self, *, system: str, user: str, tools: dict[str, dict[str, Any]], log: EventLog) -> ScriptedSession:
        """Start an episode; the system prompt and brief are logged for the record."""
        log.write("scripted_open", system=system, user=user, tools=sorted(tools))
        return ScriptedSession(log=log)
