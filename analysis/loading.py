"""Reading a study's logs into the columns the analyses need (the I/O edge of :mod:`planted.analysis`).

A study directory is what ``planted run`` writes (:mod:`planted.agents.grid`): ``runs.parquet``,
``baselines.parquet``, ``study.json``, ``runs/<run_id>/`` (``result.json``, ``transcript.jsonl``,
``final_model.py``) and ``worlds/<world_id>/``. A Monte Carlo directory is what ``planted mc --out``
writes (``mc.parquet``). Nothing here calls a model or re-runs a procedure.

Columns added to the run table (one row per run)
------------------------------------------------
* ``study`` (the study's name) and ``design``: ``gaussian`` for runs in Gaussian-shock worlds,
  ``bootstrap`` otherwise (bootstrap-shock and injected real-factor worlds: the first two studies).
* ``analysis_label``: kept when the grid stamped it (``confirmatory`` or ``exploratory``); missing
  in run tables written before the label existed.
* ``complexity_slope`` (H5): :func:`planted.analysis.hypotheses.complexity_slope` of the
  ``n_parameters`` of the run's ``record_spec`` calls, in call order.
* ``in_sample_r2_final`` (H5): see :func:`final_in_sample_r2`.
* ``oracle_cw_stat``, ``combination_cw_stat`` (H6): the ``statistic`` of those procedures in
  ``baselines.parquet`` (the pseudo-OOS Clark-West statistic on the training window).
* Transcript coding (paper D.5, Table D.4): ``n_candidates``, ``planted_retained``, ``gauge``,
  ``most_persistent_included``, ``benchmark`` and the keyword flags ``multiple_testing``,
  ``persistence``, ``forecast_test`` (:func:`planted.analysis.coding.code_runs`), from the text the
  model produced (turn text, tool-call arguments, reasoning returned by the API) and the final
  model's source. ``coded`` says whether the run's transcript was found.
* Repeated-value artifact (paper 5.1): ``lookup_model`` (:func:`planted.analysis.artifact.lookup_flag`
  on ``final_model.py``), ``lookup_correlation`` (:func:`planted.analysis.artifact.lookup_correlation`:
  the deployed forecasts against the audit's exact lookup on the test window) and ``artifact_flag``
  (:func:`planted.analysis.artifact.artifact_flags`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from planted.analysis.artifact import artifact_flags, lookup_correlation, lookup_flag
from planted.analysis.coding import code_runs, first_order_autocorrelations, is_benchmark, parse_predictors
from planted.analysis.hypotheses import complexity_slope
from planted.agents.transcript import read_events
from planted.records import baseline_columns, check_runs_schema
from planted.run_record import RunRecordError, SchemaVersionError, read_run_record
from planted.worlds.artifact import repeated_follower_share, repeated_share
from planted.worlds.files import TEST_FILE, VISIBLE_FILE

from planted.study_layout import (
    BASELINES_TABLE as BASELINES_FILE, EVALUATION_FILE, MODEL_FILE, RESULT_FILE, RUNS_TABLE as RUNS_FILE, STUDY_FILE, TRANSCRIPT_FILE,
    StudyLayout,
)
MC_FILE = "mc.parquet"
CODED_COLUMNS = ("n_candidates", "planted_retained", "gauge", "most_persistent_included", "benchmark",
                 "multiple_testing", "persistence", "forecast_test")


class StudyDataError(RuntimeError):
    """A directory given as a study or a simulation does not hold the expected files."""


@dataclass(frozen=True)
class StudyInfo:
    """One study directory that entered a report."""

    name: str
    path: str
    models: tuple[str, ...]
    n_runs: int
    n_errors: int
    labels: tuple[str, ...]
    reasons: tuple[str, ...]
    """Why runs are exploratory, as the grid stamped it (``analysis_reason``)."""
    designs: tuple[str, ...]
    transcripts: int
    pool: str = "embedded"
    """The study's shock pool (``embedded``, or ``ff5`` with its end month; studies before the choice: embedded)."""


