"""Acceptance-time checks: work from a submitter names only endpoints its keys may go to.

The orchestrator's ``POST /runs``, the grading service's ``/grade`` and the agents runner's
``POST /runs`` call these before anything is stored or run. A caller-supplied endpoint is
accepted when a provider key of the service may go there (:class:`KeyPolicy`), or when the
caller names a secret the operator provisioned for exactly that endpoint; everything else is
refused with one line naming the field (``agents[0].api_base``, ``judge.api_key_secret``…).
The same rule holds again on every call (:func:`atoll.llm.endpoints.call_key`), so work that
reaches a worker some other way still cannot move a key. :func:`judge_from_request` reads a
grading request's judge over the service's own, checked so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.judge import KEY_FIELDS, JudgeConfig
from atoll.llm.endpoints import (
    KeyPolicy,
    model_problem,
    parse_endpoint,
    provider_of_call,
    same_endpoint,
    within,
)
from atoll.llm.profiles import ProfileError, checked_judge
from atoll.model_arguments import INLINE_KEY_HELP, argument_problem

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


def check_experiment(spec: ExperimentSpec, *, code: ErrorCode = ErrorCode.bad_experiment) -> None:
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
    for name in KEY_FIELDS:
        if name in request:
            raise AtollError(ErrorCode.bad_input, f"field judge.{name}: {INLINE_KEY_HELP}")
    extra = request.get("extra_args")
    if isinstance(extra, Mapping):
        problem = argument_problem(extra, "judge.extra_args")
        if problem:
            raise AtollError(ErrorCode.bad_input, f"field {problem}")
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
        raise AtollError(ErrorCode.bad_input, f"field {problem}")


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
        raise AtollError(ErrorCode.bad_input, f"field api_key: {INLINE_KEY_HELP}")
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
        raise AtollError(ErrorCode.bad_input, f"field {problem}")


def judge_from_request(
    request: Any,
    default: JudgeConfig | None = None,
    *,
    allowed_api_bases: Collection[str] | None = None,
) -> JudgeConfig | None:
    """The judge a wire-form ``request`` asks for, over the receiver's ``default``.

    None (no request) keeps ``default``; ``{"model": null}`` or the older ``{"none": true}``
    means no judge; other fields override ``default``'s, whose key (``api_key``,
    ``api_key_env``) is kept and never taken from the request. Raises AtollError(bad_input)
    naming the field for a request that is not an object or has an invalid field.

    ``allowed_api_bases`` (a service's setting; None: not checked) guards the receiver's keys
    (:func:`check_judge_request`): the call goes only to the default's
    ``api_base``, one of these, an endpoint on the service's key allow-list or one a named
    secret is provisioned for; the request carries no key and ``extra_args`` only generation
    parameters, so a caller cannot have the service's key sent to an endpoint of its choosing."""
    if request is None:
        return default
    if not isinstance(request, Mapping):
        raise AtollError(ErrorCode.bad_input, "field judge: expected a JSON object")
    if request.get("none") is True or ("model" in request and request["model"] is None):
        return None
    if allowed_api_bases is not None:
        own = [default.api_base] if default is not None and default.api_base else []
        check_judge_request(
            request, default.model if default else None, also_allowed=[*own, *allowed_api_bases]
        )
    overrides = {key: value for key, value in request.items() if key not in KEY_FIELDS}
    base = default.model_dump(exclude=set(KEY_FIELDS)) if default else {}
    if "api_base" in overrides and "api_key_secret" not in overrides:
        base.pop("api_key_secret", None)  # a secret is bound to its endpoint, not to a new one
    try:
        merged = checked_judge(JudgeConfig.model_validate({**base, **overrides}))
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_input, f"field judge: {describe_validation(exc)}") from None
    except ProfileError as exc:  # a parameter the model refuses, named with the model
        raise AtollError(ErrorCode.bad_input, f"field judge: {exc.message}") from None
    if (
        default is not None
        and same_endpoint(merged.api_base, default.api_base)
        and _same_provider(merged.model, default.model)
    ):
        # The operator's judge key is for the operator's judge endpoint and its provider: a
        # request that picks another endpoint (one of allowed_api_bases) or another provider's
        # model gets the key that provider may receive there (atoll.llm.endpoints.call_key),
        # never this one.
        merged.api_key = default.api_key
        merged.api_key_env = default.api_key_env
    return merged


def _same_provider(model: str, other: str) -> bool:
    if model == other:
        return True
    return provider_of_call(model) == provider_of_call(other)


__all__ = [
    "check_agent_request",
    "check_experiment",
    "check_judge_request",
    "endpoint_problem",
    "experiment_problem",
    "judge_from_request",
]
