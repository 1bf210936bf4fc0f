"""Acceptance-time checks: work from a submitter names only endpoints its keys may go to.

The orchestrator's ``POST /runs``, the grading service's ``/grade`` and the agents runner's
``POST /runs`` call these before anything is stored or run. A caller-supplied endpoint is
accepted when a provider key of the service may go there (:class:`KeyPolicy`), or when the
caller names a secret the operator provisioned for exactly that endpoint; everything else is
refused with one line naming the field (``agents[0].api_base``, ``judge.api_key_secret``…).
The same rule holds again on every call (:func:`atoll.llm.endpoints.call_key`), so work that
reaches a worker some other way still cannot move a key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from atoll.errors import AtollError
from atoll.llm.arguments import INLINE_KEY_HELP, argument_problem
from atoll.llm.endpoints import KeyPolicy, model_problem, parse_endpoint, provider_of_call, within

if TYPE_CHECKING:
    from atoll.experiment import ExperimentSpec


def endpoint_problem(
    path: str,
    model: str,
    api_base: Any,
    *,
    api_base_field: str = "api_base",
    secret: Any = None,
    policy: KeyPolicy,
    also_allowed: Collection[str] = (),
) -> str | None:
    """None when a call of ``model`` to ``api_base`` with ``secret`` (a secret's name) keeps
    every key where it belongs; else one line naming the field under ``path``."""
    base_field = f"{path}.{api_base_field}"
    if problem := model_problem(model):
        return f"{path}.model: {problem}"
    if api_base is not None and (not isinstance(api_base, str) or parse_endpoint(api_base) is None):
        return f"{base_field}: {api_base!r} is not an http(s) URL"
    if secret is not None:
        secret_field = f"{path}.api_key_secret"
        provisioned = policy.secret(secret) if isinstance(secret, str) else None
        if provisioned is None:
            return f"{secret_field}: no secret named {secret!r} is provisioned on this service"
        if api_base is None:
            return f"{secret_field}: a secret is sent only to the endpoint named in {base_field}"
        if not provisioned.allows(api_base):
            return f"{base_field}: secret {secret!r} is not provisioned for {api_base!r}"
        return None
    if api_base is None:
        return None  # the provider's own endpoint (or the one the operator's environment sets)
    if within(api_base, also_allowed):
        return None
    provider = provider_of_call(model, api_base)
    if policy.allows(provider, api_base):
        return None
    # The allowed endpoints are not listed: they may name the operator's internal hosts.
    return (
        f"{base_field}: this service sends no {provider} calls to {api_base!r}: it is not on the "
        "service's endpoint allow-list (an operator adds endpoints with ATOLL_KEY_ENDPOINTS, or "
        "ATOLL_GRADER_ALLOWED_API_BASES for the grading service); a submitter's own endpoint needs "
        "a secret the operator provisioned for it, named in api_key_secret"
    )


def experiment_problem(spec: ExperimentSpec, policy: KeyPolicy | None = None) -> str | None:
    """The first endpoint of ``spec`` (its agents', its judge's and its coworker model's) that is refused, as one
    line naming the field; None when every one is accepted."""
    policy = policy or KeyPolicy.current()
    for index, agent in enumerate(spec.agents):
        if agent.model == "replay":
            continue
        path = f"agents[{index}]"
        config_base = agent.config.get("api_base")
        problem = endpoint_problem(
            path,
            agent.model,
            agent.api_base if agent.api_base is not None else config_base,
            api_base_field="api_base"
            if agent.api_base is not None or config_base is None
            else "config.api_base",
            secret=agent.api_key_secret,
            policy=policy,
        )
        if problem:
            return problem
    if spec.judge.model and (
        problem := endpoint_problem(
            "judge", spec.judge.model, spec.judge.api_base, secret=spec.judge.api_key_secret, policy=policy
        )
    ):
        return problem
    coworker = spec.coworker
    if coworker.model:
        return endpoint_problem(
            "coworker", coworker.model, coworker.api_base, secret=coworker.api_key_secret, policy=policy
        )
    return None


def check_experiment(spec: ExperimentSpec, *, code: str = "bad_experiment") -> None:
    """Raise AtollError(``code``) naming the first refused endpoint of ``spec``."""
    problem = experiment_problem(spec)
    if problem:
        raise AtollError(code, problem)


def check_judge_request(
    request: Mapping[str, Any], default_model: str | None, *, also_allowed: Collection[str] = ()
) -> None:
    """Raise AtollError(bad_input) naming the field when a grading request's judge would move
    a key: a key of its own (``api_key``, ``api_key_env``), extra arguments beyond generation
    parameters, or an endpoint off the service's list (``also_allowed``: the service's own)."""
    for name in ("api_key", "api_key_env"):
        if name in request:
            raise AtollError("bad_input", f"field judge.{name}: {INLINE_KEY_HELP}")
    extra = request.get("extra_args")
    if isinstance(extra, Mapping):
        problem = argument_problem(extra, "judge.extra_args")
        if problem:
            raise AtollError("bad_input", f"field {problem}")
    model = request.get("model") or default_model
    if "api_base" not in request and "api_key_secret" not in request and "model" not in request:
        return
    problem = endpoint_problem(
        "judge",
        model if isinstance(model, str) else "",
        request.get("api_base"),
        secret=request.get("api_key_secret"),
        policy=KeyPolicy.current(),
        also_allowed=also_allowed,
    )
    if problem:
        raise AtollError("bad_input", f"field {problem}")


def check_agent_request(
    *,
    model: str,
    api_base: str | None,
    config_api_base: str | None,
    api_key: str | None,
    api_key_secret: str | None,
    extra_args: Mapping[str, Any],
) -> None:
    """Raise AtollError(bad_input) naming the field when an agent run requested over HTTP
    would move the service's key: an inline key, arguments beyond generation parameters, or
    an endpoint off the service's list."""
    if api_key is not None:
        raise AtollError("bad_input", f"field api_key: {INLINE_KEY_HELP}")
    problem = argument_problem(extra_args, "config.extra_args")
    if problem is None and model != "replay":
        problem = endpoint_problem(
            "request",
            model,
            api_base if api_base is not None else config_api_base,
            api_base_field="api_base"
            if api_base is not None or config_api_base is None
            else "config.api_base",
            secret=api_key_secret,
            policy=KeyPolicy.current(),
        )
        problem = problem and problem.removeprefix("request.")
    if problem:
        raise AtollError("bad_input", f"field {problem}")


__all__ = [
    "check_agent_request",
    "check_experiment",
    "check_judge_request",
    "endpoint_problem",
    "experiment_problem",
]
