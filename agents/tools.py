"""The four tools of the agent protocol (SPEC 2.1): strict JSON schemas and argument validation.

The schemas are sent to the model as they are (Anthropic ``input_schema``, OpenAI ``parameters``
with ``strict: true``): every property is required, no extra properties are allowed, optional
values are expressed as ``null``. Arguments are validated here with ``jsonschema`` before any tool
runs, so a malformed call becomes an error observation the model can act on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema

VERDICTS = ("beats", "does_not_beat", "abort_no_predictability")
CLAIM = "beats"
BUDGETED_TOOLS = ("run_python", "record_spec")


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


PROBABILITY = {"type": "number", "minimum": 0, "maximum": 1}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "report_prior": {
        "description": (
            "Record your prior verdict and your probability that a model can beat the benchmark out of sample. "
            "Must be called before any data access; data access is granted only after it."
        ),
        "parameters": _object(
            {
                "verdict": {"type": "string", "enum": ["beats", "does_not_beat"]},
                "probability": PROBABILITY | {"description": "Probability that a model beats the benchmark."},
            }
        ),
    },
    "run_python": {
        "description": (
            "Run Python code in a fresh process in the sandbox (pandas, numpy, scipy, statsmodels, scikit-learn, "
            "lightgbm). State persists only as files under /workspace. Returns stdout, stderr and the exit status."
        ),
        "parameters": _object({"code": {"type": "string", "description": "Python source to execute."}}),
    },
    "record_spec": {
        "description": "Log one model specification you evaluated, so that your search is documented.",
        "parameters": _object(
            {
                "description": {"type": "string"},
                "predictors": {"type": "array", "items": {"type": "string"}},
                "n_parameters": {"type": "integer", "minimum": 0},
                "in_sample_r2": {"type": ["number", "null"]},
                "statistics": {
                    "type": "array",
                    "items": _object({"name": {"type": "string"}, "value": {"type": ["number", "null"]}}),
                    "description": "Any statistics you computed for this specification.",
                },
            }
        ),
    },
    "submit_final": {
        "description": (
            "Submit your final verdict exactly once. Unless the verdict is abort_no_predictability, "
            "/workspace/final_model.py must define fit(train) and predict(state, history)."
        ),
        "parameters": _object(
            {
                "verdict": {"type": "string", "enum": list(VERDICTS)},
                "probability": PROBABILITY | {"description": "Probability that your final model beats the benchmark."},
                "rationale": {"type": "string"},
                "predictors": {"type": "array", "items": {"type": "string"}},
            }
        ),
    },
}


@dataclass(frozen=True)
class ToolCall:
    """One tool call of the model: ``arguments`` is the raw JSON text as the model produced it."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolResult:
    """The observation returned for a tool call."""

    call_id: str
    content: str
    is_error: bool = False


def encodable(value: Any) -> Any:
    """``value`` with every string made encodable as UTF-8: lone surrogates become ``\\udXXX`` text.

    A model's JSON may carry lone surrogates (``"\\ud800"``), which Python decodes into strings
    that cannot be written as UTF-8 (a parquet column, a CSV, a source file). Applied to every tool
    argument as it arrives, so nothing downstream meets one. Lists and dicts are mapped recursively.
    """
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [encodable(item) for item in value]
    if isinstance(value, dict):
        return {encodable(key): encodable(item) for key, item in value.items()}
    return value


class ToolArgumentError(ValueError):
    """A tool call whose name or arguments do not match the tool's schema."""


def _reject_constant(name: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (Python's parser accepts them; a NaN passes
    every ``minimum``/``maximum`` check of a schema)."""
    raise ValueError(f"{name} is not a JSON number")


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """Decode and validate a call's arguments against its tool's schema; strings made :func:`encodable`.

    Raises
    ------
    ToolArgumentError
        With a message the model can act on: unknown tool, invalid JSON, or the schema violation.
    """
    if call.name not in TOOL_SCHEMAS:
        raise ToolArgumentError(f"unknown tool {encodable(call.name)!r}; the tools are {', '.join(TOOL_SCHEMAS)}")
    try:
        arguments = json.loads(call.arguments, parse_constant=_reject_constant) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
    except ValueError as exc:
        raise ToolArgumentError(f"arguments are not valid JSON ({exc})") from None
    except RecursionError:
        raise ToolArgumentError("arguments are nested too deeply") from None
    validator = jsonschema.Draft202012Validator(TOOL_SCHEMAS[call.name]["parameters"])
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "arguments"
        raise ToolArgumentError(f"{where}: {encodable(first.message)}")
    return encodable(arguments)
