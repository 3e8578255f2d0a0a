"""The launch settings of the local vLLM server: the checked ``vllm:`` section of a model config and its command line.

:class:`VllmSettings` is the ``vllm:`` section of a model config (``conf/model/qwen.yaml``) with
every key documented and checked: a revision pinned to a commit (a branch can move under a
preregistered run), a loopback host (the server has no authentication), a tool-call parser when
the model chooses its tools. :func:`vllm_command` turns it into the ``vllm serve`` command line
(the flags of vLLM's OpenAI-compatible server, ``vllm serve --help``) and :func:`find_vllm` finds
the executable. :mod:`planted.agents.vllm_server` runs it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from planted.agents.backend import FatalBackendError
from planted.config import check_keys

INSTALL_HINT = "pip install 'planted[local]'"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
COMMIT = re.compile(r"[0-9a-f]{40}")


class VllmServerError(FatalBackendError):
    """The local vLLM server could not be started or stopped working; the message quotes its log."""


class VllmNotInstalledError(VllmServerError):
    """The ``vllm`` executable is not installed (it needs the ``local`` extra and a GPU)."""


@dataclass(frozen=True)
class VllmSettings:
    """The ``vllm:`` section of a model config, checked (unknown keys are refused)."""

    hf_repo: str
    """Hugging Face repository of the weights, e.g. ``Qwen/Qwen3-32B-AWQ``."""
    revision: str
    """Pinned commit (40 hex digits) of the repository; also used for the tokenizer."""
    served_model_name: str
    """Model name the server answers to (the model config's ``model_id``)."""
    host: str = "127.0.0.1"
    """Listening address; only loopback is accepted (the server has no authentication)."""
    port: int = 8000
    """Listening port; 0 picks a free one."""
    enable_auto_tool_choice: bool = True
    """``--enable-auto-tool-choice``: the model decides when to call tools."""
    tool_call_parser: str | None = None
    """``--tool-call-parser`` (``hermes`` for Qwen3); required with auto tool choice."""
    reasoning_parser: str | None = None
    """``--reasoning-parser`` (``qwen3``): the thinking goes to ``reasoning_content``."""
    max_model_len: int | None = None
    """``--max-model-len``: context length in tokens (prompt and output)."""
    gpu_memory_utilization: float | None = None
    """``--gpu-memory-utilization``: share of GPU memory vLLM may take."""
    quantization: str | None = None
    """``--quantization`` (e.g. ``awq``); ``None`` lets vLLM read it from the weights (it then picks its fastest kernel)."""
    extra_args: tuple[str, ...] = ()
    """Further ``vllm serve`` arguments, passed unchanged."""
    health_timeout_s: float = 900.0
    """Seconds to wait for ``/health`` (downloading and loading 20 GB of weights takes minutes)."""
    shutdown_grace_s: float = 30.0
    """Seconds between SIGTERM and SIGKILL when stopping."""

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | "VllmSettings") -> "VllmSettings":
        """Check and convert a model config's ``vllm`` section.

        Raises
        ------
        VllmServerError
            Unknown or missing keys, an unpinned revision, a non-loopback host or a missing parser.
        """
        if isinstance(data, VllmSettings):
            return data
        if not data:
            raise VllmServerError("the model config has no vllm section: nothing to launch (use --base-url for a running server)")
        check_keys(data, {f.name for f in fields(cls)}, {"hf_repo", "revision", "served_model_name"},
                   what="vllm settings", error=VllmServerError)
        values = dict(data)
        values["extra_args"] = tuple(str(arg) for arg in data.get("extra_args") or ())
        settings = cls(**values)
        if not COMMIT.fullmatch(str(settings.revision)):
            raise VllmServerError(
                f"vllm.revision {settings.revision!r} is not a pinned commit (40 hex digits); a branch or tag "
                "can move under a preregistered run. Copy the commit from the repository's history on Hugging Face."
            )
        if settings.host not in LOOPBACK:
            raise VllmServerError(f"vllm.host {settings.host!r}: the server has no authentication and may only listen on 127.0.0.1")
        if settings.enable_auto_tool_choice and not settings.tool_call_parser:
            raise VllmServerError("vllm.enable_auto_tool_choice needs vllm.tool_call_parser (hermes for Qwen3)")
        if not 0 <= int(settings.port) < 65536:
            raise VllmServerError(f"vllm.port {settings.port} is not a port number")
        return settings


def find_vllm() -> str:
    """Path of the ``vllm`` executable: on ``PATH``, else beside the running Python (an unactivated venv).

    Raises
    ------
    VllmNotInstalledError
        Naming the ``local`` extra and the GPU it needs.
    """
    import shutil

    found = shutil.which("vllm")
    if found:
        return found
    beside = Path(sys.executable).parent / "vllm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    raise VllmNotInstalledError(
        "the local arm needs vLLM, which is not installed: install it with "
        f"`{INSTALL_HINT}` on a machine with a CUDA GPU (Qwen3-32B-AWQ needs about 20 GB of GPU memory), "
        "or point the run at a server that is already running with --base-url"
    )


def vllm_command(settings: VllmSettings, *, executable: str, port: int) -> list[str]:
    """The ``vllm serve`` command line of ``settings`` (listening on 127.0.0.1:``port``)."""
    s = settings
    argv = [executable, "serve", s.hf_repo, "--revision", s.revision, "--tokenizer-revision", s.revision,
            "--served-model-name", s.served_model_name, "--host", "127.0.0.1", "--port", str(port)]
    if s.enable_auto_tool_choice:
        argv.append("--enable-auto-tool-choice")
    if s.tool_call_parser:
        argv += ["--tool-call-parser", s.tool_call_parser]
    if s.reasoning_parser:
        argv += ["--reasoning-parser", s.reasoning_parser]
    if s.max_model_len is not None:
        argv += ["--max-model-len", str(int(s.max_model_len))]
    if s.gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{float(s.gpu_memory_utilization):g}"]
    if s.quantization:
        argv += ["--quantization", s.quantization]
    return argv + list(s.extra_args)


__all__ = ["VllmNotInstalledError", "VllmServerError", "VllmSettings", "find_vllm", "vllm_command"]