@dataclass(frozen=True, eq=False)
class StudyData:
    """The run table(s) of one or more study directories, enriched for the analyses.

    Attributes
    ----------
    runs : DataFrame
        One row per run (every status), with the columns listed in the module docstring.
    baselines : DataFrame
        ``baselines.parquet`` of every study (one row per world x procedure), de-duplicated by
        (world, procedure), with a ``design`` column.
    worlds : DataFrame
        One row per world with files on disk: ``world_id``, ``design``, ``n_returns``,
        ``repeated_share`` and ``repeated_follower_share`` over training and test months.
    studies : tuple of StudyInfo
    notes : tuple of str
        What was dropped or could not be read (duplicates, missing transcripts).
    """

    runs: pd.DataFrame
    baselines: pd.DataFrame
    worlds: pd.DataFrame
    studies: tuple[StudyInfo, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def models(self) -> tuple[str, ...]:
        """Models in order of first appearance."""
        return tuple(str(m) for m in pd.unique(self.runs["model"].dropna()))


def study_directories(path: str | Path) -> list[Path]:
    """The study directories at ``path``: itself when it holds ``runs.parquet``, else its children that do.

    Raises
    ------
    StudyDataError
        When neither holds a run table.
    """
    root = Path(path)
    if (root / RUNS_FILE).is_file():
        return [root]
    children = sorted(p for p in root.iterdir() if (p / RUNS_FILE).is_file()) if root.is_dir() else []
    if not children:
        raise StudyDataError(
            f"{root} holds no {RUNS_FILE} (nor do its subdirectories); pass the directory that `planted run` "
            "wrote, e.g. runs/<study>"
        )
    return children


def design_of(shocks: pd.Series) -> pd.Series:
    """``gaussian`` for Gaussian-shock worlds, ``bootstrap`` for every other world."""
    return pd.Series(np.where(shocks.astype("string").fillna("") == "gaussian", "gaussian", "bootstrap"),
                     index=shocks.index)


def final_in_sample_r2(specs: Sequence[Mapping[str, Any]], predictors: Sequence[str] | str | None,
                       model_source: str | None = None) -> float:
    """In-sample R2 of the submitted model over the training window, from the logged specifications.

    Parameters
    ----------
    specs : sequence of dict
        The run's ``record_spec`` arguments in call order (``result.json`` -> ``record.specs``).
    predictors : sequence of str, str or None
        The submitted predictor list.
    model_source : str, optional
        ``final_model.py``, for :func:`planted.analysis.coding.is_benchmark`.

    Returns
    -------
    float
        0 when the submitted model is the benchmark (the historical mean has no in-sample fit beyond
        the mean); otherwise ``in_sample_r2`` of the **last** recorded specification whose candidates
        (:func:`planted.analysis.coding.parse_predictors`) equal the submitted ones; otherwise that of
        the last specification that reports one (the agent's final model is usually its last); NaN
        when no specification reports an in-sample R2. Values are the agent's own report (a
        fraction), never recomputed: running agent code outside the sandbox is not allowed.
    """
    if is_benchmark(predictors, model_source):
        return 0.0
    target = parse_predictors(predictors)
    reported: list[tuple[frozenset[str], float]] = [
        (parse_predictors(s.get("predictors")), float(s["in_sample_r2"])) for s in specs
        if isinstance(s.get("in_sample_r2"), (int, float)) and np.isfinite(s["in_sample_r2"])
    ]
    matching = [v for c, v in reported if c == target]
    if matching:
        return matching[-1]
    return reported[-1][1] if reported else float("nan")


def transcript_texts(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """The text a model produced in an episode, for keyword coding.

    Turn text and every tool call's arguments (``model_turn`` events: code, specification
    descriptions, rationales) and the reasoning text or summary returned with each API response
    (``api_response`` events). The prompts and the observations are left out: they are not the
    model's words.
    """
    chunks: list[str] = []
    for event in events:
        kind = event.get("event")
        if kind == "model_turn":
            chunks.append(str(event.get("text") or ""))
            for call in event.get("tool_calls") or []:
                chunks.append(str(call.get("arguments") or ""))
        elif kind == "api_response":
            chunks.append(str(event.get("reasoning") or ""))
    return [c for c in chunks if c]


_CODED_EVENTS = {"model_turn", "api_response"}


def _read_events(path: Path) -> list[dict[str, Any]]:
    """The events :func:`transcript_texts` reads, through the one transcript reader
    (:func:`planted.agents.transcript.read_events`; a damaged last line is left out)."""
    return [e for e in read_events(path, complete=False) if e.get("event") in _CODED_EVENTS]


def _run_record(path: Path) -> Mapping[str, Any]:
    """The protocol's log of a run (prior, ``record_spec`` entries, submission) from its ``result.json``
    (empty for a run without an agent outcome; :class:`StudyDataError` naming the file when damaged)."""
    try:
        record = read_run_record(path)
    except (RunRecordError, SchemaVersionError) as exc:
        raise StudyDataError(str(exc)) from None
    return record.outcome.record if record.outcome else {}


def _read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def world_measures(directory: Path, world_ids: Iterable[str]
                   ) -> tuple[pd.DataFrame, dict[str, dict[str, float]], dict[str, np.ndarray]]:
    """Per world with files under ``directory/worlds``: the repeated-value shares, candidate autocorrelations
    and returns.

    Returns
    -------
    (DataFrame, dict, dict)
        Rows ``world_id, n_returns, repeated_share, repeated_follower_share`` over the training and
        test months (the agent's file and the sealed test file; anonymisation multiplies returns by
        one positive constant, so repeats survive it); per world the first-order autocorrelation
        of each candidate in the agent's file (:func:`planted.analysis.coding.first_order_autocorrelations`);
        and the returns over training and test months of the worlds that have both files.
    """
    rows, autocorrelations, full = [], {}, {}
    for wid in world_ids:
        visible = StudyLayout(directory).world_dir(wid) / VISIBLE_FILE
        if not visible.is_file():
            continue
        train = _read_csv(visible)
        candidates = [c for c in train.columns if c.startswith("x")]
        autocorrelations[wid] = first_order_autocorrelations(train, candidates)
        returns = train["asset_A"].to_numpy()
        sealed = StudyLayout(directory).world_dir(wid) / TEST_FILE
        if sealed.is_file():
            returns = np.concatenate([returns, _read_csv(sealed)["asset_A"].to_numpy()])
            full[wid] = returns.astype(float)
        rows.append({"world_id": wid, "n_returns": int(returns.size), "repeated_share": repeated_share(returns),
                     "repeated_follower_share": repeated_follower_share(returns)})
    frame = pd.DataFrame(rows, columns=["world_id", "n_returns", "repeated_share", "repeated_follower_share"])
    return frame, autocorrelations, full


def _lookup_correlation(run_dir: Path, returns: np.ndarray | None) -> float:
    evaluation = run_dir / EVALUATION_FILE
    if returns is None or not evaluation.is_file():
        return float("nan")
    return lookup_correlation(_read_csv(evaluation), returns)


def _enrich(runs: pd.DataFrame, directory: Path, autocorrelations: Mapping[str, Mapping[str, float]],
            returns_of: Mapping[str, np.ndarray]) -> tuple[pd.DataFrame, int]:
    """Add complexity, final in-sample R2 and the transcript coding from each run's directory."""
    slopes: list[float] = []
    finals: list[float] = []
    texts: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    coded: list[bool] = []
    correlations: list[float] = []
    runs = runs.copy()
    for row in runs.itertuples(index=False):
        run_dir = StudyLayout(directory).run_dir(str(row.run_id))
        result_file, transcript = run_dir / RESULT_FILE, run_dir / TRANSCRIPT_FILE
        source_file = run_dir / MODEL_FILE
        source = source_file.read_text(encoding="utf-8", errors="replace") if source_file.is_file() else None
        specs: list[dict[str, Any]] = []
        if result_file.is_file():
            specs = list(_run_record(result_file).get("specs") or [])
        slopes.append(complexity_slope([s.get("n_parameters") for s in specs]) if specs else float("nan"))
        finals.append(final_in_sample_r2(specs, row.predictors, source) if result_file.is_file() else float("nan"))
        found = transcript.is_file()
        coded.append(found)
        if found:
            texts[row.run_id] = transcript_texts(_read_events(transcript))
        if source is not None:
            sources[row.run_id] = source
        correlations.append(_lookup_correlation(run_dir, returns_of.get(str(row.world_id))))
    for column, computed in (("complexity_slope", slopes), ("in_sample_r2_final", finals)):
        values = np.asarray(computed, dtype=float)
        if column in runs.columns:  # a run table that already carries the column keeps it where no record is on disk
            values = np.where(np.isnan(values), pd.to_numeric(runs[column], errors="coerce").to_numpy(), values)
        runs[column] = values
    runs = runs.assign(coded=coded, lookup_model=[lookup_flag(sources.get(r)) for r in runs["run_id"]],
                       lookup_correlation=correlations)
    coding = code_runs(runs, texts=texts, autocorrelations=autocorrelations, model_sources=sources)
    coding = coding.set_index("run_id")
    for column in CODED_COLUMNS:
        values = coding[column].reindex(runs["run_id"]).to_numpy(dtype=object).copy()
        values[~np.asarray(coded)] = None  # no transcript: unknown, not "no mention"
        runs[column] = values
    return runs, int(np.sum(coded))


def _baseline_statistics(baselines: pd.DataFrame) -> pd.DataFrame:
    wanted = baselines[baselines["procedure"].isin(["oracle", "combination"])]
    wide = wanted.pivot_table(index="world_id", columns="procedure", values="statistic", aggfunc="first")
    return wide.rename(columns=lambda p: f"{p}_cw_stat")


def read_study(directory: str | Path, *, code: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, StudyInfo]:
    """Read one study directory (see the module docstring) and enrich its run table.

    Parameters
    ----------
    directory : path
    code : bool
        Read the run directories (complexity, final in-sample R2, transcript coding, artifact flag)
        and the world files (repeated-value shares); False keeps only the tables.

    Returns
    -------
    (runs, baselines, worlds, StudyInfo)
    """
    directory = Path(directory)
    try:
        runs = check_runs_schema(pd.read_parquet(directory / RUNS_FILE), directory / RUNS_FILE)
    except SchemaVersionError as exc:
        raise StudyDataError(str(exc)) from None
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        raise StudyDataError(f"{directory / RUNS_FILE} cannot be read ({type(exc).__name__}); `planted run` with the "
                             "same study and --out rebuilds it from the runs' records") from None
    if runs.empty:
        raise StudyDataError(f"{directory / RUNS_FILE} holds no runs")
    config: dict[str, Any] = {}
    if (directory / STUDY_FILE).is_file():
        config = json.loads((directory / STUDY_FILE).read_text()).get("config", {})
    name = str((config.get("study") or {}).get("name") or directory.name)
    runs = runs.assign(study=name, study_dir=str(directory), design=design_of(runs["shocks"]))
    if "analysis_label" not in runs.columns:
        runs["analysis_label"] = None
    baselines = pd.read_parquet(directory / BASELINES_FILE) if (directory / BASELINES_FILE).is_file() else pd.DataFrame(
        columns=baseline_columns())
    stats = _baseline_statistics(baselines) if not baselines.empty else pd.DataFrame()
    for column in ("oracle_cw_stat", "combination_cw_stat"):
        runs[column] = stats[column].reindex(runs["world_id"]).to_numpy() if column in stats else np.nan
    design = runs.drop_duplicates("world_id").set_index("world_id")["design"]
    baselines = baselines.assign(design=design.reindex(baselines["world_id"]).to_numpy())
    transcripts = 0
    worlds = pd.DataFrame(columns=["world_id", "n_returns", "repeated_share", "repeated_follower_share"])
    if code:
        worlds, autocorrelations, returns_of = world_measures(directory, pd.unique(runs["world_id"]))
        runs, transcripts = _enrich(runs, directory, autocorrelations, returns_of)
    else:
        for column in ("complexity_slope", "in_sample_r2_final", *CODED_COLUMNS):
            if column not in runs.columns:
                runs[column] = np.nan
        runs["coded"] = False
        runs["lookup_model"] = None
        runs["lookup_correlation"] = np.nan
    runs["artifact_flag"] = artifact_flags(runs)
    worlds = worlds.assign(design=design.reindex(worlds["world_id"]).to_numpy())
    info = StudyInfo(
        name=name, path=str(directory), models=tuple(str(m) for m in pd.unique(runs["model"].dropna())),
        n_runs=len(runs), n_errors=int((runs["status"] != "ok").sum()),
        labels=tuple(sorted(str(v) for v in pd.unique(runs["analysis_label"].dropna()))),
        reasons=tuple(sorted(str(v) for v in pd.unique(runs["analysis_reason"].dropna()))),
        designs=tuple(sorted(pd.unique(runs["design"]))), transcripts=transcripts,
        pool=pool_label((config.get("study") or {}).get("pool"), (config.get("study") or {}).get("pool_end")),
    )
    return runs, baselines, worlds, info


def pool_label(source: str | None, end: str | None) -> str:
    """How a report names a shock pool: ``embedded`` (the default), ``ff5``, ``ff5 through 2026-08``."""
    return f"{source or 'embedded'}" + (f" through {end}" if end else "")


def _stack(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate, leaving out empty frames (pandas 2 warns about them) unless all are empty."""
    kept = [f for f in frames if not f.empty] or list(frames[:1])
    return pd.concat(kept, ignore_index=True)


def load_study_data(paths: Sequence[str | Path] | str | Path, *, models: Sequence[str] | None = None,
                    code: bool = True) -> StudyData:
    """Read and combine the study directories at ``paths`` (see :func:`study_directories`).

    Parameters
    ----------
    paths : path or sequence of paths
        Study directories, or directories whose subdirectories are studies; their run tables are
        stacked in the order given (which fixes the default model order: first seen first).
    models : sequence of str, optional
        Keep only these models, in this order (an unknown name is an error).
    code : bool
        See :func:`read_study`.

    Notes
    -----
    A run that appears twice (same model and ``run_id``, e.g. a study directory passed twice) is
    kept once, the first time, and a note says so. Baselines and world measures are de-duplicated by
    world (the same world id is the same world: ids name the cell, shocks and seed index).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    directories = [d for p in paths for d in study_directories(p)]
    frames, base_frames, world_frames, infos = [], [], [], []
    for directory in directories:
        runs, baselines, worlds, info = read_study(directory, code=code)
        frames.append(runs)
        base_frames.append(baselines)
        world_frames.append(worlds)
        infos.append(info)
    runs = pd.concat(frames, ignore_index=True)
    notes = []
    duplicated = runs.duplicated(["model", "run_id"])
    if duplicated.any():
        notes.append(f"{int(duplicated.sum())} runs appear in more than one study directory; the first copy is used")
        runs = runs[~duplicated].reset_index(drop=True)
    if models is not None:
        unknown = [m for m in models if m not in set(runs["model"])]
        if unknown:
            raise StudyDataError(f"models {unknown} have no runs in {', '.join(str(d) for d in directories)}; "
                                 f"the runs hold {sorted(set(runs['model'].dropna()))}")
        runs = runs[runs["model"].isin(models)]
        left_out = [i for i in infos if not set(i.models) & set(models)]
        for info in left_out:
            notes.append(f"study {info.name} ({info.path}) left out: its models {list(info.models)} are not among "
                         f"the models asked for")
        infos = [i for i in infos if i not in left_out]
        order = {m: i for i, m in enumerate(models)}
        runs = runs.iloc[np.argsort(runs["model"].map(order).to_numpy(), kind="stable")].reset_index(drop=True)
    baselines = _stack(base_frames).drop_duplicates(["world_id", "procedure"])
    worlds = _stack(world_frames).drop_duplicates("world_id")
    missing = int((~runs["coded"].astype(bool)).sum()) if code else len(runs)
    if missing:
        notes.append(f"{missing} runs have no transcript on disk; their transcript coding is missing")
    return StudyData(runs=runs, baselines=baselines.reset_index(drop=True), worlds=worlds.reset_index(drop=True),
                     studies=tuple(infos), notes=tuple(notes))


def load_mc(directories: Sequence[str | Path]) -> pd.DataFrame:
    """Stack the ``mc.parquet`` tables of Monte Carlo directories (build-error rows dropped).

    Raises
    ------
    StudyDataError
        When a directory holds no ``mc.parquet``.
    """
    frames = []
    for directory in directories:
        path = Path(directory) / MC_FILE
        if not path.is_file():
            raise StudyDataError(f"{directory} holds no {MC_FILE}; pass the --out directory of `planted mc`")
        table = pd.read_parquet(path)
        table = table[table["procedure"] != "<build-error>"]
        recorded = Path(directory) / "simulation.json"
        pool = json.loads(recorded.read_text())["config"].get("pool", {}) if recorded.is_file() else {}
        frames.append(table.assign(mc_source=str(directory), mc_pool=pool_label(pool.get("source"), pool.get("end"))))
    if not frames:
        return pd.DataFrame(columns=["family", "r2", "phi", "rho", "shocks", "procedure", "kind", "decision_p"])
    table = pd.concat(frames, ignore_index=True)
    keys = [k for k in ("cell", "seed", "world", "procedure") if k in table.columns]
    # the same world simulated twice is counted once; the same seed under another shock pool is another world
    return table.drop_duplicates([*keys, "mc_pool"]).reset_index(drop=True) if len(keys) == 4 else table
