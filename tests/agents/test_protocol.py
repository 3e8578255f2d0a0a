"""The tool rules (SPEC 2.1): prior first, budget, invalid JSON, missing model file, one submission."""

import json
import pytest

from planted.agents.protocol import EpisodeProtocol, read_model_file
from planted.agents.tools import TOOL_SCHEMAS, ToolArgumentError, ToolCall, parse_arguments

from .fakes import FakeSandbox

GOOD_MODEL = "def fit(train):\n    return None\n\ndef predict(state, history):\n    return 0.0\n"


def call(name, **arguments):
    return ToolCall(call_id=f"c-{name}", name=name, arguments=json.dumps(arguments))


@pytest.fixture()
def protocol(tmp_path):
    return EpisodeProtocol(FakeSandbox(tmp_path), tmp_path, budget=3, data_note="Prior recorded. Data: ...")


def test_every_schema_is_strict():
    for schema in TOOL_SCHEMAS.values():
        params = schema["parameters"]
        assert params["additionalProperties"] is False
        assert sorted(params["required"]) == sorted(params["properties"])


def test_prior_must_come_first(protocol):
    result = protocol.handle(call("run_python", code="print(1)"))
    assert result.is_error and "call report_prior first" in result.content
    assert protocol.sandbox.calls == 0 and protocol.record.budget_used == 0
    note = protocol.handle(call("report_prior", verdict="does_not_beat", probability=0.2))
    assert not note.is_error and note.content.startswith("Prior recorded")
    again = protocol.handle(call("report_prior", verdict="beats", probability=0.9))
    assert again.is_error and "already recorded" in again.content
    assert protocol.record.prior == {"verdict": "does_not_beat", "probability": 0.2}


def test_budget_counts_run_python_and_record_spec_and_then_refuses(protocol):
    protocol.handle(call("report_prior", verdict="beats", probability=0.5))
    protocol.handle(call("run_python", code=GOOD_MODEL))
    spec = dict(description="ols", predictors=["x1"], n_parameters=2, in_sample_r2=None, statistics=[])
    assert "Budget left: 1" in protocol.handle(call("record_spec", **spec)).content
    protocol.handle(call("record_spec", **spec))
    refused = protocol.handle(call("run_python", code="print(1)"))
    assert refused.is_error and "budget exhausted (3 calls" in refused.content and "submit_final" in refused.content
    assert protocol.record.budget_used == 3 and protocol.sandbox.calls == 1 and len(protocol.record.specs) == 2
    accepted = protocol.handle(call("submit_final", verdict="beats", probability=0.7, rationale="r", predictors=["x1"]))
    assert not accepted.is_error and protocol.finished


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ('{"verdict": "beats", "probability": 0.4', "not valid JSON"),
        ('{"verdict": "maybe", "probability": 0.4}', "'maybe' is not one of"),
        ('{"verdict": "beats", "probability": 1.4}', "greater than the maximum"),
        ('{"verdict": "beats"}', "'probability' is a required property"),
        ('{"verdict": "beats", "probability": 0.4, "extra": 1}', "Additional properties"),
    ],
)
def test_invalid_arguments_get_an_actionable_error(protocol, arguments, fragment):
    result = protocol.handle(ToolCall("c1", "report_prior", arguments))
    assert result.is_error and fragment in result.content and "Call it again" in result.content
    assert protocol.record.prior is None and protocol.record.invalid_calls == 1


def test_unknown_tool_is_named():
    with pytest.raises(ToolArgumentError, match="unknown tool 'shell'"):
        parse_arguments(ToolCall("c", "shell", "{}"))


def test_missing_model_file_rejects_the_submission_until_fixed(protocol):
    protocol.handle(call("report_prior", verdict="beats", probability=0.5))
    submit = call("submit_final", verdict="does_not_beat", probability=0.2, rationale="none", predictors=[])
    first = protocol.handle(submit)
    assert first.is_error and "final_model.py not found" in first.content and not protocol.finished
    protocol.handle(call("run_python", code="def fit(train):\n    return 1\n"))
    second = protocol.handle(submit)
    assert "does not define predict" in second.content
    protocol.handle(call("run_python", code=GOOD_MODEL))
    assert not protocol.handle(submit).is_error
    assert protocol.record.rejected_submissions == 2 and protocol.record.submission.verdict == "does_not_beat"


def test_abort_needs_no_model_and_a_second_submission_is_refused(protocol):
    protocol.handle(call("report_prior", verdict="does_not_beat", probability=0.1))
    abort = call("submit_final", verdict="abort_no_predictability", probability=0.0, rationale="noise", predictors=[])
    assert not protocol.handle(abort).is_error
    assert not protocol.record.submission.claim
    second = protocol.handle(call("submit_final", verdict="beats", probability=0.9, rationale="x", predictors=["x2"]))
    assert second.is_error and "already accepted" in second.content
    assert protocol.record.submission.verdict == "abort_no_predictability"


def test_model_file_check_is_static(tmp_path):
    path = tmp_path / "final_model.py"
    text = "import os\nos.remove('/etc/passwd')\ndef fit(t): pass\ndef predict(s, h): return 0.0\n"
    path.write_text(text)
    assert read_model_file(tmp_path) == (text.encode(), None)  # accepted without ever being executed in the host
    path.write_text("def fit(:\n")
    assert "syntax error" in read_model_file(tmp_path)[1]
    path.write_text("def fit(t): pass\n")
    assert "does not define predict at top level" in read_model_file(tmp_path)[1]


def test_hostile_model_files_are_refused_without_touching_the_host(tmp_path):
    """Links (to existing and missing targets alike), FIFOs, directories, huge and deeply nested files."""
    import os

    path = tmp_path / "final_model.py"
    path.symlink_to("/etc/passwd")
    refused_existing = read_model_file(tmp_path)
    path.unlink()
    path.symlink_to("/nonexistent/secret")
    assert read_model_file(tmp_path) == refused_existing  # no existence oracle
    assert refused_existing[0] is None and "symbolic link" in refused_existing[1]
    path.unlink()
    path.symlink_to("/proc/self/mem")
    assert "symbolic link" in read_model_file(tmp_path)[1]
    path.unlink()
    os.mkfifo(path)  # opening a FIFO for reading would block a naive reader forever
    assert "not a regular file" in read_model_file(tmp_path)[1]
    path.unlink()
    path.mkdir()
    assert "not a regular file" in read_model_file(tmp_path)[1]
    path.rmdir()
    path.write_bytes(b"#" * (1024 * 1024 + 1))
    assert "more than the limit of 1048576 bytes" in read_model_file(tmp_path)[1]
    path.write_text("def fit(t): pass\ndef predict(s, h):\n    return " + "(" * 200_000 + "0" + ")" * 200_000 + "\n")
    source, problem = read_model_file(tmp_path)
    assert source is None and ("too deeply nested" in problem or "syntax error" in problem), problem
    path.write_text("x = " + "[" * 90 + "]" * 90 + "\ndef fit(t): pass\ndef predict(s, h): return 0.0\n")
    assert read_model_file(tmp_path)[1] is None  # ordinary nesting is fine
