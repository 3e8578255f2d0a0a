"""What every API backend shares: retries with backoff, error classification, prices and usage.

A backend session builds a request body in its own wire format and hands it to an
:class:`ApiCaller`, which sends it through the provider's SDK (whose own retries are disabled),
logs the request and each response verbatim, retries transient failures with exponential backoff
and jitter, turns fatal ones into :class:`~planted.agents.backend.FatalBackendError`, resends a
truncated response's request per the :class:`RetryPolicy`, and prices the token usage.

Error classes (SPEC 2.5)
------------------------
* transient, retried on the same turn: dropped connections and timeouts, HTTP 408, 409, 425, 429
  (rate limit), every 5xx including Anthropic's 529 "overloaded", and a 200 reply that reports a
  server-side failure (:class:`TransientReplyError`);
* fatal, stops the grid: 401 (authentication), 402 (payment), 403 (permission), 404 (unknown model
  or endpoint), and exhausted credit or quota whatever the status (OpenAI's 429
  ``insufficient_quota``, Anthropic's 400 "credit balance is too low");
* any other 4xx: the request itself is wrong; :class:`BackendRequestError`, not retried.

Truncation: a response cut off by the output limit is never read as an answer. It is logged with
``truncated: true``, the identical request is sent again up to ``truncation_retries`` times, and
then :class:`TruncatedResponseError` is raised, which the grid records as an infrastructure error.
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from planted.agents.backend import FatalBackendError, Usage
from planted.agents.tools import ToolCall
from planted.agents.transcript import EventLog

TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
FATAL_STATUSES = {
    401: "authentication failed",
    402: "payment required (credit exhausted)",
    403: "permission denied",
    404: "not found (unknown model or endpoint)",
}
QUOTA_MARKERS = ("insufficient_quota", "billing_hard_limit", "billing_not_active", "credit balance")
SECRET_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}")


class TransientBackendError(RuntimeError):
    """Transient failures persisted through every attempt of the retry policy."""


class BackendRequestError(RuntimeError):
    """The provider rejected the request itself (a 4xx that is neither fatal nor transient)."""


class TruncatedResponseError(RuntimeError):
    """The response was truncated by the output limit on every attempt of the truncation policy."""


class TransientReplyError(RuntimeError):
    """A successful HTTP reply whose body reports a server-side failure; retried like a 5xx."""


NOTICE_INTERVAL_S = 10.0
"""At most one console line about retries per this many seconds (every retry is in the transcript)."""


class RetryMonitor:
    """What the console shows of retries, and how long a backend has been unreachable.

    Shared by every session of a process (concurrent episodes reach the same provider): a retry
    prints one line through ``tqdm.write`` at most every :data:`NOTICE_INTERVAL_S` seconds (how many
    retries were not shown is said in the next line), and the start of an outage, the first
    connection error after the last success of the backend, is kept so that
    :meth:`outage_seconds` can stop the grid when it lasts too long.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, write: Callable[[str], None] | None = None):
        self.clock = clock
        self.write = write
        self._lock = threading.Lock()
        self._outage: dict[str, float] = {}
        self._last_notice = -math.inf
        self._unshown = 0

    def notice(self, text: str) -> None:
        with self._lock:
            now = self.clock()
            if now - self._last_notice < NOTICE_INTERVAL_S:
                self._unshown += 1
                return
            extra = f" (and {self._unshown} more retries since the last notice)" if self._unshown else ""
            self._last_notice, self._unshown = now, 0
        (self.write or _tqdm_write)(text + extra)

    def connection_failed(self, backend: str) -> float:
        """Record a connection error of ``backend``; seconds since its outage began."""
        with self._lock:
            now = self.clock()
            return now - self._outage.setdefault(backend, now)

    def succeeded(self, backend: str) -> None:
        with self._lock:
            self._outage.pop(backend, None)


