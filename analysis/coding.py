"""Transcript coding: keyword families, the candidates of the submitted model, and the selection
measures of Castle, Doornik and Hendry (2011) — potency and gauge (SPEC 6; paper D.5, Table D.4).

The flags are keyword matches, not validated codes (the paper's limitation 7.2 applies). All
matching is case-insensitive.

Conventions
-----------
* Candidates offered to the agent are the columns ``x1``..``x8`` (:data:`CANDIDATES`). ``m12``
  names the asset's trailing 12-month mean return (the ninth candidate of the baselines, the true
  regressor of momentum-null and reversal worlds), and ``asset_A`` any other feature built from the
  return series itself (its own lags, rolling statistics, lookups).
* A predictor entry names a candidate through the candidate's name anywhere inside it, so
  transformations count as the candidate (and only an entry naming no x-column can name m12 or
  asset_A): ``log(x5)``, ``x7_lag2``, ``x3^2``, ``zscore(x2)``,
  ``x1*x4`` (both). Ranges ``x1-x3``, ``x1–x3``, ``x2..x4``, ``x2...x4``, ``x1:x3``, ``x2 to x4`` and
  ``x2 through x4`` name every candidate from the first to the last. "all"/"all candidates"/"all
  predictors" names x1..x8.
* Gauge counts irrelevant *offered* columns: the 8 columns minus the planted one (all 8 in worlds
  without a planted column). Potency is computed over claims in worlds with a planted column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

CANDIDATES: tuple[str, ...] = tuple(f"x{i}" for i in range(1, 9))
MOMENTUM = "m12"
OWN_RETURN = "asset_A"

KEYWORD_FAMILIES: dict[str, re.Pattern[str]] = {
    "multiple_testing": re.compile(
        r"multiple[\s-]+(?:testing|tests|comparisons?|hypothes[ie]s|inference)"
        r"|data[\s-]*(?:snoop\w*|mining|dredg\w*)|snooping|p[\s-]*hacking"
        r"|bonferroni|\bholm\b|benjamini|hochberg|false[\s-]+discovery|\bfdr\b"
        r"|family[\s-]*wise|\bfwer\b|look[\s-]*elsewhere|forking[\s-]+paths"
        r"|reality[\s-]+check|romano[\s-]*(?:and[\s-]+)?wolf|deflated[\s-]+sharpe"
        r"|(?:number|many)\s+of\s+(?:tests|candidates|predictors)\s+(?:tested|tried|searched)",
        re.IGNORECASE,
    ),
    "persistence": re.compile(
        r"stambaugh|persisten(?:t|ce|cy)|near[\s-]*(?:unit[\s-]*root|integrated)|unit[\s-]*root"
        r"|\bivx\b|spurious\s+regression|small[\s-]*sample\s+bias|amihud|lewellen|campbell[\s-]*(?:and[\s-]+)?yogo"
        r"|highly\s+autocorrelated",
        re.IGNORECASE,
    ),
    "forecast_test": re.compile(
        r"clark[\s-]*(?:and[\s-]+|&\s*)?west|diebold[\s-]*(?:and[\s-]+|&\s*)?mariano"
        r"|giacomini[\s-]*(?:and[\s-]+|&\s*)?white|\b(?:cw|dm)[\s-]+(?:test|stat\w*)"
        r"|\bmse[\s-]*f\b|\benc[\s-]*new\b|encompassing\s+test|forecast\s+encompassing",
        re.IGNORECASE,
    ),
}

_RANGE = re.compile(
    r"(?<![a-z0-9])x([1-8])\s*(?:-|–|—|\.\.\.?|:|\bto\b|\bthrough\b)\s*x?([1-8])(?![0-9])", re.IGNORECASE
)
_SINGLE = re.compile(r"(?<![a-z0-9])x([1-8])(?![0-9])", re.IGNORECASE)
_ALL = re.compile(r"^\s*all(?:\s+(?:the\s+)?(?:\d\s+)?(?:candidates?|predictors?|columns?|variables?|features?))?\s*$",
                  re.IGNORECASE)
_MOMENTUM = re.compile(
    r"(?<![a-z0-9])m12(?![0-9])|momentum|\bmom[\s_-]*12|trailing[\s_-]*12|12[\s_-]*(?:month|m)[\s_-]*(?:mean|avg|average|return|mom)"
    r"|(?:rolling|moving)[\s_-]*(?:mean|avg|average)[\s_(-]*12",
    re.IGNORECASE,
)
_OWN = re.compile(r"asset[\s_-]*a|own[\s_-]*(?:lag|return)|lagged[\s_-]*returns?|past[\s_-]*returns?|\br[\s_]*(?:lag|t-?1)",
                  re.IGNORECASE)


def keyword_flags(chunks: Iterable[str], families: Mapping[str, re.Pattern[str]] = KEYWORD_FAMILIES) -> dict[str, bool]:
    """Whether any text chunk (reasoning, code, tool input) matches each keyword family."""
    texts = [c for c in chunks if c]
    return {name: any(pattern.search(t) for t in texts) for name, pattern in families.items()}


def keyword_matches(chunks: Iterable[str], families: Mapping[str, re.Pattern[str]] = KEYWORD_FAMILIES) -> dict[str, list[str]]:
    """The matched strings of each family, in order of appearance (for checking flags by hand)."""
    texts = [c for c in chunks if c]
    return {name: [m.group(0) for t in texts for m in pattern.finditer(t)] for name, pattern in families.items()}


def _as_list(predictors: Sequence[str] | str | None) -> list[str]:
    if predictors is None:
        return []
    if isinstance(predictors, str):
        text = predictors.strip()
        if text.startswith("["):
            try:
                loaded = json.loads(text)
            except json.JSONDecodeError:
                loaded = None
            if isinstance(loaded, list):
                return [str(v) for v in loaded if v is not None]
        return [text] if text and text.lower() != "null" else []
    return [str(v) for v in predictors if v is not None]


def parse_predictors(predictors: Sequence[str] | str | None) -> frozenset[str]:
    """Candidates named in a submitted predictor list.

    Parameters
    ----------
    predictors : sequence of str, str or None
        The ``predictors`` of ``submit_final``: a list of entries, a JSON list (as stored in the run
        table), or one free-text entry.

    Returns
    -------
    frozenset of str
        Subset of ``x1..x8``, ``m12`` and ``asset_A`` (see the module conventions). Entries naming
        none of them (``const``, ``historical mean``) contribute nothing.
    """
    found: set[str] = set()
    for entry in _as_list(predictors):
        if _ALL.match(entry):
            found.update(CANDIDATES)
            continue
        named: set[str] = set()
        for m in _RANGE.finditer(entry):
            lo, hi = sorted((int(m.group(1)), int(m.group(2))))
            named.update(f"x{i}" for i in range(lo, hi + 1))
        named.update(f"x{m.group(1)}" for m in _SINGLE.finditer(_RANGE.sub(" ", entry)))
        if named:  # a transformation of named candidates (x3_rolling_mean_12 is x3, not momentum)
            found.update(named)
        elif _MOMENTUM.search(entry):
            found.add(MOMENTUM)
        elif _OWN.search(entry):
            found.add(OWN_RETURN)
    return frozenset(found)


def is_benchmark(predictors: Sequence[str] | str | None, model_source: str | None = None) -> bool:
    """Whether the submitted model is the benchmark (the expanding historical mean).

    True when the predictor list names no candidate, no momentum and no return feature
    (:func:`parse_predictors` is empty: an empty list, "const", "historical mean"), and — when the
    final model's source is given — the code mentions none of ``x1..x8`` either (a model that uses
    a column but does not list it is not the benchmark).
    """
    if parse_predictors(predictors):
        return False
    if model_source is None:
        return True
    return not _SINGLE.search(model_source)


def most_persistent(autocorrelations: Mapping[str, float]) -> str:
    """The candidate with the largest first-order autocorrelation (ties: the first in name order)."""
    if not autocorrelations:
        raise ValueError("no autocorrelations given")
    return max(sorted(autocorrelations), key=lambda c: autocorrelations[c])


def first_order_autocorrelations(frame: pd.DataFrame, columns: Sequence[str] = CANDIDATES) -> dict[str, float]:
    """Lag-1 autocorrelation of each candidate in the agent's training data (paper Appendix C).

    ``corr(x[t], x[t-1])`` over the available pairs (Pearson); invariant to the anonymising affine
    map, including a sign flip.
    """
    out = {}
    for c in columns:
        x = frame[c].to_numpy(dtype=float)
        out[c] = float(np.corrcoef(x[1:], x[:-1])[0, 1])
    return out


@dataclass(frozen=True)
class RunCoding:
    """The coding of one run: candidates retained and the selection measures."""

    candidates: frozenset[str]
    n_candidates: int
    planted_retained: bool | None
    gauge: float
    most_persistent_included: bool | None
    benchmark: bool


def code_run(
    predictors: Sequence[str] | str | None,
    *,
    planted: str | None,
    autocorrelations: Mapping[str, float] | None = None,
    model_source: str | None = None,
    offered: Sequence[str] = CANDIDATES,
) -> RunCoding:
    """Selection measures of one submitted model.

    Parameters
    ----------
    predictors : sequence of str, str or None
    planted : str or None
        The planted column (``x1``..``x8``), None in worlds without one among the offered columns.
    autocorrelations : mapping, optional
        First-order autocorrelation of each offered column (:func:`first_order_autocorrelations`).
    model_source : str, optional
        The final model's code, for :func:`is_benchmark`.
    offered : sequence of str

    Returns
    -------
    RunCoding
        ``n_candidates``: offered columns plus m12 retained; ``planted_retained`` (None without a
        planted column); ``gauge``: share of the irrelevant offered columns retained;
        ``most_persistent_included`` (None without autocorrelations); ``benchmark``.
    """
    chosen = parse_predictors(predictors)
    irrelevant = [c for c in offered if c != planted]
    retained = chosen & set(offered)
    return RunCoding(
        candidates=chosen,
        n_candidates=len(retained) + (MOMENTUM in chosen),
        planted_retained=None if planted is None or planted not in offered else planted in chosen,
        gauge=len(retained & set(irrelevant)) / len(irrelevant) if irrelevant else float("nan"),
        most_persistent_included=None if not autocorrelations else most_persistent(autocorrelations) in chosen,
        benchmark=is_benchmark(predictors, model_source),
    )


def code_runs(
    runs: pd.DataFrame,
    *,
    texts: Mapping[str, Sequence[str]] | None = None,
    autocorrelations: Mapping[str, Mapping[str, float]] | None = None,
    model_sources: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Code every run of a run table.

    Parameters
    ----------
    runs : DataFrame
        With ``run_id``, ``world_id``, ``predictors`` (list or JSON list) and ``planted_column``.
    texts : mapping run_id -> list of str, optional
        The transcript's text chunks (reasoning, code, tool inputs) for the keyword flags.
    autocorrelations : mapping world_id -> {column: autocorrelation}, optional
    model_sources : mapping run_id -> str, optional

    Returns
    -------
    DataFrame
        ``run_id`` and, per run: ``n_candidates``, ``planted_retained``, ``gauge``,
        ``most_persistent_included``, ``benchmark`` and one boolean column per keyword family
        (when ``texts`` is given).
    """
    rows = []
    for row in runs.itertuples(index=False):
        planted = getattr(row, "planted_column", None)
        planted = planted if isinstance(planted, str) and planted else None
        coding = code_run(
            row.predictors, planted=planted,
            autocorrelations=(autocorrelations or {}).get(row.world_id),
            model_source=(model_sources or {}).get(row.run_id),
        )
        record: dict[str, object] = {
            "run_id": row.run_id, "n_candidates": coding.n_candidates, "planted_retained": coding.planted_retained,
            "gauge": coding.gauge, "most_persistent_included": coding.most_persistent_included,
            "benchmark": coding.benchmark,
        }
        if texts is not None:
            record.update(keyword_flags(texts.get(row.run_id, ())))
        rows.append(record)
    return pd.DataFrame(rows)


def potency(coded: pd.DataFrame, claims: np.ndarray) -> float:
    """Share of claims in worlds with a planted column whose model retains it (Castle et al. 2011).

    References
    ----------
    Castle, J. L., Doornik, J. A. and Hendry, D. F. (2011). Evaluating automatic model selection.
    Journal of Time Series Econometrics 3(1). doi:10.2202/1941-1928.1097
    """
    claims = np.asarray(claims, dtype=bool)
    retained = coded["planted_retained"].to_numpy(dtype=object)[claims]
    known = np.array([v is not None and not (isinstance(v, float) and np.isnan(v)) for v in retained], dtype=bool)
    return float(np.mean(retained[known].astype(bool))) if known.any() else float("nan")


def gauge(coded: pd.DataFrame, claims: np.ndarray) -> float:
    """Mean share of irrelevant offered candidates retained by claiming models (Castle et al. 2011)."""
    values = coded["gauge"].to_numpy(dtype=float)[np.asarray(claims, dtype=bool)]
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
