"""Where a key may go: the one rule every model call and every accepted request follows.

A provider key that a service holds (its environment's ``OPENAI_API_KEY``…, or a variable its
settings name with ``api_key_env``) is sent only to an endpoint on that provider's
allow-list:

- the provider's public endpoint(s) (:data:`PUBLIC_ENDPOINTS`), unless the operator's
  ``ATOLL_KEY_ENDPOINTS`` names the provider (``openai=https://proxy.corp/v1,anthropic=…``;
  ``*=URL`` for every provider), which then replaces them;
- the endpoints the service's own settings set for a model of that provider
  (``ATOLL_API_BASE`` for ``ATOLL_MODEL``/``ATOLL_JUDGE_MODEL``, ``ATOLL_JUDGE_API_BASE`` for
  ``ATOLL_JUDGE_MODEL``, the grading service's judge
  ``api_base`` and ``ATOLL_GRADER_ALLOWED_API_BASES`` for its judge model, an operator's
  command-line ``--api-base`` for its ``--model``, each agent's and the judge's endpoint of an
  experiment file the operator runs with ``atoll run``), which the process registers with
  :func:`trust_endpoints`. An operator's endpoint is trusted with the key of the provider it
  was set for, never with every key the service holds: a vLLM box set for ``openai/…`` never
  receives the Anthropic key.

A submitter brings a key only as the name of a secret the operator provisioned
(``api_key_secret: NAME``): ``ATOLL_SECRET_<NAME>`` holds it and
``ATOLL_SECRET_<NAME>_ENDPOINTS`` the endpoints it may be sent to (or the files ``NAME`` and
``NAME.endpoints`` in ``ATOLL_SECRETS_DIR``). :func:`call_key` applies the rule to each call;
:mod:`atoll.llm.admission` applies it when work is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from atoll.errors import AtollError, ErrorCode
from atoll.settings import environ as current_environ

# litellm's default endpoint of each provider atoll documents (litellm/llms/*: api.openai.com,
# api.anthropic.com, generativelanguage.googleapis.com, api.x.ai, api.moonshot.ai, …).
PUBLIC_ENDPOINTS: dict[str, tuple[str, ...]] = {
    "openai": ("https://api.openai.com",),
    "text-completion-openai": ("https://api.openai.com",),
    "anthropic": ("https://api.anthropic.com",),
    "gemini": ("https://generativelanguage.googleapis.com",),
    "xai": ("https://api.x.ai",),
    "moonshot": ("https://api.moonshot.ai", "https://api.moonshot.cn"),
    "deepseek": ("https://api.deepseek.com",),
    "mistral": ("https://api.mistral.ai",),
    "groq": ("https://api.groq.com",),
    "together_ai": ("https://api.together.xyz", "https://api.together.ai"),
    "fireworks_ai": ("https://api.fireworks.ai",),
    "openrouter": ("https://openrouter.ai",),
    "perplexity": ("https://api.perplexity.ai",),
    "cerebras": ("https://api.cerebras.ai",),
    "deepinfra": ("https://api.deepinfra.com",),
}

# Providers whose only credential is the ``api_key`` litellm sends, an explicit one winning
# over the environment's: a call of theirs to an endpoint off the list can carry a
# placeholder. Other providers (bedrock, vertex_ai, azure, sagemaker, watsonx…) sign or
# authenticate with further credentials from the environment, so atoll calls them only on
# listed endpoints.
KEY_ONLY_PROVIDERS = frozenset(
    {
        *PUBLIC_ENDPOINTS,
        "hosted_vllm",
        "custom_openai",
        "ollama",
        "ollama_chat",
        "lm_studio",
        "llamafile",
    }
)
PLACEHOLDER_KEY = "none"  # local servers take any key; the openai client refuses to send none
_SECRET_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
# This process's operator-set endpoints (trust_endpoints), each with the model it was set for
# (its provider is looked up when a policy is made: registering one imports no litellm).
_TRUSTED: set[tuple[str, str]] = set()


class KeyRefused(AtollError):
    """A call or request would send a key where it may not go (code ``key_refused``)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.key_refused, message)