def _tqdm_write(text: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(text, file=sys.stderr)


MONITOR = RetryMonitor()
"""The process's retry monitor (tests pass their own to :class:`ApiCaller`)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried.

    Attributes
    ----------
    max_attempts : int
        Attempts per request for transient errors, the first included.
    base_delay_s, max_delay_s : float
        The delay before attempt ``k + 1`` is drawn uniformly from
        ``[d / 2, d]`` with ``d = min(max_delay_s, base_delay_s * 2 ** (k - 1))`` ("equal jitter"),
        and is at least the server's ``retry-after`` (capped at ``max_delay_s``).
    truncation_retries : int
        How often a truncated response's request is sent again before giving up.
    max_outage_s : float
        Connection errors (no HTTP status: the provider cannot be reached) that persist for this
        many seconds across every request of the backend, with no success in between, stop the
        grid like a fatal error (:class:`~planted.agents.backend.FatalBackendError`) instead of
        retrying run after run.
    """

    max_attempts: int = 8
    base_delay_s: float = 2.0
    max_delay_s: float = 120.0
    truncation_retries: int = 1
    max_outage_s: float = 600.0

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | None) -> "RetryPolicy":
        """Build from the ``retry`` block of a model config (missing keys keep their defaults)."""
        data = dict(data or {})
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown retry settings {sorted(unknown)}")
        policy = cls(**data)
        if policy.max_attempts < 1 or policy.truncation_retries < 0 or policy.base_delay_s < 0 or policy.max_outage_s <= 0:
            raise ValueError(f"invalid retry policy {policy}")
        return policy

    def delay(self, attempt: int, *, rng: np.random.Generator, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        wait = ceiling / 2 + rng.uniform(0.0, ceiling / 2)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay_s))
        return float(wait)


@dataclass(frozen=True)
class TokenCounts:
    """Token counts of one response, in the neutral convention of :class:`~planted.agents.backend.Usage`.

    ``input_tokens`` counts every input token, cached reads and cache writes included;
    ``output_tokens`` counts every output token, reasoning included (both providers bill
    reasoning as output); the other fields are subsets.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens, as of a date.

    Cached input and cache writes default to the input price when a provider has no such tier.
    """

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None
    as_of: str = ""

    @classmethod
    def from_config(cls, data: Mapping[str, Any]) -> "Prices":
        """Build from the ``prices`` block of a model config."""
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown price fields {sorted(unknown)}")
        missing = {"input_per_mtok", "output_per_mtok"} - set(data)
        if missing:
            raise ValueError(f"prices need {sorted(missing)}")
        return cls(**{**data, "as_of": str(data.get("as_of", ""))})

    def usage(self, counts: TokenCounts) -> Usage:
        """Usage with its cost: uncached input, cached input, cache writes and output at their prices."""
        cached = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        written = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        plain = max(counts.input_tokens - counts.cached_tokens - counts.cache_write_tokens, 0)
        cost = (plain * self.input_per_mtok + counts.cached_tokens * cached + counts.cache_write_tokens * written
                + counts.output_tokens * self.output_per_mtok) / 1e6
        return Usage(counts.input_tokens, counts.output_tokens, counts.reasoning_tokens, counts.cached_tokens, cost)


@dataclass(frozen=True)
class Reply:
    """What a backend reads from a response body for the log and the retry rules."""

    served_model: str
    stop_reason: str
    truncated: bool
    counts: TokenCounts
    reasoning: str = ""


@dataclass(frozen=True)
class Failure:
    """A classified error."""

    kind: Literal["transient", "fatal", "request"]
    status: int | None
    error_type: str
    message: str
    retry_after: float | None = None

    def describe(self) -> str:
        """``HTTP 429 rate_limit_error: ...`` or ``connection: ...``."""
        where = f"HTTP {self.status}" if self.status is not None else "connection"
        return f"{where} {self.error_type}: {self.message}".strip()


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with each secret and anything shaped like an API key replaced by ``[redacted]``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return SECRET_PATTERN.sub("[redacted]", text)


def _error_fields(body: object) -> tuple[str, str]:
    """Error type (or code) and message from any provider's error body."""
    if not isinstance(body, Mapping):
        return "", "" if body is None else str(body)
    inner = body.get("error")
    source = inner if isinstance(inner, Mapping) else body
    kind = source.get("code") or source.get("type") or ""
    message = source.get("message") or ""
    return str(kind), str(message)


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                return None
    return None


