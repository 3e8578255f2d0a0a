"""The ``planted`` command line.

Subcommands are thin: they parse arguments, call one library function and print. Known user
errors (bad specs, missing data files, broken world directories) print one line naming the
problem and the fix and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from planted import __version__
from planted.cli_args import (OneLineParser, floats, n_jobs, names, non_negative, output_dir, positive, procedure_names,
                              warn_large_r2)

Handler = Callable[[argparse.Namespace], int]


def _user_errors() -> tuple[type[BaseException], ...]:
    from planted.agents.backend import FatalBackendError
    from planted.analysis.loading import StudyDataError
    from planted.analysis.paper_tables import ProbeDataError
    from planted.baselines.audit import AuditError
    from planted.baselines.engine import SimulationConfigError
    from planted.agents.grid import StudyConfigMismatch
    from planted.agents.sandbox import SandboxUnavailableError
    from planted.agents.secret import StudySecretError
    from planted.agents.status import StudyStatusError
    from planted.analysis.episode_view import EpisodeViewError
    from planted.config import ConfigError
    from planted.prereg import PreregistrationError
    from planted.run_record import RunRecordError, SchemaVersionError
    from planted.worlds import FactorDataError, WorldFileError, WorldSpecError

    return (WorldSpecError, FactorDataError, WorldFileError, StudyConfigMismatch, SandboxUnavailableError,
            FatalBackendError, ConfigError, PreregistrationError, StudyDataError, StudySecretError,
            SchemaVersionError, RunRecordError, SimulationConfigError, StudyStatusError, ProbeDataError, EpisodeViewError, AuditError)


def _add_world_spec_arguments(parser: argparse.ArgumentParser, *, family_required: bool = True) -> None:
    parser.add_argument("--family", required=family_required, help="world family (see `planted world list`)")
    parser.add_argument("--r2", type=float, help="population R2 of the planted predictor (0.01 = 1%%)")
    parser.add_argument("--phi", type=float, help="persistence of the planted predictor (linear)")
    parser.add_argument("--rho", type=float, help="corr(return shock, predictor innovation) (linear)")
    parser.add_argument("--shocks", choices=("bootstrap", "gaussian"), help="return shocks (default bootstrap)")
    parser.add_argument("--factor", choices=("HML", "RMW"), help="real factor of an injected world")
    parser.add_argument("--path", type=Path, help="Fama-French 5-factor CSV (needed for RMW; see `planted data fetch`)")
    _add_pool_arguments(parser)


def _add_project_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", type=Path, help="the project directory with conf/ and prereg/ (default: "
                        "$PLANTED_PROJECT, else the current directory; without one, only the shipped templates)")


def _add_pool_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pool", choices=("embedded", "ff5"), default="embedded",
        help="shock pool of bootstrap worlds: embedded linearmodels HML 1963-07..2017-03 (default) or HML of the "
             "5-factor file given by --path (the paper's)",
    )
    parser.add_argument("--pool-end", help="last month of the pool, YYYY-MM (2026-08: the paper's vintage)")


def _spec_from_args(args: argparse.Namespace):
    from planted.worlds import WorldSpec

    fields = {k: getattr(args, k) for k in ("r2", "phi", "rho", "factor") if getattr(args, k) is not None}
    if args.shocks is not None:
        fields["shocks"] = args.shocks
    elif args.family == "injected":
        fields["shocks"] = None
    return WorldSpec(family=args.family, **fields)


def _pool_choice(args: argparse.Namespace):
    from planted.worlds import PoolChoice, WorldSpecError

    try:
        return PoolChoice(args.pool, args.pool_end)
    except ValueError as exc:
        raise WorldSpecError(f"{exc}; pass --pool-end as YYYY-MM") from None


def _pool_from_args(args: argparse.Namespace):
    return _pool_choice(args).load(args.path)


def cmd_world_build(args: argparse.Namespace) -> int:
    from planted.worlds import build, write_world

    spec = _spec_from_args(args)
    warn_large_r2(spec.family, [spec.r2])
    world = build(spec, seed=args.seed, pool=_pool_from_args(args), factor_file=args.path)
    out = write_world(world, args.out, replace=args.force)
    print(world.summary())
    print(f"  agent file: {out / 'visible' / 'data.csv'}\n  sealed:     {out / 'sealed'}")
    return 0


def cmd_world_show(args: argparse.Namespace) -> int:
    from planted.worlds import read_meta

    meta = read_meta(args.dir)
    if args.json:
        print(json.dumps(meta, sort_keys=True, indent=2))
        return 0
    from planted.worlds.describe import describe_meta

    print(describe_meta(meta))
    return 0


def cmd_world_list(args: argparse.Namespace) -> int:
    from planted.worlds.describe import family_table

    print(family_table())
    return 0


def cmd_world_tour(args: argparse.Namespace) -> int:
    from planted.worlds.describe import tour

    print(tour(Path(args.out), seed=args.seed, factor_file=args.path))
    return 0


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from planted.worlds.data import FF5_URL, fetch_ff5

    path, digest = fetch_ff5(args.dest, url=args.url or FF5_URL)
    print(f"stored {path}\nsha256 {digest}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from planted.agents.study import study_grid
    from planted.baselines.audit import AuditConfig, family_specs, run_audit, write_audit
    from planted.config import ConfigError, study_section
    from planted.study_config import StudyConfig

    if (args.study is None) == (args.family is None):
        raise ConfigError("pass either --study NAME (every family of a study) or --family (one world family)")
    if args.study is not None:
        config = StudyConfig.from_dict(study_section(args.study, project=_project(args)), args.study)
        specs = [unit.spec for unit in study_grid(config, 0).worlds.values()]  # the cells; seeds are not used
        pool = config.pool_choice
    else:
        specs, pool = [_spec_from_args(args)], _pool_choice(args)
    audit = AuditConfig(specs=family_specs(specs), worlds=args.worlds, seed=args.seed, level=args.level,
                        n_jobs=args.n_jobs, pool=pool, factor_file=str(args.path) if args.path else None)
    result = run_audit(audit, progress=not args.quiet)
    write_audit(result, args.out)
    print(result.summary())
    print(f"  table: {args.out / 'audit.md'}; verdict: {args.out / 'audit.json'}")
    return 1 if result.flagged else 0


def cmd_mc(args: argparse.Namespace) -> int:
    from planted.baselines.engine import SimulationConfig, cells_for, connect_cluster, simulate
    from planted.baselines.summary import rate_table, summarise
    from planted.worlds import repeated_value_share

    shocks = None if args.family == "injected" else args.shocks
    warn_large_r2(args.family, args.r2)
    cells = cells_for(args.family, shocks=shocks, r2=args.r2, phi=args.phi, rho=args.rho, factor=args.factor)
    config = SimulationConfig(
        cells=cells, worlds_per_cell=args.worlds_per_cell, procedures=args.procedures,
        seed=args.seed, chunk_size=args.chunk_size, n_jobs=args.n_jobs, backend=args.backend,
        factor_file=str(args.path) if args.path else None, pool=_pool_choice(args),
    )
    pool = config.pool.load(config.factor_file)
    repeated = repeated_value_share(pool)
    pool_facts = {"source": pool.source, "residuals": pool.size, "sha256": pool.sha256, "repeated_value_share": repeated}
    cluster, address = connect_cluster(args.backend, args.scheduler)  # kept alive until the simulation is done
    if address:
        print(f"{args.backend} scheduler: {address}", file=sys.stderr)
    table = simulate(config, args.out, progress=not args.json)
    del cluster
    summary = summarise(table, args.alpha, args.match_null_rate)
    if args.json:
        print(json.dumps({k: summary[k] for k in summary if k != "intervals"} | {"intervals": summary["intervals"],
                                                                                  "pool": pool_facts}))
    else:
        print(f"shock pool: {pool.source}, {pool.size} residuals (sha256 {pool.sha256[:12]}); median share of a null "
              f"world's returns repeating an earlier one: {repeated:.1%}")
        print(f"claim rates at alpha = {args.alpha:g} (Wilson 95% intervals), worlds per level: {summary['n_worlds']}")
        print(rate_table(table, args.alpha).to_string())
        if args.out:
            print(f"table: {Path(args.out) / 'mc.parquet'}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from planted.agents.runner import prepare_run
    from planted.agents.vllm_server import planned_url, serving
    from planted.config import compose_model

    project = _project(args)
    model = compose_model(args.model, project=project)

    def prepare(base_url: str | None):
        return prepare_run(
            study=args.study, model=args.model, out=args.out, concurrency=args.concurrency,
            unsafe_no_sandbox=args.unsafe_no_sandbox, new_dir=args.new_dir, factor_file=args.path,
            base_url=base_url, overrides=args.override or [], progress=not args.quiet,
            exploratory=args.exploratory, dry_run=args.dry_run, max_infra_retries=args.max_infra_retries,
            project=project, base_url_is_override=args.base_url is not None,
        )

    if args.dry_run:  # no server launch just to print a plan
        print(prepare(args.base_url or planned_url(model)).plan())
        return 0
    if model.get("vllm") and not args.base_url:
        args.out.mkdir(parents=True, exist_ok=True)  # for the server log
    with serving(model, base_url=args.base_url, log=args.out / f"vllm-{args.model}.log") as url:
        print(prepare(url).execute(limit=args.limit, redo_infra_errors=args.redo_infra_errors))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from planted.agents.vllm_server import serve_forever
    from planted.config import ConfigError, compose_model

    model = compose_model(args.model, args.override or [])
    if not model.get("vllm"):
        raise ConfigError(f"model {args.model!r} has no vllm section: nothing to serve locally (try --model qwen)")
    return serve_forever(model["vllm"], log=args.log)


def cmd_probe_memorization(args: argparse.Namespace) -> int:
    from planted.agents.memorization import knowledge_cutoff, probe_series, run_probe, save_probe
    from planted.agents.registry import make_backend
    from planted.agents.transcript import EventLog
    from planted.agents.vllm_server import serving
    from planted.config import ConfigError, compose_model

    model = compose_model(args.model, args.override or [])
    cutoff = knowledge_cutoff(model, args.cutoff)
    series, dataset = probe_series(args.factor, args.data)
    out = args.out / f"{args.model}-{args.factor}-seed{args.seed}"
    if out.exists():
        raise ConfigError(f"{out} already exists; remove it or choose another --out or --seed")
    out.mkdir(parents=True)
    with serving(model, base_url=args.base_url, log=out / "vllm.log") as url, EventLog(out / "transcript.jsonl") as log:
        backend = make_backend(model, base_url=url)
        result = run_probe(backend, series, cutoff=cutoff, seed=args.seed, log=log, n_before=args.months,
                           n_after=args.months_after, dataset=dataset,
                           concurrency=args.concurrency or int(model.get("concurrency", 1)))
    save_probe(result, out, model_config=model)
    print(result.summary())
    print(f"  answers: {out / 'answers.csv'}\n  transcript: {out / 'transcript.jsonl'}")
    return 0


def _project(args: argparse.Namespace):
    from planted.project import Project

    return Project.find(args.project)


def cmd_prereg(args: argparse.Namespace) -> int:
    from planted.prereg import freeze, reveal, verify

    project = _project(args)
    if args.prereg_command == "freeze":
        target = freeze(args.name, project=project, out=args.out, tag=not args.no_tag, factor_file=args.path,
                        audit_dir=args.audit, audit_worlds=args.audit_worlds, audit_jobs=args.n_jobs,
                        accept_audit_flags=args.accept_audit_flags)
        print(f"froze {args.name}: {target}" + ("" if args.no_tag else f" (committed and tagged {args.name!r})"))
        print(f"  its secret (world seeds; keep it out of the repository until `planted prereg reveal`): "
              f"{args.out / args.name / 'sealed' / 'study_secret.json'}")
        return 0
    if args.prereg_command == "reveal":
        target = reveal(args.name, project=project, out=args.out, commit=not args.no_commit, force=args.force)
        print(f"revealed the secret of {args.name}: {target}" + ("" if args.no_commit else " (committed)"))
        return 0
    drift = verify(args.name, project=project)
    print(drift.summary())
    return 0 if drift.confirmatory else 1


def cmd_view(args: argparse.Namespace) -> int:
    from rich.console import Console

    from planted.analysis.episode_view import load_episode, render_terminal, write_episode_page

    if args.html is not None:
        print(f"episode page: {write_episode_page(args.run_dir, args.html)}")
        return 0
    render_terminal(load_episode(args.run_dir), Console())
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from planted.agents.status import study_status

    print(study_status(args.directory).summary())
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from planted.project import init_project

    written = init_project(args.directory)
    print(f"created a planted project in {args.directory} ({len(written)} files): conf/ (studies, models, prompts: "
          "yours to edit), prereg/, README.md, .gitignore")
    print(f"next: cd {args.directory} && git init && git add -A && git commit -m 'planted project'")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from planted.analysis.report import write_report

    models = [m for item in args.models for m in names(item)] if args.models else None
    local = [m for item in args.local_models for m in names(item)] if args.local_models is not None else None
    outputs = write_report(
        args.runs, args.out, args.mc, models=models, local_models=local, seed=args.seed, n_boot=args.n_boot,
        exploratory=args.exploratory, figures=not args.no_figures, episodes=not args.no_episodes,
        probe_dirs=args.probe,
    )
    count = {status: sum(o.status == status for o in outputs) for status in ("written", "skipped", "failed")}
    print(f"{count['written']} outputs written, {count['skipped']} skipped, {count['failed']} failed")
    for o in outputs:
        if o.status == "failed":
            print(f"  failed: {o.paper}: {o.note}", file=sys.stderr)
    print(f"index: {Path(args.out) / 'index.md'}")
    print(f"open in a browser: {(Path(args.out) / 'index.html').resolve()}")
    return 1 if count["failed"] else 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``planted`` command."""
    parser = OneLineParser(
        prog="planted", description="Score LLM research agents as statistical tests on worlds with a planted truth."
    )
    parser.add_argument("--version", action="version", version=f"planted {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    world = commands.add_parser("world", help="build, inspect and list worlds").add_subparsers(
        dest="world_command", required=True
    )
    build = world.add_parser("build", help="build one world and write its files")
    _add_world_spec_arguments(build)
    build.add_argument("--seed", type=non_negative, required=True, help="non-negative integer seed")
    build.add_argument("--out", type=output_dir, required=True, help="output directory")
    build.add_argument("--force", action="store_true", help="replace a different world already in --out")
    build.set_defaults(handler=cmd_world_build)
    show = world.add_parser("show", help="summarise a world directory")
    show.add_argument("dir", type=Path)
    show.add_argument("--json", action="store_true", help="print meta.json")
    show.set_defaults(handler=cmd_world_show)
    world.add_parser("list", help="list the families and their parameters").set_defaults(handler=cmd_world_list)
    tour = world.add_parser("tour", help="build one world of every family and summarise them")
    tour.add_argument("--out", type=output_dir, required=True, help="output directory (one subdirectory per family)")
    tour.add_argument("--seed", type=non_negative, default=2026, help="seed of every world (default 2026)")
    tour.add_argument("--path", type=Path, help="5-factor CSV; adds the injected RMW world")
    tour.set_defaults(handler=cmd_world_tour)

    mc = commands.add_parser("mc", help="Monte Carlo: claim rates of the baseline procedures on simulated worlds")
    mc.add_argument("--family", default="linear", choices=("linear", "persistent_null", "momentum_null", "reversal", "regime", "injected"),
                    help="world family (default linear)")
    mc.add_argument("--shocks", default="bootstrap", choices=("bootstrap", "gaussian"), help="return shocks (default bootstrap)")
    mc.add_argument("--r2", type=floats, default=[0.0, 0.0025, 0.005, 0.01, 0.02, 0.04],
                    help="comma-separated population R2 levels, as shares: 0.01 = 1%% (default 0,0.0025,0.005,0.01,0.02,0.04)")
    mc.add_argument("--phi", type=floats, default=[0.5, 0.95], help="comma-separated persistences, linear (default 0.5,0.95)")
    mc.add_argument("--rho", type=floats, default=[0.0, -0.8],
                    help="comma-separated corr(return shock, predictor innovation), linear (default 0,-0.8)")
    mc.add_argument("--factor", default="HML", choices=("HML", "RMW"), help="real factor of injected worlds (default HML)")
    mc.add_argument("--path", type=Path, help="5-factor CSV (injected RMW worlds, and the ff5 shock pool)")
    _add_pool_arguments(mc)
    mc.add_argument("--worlds-per-cell", type=positive, default=1000,
                    help="simulated worlds per cell (default 1000); a larger number extends an --out directory")
    mc.add_argument("--procedures", type=procedure_names,
                    default=["oracle", "combination", "combination_ct", "holm_best", "best9", "hac_holm", "ivx_holm"],
                    help="comma-separated baseline procedures (default: all but rf_ridge and lasso)")
    mc.add_argument("--seed", type=non_negative, default=1, help="seed of the simulation domain (default 1)")
    mc.add_argument("--alpha", type=float, default=0.05, help="test level of the printed claim rates (default 0.05)")
    mc.add_argument("--match-null-rate", type=float, help="add size-matched claim rates at this null claim rate")
    mc.add_argument("--chunk-size", type=positive, default=250, help="worlds per vectorised batch and file (default 250)")
    mc.add_argument("--n-jobs", type=n_jobs, default=1, help="parallel workers, -1 for every core (default 1)")
    mc.add_argument("--backend", default="loky", choices=("loky", "threading", "dask", "ray"),
                    help="joblib backend (default loky: local processes)")
    mc.add_argument("--scheduler", help="dask scheduler or ray cluster address (default: a local one)")
    mc.add_argument("--out", type=output_dir, help="output directory (resumable, extensible); omit to keep results in memory")
    mc.add_argument("--json", action="store_true", help="print the summary as JSON")
    mc.set_defaults(handler=cmd_mc)

    audit = commands.add_parser("audit", help="before any agent run: can a lookup, kNN or tree forecaster beat the "
                                "benchmark in null worlds of a family?")
    audit.add_argument("--study", help="audit every family and shock type of this study")
    _add_world_spec_arguments(audit, family_required=False)  # one family (its R2 is set to 0), or --study
    audit.add_argument("--worlds", type=positive, default=200, help="null worlds per family (default 200)")
    audit.add_argument("--seed", type=non_negative, default=1, help="seed of the audit domain (default 1)")
    audit.add_argument("--level", type=float, default=0.05, help="Holm-adjusted level of a flag (default 0.05)")
    audit.add_argument("--n-jobs", type=n_jobs, default=1, help="parallel workers, -1 for every core (default 1)")
    audit.add_argument("--out", type=output_dir, default=Path("audit"), help="output directory (default audit)")
    audit.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_project_argument(audit)
    audit.set_defaults(handler=cmd_audit)

    run = commands.add_parser("run", help="run a study grid of agent episodes (resumable)")
    run.add_argument("--study", default="smoke", help="study: conf/study/NAME.yaml of the project, else a shipped template, or a YAML path (default: smoke)")
    run.add_argument("--model", default="scripted", help="model config: conf/model/NAME.yaml of the project, else shipped (default: scripted)")
    run.add_argument("--out", type=output_dir, default=Path("runs"), help="output root; the study writes OUT/<study>/")
    run.add_argument("--concurrency", type=positive, help="episodes at once (default: the model config's)")
    run.add_argument("--base-url", help="point the backend at an already running server")
    run.add_argument("--path", type=Path, help="Fama-French 5-factor CSV (needed for injected RMW worlds)")
    run.add_argument("--override", action="append", help="hydra override, e.g. study.budget=20 (repeatable)")
    run.add_argument("--new-dir", action="store_true", help="if OUT/<study> holds another configuration, use a fresh numbered directory")
    run.add_argument("--limit", type=non_negative, help="run at most this many pending episodes")
    run.add_argument("--dry-run", action="store_true", help="print the plan (runs, cost estimate) and exit")
    run.add_argument("--max-infra-retries", type=non_negative, default=2,
                     help="attempts after the first when the host fails a run, before it is recorded as infra_error (default 2)")
    run.add_argument("--redo-infra-errors", action="store_true",
                     help="also redo runs recorded as infra_error (after fixing the cause)")
    run.add_argument("--unsafe-no-sandbox", action="store_true",
                     help="development only: run agent code without bubblewrap (stamped into every record)")
    run.add_argument("--exploratory", action="store_true",
                     help="run a frozen study even if its manifest does not verify; every output is labelled exploratory")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_project_argument(run)
    run.set_defaults(handler=cmd_run)

    serve = commands.add_parser("serve", help="start the local vLLM server of a model config and wait for Ctrl-C")
    serve.add_argument("--model", default="qwen", help="model config with a vllm section (default: qwen)")
    serve.add_argument("--log", type=Path, help="server log file (default: a new vllm-*.log in the temp directory)")
    serve.add_argument("--override", action="append", help="hydra override, e.g. model.vllm.port=8001 (repeatable)")
    serve.set_defaults(handler=cmd_serve)

    probe = commands.add_parser("probe", help="probes of what a model knows").add_subparsers(
        dest="probe_command", required=True)
    memo = probe.add_parser("memorization", help="ask the model, without tools or data, for published factor returns")
    memo.add_argument("--model", required=True, help="model config under conf/model (not scripted)")
    memo.add_argument("--factor", choices=("HML", "RMW"), default="HML")
    memo.add_argument("--months", type=int, default=120, help="months drawn before the knowledge cutoff (default 120)")
    memo.add_argument("--months-after", type=int, help="months drawn after the cutoff (default: all in the data)")
    memo.add_argument("--cutoff", help="knowledge cutoff YYYY-MM (default: the model config's knowledge_cutoff)")
    memo.add_argument("--data", type=Path,
                      help="Fama-French 5-factor CSV (default: embedded 3-factor HML; RMW uses `planted data fetch`'s copy)")
    memo.add_argument("--seed", type=int, default=1, help="seed of the month draw")
    memo.add_argument("--out", type=Path, default=Path("runs") / "memorization",
                      help="output root; the probe writes OUT/<model>-<factor>-seed<seed>/")
    memo.add_argument("--base-url", help="use an already running server (no vLLM launch)")
    memo.add_argument("--concurrency", type=int, help="questions in flight (default: the model config's)")
    memo.add_argument("--override", action="append", help="hydra override, e.g. model.max_tokens=4000 (repeatable)")
    memo.set_defaults(handler=cmd_probe_memorization)

    prereg = commands.add_parser("prereg", help="freeze and verify preregistered studies").add_subparsers(
        dest="prereg_command", required=True
    )
    for name, text in (("freeze", "freeze a study: manifest of hashes, run order, secret's hash, git commit and tag"),
                       ("verify", "list every hash-controlled file that drifted from the frozen manifest"),
                       ("reveal", "after the runs: publish the study secret (checked against the manifest) and commit it")):
        sub = prereg.add_parser(name, help=text)
        sub.add_argument("name", help="study name (conf/study/NAME.yaml of the project)")
        _add_project_argument(sub)
        if name in ("freeze", "reveal"):
            sub.add_argument("--out", type=output_dir, default=Path("runs"),
                             help="the --out directory of the study's runs, where its secret lives (default: runs)")
        if name == "freeze":
            sub.add_argument("--no-tag", action="store_true", help="write the files only (no commit, no tag)")
            sub.add_argument("--path", type=Path, help="the 5-factor CSV of a study whose shock pool is ff5")
            sub.add_argument("--audit", type=Path, help="an existing `planted audit --study NAME --out DIR` directory "
                             "(default: run the world audit into OUT/NAME/audit/)")
            sub.add_argument("--audit-worlds", type=positive, default=200, help="null worlds per family of the audit "
                             "(default 200)")
            sub.add_argument("--n-jobs", type=n_jobs, default=1, help="workers of the audit, -1 for every core (default 1)")
            sub.add_argument("--accept-audit-flags", action="store_true",
                             help="freeze although the audit flags a family (recorded in the manifest)")
        if name == "reveal":
            sub.add_argument("--no-commit", action="store_true", help="write prereg/NAME/secret.json only")
            sub.add_argument("--force", action="store_true", help="reveal although runs are pending")
        sub.set_defaults(handler=cmd_prereg)

    view = commands.add_parser("view", help="one episode, readably: prior, tool calls with code, record_spec entries, "
                               "final model, verdict, evaluation")
    view.add_argument("run_dir", type=Path, help="a run directory, OUT/<study>/runs/<run_id>")
    view.add_argument("--html", type=Path, help="write the same as an HTML page to this file instead")
    view.set_defaults(handler=cmd_view)

    status = commands.add_parser("status", help="what a study directory holds: done, errored, unfinished, pending, spent")
    status.add_argument("directory", type=Path, help="a study directory written by `planted run` (OUT/<study>)")
    status.set_defaults(handler=cmd_status)

    init = commands.add_parser("init", help="create a project: editable studies, models and prompts, prereg/, README")
    init.add_argument("directory", type=Path, help="the project directory (created; an existing conf/ is never overwritten)")
    init.set_defaults(handler=cmd_init)

    report = commands.add_parser("report", help="every table and figure the logged runs support (no model calls)")
    report.add_argument("--runs", type=Path, nargs="+", required=True,
                        help="study directories written by `planted run` (runs/<study>), or directories of them")
    report.add_argument("--out", type=output_dir, required=True, help="output directory (index.md, CSV, Markdown, PNG, PDF)")
    report.add_argument("--mc", type=Path, nargs="*", default=[],
                        help="directories written by `planted mc --out` (power curves, size matching, frontiers)")
    report.add_argument("--models", nargs="+", help="models to include, in order (space- or comma-separated); "
                        "the first is the reference model of C1 and C2 (default: order of the --runs directories)")
    report.add_argument("--local-models", nargs="*", help="models tested as the local arm: G1 and G3 in their own "
                        "Holm family (default: models served by the openai_compat backend)")
    report.add_argument("--seed", type=int, default=0, help="seed of every bootstrap interval")
    report.add_argument("--n-boot", type=positive, default=2000, help="bootstrap draws per interval")
    report.add_argument("--exploratory", action="store_true", help="label every output exploratory")
    report.add_argument("--no-figures", action="store_true", help="tables only")
    report.add_argument("--probe", type=Path, nargs="*", default=[],
                        help="directories written by `planted probe memorization` (Table 5 panel A)")
    report.add_argument("--no-episodes", action="store_true", help="no episode pages (index.html links none)")
    report.set_defaults(handler=cmd_report)

    data = commands.add_parser("data", help="factor data").add_subparsers(dest="data_command", required=True)
    fetch = data.add_parser("fetch", help="download the Fama-French 5-factor file and print its SHA-256")
    fetch.add_argument("--dest", type=Path, help="target directory (default: the user data directory)")
    fetch.add_argument("--url", help="source URL of the zip (default: the Kenneth French library)")
    fetch.set_defaults(handler=cmd_data_fetch)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``planted`` console script."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a one-line usage error (already printed)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    handler: Handler = args.handler
    try:
        return handler(args)
    except _user_errors() as exc:
        print(f"planted: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
