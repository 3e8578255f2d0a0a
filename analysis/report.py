"""``planted report``: every table and figure the logs support, written from a study directory.

:func:`write_report` reads one or more study directories (:mod:`planted.analysis.loading`) and,
optionally, Monte Carlo directories; calls the pure table functions (:mod:`planted.analysis.tables`,
:mod:`~planted.analysis.summaries`, :mod:`~planted.analysis.matching`,
:mod:`~planted.analysis.behaviour`) and figure functions (:mod:`planted.analysis.figures`); and
writes each table as CSV and Markdown, each figure as PNG and PDF, ``report.md`` (everything in
one file) and ``index.md``: every output with the function that made it and its label, and every
output that was skipped with the reason. No model is called.

The outputs are a registry (:func:`registry`): each is declared once, in the paper's order, with
its builder, its label and, when the logs cannot support it, the reason and what would produce it.
Each draws its bootstrap from the stream named by the output (and design, and model) below the
report seed, and figures carry no timestamps, so leaving an output out (``exclude``) or adding one
changes no other output by a byte.

Labels
------
An output of a pre-specified analysis is *confirmatory*, one the paper designed after the results
were known (the stronger baselines, size matching, transcript coding, frontiers, recalibration,
the cross-model comparison of section 4.2, the decision-rule analyses of F.2) is *exploratory*
(paper sections 1 and 7.2, Appendix G). When the runs behind an output are labelled exploratory by
the grid (``analysis_label``: the study was not frozen, or ran with ``--exploratory``), or the
report is asked to treat them so, every output is exploratory.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

import pandas as pd

from planted.baselines.rates import matched_difference
from planted.analysis import artifact, behaviour, decision_rules, matching, paper_tables, summaries, tables
from planted.analysis.loading import StudyData, load_mc, load_study_data
from planted.analysis import report_figures
from planted.analysis.report_html import write_html_index
from planted.analysis.report_output import Output, ReportWriter
from planted.analysis.tables import Table
from planted.seeding import as_seed_sequence, named_generator, substream

DESIGN_NAMES = {"bootstrap": "bootstrap-shock and injected worlds (studies 1-2)", "gaussian": "Gaussian-shock worlds (studies 3-4)"}


def _rule_pvalues(runs: pd.DataFrame) -> pd.DataFrame:
    """Every rule's decision p-value for every run, study by study (run ids repeat across studies)."""
    frames = [decision_rules.rule_pvalues(g, Path(str(study_dir))).assign(study_dir=str(study_dir))
              for study_dir, g in runs.groupby("study_dir", sort=False)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id", "rule", "decision_p",
                                                                                    "study_dir"])


def _designs(runs: pd.DataFrame) -> list[str]:
    return [d for d in ("bootstrap", "gaussian") if (runs["design"] == d).any()]


def _suffix(design: str) -> str:
    return "" if design == "bootstrap" else "_gaussian"


def _for_design(table: Table, design: str, n_designs: int) -> Table:
    if n_designs == 1 and design == "bootstrap":
        return table
    return replace(table, key=table.key + _suffix(design), title=f"{table.title} — {DESIGN_NAMES[design]}")


def _has_replicates(runs: pd.DataFrame) -> bool:
    neutral = runs[(runs["framing"] == "neutral") & (runs["status"] == "ok")]
    return bool(neutral.groupby(["model", "world_id"]).size().gt(1).any())


def _has_framing(runs: pd.DataFrame) -> bool:
    return bool((runs["framing"] != "neutral").any())


def _mc_summary(mc: pd.DataFrame) -> list[str]:
    if mc.empty:
        return []
    lines = ["| Source | Shock pool | Family | Shocks | R2 levels (%) | Worlds per level | Procedures |",
             "|---|---|---|---|---|---|---|"]
    for (source, pool, family, shocks), g in mc.groupby(["mc_source", "mc_pool", "family", "shocks"], dropna=False):
        levels = sorted(pd.to_numeric(g["r2"]).dropna().unique())
        per = g.groupby(pd.to_numeric(g["r2"]))["world"].nunique() * g.groupby(pd.to_numeric(g["r2"]))["cell"].nunique()
        lines.append(f"| {source} | {pool} | {family} | {shocks} | {', '.join(f'{100 * v:g}' for v in levels)} | "
                     f"{int(per.min()) if len(per) else 0} | {', '.join(sorted(pd.unique(g['procedure'])))} |")
    return lines