def classify_error(
    exc: BaseException,
    *,
    status_errors: tuple[type[BaseException], ...],
    connection_errors: tuple[type[BaseException], ...],
) -> Failure | None:
    """Classify an exception raised while sending a request (``None``: not an API error, a bug).

    Parameters
    ----------
    exc : BaseException
    status_errors : tuple of exception types
        The SDK's HTTP status errors (with ``status_code`` and ``body``).
    connection_errors : tuple of exception types
        The SDK's connection and timeout errors.
    """
    if isinstance(exc, TransientReplyError):
        return Failure("transient", 200, "failed_reply", str(exc))
    if isinstance(exc, connection_errors):
        return Failure("transient", None, type(exc).__name__, str(exc))
    if not isinstance(exc, status_errors):
        return None
    status = int(getattr(exc, "status_code"))
    error_type, message = _error_fields(getattr(exc, "body", None))
    message = message or str(exc)
    text = f"{error_type} {message}".lower()
    if any(marker in text for marker in QUOTA_MARKERS):
        return Failure("fatal", status, error_type or "quota", f"credit or quota exhausted: {message}")
    if status in FATAL_STATUSES:
        return Failure("fatal", status, error_type, f"{FATAL_STATUSES[status]}: {message}")
    if status in TRANSIENT_STATUSES or status >= 500:
        return Failure("transient", status, error_type, message, _retry_after(exc))
    return Failure("request", status, error_type, message)