@dataclass(frozen=True)
class _Url:
    scheme: str
    host: str
    port: int
    path: str

    def covers(self, other: _Url) -> bool:
        """``other`` is this endpoint or below it (same scheme, host and port; path prefix)."""
        if (self.scheme, self.host, self.port) != (other.scheme, other.host, other.port):
            return False
        prefix = self.path.rstrip("/")
        return not prefix or other.path.rstrip("/") == prefix or other.path.startswith(prefix + "/")


def _climbs(path: str) -> bool:
    """True when ``path`` has a ``.`` or ``..`` segment (also percent-encoded) or an encoded
    separator: the HTTP client removes dot segments before sending (``/team-a/../team-b`` is
    sent as ``/team-b``) and servers decode ``%2e``/``%2f``, so a path-prefix match on the
    written form would not hold for where the request goes."""
    lowered = path.lower()
    if "%2f" in lowered or "%5c" in lowered:
        return True
    return any(unquote(segment) in (".", "..") for segment in path.split("/"))


def parse_endpoint(url: str) -> _Url | None:
    """The parts of an http(s) endpoint URL that decide where a request goes; None for
    anything else (another scheme, user info, no host, a bad port, control characters, a
    path with dot segments or encoded separators)."""
    if not isinstance(url, str) or any(ord(char) < 33 or char == "\\" for char in url):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return None
    if _climbs(parts.path):
        return None
    host = parts.hostname.lower().rstrip(".")
    return _Url(scheme, host, port or (443 if scheme == "https" else 80), parts.path or "/")


def within(url: str | None, prefixes: Iterable[str]) -> bool:
    """True when ``url`` is one of ``prefixes`` or below one (same scheme, host and port;
    path prefix on a ``/`` boundary), judged on where a request to it really goes
    (:func:`parse_endpoint`: user info, dot segments and encoded separators never match)."""
    target = parse_endpoint(url) if url else None
    return target is not None and any(
        (listed := parse_endpoint(prefix)) is not None and listed.covers(target) for prefix in prefixes
    )


def same_endpoint(first: str | None, second: str | None) -> bool:
    """True when both are None (the provider's own endpoint) or name the same endpoint
    (scheme, host, port and path, a trailing ``/`` aside)."""
    if first is None or second is None:
        return first is second
    one, other = parse_endpoint(first), parse_endpoint(second)
    if one is None or other is None:
        return first == second
    return one == _Url(other.scheme, other.host, other.port, one.path) and (
        one.path.rstrip("/") == other.path.rstrip("/")
    )


def _urls(text: str | Iterable[str] | None) -> list[str]:
    if text is None:
        return []
    items = re.split(r"[,\s]+", text) if isinstance(text, str) else list(text)
    return [item.strip() for item in items if item and item.strip()]


@dataclass(frozen=True)
class Secret:
    """An operator-provisioned key and the endpoints it may be sent to; never shown in ``repr``."""

    name: str
    value: str = field(repr=False)
    endpoints: tuple[str, ...] = ()

    def allows(self, api_base: str | None) -> bool:
        return within(api_base, self.endpoints)


def trust_endpoints(calls: Iterable[tuple[str | None, str | None]]) -> None:
    """Register the (model, endpoint) pairs this process's operator set (service settings,
    command-line options, an experiment file run with ``atoll run``): the key of that model's
    provider may go to that endpoint. A pair missing either half is skipped."""
    _TRUSTED.update((model, url) for model, url in calls if model and url)


def _trusted_pairs(calls: Iterable[tuple[str | None, str | None]]) -> list[tuple[str, str]]:
    """(provider, endpoint) of each (model, endpoint) pair with both halves."""
    return [(provider_of_call(model, url), url) for model, url in calls if model and url]


