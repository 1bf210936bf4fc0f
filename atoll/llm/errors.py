"""What went wrong with a model call, in the classes that decide what happens next.

Every failure of :func:`atoll.llm.complete` leaves as one :class:`ModelError` whose ``kind``
says who must act:

- ``transient``: 5xx, timeouts, a dropped connection. Retried with backoff.
- ``rate_limited``: 429. Retried after the provider's ``Retry-After``; the provider's
  concurrency window shrinks.
- ``configuration``: the endpoint cannot work as configured — a bad or missing key (401,
  403, "missing credentials"), an unknown model or route (404, "LLM Provider NOT provided"),
  a configured ``api_base`` that refuses connections or whose host does not resolve. Never
  retried: the same call fails the same way until a person fixes the setup.
- ``context_window``: the prompt is longer than the model's window (the caller shrinks it).
- ``content``: the provider rejected this request (other 4xx, content policy) or failed in a
  way we do not recognise. Not retried.
- ``cost_ceiling``: the shared cost ledger's ceiling is reached; nothing was sent.

litellm wraps the transport's failures inconsistently (a refused connection and a missing
OpenAI key both arrive as ``InternalServerError`` with status 500), so the class is read from
the whole exception chain, not from the outer type.
"""

from __future__ import annotations

import json
import re
import socket
from enum import StrEnum
from typing import Any

from atoll.errors import AtollError, ErrorCode


class ModelErrorKind(StrEnum):
    transient = "transient"
    rate_limited = "rate_limited"
    configuration = "configuration"
    context_window = "context_window"
    content = "content"
    cost_ceiling = "cost_ceiling"


RETRIED = frozenset({ModelErrorKind.transient, ModelErrorKind.rate_limited})


class ModelError(AtollError):
    """A model call failed; ``str()`` is one line naming the model, the URL and the
    provider's message (``configuration error from model endpoint openai/x at
    http://…/v1: HTTP 401: Incorrect API key``). ``retries`` counts the retries spent."""

    def __init__(
        self,
        kind: ModelErrorKind,
        *,
        model: str,
        api_base: str | None,
        message: str,
        status: int | None = None,
        retry_after_s: float | None = None,
        retries: int = 0,
    ) -> None:
        self.kind = kind
        self.model = model
        self.api_base = api_base
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s
        self.retries = retries
        Exception.__init__(self, self.line())
        self.code = ErrorCode(f"model_{kind.value}")  # message stays the provider's; str() is the whole line

    @property
    def retryable(self) -> bool:
        return self.kind in RETRIED

    @property
    def where(self) -> str:
        return f"{self.model} at {self.api_base or _default_endpoint(self.model)}"

    @property
    def detail(self) -> str:
        """The provider's side of the line: HTTP status, message, retries spent."""
        status = f"HTTP {self.status}: " if self.status and str(self.status) not in self.message else ""
        retried = f" (after {self.retries} retries)" if self.retries else ""
        return f"{status}{self.message}{retried}"

    def line(self) -> str:
        return f"{self.kind.value} error from model endpoint {self.where}: {self.detail}"

    def __str__(self) -> str:
        return self.line()


def _default_endpoint(model: str) -> str:
    provider = model.split("/", 1)[0] if "/" in model else model
    return f"{provider}'s default endpoint"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


_PREFIX = re.compile(r"^(?:litellm\.)?[A-Za-z]*(?:Error|Exception)(?: - |: )\s*")
_CONFIGURATION_TEXT = (
    "missing credentials",
    "api_key client option must be set",
    "no api key",
    "api key is missing",
    "missing anthropic api key",
    "llm provider not provided",
    "incorrect api key",
    "invalid api key",
    "invalid_api_key",
)


# A provider's 400 that refuses a parameter rather than this request's content (OpenAI's
# "Unsupported parameter"/"Unsupported value", Anthropic's thinking rules, Gemini's unknown field).
_PARAMETER_TEXT = (
    "unsupported parameter",
    "unsupported value",
    "unsupported_parameter",
    "unsupported_value",
    "is not supported with this model",
    "budget_tokens",
    "thinking is enabled",
    "thinking_level",
    "thinking level",
    "invalid json payload received. unknown name",
)
PARAMETER_ADVICE = (
    "change or remove that parameter in the experiment (extra_args, config, thinking) or the judge "
    "settings; docs/models.md lists what each model accepts"
)
_LITELLM_ADVICE = re.compile(
    r"\s*(to drop (these|unsupported params)|if you want to use these params).*$", re.I | re.S
)


def unsupported_parameter_message(text: str) -> str:
    """litellm's refusal of a parameter without its advice to change a litellm setting."""
    return _LITELLM_ADVICE.sub("", text).rstrip(" .,;") or text