def _reasons(reasons: Sequence[str]) -> str:
    return f" ({'; '.join(reasons)})" if reasons else ""


def _index(out: Path, data: StudyData, mc: pd.DataFrame, outputs: list[Output], *, seed: int, n_boot: int,
           models: Sequence[str], local_models: Sequence[str], forced: bool) -> None:
    lines = ["# planted report", "",
             "Every table and figure that the logged runs support, regenerated from the logs without model calls by "
             "`planted.analysis.report.write_report`. Rates are shares of worlds with Wilson 95% intervals.", "",
             "## Inputs", "", "| Study | Directory | Models | Runs | Errors | Designs | Shock pool | Label | Transcripts |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in data.studies:
        lines.append(f"| {s.name} | {s.path} | {', '.join(s.models)} | {s.n_runs} | {s.n_errors} | {', '.join(s.designs)} | "
                     f"{s.pool} | {', '.join(s.labels) or 'unlabelled'}{_reasons(s.reasons)} | {s.transcripts} |")
    pools = {s.pool for s in data.studies} | (set(pd.unique(mc["mc_pool"])) if "mc_pool" in mc.columns else set())
    if len(pools) > 1:
        lines += ["", f"Warning: the studies and simulations use different shock pools ({', '.join(sorted(pools))}); "
                      "simulated baselines are comparable with agent worlds of the same pool only."]
    lines += [""] + (_mc_summary(mc) or ["No Monte Carlo simulation given (`--mc`)."])
    lines += ["", f"Models, in order (the first is the reference of C1 and C2): {', '.join(models)}.",
              f"Local models (Table 4's separate family): {', '.join(local_models) or 'none'}.",
              f"Bootstrap seed {seed}, {n_boot} draws per interval.", ""]
    lines += ["Labels: outputs of pre-specified analyses are confirmatory, those the paper designed after its results "
              "were known are exploratory; when the runs are labelled exploratory by the grid (an unfrozen study or a "
              "run with `--exploratory`)" + (" or the report was asked to treat them so" if forced else "")
              + ", every output is exploratory. An unlabelled run table (written before labels existed) counts as "
              "confirmatory.", ""]
    for note in data.notes:
        lines.append(f"Note: {note}.")
    lines += ["", "All tables and figures in one file: [report.md](report.md).", "", "## Outputs", "",
              "| Output | Files | Made by | Label | Notes |", "|---|---|---|---|---|"]
    for o in outputs:
        if o.status != "written":
            continue
        files = ", ".join(f"[{f}]({f})" for f in o.files)
        made = "<br>".join(f"`{f}`" for f in o.functions)
        lines.append(f"| {o.paper} | {files} | {made} | {o.role} | {o.note} |")
    skipped = [o for o in outputs if o.status != "written"]
    if skipped:
        lines += ["", "## Skipped", "", "| Output | Status | Why |", "|---|---|---|"]
        for o in skipped:
            lines.append(f"| {o.paper} | {o.status} | {o.note} |")
    (out / "index.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------
# The registry: every output, declared once, in the paper's order
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One output of the report.

    Attributes
    ----------
    paper : str
        Its name in the paper's numbering (``"Table D.1 (Gaussian)"``); unique in a report.
    description : str
    make : callable
        Writes it (through the report's writer); None when it is skipped.
    figure : bool
        A figure (skipped when figures were not asked for).
    skip : str or None
        Why the logs cannot support it, and what would produce it.
    runs : DataFrame or None
        The runs it is built from (its rows' sample is the subset its caption names); None: all runs.
        The HTML index links each output to these runs' episode pages.
    """

    paper: str
    description: str
    make: Callable[[], None] | None = None
    figure: bool = False
    skip: str | None = None
    runs: pd.DataFrame | None = None


@dataclass(frozen=True, eq=False)
class _Context:
    w: "ReportWriter"
    data: StudyData
    mc: pd.DataFrame
    runs: pd.DataFrame
    models: list[str]
    local_models: list[str]
    root: np.random.SeedSequence
    n_boot: int
    probe_dirs: tuple[Path, ...] = ()

    def stream(self, *names: str) -> np.random.Generator:
        """The output's own generator: named by the output (and design), never by its position."""
        return named_generator(self.root, *names)

    def seed(self, *names: str) -> np.random.SeedSequence:
        """The output's own seed sequence (for builders that derive per-model streams below it)."""
        return substream(self.root, *(zlib.crc32(n.encode("utf-8")) for n in names))


def _table(ctx: _Context, paper: str, description: str, build: Callable[[], Table], functions: Sequence[Callable[..., object]],
           role: str, note: str = "", empty: str = "no runs in the sample this table needs") -> Entry:
    return Entry(paper, description, lambda: ctx.w.table(paper, build(), functions, role, note, empty=empty))


def registry(ctx: _Context) -> Iterator[Entry]:
    """Every output the report knows, each once: Tables 1-5, the outputs of each design, the pooled ones
    (``index.html`` shows them in the paper's order, :func:`planted.analysis.report_html.paper_order`)."""
    runs, w, data = ctx.runs, ctx.w, ctx.data
    single = len(ctx.models) == 1
    yield _table(ctx, "Table 1", "Pre-specified hypotheses", paper_tables.hypotheses_table,
                 [paper_tables.hypotheses_table], w.role("confirmatory (the preregistered design)", runs))
    yield _table(ctx, "Table 2", "The studies", lambda: paper_tables.studies_table(runs), [paper_tables.studies_table],
                 w.role("confirmatory (the design as run)", runs))
    boot = runs[runs["design"] == "bootstrap"]
    if boot.empty:
        yield Entry("Table 3", "Pre-specified tests H1-H6, C1-C3", skip="no bootstrap-shock runs: Table 3 is the test "
                    "family of studies 1-2 (Gaussian-shock studies are tested in Table 4)")
    else:
        yield replace(_table(ctx, "Table 3", "Pre-specified tests",
                     lambda: summaries.prespecified_tests(boot, models=[m for m in ctx.models if m in set(boot["model"])]),
                     [summaries.prespecified_tests], w.role("confirmatory; H1' and H6 exploratory", boot),
                     "C1-C3 not computed: the cross-model tests need at least two models" if single else ""), runs=boot)
    gauss = runs[runs["design"] == "gaussian"]
    if gauss.empty:
        yield Entry("Table 4", "Pre-specified tests G1-G3 of the Gaussian-shock studies", skip="no Gaussian-shock runs")
    else:
        n_commercial = len([m for m in ctx.models if m in set(gauss["model"]) and m not in set(ctx.local_models)])
        yield replace(_table(ctx, "Table 4", "Pre-specified tests G1-G3",
                     lambda: summaries.gaussian_tests_table(gauss, models=ctx.models, local_models=ctx.local_models),
                     [summaries.gaussian_tests_table], w.role("confirmatory", gauss),
                     "G2 not computed: it compares at least two (non-local) models" if n_commercial < 2 else ""), runs=gauss)
    if ctx.probe_dirs:
        yield _table(ctx, "Table 5", "Memorization probe", lambda: paper_tables.memorization_table(ctx.probe_dirs),
                     [paper_tables.memorization_table], "exploratory",
                     "panel B (agent runs on the real factor series) is not a planted world and is not produced")
    else:
        yield Entry("Table 5", "Memorization probe (panel A) and real-data runs (panel B)",
                    skip="needs `planted probe memorization` outputs: pass their directories with --probe DIR; panel B "
                         "(agent runs on the real factor series) is not a planted world and is not produced")
    designs = _designs(runs)
    for design in designs:
        d = runs[runs["design"] == design]
        yield from (replace(e, runs=d) for e in _design_entries(ctx, design, len(designs)))
    if gauss.empty:
        for paper in ("Table F.1", "Figure 4"):
            yield Entry(paper, "Gaussian-shock worlds against bootstrap worlds", skip="no Gaussian-shock runs")
    else:
        yield _table(ctx, "Table F.1", "Gaussian vs bootstrap", lambda: tables.gaussian_vs_bootstrap(runs),
                     [tables.gaussian_vs_bootstrap], w.role("confirmatory", gauss))
        yield Entry("Figure 4", "Gaussian claim rates", lambda: report_figures.figure4(w, runs, gauss), figure=True, runs=gauss)
    yield _table(ctx, "Table F.2", "Holdout rule", lambda: tables.holdout_rule(runs), [tables.holdout_rule], "exploratory")
    yield _table(ctx, "Appendix F.2 thresholds", "Probability thresholds", lambda: tables.probability_thresholds(runs),
                 [tables.probability_thresholds], "exploratory")
    yield _table(ctx, "Decision rules (7.1, F.2)", "Rules applied to the agent's runs",
                 lambda: decision_rules.rules_table(runs, _rule_pvalues(runs)), [decision_rules.rules_table,
                                                                                decision_rules.rule_pvalues],
                 "exploratory", empty="no neutral runs in no-signal or R2=1% worlds")
    yield _table(ctx, "Calibration (D.4)", "Calibration measures",
                 lambda: summaries.calibration_table(runs, seed=ctx.seed("Calibration (D.4)"), n_boot=ctx.n_boot),
                 [summaries.calibration_table], w.role("confirmatory; own-model label exploratory", runs))
    yield _table(ctx, "Table E.2", "Recalibration", lambda: summaries.recalibration_table(runs),
                 [summaries.recalibration_table], "exploratory", empty="needs at least five worlds per model and design")
    yield _table(ctx, "Appendix D.7", "H5 and H6 in detail", lambda: summaries.prior_and_complexity(runs),
                 [summaries.prior_and_complexity], "exploratory")
    yield _table(ctx, "Table E.1", "Models compared",
                 lambda: summaries.models_compared(runs, mc=ctx.mc, seed=ctx.seed("Table E.1"), n_boot=ctx.n_boot,
                                                   models=ctx.models),
                 [summaries.models_compared], "exploratory", "one model: a one-column summary (no comparison)" if single else "")
    if single:
        yield Entry("Model agreement (section 4.2)", "Cohen's kappa between models", skip="one model only: agreement "
                    "between models needs at least two models run on the same worlds")
    else:
        yield _table(ctx, "Model agreement (section 4.2)", "Agreement between models",
                     lambda: summaries.model_agreement_table(runs, models=ctx.models), [summaries.model_agreement_table],
                     "exploratory", empty="needs two models run on common worlds")
    if _has_replicates(runs):
        yield _table(ctx, "Replicates (F.1, F.2)", "Replicate agreement",
                     lambda: summaries.replicate_table(runs, rng=ctx.stream("Replicates (F.1, F.2)"), n_boot=ctx.n_boot),
                     [summaries.replicate_table], w.role("confirmatory; within-world share and P(disagree) exploratory", runs))
    else:
        yield Entry("Replicates (F.1, F.2)", "Run-to-run agreement", skip="no replicates: no world was run more than "
                    "once under neutral framing")
    yield _table(ctx, "Artifact: runs (5.1, E.1)", "Flagged runs", lambda: artifact.artifact_runs(runs),
                 [artifact.artifact_runs], "exploratory")
    audits = [Path(s.path) / "audit" / "audit.csv" for s in data.studies if (Path(s.path) / "audit" / "audit.csv").is_file()]
    if audits:
        yield _table(ctx, "World audit (7.1)", "Detectors in null worlds", lambda: paper_tables.audit_table(audits),
                     [paper_tables.audit_table], "exploratory")
    else:
        yield Entry("World audit (7.1)", "Detectors in null worlds", skip="no world audit in the study directories "
                    "(`planted prereg freeze` writes OUT/NAME/audit/; or `planted audit --study NAME --out OUT/NAME/audit`)")
    if data.worlds.empty:
        yield Entry("Artifact: worlds (5.1)", "Repeated-value shares", skip="no world files on disk")
    else:
        yield _table(ctx, "Artifact: worlds (5.1)", "Repeated-value shares",
                     lambda: artifact.artifact_worlds(data.worlds, runs), [artifact.artifact_worlds], "exploratory")


def _design_entries(ctx: _Context, design: str, n_designs: int) -> Iterator[Entry]:
    """The outputs drawn once per shock design (Tables D.1-D.5, framing, Figures 1-3 and D.1)."""
    w, data = ctx.w, ctx.data
    d = ctx.runs[ctx.runs["design"] == design]
    tag = "" if design == "bootstrap" else " (Gaussian)"
    baselines = data.baselines[data.baselines["design"] == design]

    def per_design(build: Callable[[], Table]) -> Callable[[], Table]:
        return lambda: _for_design(build(), design, n_designs)

    yield _table(ctx, f"Table D.1{tag}", "Claim rates by world type", per_design(lambda: tables.claim_rates_by_world(d)),
                 [tables.claim_rates_by_world], w.role("confirmatory", d))
    if (d["family"] == "linear").any():
        yield _table(ctx, f"Table D.3{tag}", "Claim rates by persistence",
                     per_design(lambda: tables.claim_rates_by_persistence(d)), [tables.claim_rates_by_persistence],
                     w.role("confirmatory", d))
    else:
        yield Entry(f"Table D.3{tag}", "Claim rates by persistence", skip="no linear worlds")
    yield _table(ctx, f"Table D.5{tag}", "Deployed test-window OOS R2",
                 per_design(lambda: tables.deployed_oos_r2(d, baselines)), [tables.deployed_oos_r2], w.role("confirmatory", d))
    if d["coded"].astype(bool).any() if "coded" in d.columns else False:
        yield _table(ctx, f"Table D.4{tag}", "Search behaviour", per_design(lambda: behaviour.search_behaviour(d)),
                     [behaviour.search_behaviour], "exploratory")
        yield Entry(f"Potency by R2{tag}", "Potency and gauge by R2", lambda: w.table(
            f"Potency by R2{tag} (D.5)", per_design(lambda: behaviour.potency_by_signal(d))(),
            [behaviour.potency_by_signal], "exploratory", empty="no correct claims in linear signal worlds"))
    else:
        yield Entry(f"Table D.4{tag}", "Search behaviour", skip="no transcripts on disk to code")
    if _has_framing(d):
        yield Entry(f"Framing{tag}", "Claim rates by framing", lambda: w.table(
            f"Framing rates{tag} (section 3.3, Figure 3B)", per_design(lambda: tables.framing_rates(d))(),
            [tables.framing_rates], w.role("confirmatory", d), empty="no world was run under all three framings"))
    else:
        yield Entry(f"Framing rates{tag}", "Claim rates by framing (section 3.3)",
                    skip="no framing worlds (every run is neutral)")
    yield Entry(f"Figure 2{tag}", "Calibration", lambda: report_figures.figure2(w, d, design), figure=True)
    yield Entry(f"Figure 3{tag}", "Models compared", lambda: report_figures.figure3(w, d, design, ctx.mc), figure=True)
    sim = matching.simulated_linear(ctx.mc, design)
    if sim.empty or not matching.has_null(sim):
        reason = (f"needs a Monte Carlo simulation of linear {design}-shock worlds with R2=0 (`--mc DIR`, "
                  f"`planted mc --family linear --shocks {design}`)")
        for paper in ("Table D.2", "Appendix D.3 anchors"):
            yield Entry(f"{paper}{tag}", paper, skip=reason)
        same = matching.same_world_decisions(d, baselines)
        if same.empty or not matching.has_null(same):
            for paper in ("Figure 1", "Figure D.1"):
                yield Entry(f"{paper}{tag}", paper, skip=reason + "; the agent's runs have no linear R2=0 worlds either")
            return
        yield Entry(f"Figure 1{tag}", "Power curves (same-world baselines)",
                    lambda: report_figures.figure1(w, d, design, same, same_world=True), figure=True)
        yield Entry(f"Figure D.1{tag}", "Frontiers (same-world baselines)",
                    lambda: report_figures.figure_d1(w, d, design, same, same_world=True), figure=True)
        return
    problems = [f"{model}: {problem}" for model in tables.models_of(d)
                if (problem := matching.anchor_problem(*matching.agent_null_rate(d[d["model"] == model])))]
    anchor_note = (f"{matching.UNRELIABLE}: " + "; ".join(problems)) if problems else ""
    yield _table(ctx, f"Table D.2{tag}", "Matched power", per_design(lambda: matching.matched_power(
        d, sim, rng=ctx.stream("Table D.2", design), n_boot=ctx.n_boot)), [matching.matched_power, matched_difference],
        "exploratory", anchor_note)
    yield _table(ctx, f"Appendix D.3 anchors{tag}", "Matched level anchors", per_design(lambda: matching.matched_anchors(
        d, sim, baselines, rng=ctx.stream("Appendix D.3 anchors", design), n_boot=ctx.n_boot)), [matching.matched_anchors],
        "exploratory", empty="needs agent runs in linear worlds with R2=0 and 1%")
    yield Entry(f"Figure 1{tag}", "Power curves", lambda: report_figures.figure1(w, d, design, sim), figure=True)
    yield Entry(f"Figure D.1{tag}", "Frontiers", lambda: report_figures.figure_d1(w, d, design, sim), figure=True)



def write_report(
    runs_dirs: str | Path | Sequence[str | Path],
    out_dir: str | Path,
    mc_dirs: Sequence[str | Path] = (),
    *,
    models: Sequence[str] | None = None,
    local_models: Sequence[str] | None = None,
    seed: int = 0,
    n_boot: int = 2000,
    exploratory: bool = False,
    strict: bool = False,
    figures: bool = True,
    exclude: Sequence[str] = (),
    html: bool = True,
    episodes: bool = True,
    probe_dirs: Sequence[str | Path] = (),
) -> list[Output]:
    """Write every table and figure the logs support, plus ``index.md``; return the outputs.

    Parameters
    ----------
    runs_dirs : path or sequence of paths
        Study directories written by ``planted run`` (or directories of them); several are
        combined (one model per study directory, several models for the cross-model tables).
    out_dir : path
        Created if needed; files are overwritten.
    mc_dirs : sequence of paths
        Directories written by ``planted mc --out`` (``mc.parquet``): the simulated power curves,
        size matching and frontiers need linear worlds with the shocks of the runs' design.
    models : sequence of str, optional
        Models to include, in order; the first is the reference model of C1-C2 (default: order of
        appearance in ``runs_dirs``).
    local_models : sequence of str, optional
        Models tested as the local open-weight arm (paper 5.4: G1 and G3, their own Holm family);
        default: models served by the ``openai_compat`` backend.
    seed : int
        Seed of every bootstrap interval (each output draws from the stream named by the output and
        its design below it, :func:`planted.seeding.named_generator`).
    n_boot : int
        Bootstrap draws per interval.
    exploratory : bool
        Label every output exploratory whatever the run table says.
    strict : bool
        Raise the first error instead of recording the output as failed.
    figures : bool
        Draw the figures (False: tables only, each figure listed as skipped).
    exclude : sequence of str
        Outputs (by their ``paper`` name, e.g. ``"Table D.2"``) to leave out; no other output
        changes by a byte (each draws from its own named random stream).
    html : bool
        Also write ``index.html`` (:mod:`planted.analysis.report_html`): every output embedded in
        the paper's order with its caption, maker and label.
    episodes : bool
        With ``html``, write a page per episode on disk (``episodes/``) and link each output to
        the episodes of the runs it is built from.
    probe_dirs : sequence of paths
        Directories written by ``planted probe memorization`` (Table 5 panel A).

    Returns
    -------
    list of Output
        Written, skipped and failed outputs, in the order of ``index.md``.
    """
    out = Path(out_dir)
    paper_tables.memorization_table(probe_dirs)  # a directory that is not a probe fails now, before any work
    out.mkdir(parents=True, exist_ok=True)
    data = load_study_data(runs_dirs if not isinstance(runs_dirs, (str, Path)) else [runs_dirs], models=models)
    mc = load_mc(list(mc_dirs))
    runs = data.runs
    model_order = list(models) if models is not None else list(data.models)
    if local_models is None:
        backends = runs.drop_duplicates("model").set_index("model")["backend"] if "backend" in runs else pd.Series(dtype=str)
        local_models = [m for m in model_order if backends.get(m) == "openai_compat"]
    root = as_seed_sequence(seed)
    w = ReportWriter(out, forced_exploratory=exploratory, strict=strict, figures=figures)
    context = _Context(w=w, data=data, mc=mc, runs=runs, models=model_order, local_models=list(local_models),
                       root=root, n_boot=n_boot, probe_dirs=tuple(Path(p) for p in probe_dirs))
    for entry in registry(context):
        if entry.paper in exclude:
            continue
        sample = runs if entry.runs is None else entry.runs
        w.current_runs = tuple(zip(sample["study_dir"].astype(str), sample["run_id"].astype(str)))
        if entry.skip is not None or entry.make is None:
            w.skip(entry.paper, entry.description, entry.skip or "nothing to build")
        elif entry.figure:
            w.draw(entry.paper, entry.description, entry.make)
        else:
            w.attempt(entry.paper, entry.description, entry.make)

    (out / "report.md").write_text("# planted report: all tables and figures\n\nSee [index.md](index.md) for what made "
                                   "each output.\n\n" + "\n".join(w.sections), encoding="utf-8")
    _index(out, data, mc, w.outputs, seed=seed, n_boot=n_boot, models=model_order, local_models=list(local_models),
           forced=exploratory)
    (out / "outputs.json").write_text(json.dumps([o.__dict__ for o in w.outputs], indent=1) + "\n", encoding="utf-8")
    if html:
        write_html_index(out, data, w.shown, w.outputs, episodes=episodes)
    return w.outputs


__all__ = ["Entry", "Output", "registry", "write_report"]
