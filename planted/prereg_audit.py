"""The world audit a freeze requires: every family of the study audited, flags refused unless accepted.

:func:`study_audit` finds or runs the audit (:mod:`planted.baselines.audit`) of every family and
shock type of a study; :func:`planted.prereg.freeze` refuses a study whose audit flags a family
unless the researcher accepts the flags, and records the verdict's hash, the flags and the
acceptance in the manifest (the verdict and table are committed beside it, :data:`AUDIT_FILES`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planted.prereg_git import PreregistrationError

AUDIT_FILES = ("audit.json", "audit.md")
"""The world audit's verdict and table, committed beside the manifest."""


def study_audit(study: str, config: dict[str, Any], *, out: Path, factor_file: Path | None, audit_dir: Path | None,
                worlds: int, n_jobs: int) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The world audit of every family of a study (:mod:`planted.baselines.audit`): an existing one in
    ``audit_dir`` that covers the study's families with its shock pool, or a new one written to
    ``OUT/NAME/audit/``; returns its directory, its verdict and the flags of the study's families."""
    from planted.agents.study import study_grid
    from planted.baselines.audit import AuditConfig, audit_code_sha256, family_specs, run_audit, write_audit
    from planted.study_config import StudyConfig

    settings = StudyConfig.from_dict(config, study)
    specs = family_specs([unit.spec for unit in study_grid(config, 0).worlds.values()])
    pool = settings.pool_choice.load(factor_file)
    if audit_dir is None:
        audit_dir = Path(out) / str(config["name"]) / "audit"
        result = run_audit(AuditConfig(specs=specs, worlds=worlds, n_jobs=n_jobs, pool=settings.pool_choice,
                                       factor_file=None if factor_file is None else str(factor_file)))
        write_audit(result, audit_dir)
    try:
        verdict = json.loads((audit_dir / "audit.json").read_text(encoding="utf-8"))
        families, audited_pool = set(verdict["families"]), verdict["pool"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PreregistrationError(f"{audit_dir} holds no readable audit.json ({type(exc).__name__}); run "
                                   f"`planted audit --study {study} --out {audit_dir}`") from None
    if verdict.get("code_sha256") != audit_code_sha256():
        raise PreregistrationError(f"the audit in {audit_dir} was made by other audit code; rerun "
                                   f"`planted audit --study {study} --out {audit_dir}` (or freeze without --audit)")
    missing = [s.label() for s in specs if s.label() not in families]
    if missing or audited_pool != pool.sha256:
        what = f"families {', '.join(missing)}" if missing else f"the study's shock pool ({pool.sha256[:12]})"
        raise PreregistrationError(f"the audit in {audit_dir} does not cover {what}; run "
                                   f"`planted audit --study {study} --out {audit_dir}` (or freeze without --audit)")
    flagged = {f: v for f, v in verdict.get("flagged", {}).items() if f in {s.label() for s in specs}}
    return audit_dir, verdict, flagged


__all__ = ["AUDIT_FILES", "study_audit"]