def provider_message(exc: BaseException, limit: int = 300) -> str:
    """The provider's own words: the ``error.message`` of an HTTP error body, the OS error of
    a failed connection, else the exception text without litellm's class-name prefixes."""
    for link in _chain(exc):
        response = getattr(link, "response", None)
        text = _body_message(response)
        if text:
            return _clip(text, limit)
    for link in reversed(_chain(exc)):
        if isinstance(link, (ConnectionRefusedError, socket.gaierror)):
            return _clip(f"{_connect_reason(link)} ({link})", limit)
    raw = str(getattr(exc, "message", None) or exc).strip()
    text = raw.splitlines()[0] if raw else type(exc).__name__
    while True:
        stripped = _PREFIX.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    return _clip(text or type(exc).__name__, limit)


def _body_message(response: Any) -> str | None:
    if response is None or not hasattr(response, "status_code"):
        return None
    try:
        raw = response.text
    except Exception:  # noqa: BLE001 - a streamed body may not be readable; the type says enough
        return None
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.strip().splitlines()[0] if raw.strip() else None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return raw.strip()[:300]


def _connect_reason(exc: BaseException) -> str:
    return "connection refused" if isinstance(exc, ConnectionRefusedError) else "host name does not resolve"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _status(chain: list[BaseException]) -> int | None:
    for link in chain:
        response = getattr(link, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int) and status >= 400:
            return status
    status = getattr(chain[0], "status_code", None)
    return status if isinstance(status, int) else None


def classify(exc: BaseException, *, model: str, api_base: str | None) -> ModelError:
    """The :class:`ModelError` for any exception raised while calling ``model``."""
    if isinstance(exc, ModelError):
        return exc
    from atoll.llm.retry import retry_after_s  # the header parsing lives with the policy

    chain = _chain(exc)
    names = {type(link).__name__ for link in chain}
    text = " ".join(str(link) for link in chain).lower()
    status = _status(chain)
    message = provider_message(exc)

    # litellm gives errors raised before any answer (refused connection, missing key) a
    # made-up status; only a status a server sent is worth showing.
    answered = "HTTPStatusError" in names

    def error(kind: ModelErrorKind) -> ModelError:
        return ModelError(
            kind,
            model=model,
            api_base=api_base,
            message=message,
            status=status if answered else None,
            retry_after_s=retry_after_s(exc) if kind is ModelErrorKind.rate_limited else None,
        )

    if "ContextWindowExceededError" in names or "context_length_exceeded" in text:
        return error(ModelErrorKind.context_window)
    if "UnsupportedParamsError" in names:
        # litellm refused to send a parameter the model does not take; its advice (a litellm
        # setting) is not one an atoll user can follow, so the line says what they can do.
        return ModelError(
            ModelErrorKind.configuration,
            model=model,
            api_base=api_base,
            message=f"{unsupported_parameter_message(message)}; {PARAMETER_ADVICE}",
        )
    if any(isinstance(link, (ConnectionRefusedError, socket.gaierror)) for link in chain):
        # A configured endpoint that is not there will not appear by retrying; the provider's
        # own default endpoint failing to resolve is more likely a network blip.
        return error(ModelErrorKind.configuration if api_base else ModelErrorKind.transient)
    if any(marker in text for marker in _CONFIGURATION_TEXT):
        return error(ModelErrorKind.configuration)
    if status == 400 and any(marker in text for marker in _PARAMETER_TEXT):
        # The provider refused a parameter: every call of this configuration fails the same way.
        return error(ModelErrorKind.configuration)
    if status in (401, 403, 404) or names & {"AuthenticationError", "PermissionDeniedError", "NotFoundError"}:
        return error(ModelErrorKind.configuration)
    if status == 429 or "RateLimitError" in names:
        return error(ModelErrorKind.rate_limited)
    if isinstance(exc, TimeoutError) or names & {
        "Timeout",
        "APITimeoutError",
        "ReadTimeout",
        "ConnectTimeout",
    }:
        return error(ModelErrorKind.transient)
    if "ContentPolicyViolationError" in names:
        return error(ModelErrorKind.content)
    if status is not None and (status >= 500 or status in (408, 409)):
        return error(ModelErrorKind.transient)
    if status is not None and 400 <= status < 500:
        return error(ModelErrorKind.content)
    if names & {
        "APIConnectionError",
        "ConnectError",
        "RemoteProtocolError",
        "ReadError",
        "ConnectionResetError",
    }:
        return error(ModelErrorKind.transient)
    if isinstance(exc, OSError):
        return error(ModelErrorKind.transient)
    return error(ModelErrorKind.content)