def forget_trusted_endpoints() -> None:
    """Forget what :func:`trust_endpoints` registered (tests)."""
    _TRUSTED.clear()


@dataclass
class KeyPolicy:
    """The allow-lists of one process, read from its environment (see the module docstring)."""

    endpoints: dict[str, tuple[str, ...]]
    trusted: tuple[tuple[str, str], ...]  # (provider, endpoint) the operator set
    environ: Mapping[str, str]

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None) -> KeyPolicy:
        """The policy now: ``ATOLL_KEY_ENDPOINTS`` over the public endpoints, plus the
        endpoints this process's operator set. Raises KeyRefused for a malformed setting."""
        environ = current_environ() if environ is None else environ
        endpoints = dict(PUBLIC_ENDPOINTS)
        configured: dict[str, list[str]] = {}
        for entry in _urls(environ.get("ATOLL_KEY_ENDPOINTS")):
            provider, equals, url = entry.partition("=")
            if not equals or not provider or parse_endpoint(url) is None:
                raise KeyRefused(
                    f"ATOLL_KEY_ENDPOINTS: {entry!r} is not PROVIDER=http(s)://host[:port][/path]"
                )
            configured.setdefault(provider.strip(), []).append(url)
        endpoints.update({provider: tuple(urls) for provider, urls in configured.items()})
        settings = [
            (environ.get(model_variable), url)
            for model_variable, base_variable in (
                ("ATOLL_MODEL", "ATOLL_API_BASE"),
                ("ATOLL_JUDGE_MODEL", "ATOLL_API_BASE"),
                ("ATOLL_JUDGE_MODEL", "ATOLL_JUDGE_API_BASE"),
            )
            for url in _urls(environ.get(base_variable))
        ]
        trusted = _trusted_pairs([*_TRUSTED, *settings])
        return cls(endpoints=endpoints, trusted=tuple(trusted), environ=environ)

    def allowed(self, provider: str) -> list[str]:
        """The endpoints a key of ``provider`` may be sent to."""
        own = [url for trusted_for, url in self.trusted if trusted_for == provider]
        return [*self.endpoints.get(provider, ()), *self.endpoints.get("*", ()), *own]

    def allows(self, provider: str, api_base: str) -> bool:
        return within(api_base, self.allowed(provider))

    def secret(self, name: str) -> Secret | None:
        """The provisioned secret ``name``; None when there is none (or the name is invalid)."""
        if not _SECRET_NAME.match(name or "") or name.endswith("_ENDPOINTS"):
            return None
        value = self.environ.get(f"ATOLL_SECRET_{name}")
        bound = self.environ.get(f"ATOLL_SECRET_{name}_ENDPOINTS")
        folder = self.environ.get("ATOLL_SECRETS_DIR")
        if value is None and folder:
            value, bound = _read_secret_files(Path(folder), name)
        if not value:
            return None
        return Secret(name, value.strip(), tuple(_urls(bound)))


