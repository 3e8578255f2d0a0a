"""Transcripts are append-only and damage is detected; study grids expand to the paper's counts."""

import numpy as np
import pytest

from planted.agents.prompts import load_prompts
from planted.agents.study import study_grid
from planted.agents.transcript import EventLog, TranscriptError, read_events
from planted.config import ConfigError, compose_study
from planted.seeding import substream


def test_events_round_trip_and_truncation_is_detected(tmp_path):
    path = tmp_path / "t.jsonl"
    with EventLog(path) as log:
        log.write("a", x=1)
        log.write("b", text="é\nline")
    events = read_events(path)
    assert [e["event"] for e in events] == ["a", "b"] and events[1]["text"] == "é\nline"
    assert [e["seq"] for e in events] == [0, 1]
    with open(path, "ab") as handle:
        handle.write(b'{"seq": 2, "event": "c", "te')
    with pytest.raises(TranscriptError, match="incomplete"):
        read_events(path)


@pytest.mark.parametrize(("study", "runs", "worlds"), [("prereg-v1", 900, 580), ("prereg-v3", 430, 350), ("smoke", 11, 9)])
def test_study_grids_have_the_specified_size(study, runs, worlds):
    grid = study_grid(compose_study(study, "scripted")["study"], secret=1)
    assert len(grid.runs) == runs and len(grid.worlds) == worlds
    assert len({r.run_id for r in grid.runs}) == runs


def test_prereg_v1_framing_worlds_are_neutral_worlds_rerun():
    grid = study_grid(compose_study("prereg-v1", "scripted")["study"], secret=1)
    by_world = {}
    for run in grid.runs:
        by_world.setdefault(run.world_id, set()).add(run.framing)
    framed = [w for w, f in by_world.items() if f == {"neutral", "optimistic", "skeptical"}]
    assert len(framed) == 160
    assert sum(1 for r in grid.runs if r.framing == "neutral") == 580


def test_run_order_is_fixed_by_the_public_seed_and_mixes_groups():
    config = compose_study("prereg-v1", "scripted")["study"]
    first, second = study_grid(config, secret=1), study_grid(config, secret=2**127 + 5)
    assert [r.run_id for r in first.runs] == [r.run_id for r in second.runs]  # committed before the runs
    assert len({r.group for r in first.runs[:50]}) > 2


def test_world_seeds_need_the_secret():
    """Worlds built from the public seed alone, or with another secret, are not the study's worlds."""
    from planted.worlds import build

    config = compose_study("smoke", "scripted")["study"]
    secret = 0x1F2E3D4C5B6A79880123456789ABCDEF
    unit = next(iter(study_grid(config, secret).worlds.values()))
    world = build(unit.spec, unit.seed).meta["content_sha256"]
    assert build(unit.spec, unit.seed).meta["content_sha256"] == world  # reproducible with the secret
    assert list(unit.seed.entropy) == [config["seed"], secret]
    assert build(unit.spec, next(iter(study_grid(config, secret + 1).worlds.values())).seed).meta["content_sha256"] != world
    public_only = build(unit.spec, substream(np.random.SeedSequence(config["seed"]), *unit.seed.spawn_key))
    assert public_only.meta["content_sha256"] != world


def test_transcript_lines_survive_hostile_text(tmp_path):
    """Lone surrogates, U+2028, U+0085 and NUL are written escaped and read back verbatim."""
    path = tmp_path / "t.jsonl"
    hostile = "a\ud800b\u2028c\u0085d\x00e\u2029"
    with EventLog(path) as log:
        log.write("model_turn", text=hostile)
        log.write("end")
    assert path.read_bytes().isascii() and path.read_bytes().count(b"\n") == 2
    events = read_events(path)
    assert [e["event"] for e in events] == ["model_turn", "end"] and events[0]["text"] == hostile


def test_prompts_are_the_papers_appendix_a():
    prompts = load_prompts()
    assert prompts.user_message("neutral").endswith("You may also conclude that no model beats the benchmark.")
    assert prompts.user_message("optimistic").endswith("Prior research indicates a genuine timing signal exists in this data.")
    system = prompts.system_prompt(budget=40, refit_every=12)
    assert "at most 40 calls of run_python and record_spec combined" in system
    assert "refit every 12 months" in system
    assert "700 rows" in prompts.data_note_for(700) and "0..699" in prompts.data_note_for(700)
    with pytest.raises(ValueError, match="unknown framing"):
        prompts.user_message("hopeful")


def test_unknown_study_lists_the_available_ones():
    with pytest.raises(ConfigError, match="available: .*smoke"):
        compose_study("nope", "scripted")


def test_the_smoke_study_publishes_its_secret_so_its_worlds_are_the_same_everywhere(tmp_path):
    from planted.agents.secret import StudySecretError, parse_secret, study_secret, write_secret

    config = compose_study("smoke", "scripted")["study"]
    published = parse_secret(config["secret"], "smoke")
    assert study_secret(tmp_path / "a", "smoke", published=published) == published
    assert not (tmp_path / "a").exists()  # nothing written for a published secret
    write_secret(tmp_path / "b" / "sealed" / "study_secret.json", published + 1, "smoke")
    with pytest.raises(StudySecretError, match="another secret"):
        study_secret(tmp_path / "b", "smoke", published=published)
    with pytest.raises(StudySecretError, match="32 hex digits"):
        parse_secret("abc", "smoke")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda s: s.update(refit_evry=6), r"unknown key 'refit_evry' \(did you mean 'refit_every'\?\)"),
    (lambda s: s["groups"][0].update(seedz=2), r"unknown key groups\[0\]\.'seedz' \(did you mean 'seeds'\?\)"),
    (lambda s: s["groups"][0]["cells"].update(phii=0.9), r"unknown key groups\[0\]\.cells\[0\]\.'phii' \(did you mean 'phi'\?\)"),
    (lambda s: s.update(budget=0), "budget must be at least 1, got 0"),
    (lambda s: s.update(seed="x"), "seed must be a whole number, got 'x'"),
    (lambda s: s["groups"][0].update(framings=["neutal"]), r"framings has 'neutal' \(did you mean 'neutral'\?\)"),
    (lambda s: s.update(procedures=["hac_hol"]), r"procedures has 'hac_hol' \(did you mean 'hac_holm'\?\)"),
])
def test_misspelt_or_invalid_study_keys_fail_naming_the_key_and_the_file(tmp_path, edit, message):
    import yaml

    study = {"name": "typo", "seed": 1, "groups": [{"name": "g", "cells": {"family": "linear", "r2": 0.0, "phi": 0.95,
                                                                         "rho": -0.8, "shocks": "gaussian"}, "seeds": 1}]}
    edit(study)
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(study))
    with pytest.raises(ConfigError, match=message) as raised:
        compose_study(str(path), "scripted")
    assert str(raised.value).startswith(f"{path}: ") and "\n" not in str(raised.value)


def test_a_misspelt_key_fails_on_the_command_line_with_one_line(tmp_path, capsys):
    import yaml

    from planted.cli import main

    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump({"name": "typo", "seed": 1, "refit_evry": 6, "groups": [
        {"name": "g", "cells": {"family": "reversal", "shocks": "gaussian"}, "seeds": 1}]}))
    assert main(["run", "--study", str(path), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert "refit_evry" in err and "refit_every" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # before any work
