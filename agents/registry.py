"""Build the backend a model config names: ``scripted``, ``anthropic``, ``openai`` or ``openai_compat``.

:func:`make_backend` reads a model config (``conf/model/<name>.yaml`` as a plain dict), checks it,
looks up the API key in the environment variable it names and only then builds the backend, so a
missing key is reported before any world is built or any request is sent. The SDKs are imported
only for the backend that is asked for; the scripted researcher needs neither SDK nor key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Mapping

from planted.agents.backend import Backend, FatalBackendError, Session
from planted.agents.retry import Prices, RetryPolicy
from planted.config import ConfigError, check_keys

if TYPE_CHECKING:
    from planted.agents.transcript import EventLog

BACKENDS = ("scripted", "anthropic", "openai", "openai_compat")
DEFAULT_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
NO_KEY = "EMPTY"
"""Placeholder key for an OpenAI-compatible server that needs none (a local vLLM)."""


class MissingAPIKeyError(FatalBackendError):
    """The environment variable that should hold the API key is unset or empty."""


@dataclass(frozen=True)
class ModelConfig:
    """A model config, checked (unknown keys are refused so that a typo cannot pass silently)."""

    backend: str
    """``scripted``, ``anthropic`` (Messages API), ``openai`` (Responses API) or ``openai_compat``."""
    model_id: str
    """Model name sent with each request."""
    prices: Prices
    """US dollars per million tokens (input, output, cached input, cache writes) and their date."""
    effort: str | None = None
    """Anthropic ``output_config.effort``; OpenAI ``reasoning.effort``; chat completions ``reasoning_effort``."""
    max_tokens: int | None = None
    """Output limit per response (thinking included); ``None`` leaves it to the server (compat only)."""
    concurrency: int = 1
    """Episodes run at once by the grid."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Transient-error and truncation retries."""
    request_timeout_s: float = 900.0
    """Seconds before one request is abandoned (and retried as a transient error)."""
    base_url: str | None = None
    """API base URL; ``None`` lets the SDK use its environment variable or the provider's default."""
    api_key_env: str | None = None
    """Environment variable holding the key (default ANTHROPIC_API_KEY / OPENAI_API_KEY; compat: none)."""
    strict_tools: bool = True
    """Send the tool schemas with ``strict: true``."""
    thinking_display: str | None = "summarized"
    """Anthropic: ``thinking.display`` (``summarized`` returns the thinking text for the log)."""
    prompt_cache: bool = True
    """Anthropic: top-level ``cache_control`` so that each turn reads the conversation so far from the cache."""
    reasoning_summary: str | None = "auto"
    """OpenAI: ``reasoning.summary`` (reasoning summaries for the log); ``None`` requests none."""
    sampling: dict[str, Any] = field(default_factory=dict)
    """Chat completions: standard sampling parameters sent as they are (``temperature``, ``top_p``)."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Chat completions: server-specific request fields (vLLM's ``top_k``, ``chat_template_kwargs``)."""
    vllm: dict[str, Any] | None = None
    """Launch settings of a local vLLM server (read by the launcher, not by the backend)."""
    knowledge_cutoff: str | None = None
    """The model's stated knowledge cutoff ``YYYY-MM`` (read by the memorization probe)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelConfig":
        """Check and convert a model config dict.

        Raises
        ------
        planted.config.ConfigError
            Unknown backend, unknown or missing keys, or a backend whose required settings are absent.
        """
        check_keys(data, {f.name for f in fields(cls)}, {"backend", "model_id", "prices"}, what="model config",
                   error=ConfigError)
        if data["backend"] not in BACKENDS:
            raise ConfigError(f"unknown backend {data['backend']!r}; choose from {', '.join(BACKENDS)}")
        values = dict(data)
        try:
            values["prices"] = Prices.from_config(data["prices"])
            values["retry"] = RetryPolicy.from_config(data.get("retry"))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"model config {data.get('model_id')!r}: {exc}") from None
        values["sampling"] = dict(data.get("sampling") or {})
        values["extra_body"] = dict(data.get("extra_body") or {})
        config = cls(**values)
        if config.backend == "anthropic" and config.max_tokens is None:
            raise ConfigError("the anthropic backend needs max_tokens (add max_tokens: to the model config)")
        return config

    @property
    def key_env(self) -> str | None:
        """The environment variable of the API key (``None``: no key needed)."""
        return self.api_key_env or DEFAULT_KEY_ENV.get(self.backend)


def resolve_api_key(config: ModelConfig) -> str:
    """The API key from the config's environment variable (a placeholder when none is needed).

    Raises
    ------
    MissingAPIKeyError
        Naming the variable to set.
    """
    if config.key_env is None:
        return NO_KEY
    value = os.environ.get(config.key_env, "").strip()
    if not value:
        raise MissingAPIKeyError(
            f"the {config.backend} backend ({config.model_id}) needs an API key: set the environment variable "
            f"{config.key_env} (or run the scripted model, which needs none)"
        )
    return value


def make_backend(model_config: Mapping[str, Any], *, base_url: str | None = None) -> Backend:
    """Build the backend of a model config.

    Parameters
    ----------
    model_config : mapping
        The ``model`` part of a composed study config (see :class:`ModelConfig`).
    base_url : str, optional
        Overrides the config's ``base_url`` (the CLI's ``--base-url``). When both are ``None`` the
        SDK uses ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` if set, else the provider's URL.

    Returns
    -------
    Backend

    Raises
    ------
    MissingAPIKeyError
        Before anything else is done, when the key's environment variable is unset.
    ValueError
        For an invalid config.
    """
    config = ModelConfig.from_dict(model_config)
    if config.backend == "scripted":
        from planted.agents.scripted import ScriptedBackend

        return ScriptedBackend()
    key = resolve_api_key(config)
    url = base_url or config.base_url
    client_settings: dict[str, Any] = {"api_key": key, "base_url": url, "max_retries": 0,
                                       "timeout": config.request_timeout_s}
    if config.backend == "anthropic":
        import anthropic

        from planted.agents.anthropic_backend import AnthropicSession

        return SdkBackend("anthropic", AnthropicSession, anthropic.Anthropic(**client_settings), config, key)
    import openai

    if config.backend == "openai":
        from planted.agents.openai_backend import OpenAISession

        return SdkBackend("openai", OpenAISession, openai.OpenAI(**client_settings), config, key)
    from planted.agents.compat_backend import CompatSession

    return SdkBackend("openai_compat", CompatSession, openai.OpenAI(**client_settings), config, key)


class SdkBackend:
    """A backend of an official SDK: one client shared by the episodes (the SDK clients are thread-safe),
    one session of ``session_class`` per episode.

    The SDK's own retries are off (``max_retries=0``): :mod:`planted.agents.retry` retries, logs and
    classifies every failure. Nothing is sent until a session's first turn.
    """

    def __init__(self, name: str, session_class: Callable[..., Session], client: Any, config: ModelConfig,
                 api_key: str) -> None:
        self.name = name
        self.session_class, self.client, self.config = session_class, client, config
        self._api_key = api_key

    def open_session(self, *, system: str, user: str, tools: dict[str, dict[str, Any]], log: EventLog) -> Session:
        """Start an episode's conversation."""
        return self.session_class(client=self.client, config=self.config, system=system, user=user, tools=tools,
                                  log=log, api_key=self._api_key)