def _read_secret_files(folder: Path, name: str) -> tuple[str | None, str | None]:
    def read(path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8") if path.is_file() and not path.is_symlink() else None
        except OSError:
            return None

    return read(folder / name), read(folder / f"{name}.endpoints")


def model_problem(model: str) -> str | None:
    """None for a plain model name; else why it may not be called: some litellm providers
    (huggingface/https://…) take a URL in the model name as the endpoint, with the key."""
    if not isinstance(model, str) or "://" in model or any(ord(char) < 33 for char in model):
        return f"model {model!r} is not a plain model name (an endpoint goes in api_base, never in the model)"
    return None


def provider_of_call(model: str, api_base: str | None = None) -> str:
    """The provider litellm will use for ``model`` (its prefix when litellm cannot tell)."""
    from atoll.llm.limits import provider_of

    try:
        import litellm

        provider = litellm.get_llm_provider(model=model, api_base=api_base)[1]
    except Exception:  # noqa: BLE001 - an unknown provider: litellm refuses the call itself
        provider = None
    return provider or provider_of(model)


def call_key(
    model: str,
    api_base: str | None,
    *,
    api_key: str | None = None,
    secret: str | None = None,
    key_env: str | None = None,
    policy: KeyPolicy | None = None,
) -> str | None:
    """The ``api_key`` to hand litellm for one call; None lets litellm read the provider's
    key from the environment, which it does only when that key may go to the endpoint.

    - ``secret`` (a provisioned secret's name): its value, when it is bound to ``api_base``;
    - ``api_key``: sent as given (the caller's own key for this endpoint);
    - ``key_env`` (a variable the service's settings name) and the provider's environment
      key: only to ``api_base`` None (the provider's configured endpoint) or a listed one;
    - otherwise, off the list: a placeholder, for providers whose only credential is that key.

    Raises KeyRefused (one line naming model, endpoint and the setting) for everything else."""
    policy = policy or KeyPolicy.current()
    where = f"{model} at {api_base}"
    if problem := model_problem(model):
        raise KeyRefused(problem)
    if secret:
        provisioned = policy.secret(secret)
        if provisioned is None:
            raise KeyRefused(f"{where}: no secret named {secret!r} is provisioned on this service")
        if not provisioned.allows(api_base):
            raise KeyRefused(f"{where}: secret {secret!r} is not bound to this endpoint")
        return provisioned.value
    if api_key:
        return api_key
    provider = provider_of_call(model, api_base)
    allowed = api_base is None or policy.allows(provider, api_base)
    if key_env:
        if not allowed:
            raise KeyRefused(
                f"{where}: the key in ${key_env} is not sent to an endpoint off {provider}'s "
                "allow-list (ATOLL_KEY_ENDPOINTS)"
            )
        return policy.environ.get(key_env) or None
    if allowed:
        # A listed OpenAI-compatible endpoint while no key is set (a local vLLM): litellm would
        # find none and refuse to send; a placeholder lets the call go.
        keyless = api_base and provider in KEY_ONLY_PROVIDERS and not policy.environ.get(_env_key(provider))
        return PLACEHOLDER_KEY if keyless else None
    if provider not in KEY_ONLY_PROVIDERS:
        raise KeyRefused(
            f"{where}: {provider} takes credentials from this service's environment, so it is called "
            "only at endpoints on its allow-list (ATOLL_KEY_ENDPOINTS)"
        )
    return PLACEHOLDER_KEY


_ENV_KEYS = {
    "text-completion-openai": "OPENAI_API_KEY",
    "custom_openai": "OPENAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
}


def _env_key(provider: str) -> str:
    """The variable litellm reads ``provider``'s key from."""
    return _ENV_KEYS.get(provider, f"{provider.upper()}_API_KEY")


_SECRET_VARIABLE = re.compile(r"(^ATOLL_SECRET_|_API_KEY$|_KEY$|_TOKEN$|_SECRET$|_SECRET_ACCESS_KEY$)")


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every key-like environment variable (provider keys,
    provisioned secrets, service tokens) replaced by ``[redacted]``."""
    environ = current_environ() if environ is None else environ
    for name, value in environ.items():
        if len(value) >= 8 and _SECRET_VARIABLE.search(name) and not name.endswith("_ENDPOINTS"):
            text = text.replace(value, "[redacted]")
    return text


__all__ = [
    "KEY_ONLY_PROVIDERS",
    "PLACEHOLDER_KEY",
    "PUBLIC_ENDPOINTS",
    "KeyPolicy",
    "KeyRefused",
    "Secret",
    "call_key",
    "forget_trusted_endpoints",
    "model_problem",
    "parse_endpoint",
    "provider_of_call",
    "redact",
    "same_endpoint",
    "trust_endpoints",
    "within",
]
