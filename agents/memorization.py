"""The memorization probe of the real-data exercise (paper section 6, Table 5 panel A).

Without tools or data, the model is asked for the published monthly return of a Fama-French
factor (HML or RMW), one month per request, for months drawn at random before its knowledge
cutoff and for the months after it. A model that recalls the published values has seen the
series, and on real data its verdicts may then reflect memory rather than inference.

The pieces:

* :func:`question` and :data:`SYSTEM_PROMPT`: the fixed prompt (below);
* :func:`parse_answer`: the answer text as a number in percent, or no answer;
* :func:`draw_months`: the months asked about, from a ``numpy.random.Generator``;
* :func:`score_answers`: the pure scoring of one period (answered share, Spearman correlation,
  correct-sign share, MAE against that of a no-knowledge guess), testable without a model;
* :func:`run_probe`: the driver, which sends each question through a
  :class:`~planted.agents.backend.Backend` and returns a :class:`ProbeResult`;
  :func:`save_probe` writes it.

The prompt
----------
System: :data:`SYSTEM_PROMPT`. User, for March 1987 and the 5-factor file::

    What was the return of the Fama-French HML factor (High Minus Low, the value factor) in
    March 1987, as published in the Fama/French 5 Factors (2x3) monthly file of Kenneth French's
    data library? Answer from memory. Reply with the monthly return in percent as a single number
    (for example -1.23), or reply "I don't know" if you do not know it.

The file is named because the factor's values differ between the library's files (the embedded
HML series is the 3-factor file's). The library also revises old values slightly with each
CRSP vintage, so a perfect recall of another vintage is not an exact match.

Each question is a fresh conversation (``open_session`` with no tools, then one turn), so the
requests go through the backend's own session and :class:`~planted.agents.retry.ApiCaller`:
the same retries, truncation handling, fatal errors, verbatim logging and cost accounting as an
episode, with the model config's sampling and reasoning settings.
"""

from __future__ import annotations

import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from planted.agents.backend import Backend
from planted.agents.probe_scoring import (  # noqa: F401 (part of the probe's interface)
    MIN_HISTORY, PeriodScore, draw_months, no_knowledge_guess, score_answers,
)
from planted.agents.retry import TransientBackendError, TruncatedResponseError
from planted.agents.transcript import EventLog
from planted.config import ConfigError
from planted.seeding import as_seed_sequence, generator
from planted.worlds.data import FactorDataError, FactorSeries, embedded_hml, ff5_factor

FACTOR_NAMES = {
    "HML": "HML factor (High Minus Low, the value factor)",
    "RMW": "RMW factor (Robust Minus Weak, the profitability factor)",
}
SYSTEM_PROMPT = (
    "You answer questions about published financial data from memory. You have no tools, no data and no "
    "internet access in this conversation."
)
QUESTION = (
    "What was the return of the Fama-French {factor} in {month}, as published in the {dataset} of Kenneth "
    "French's data library? Answer from memory. Reply with the monthly return in percent as a single number "
    "(for example -1.23), or reply \"I don't know\" if you do not know it."
)
DATASET_FF5 = "Fama/French 5 Factors (2x3) monthly file"
DATASET_FF3 = "Fama/French 3 Factors monthly file"
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
               "November", "December")
"""English month names (``strftime("%B")`` would follow the locale)."""
PERIODS = ("before", "after")
ANSWER_COLUMNS = ("answer_pct", "kind", "text", "stop_reason", "served_model", "cost_usd")
IMPLAUSIBLE_PCT = 100.0

AnswerKind = Literal["number", "range", "refusal", "empty", "unparsed", "error"]
ANSWERED = ("number", "range")


class ProbeNotApplicableError(ConfigError):
    """The model cannot be probed (the scripted researcher recalls nothing)."""


NOT_APPLICABLE = (
    "the memorization probe needs a language model: the scripted researcher has no memory of factor returns "
    "(choose an API model, e.g. --model opus, or the local qwen)"
)


# ----------------------------------------------------------------------------------------------
# The prompt and the answer parser