class ApiCaller:
    """Send one wire format's requests with logging, retries, truncation handling and pricing.

    Parameters
    ----------
    backend : str
        Backend name for the log and the error messages.
    send : callable
        ``body -> (response JSON, request id)``; raises the SDK's exceptions (or
        :class:`TransientReplyError`).
    describe : callable
        ``response JSON -> Reply``.
    policy : RetryPolicy
    prices : Prices
    log : EventLog
    status_errors, connection_errors : tuple of exception types
        See :func:`classify_error`.
    secrets : sequence of str
        Values that must never reach the log or an exception message (the API key).
    credential_hint : str
        Appended to authentication errors, e.g. the name of the key's environment variable.
    rng : numpy.random.Generator
        Source of the backoff jitter. Sessions pass an unseeded generator: the jitter only spreads
        the retries of concurrent episodes in time and never touches a result.
    """

    def __init__(
        self,
        *,
        backend: str,
        send: Callable[[dict[str, Any]], tuple[dict[str, Any], str | None]],
        describe: Callable[[dict[str, Any]], Reply],
        policy: RetryPolicy,
        prices: Prices,
        log: EventLog,
        status_errors: tuple[type[BaseException], ...],
        connection_errors: tuple[type[BaseException], ...],
        secrets: Sequence[str] = (),
        credential_hint: str = "",
        rng: np.random.Generator,
        monitor: RetryMonitor | None = None,
    ):
        self.backend = backend
        self.send = send
        self.describe = describe
        self.policy = policy
        self.prices = prices
        self.log = log
        self.status_errors = status_errors
        self.connection_errors = connection_errors
        self.secrets = tuple(secrets)
        self.credential_hint = credential_hint
        self.rng = rng
        self.monitor = monitor if monitor is not None else MONITOR
        self.malformed_arguments = 0

    def call(self, body: dict[str, Any], *, turn: int) -> tuple[dict[str, Any], Reply, Usage]:
        """Send ``body`` until a complete response arrives; return it, its reading and the usage of every response.

        Raises
        ------
        FatalBackendError
            Authentication, permission, payment/quota or unknown-model errors.
        TransientBackendError, BackendRequestError, TruncatedResponseError
            Infrastructure errors of this run (the grid records them and redoes the run).
        """
        usage = Usage()
        for round_ in range(self.policy.truncation_retries + 1):
            self.log.write("api_request", backend=self.backend, turn=turn, round=round_, body=body)
            data, request_id, attempt = self._send(body, turn)
            reply = self.describe(data)
            cost = self.prices.usage(reply.counts)
            usage = usage + cost
            self.log.write(
                "api_response", backend=self.backend, turn=turn, round=round_, attempt=attempt,
                request_id=request_id, served_model=reply.served_model, stop_reason=reply.stop_reason,
                truncated=reply.truncated, usage=vars(cost), cost_usd=cost.cost_usd, reasoning=reply.reasoning,
                body=data,
            )
            if not reply.truncated:
                return data, reply, usage
            retrying = round_ < self.policy.truncation_retries
            self.log.write("truncated", backend=self.backend, turn=turn, round=round_,
                           stop_reason=reply.stop_reason, retrying=retrying)
        raise TruncatedResponseError(
            f"{self.backend}: the response to turn {turn} was truncated ({reply.stop_reason}) on all "
            f"{self.policy.truncation_retries + 1} attempts; raise max_tokens in the model config"
        )

    def _send(self, body: dict[str, Any], turn: int) -> tuple[dict[str, Any], str | None, int]:
        for attempt in range(1, self.policy.max_attempts + 1):
            try:
                data, request_id = self.send(body)
            except Exception as exc:
                failure = classify_error(exc, status_errors=self.status_errors, connection_errors=self.connection_errors)
                if failure is None:
                    raise
                failure = Failure(failure.kind, failure.status, failure.error_type,
                                  redact(failure.message, self.secrets), failure.retry_after)
                if failure.kind == "transient" and failure.status is None:
                    down = self.monitor.connection_failed(self.backend)
                    if down > self.policy.max_outage_s:
                        self.log.write("api_error", backend=self.backend, turn=turn, attempt=attempt, kind="outage",
                                       status=None, error_type=failure.error_type, message=failure.message)
                        raise FatalBackendError(
                            f"{self.backend}: unreachable for {down:.0f} s (more than retry.max_outage_s = "
                            f"{self.policy.max_outage_s:g}): {failure.describe()}. The grid stops; check the network "
                            "or the base URL and rerun (finished runs are kept)."
                        ) from None
                if failure.kind == "transient" and attempt < self.policy.max_attempts:
                    delay = self.policy.delay(attempt, rng=self.rng, retry_after=failure.retry_after)
                    self.log.write("retry", backend=self.backend, turn=turn, attempt=attempt, status=failure.status,
                                   error_type=failure.error_type, message=failure.message, delay_s=round(delay, 4))
                    self.monitor.notice(f"{self.backend}: {failure.describe()[:160]}; attempt {attempt + 1} of "
                                        f"{self.policy.max_attempts} in {delay:.0f} s")
                    time.sleep(delay)
                    continue
                self.log.write("api_error", backend=self.backend, turn=turn, attempt=attempt, kind=failure.kind,
                               status=failure.status, error_type=failure.error_type, message=failure.message)
                raise self._error(failure, attempt) from None
            self.monitor.succeeded(self.backend)
            return data, request_id, attempt
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _error(self, failure: Failure, attempt: int) -> Exception:
        if failure.kind == "fatal":
            hint = f"; {self.credential_hint}" if self.credential_hint and failure.status in (401, 403) else ""
            return FatalBackendError(f"{self.backend}: {failure.describe()}{hint}. The grid stops.")
        if failure.kind == "transient":
            return TransientBackendError(f"{self.backend}: gave up after {attempt} attempts: {failure.describe()}")
        return BackendRequestError(f"{self.backend}: request rejected: {failure.describe()}")

    def note_malformed(self, calls: Sequence[ToolCall], *, turn: int) -> None:
        """Log (and count) tool calls whose arguments are not valid JSON; they are passed on unchanged.

        The protocol answers such a call with an error observation the model can act on.
        """
        for call in calls:
            try:
                json.loads(call.arguments)
            except json.JSONDecodeError:
                self.malformed_arguments += 1
                self.log.write("malformed_tool_arguments", backend=self.backend, turn=turn, call_id=call.call_id,
                               tool=call.name, arguments=call.arguments, count=self.malformed_arguments)