def question(factor: str, month: pd.Period, *, dataset: str = DATASET_FF5) -> str:
    """The user message asking for ``factor``'s return in ``month`` (see the module docstring)."""
    if factor not in FACTOR_NAMES:
        raise ValueError(f"unknown factor {factor!r}; choose from {', '.join(FACTOR_NAMES)}")
    name = f"{MONTH_NAMES[month.month - 1]} {month.year}"
    return QUESTION.format(factor=FACTOR_NAMES[factor], month=name, dataset=dataset)


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer read as a number in percent (``value`` is ``None`` when there is none)."""

    value: float | None
    kind: AnswerKind

    @property
    def answered(self) -> bool:
        """Whether the answer gives a number."""
        return self.kind in ANSWERED


_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_NUMERIC = re.compile(
    rf"between\s+(?P<a>{_NUMBER})\s*%?\s*and\s+(?P<b>{_NUMBER})\s*%?"
    rf"|(?P<c>{_NUMBER})\s*%?\s*(?:to|-)\s*(?P<d>{_NUMBER})\s*%?"
    rf"|(?P<e>{_NUMBER})",
    re.IGNORECASE,
)
_REFUSAL = re.compile(
    r"\b(?:i\s+(?:do\s+not|don'?t|cannot|can'?t|am\s+not\s+able\s+to|am\s+unable\s+to|have\s+no)"
    r"|unable\s+to|not\s+(?:sure|certain|available|known)|unknown|no\s+(?:reliable\s+)?(?:data|information|record)"
    r"|cannot\s+(?:recall|provide)|n/a\b)",
    re.IGNORECASE,
)
_DATES = re.compile(r"(?<![\d.+-])(?:(?:19|20)\d{2}(?:[-/]\d{1,2}\b)?|\d{1,2}/(?:19|20)\d{2})(?!\d|\s*%|\.\d)")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def parse_answer(text: str | None) -> ParsedAnswer:
    """Read a model's answer as a monthly return in percent.

    Parameters
    ----------
    text : str or None
        The visible text of the response.

    Returns
    -------
    ParsedAnswer
        ``kind`` is ``number``, ``range`` (the midpoint is the value), ``refusal``, ``empty`` or
        ``unparsed``; only the first two are answers.

    Notes
    -----
    The rules, in order:

    1. Thinking between ``<think>`` tags (a server without a reasoning parser) is removed, as is
       everything up to a lone ``</think>``; the Unicode minus and en/em dashes become ``-``
       and the typographic apostrophe ``'``.
    2. Dates are removed: four-digit years 1900-2099 not followed by ``%`` or decimals,
       alone or as ``YYYY-MM``, ``YYYY/MM`` and ``MM/YYYY``.
    3. Whichever comes first decides: a refusal phrase ("I don't know", "I cannot", "not sure",
       "unknown", "no data", "N/A", ...) makes the answer a refusal, even if a number follows
       (a hedged fallback such as "I don't know; the long-run mean is about 0.3%" is not a
       recall); otherwise the first number is the answer.
    4. A range at that place ("between -1.5% and -1.0%", "-1.5 to -1.0", "-1.5% - -1.0%") gives
       its midpoint, with kind ``range``.
    5. Numbers are read as percent whether or not a ``%`` follows (the prompt asks for percent);
       a value of 100 or more in absolute terms is not a monthly factor return and is
       ``unparsed``, as is a text with neither a number nor a refusal phrase.
    """
    if text is None or not text.strip():
        return ParsedAnswer(None, "empty")
    clean = _THINK.sub(" ", text)
    if "</think>" in clean.lower():
        clean = clean[clean.lower().rindex("</think>") + len("</think>"):]
    clean = clean.replace("\u2212", "-").replace("\u2013", "-").replace("\u2014", "-").replace("\u2019", "'")
    clean = _DATES.sub(" ", clean)
    if not clean.strip():
        return ParsedAnswer(None, "empty")
    refusal = _REFUSAL.search(clean)
    number = _NUMERIC.search(clean)
    if refusal and (number is None or refusal.start() <= number.start()):
        return ParsedAnswer(None, "refusal")
    if number is None:
        return ParsedAnswer(None, "unparsed")
    groups = number.groupdict()
    if groups["e"] is not None:
        value, kind = float(groups["e"]), "number"
    else:
        low, high = (groups["a"], groups["b"]) if groups["a"] is not None else (groups["c"], groups["d"])
        value, kind = (float(low) + float(high)) / 2.0, "range"
    if abs(value) >= IMPLAUSIBLE_PCT:
        return ParsedAnswer(None, "unparsed")
    return ParsedAnswer(value, kind)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# Results


def _share(count: int, n: int, low: float, high: float) -> str:
    if not n:
        return "-"
    return f"{count}/{n} ({count / n:.0%} [{low:.0%}, {high:.0%}])"


def _number(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


@dataclass(frozen=True, eq=False)
class ProbeResult:
    """The answers of one probe and their scores.

    Attributes
    ----------
    factor : str
    cutoff : str
        Knowledge cutoff month, ``YYYY-MM``.
    seed : int
    source, sha256 : str
        Provenance of the published returns (see :class:`~planted.worlds.data.FactorSeries`).
    rows : pandas.DataFrame
        One row per month asked: ``month``, ``period``, ``truth_pct``, ``guess_pct``,
        ``answer_pct`` (NaN when none), ``kind``, ``text``, ``stop_reason``, ``served_model``,
        ``cost_usd``.
    """

    factor: str
    cutoff: str
    seed: int
    source: str
    sha256: str
    rows: pd.DataFrame

    @cached_property
    def scores(self) -> dict[str, PeriodScore]:
        """The score of each period, ``before`` and ``after``."""
        out = {}
        for period in PERIODS:
            part = self.rows[self.rows["period"] == period]
            out[period] = score_answers(part["truth_pct"].to_numpy(float), part["answer_pct"].to_numpy(float),
                                        part["guess_pct"].to_numpy(float), period=period)
        return out

    @property
    def served_models(self) -> list[str]:
        """The distinct models that served the requests."""
        return sorted({m for m in self.rows["served_model"] if m})

    @property
    def cost_usd(self) -> float:
        """Total cost of the requests."""
        return float(self.rows["cost_usd"].sum())

    def to_frame(self) -> pd.DataFrame:
        """The scores as a table, one row per period."""
        return pd.DataFrame([vars(score) | {"answered_share": score.answered_share,
                                            "correct_sign_share": score.correct_sign_share}
                             for score in self.scores.values()]).set_index("period")

    def summary(self) -> str:
        """Table 5 panel A for this probe (no paths, no timestamps)."""
        kinds = self.rows["kind"].value_counts()
        lines = [
            f"Memorization probe: {self.factor}, knowledge cutoff {self.cutoff}, seed {self.seed}",
            f"  model: {', '.join(self.served_models) or '-'}; data: {self.source} (sha256 {self.sha256[:12]})",
            f"  {'period':<7} {'answered':<26} {'rs':>6}  {'correct sign':<26} {'MAE (guess)':<15}",
        ]
        for score in self.scores.values():
            mae = "-" if not score.answered else f"{_number(score.mae)} ({_number(score.mae_guess)})"
            lines.append(
                f"  {score.period:<7} {_share(score.answered, score.asked, score.answered_low, score.answered_high):<26} "
                f"{_number(score.spearman):>6}  "
                f"{_share(score.correct_sign, score.answered, score.sign_low, score.sign_high):<26} {mae:<15}"
            )
        lines.append("  answer kinds: " + ", ".join(f"{kind} {int(kinds.get(kind, 0))}" for kind in
                                                 ("number", "range", "refusal", "unparsed", "empty", "error")))
        lines.append("  returns in percent; shares with Wilson 95% intervals; rs: Spearman correlation; "
                     "guess: historical mean up to the month before")
        return "\n".join(line.rstrip() for line in lines)

    def __str__(self) -> str:
        return self.summary()


# ----------------------------------------------------------------------------------------------
# Driver


def probe_series(factor: str, path: Any = None) -> tuple[FactorSeries, str]:
    """The published returns of ``factor`` and the name of their file for the prompt.

    HML without a file is the embedded series (the 3-factor file's HML, 1963-07..2017-03); a
    file, or RMW, reads the 5-factor file (``path``, else the copy of ``planted data fetch``).
    """
    if factor not in FACTOR_NAMES:
        raise FactorDataError(f"unknown factor {factor!r}; choose from {', '.join(FACTOR_NAMES)}")
    if path is None and factor == "HML":
        return embedded_hml(), DATASET_FF3
    return ff5_factor(factor, path), DATASET_FF5


def knowledge_cutoff(model_config: Mapping[str, Any], override: str | None = None) -> pd.Period:
    """The knowledge cutoff month: ``override`` if given, else the model config's ``knowledge_cutoff``.

    Raises
    ------
    ProbeNotApplicableError
        For the scripted model (checked first, so that the CLI fails before writing anything).
    ConfigError
        When neither is given or the value is not ``YYYY-MM``.
    """
    if model_config.get("backend") == "scripted":
        raise ProbeNotApplicableError(NOT_APPLICABLE)
    value = override if override is not None else model_config.get("knowledge_cutoff")
    if value is None:
        raise ConfigError("the model config has no knowledge_cutoff; pass it as --cutoff YYYY-MM")
    if not re.fullmatch(r"\d{4}-\d{2}", str(value)):
        raise ConfigError(f"knowledge cutoff {value!r} is not a month YYYY-MM")
    return pd.Period(str(value), freq="M")


def _ask(backend: Backend, text: str, log: EventLog, index: int, month: str) -> dict[str, Any]:
    session = backend.open_session(system=SYSTEM_PROMPT, user=text, tools={}, log=log)
    log.write("probe_question", index=index, month=month, text=text)
    try:
        turn = session.next_turn([])
    except (TransientBackendError, TruncatedResponseError) as exc:
        log.write("probe_answer", index=index, month=month, kind="error", error=str(exc))
        return {"answer_pct": float("nan"), "kind": "error", "text": str(exc), "stop_reason": "error",
                "served_model": "", "cost_usd": 0.0}
    parsed = ParsedAnswer(None, "refusal") if turn.stop_reason == "refusal" else parse_answer(turn.text)
    log.write("probe_answer", index=index, month=month, text=turn.text, stop_reason=turn.stop_reason,
              value=parsed.value, kind=parsed.kind, served_model=turn.served_model, cost_usd=turn.usage.cost_usd)
    return {"answer_pct": float("nan") if parsed.value is None else parsed.value, "kind": parsed.kind,
            "text": turn.text, "stop_reason": turn.stop_reason, "served_model": turn.served_model,
            "cost_usd": turn.usage.cost_usd}


def run_probe(backend: Backend, series: FactorSeries, *, cutoff: str | pd.Period, seed: int, log: EventLog,
              n_before: int = 120, n_after: int | None = None, dataset: str = DATASET_FF5,
              concurrency: int = 1, min_history: int = MIN_HISTORY) -> ProbeResult:
    """Ask the model for the factor's returns month by month and score the answers.

    Parameters
    ----------
    backend : Backend
        Any API backend (:func:`planted.agents.registry.make_backend`); not the scripted one.
    series : FactorSeries
        The published returns (decimal), e.g. from :func:`probe_series`.
    cutoff : str or pandas.Period
        The model's knowledge cutoff month (``YYYY-MM``).
    seed : int
        Seed of the month draw.
    log : EventLog
        Receives every request and response verbatim (through the backend) and, per month,
        ``probe_question`` and ``probe_answer`` events (the answer text, its reading).
    n_before : int
        Months drawn before the cutoff (the paper: 120).
    n_after : int, optional
        Months drawn after the cutoff; ``None`` asks all of them (the paper: the three available).
    dataset : str
        The file named in the question (:data:`DATASET_FF5` or :data:`DATASET_FF3`).
    concurrency : int
        Questions in flight at once (each is its own conversation; the result does not depend on it).
    min_history : int
        Earlier months a month needs to be drawn.

    Returns
    -------
    ProbeResult

    Raises
    ------
    ProbeNotApplicableError
        For the scripted backend.
    FatalBackendError
        Authentication, credit or unknown model: the probe stops.
    BackendRequestError
        The provider rejected a request (it would reject all of them).

    Notes
    -----
    A question whose transient errors or truncations outlast the retry policy is recorded with
    kind ``error`` and counts as not answered; the other questions go on.
    """
    if getattr(backend, "name", "") == "scripted":
        raise ProbeNotApplicableError(NOT_APPLICABLE)
    cutoff = pd.Period(cutoff, freq="M")
    rng = generator(as_seed_sequence(seed))
    before, after = draw_months(series.months, cutoff=cutoff, n_before=n_before, n_after=n_after, rng=rng,
                                min_history=min_history)
    positions = np.concatenate([before, after])
    periods = ["before"] * before.size + ["after"] * after.size
    months = [str(series.months[i]) for i in positions]
    truth = series.returns[positions] * 100.0
    guess = no_knowledge_guess(series.returns, positions) * 100.0
    texts = [question(series.name, series.months[i], dataset=dataset) for i in positions]
    log.write("probe_start", factor=series.name, cutoff=str(cutoff), seed=seed, n_before=int(before.size),
              n_after=int(after.size), source=series.source, sha256=series.sha256, system=SYSTEM_PROMPT,
              months=months)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(_ask, backend, text, log, i, month) for i, (text, month) in enumerate(zip(texts, months))]
        try:
            answers = [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    rows = pd.DataFrame({"month": months, "period": periods, "truth_pct": truth, "guess_pct": guess})
    rows = pd.concat([rows, pd.DataFrame(answers, columns=list(ANSWER_COLUMNS))], axis=1)
    result = ProbeResult(series.name, str(cutoff), seed, series.source, series.sha256, rows)
    log.write("probe_end", scores={period: vars(score) for period, score in result.scores.items()},
              cost_usd=result.cost_usd)
    return result


def probe_table(results: Sequence[ProbeResult]) -> pd.DataFrame:
    """Scores of several probes (e.g. HML and RMW) in one table indexed by factor and period."""
    return pd.concat({r.factor: r.to_frame() for r in results}, names=["factor", "period"])


def save_probe(result: ProbeResult, directory: Path, *, model_config: Mapping[str, Any] | None = None) -> Path:
    """Write a probe's answers, scores and provenance to ``directory`` (created if needed).

    Files: ``answers.csv`` (one row per month, with factor, cutoff, seed and the data file's
    SHA-256 on every row), ``scores.csv`` (:meth:`ProbeResult.to_frame`), ``summary.txt`` and
    ``probe.json`` (the prompt, the data's provenance, the model config, the code version).

    Returns
    -------
    Path
        ``directory``.
    """
    from planted.provenance import code_provenance

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    version = code_provenance().commit
    rows = result.rows.assign(factor=result.factor, cutoff=result.cutoff, seed=result.seed,
                              data_sha256=result.sha256, code_version=version)
    rows.to_csv(directory / "answers.csv", index=False)
    result.to_frame().to_csv(directory / "scores.csv")
    (directory / "summary.txt").write_text(result.summary() + "\n", encoding="utf-8")
    provenance = {
        "factor": result.factor, "cutoff": result.cutoff, "seed": result.seed, "source": result.source,
        "sha256": result.sha256, "system_prompt": SYSTEM_PROMPT, "question": QUESTION,
        "n_before": int((result.rows["period"] == "before").sum()),
        "n_after": int((result.rows["period"] == "after").sum()), "served_models": result.served_models,
        "cost_usd": result.cost_usd, "code_version": version, "model": dict(model_config or {}),
    }
    (directory / "probe.json").write_text(json.dumps(provenance, indent=2, sort_keys=True, default=str) + "\n",
                                          encoding="utf-8")
    return directory
