"""Preflight: one minimal completion per distinct (model, api_base) before any trial runs.

A wrong ``api_base``, a missing key or an unknown model otherwise surfaces only after the
first trials have spent their retries. :func:`preflight` sends a one-token request to each
endpoint an experiment uses (its model-driven agents and its judge) at once and raises one
:class:`~atoll.errors.AtollError` (code ``model_endpoint``) naming the model, the URL and the
provider's message. An endpoint that answers — even with a rate limit or a rejection of the
tiny request itself — is reachable and accepts the key, which is all preflight checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec

PREFLIGHT_TIMEOUT_S = 20.0
_PROBE = [{"role": "user", "content": "Reply with the word ok."}]


@dataclass
class Probe:
    """One endpoint to check and who uses it (``agent NAME``, ``judge``)."""

    model: str
    api_base: str | None
    used_by: list[str] = field(default_factory=list)
    arguments: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = field(default=None, repr=False)


def experiment_probes(
    spec: ExperimentSpec,
    *,
    uses_model: Callable[[str], bool],
    agents: bool = True,
    judge: bool = True,
) -> list[Probe]:
    """The distinct (model, api_base) pairs of ``spec``'s agents and judge.

    ``uses_model(agent_name)`` tells whether an agent implementation calls a model (its
    registry flag: the replay agent does not); ``agents``/``judge`` False leave those out (their calls are made
    by a remote service that holds its own credentials)."""
    probes: dict[tuple[str, str | None], Probe] = {}

    def add(model: str, api_base: str | None, who: str, extra: dict[str, Any]) -> None:
        probe = probes.setdefault((model, api_base), Probe(model, api_base, arguments=dict(extra)))
        probe.used_by.append(who)

    if agents:
        for agent in spec.agents:
            if agent.model == "replay" or not uses_model(agent.agent):
                continue
            add(
                agent.model,
                agent.api_base or agent.config.get("api_base"),
                f"agent {agent.name}",
                agent.extra_args,
            )
    if judge and spec.judge.model:
        add(spec.judge.model, spec.judge.api_base, "judge", spec.judge.extra_args)
    return list(probes.values())


async def check(probe: Probe, *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """None when the endpoint answers; else the one-line reason it cannot be used."""
    from atoll.llm.client import Endpoint, complete
    from atoll.llm.errors import ModelError, ModelErrorKind
    from atoll.llm.limits import CostLedger, ProviderLimiter
    from atoll.llm.retry import RetryBudget, RetryPolicy

    arguments = {**probe.arguments, "max_tokens": 1}
    # One quick retry for a blip; a private limiter and ledger, so a probe never waits
    # behind or counts against the run's own calls.
    policy = RetryPolicy(
        max_retries=1, initial_wait_s=0.5, max_wait_s=2.0, deadline_s=timeout_s, budget=RetryBudget(1)
    )
    try:
        await complete(
            Endpoint(probe.model, probe.api_base, probe.api_key),
            _PROBE,
            role="preflight",
            arguments=arguments,
            timeout_s=timeout_s,
            retry=policy,
            limiter=ProviderLimiter(),
            ledger=CostLedger(),
        )
    except ModelError as error:
        if error.kind in (ModelErrorKind.rate_limited, ModelErrorKind.content, ModelErrorKind.context_window):
            return None  # it answered: reachable, and the key was accepted
        return f"{error.where} ({', '.join(probe.used_by)}): {error.kind.value} error: {error.detail}"
    return None


async def preflight(probes: Iterable[Probe], *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> int:
    """Check every probe at once; returns how many were checked.

    Raises AtollError("model_endpoint") with one line for the first endpoint that failed
    (and how many others did)."""
    probes = list(probes)
    reasons = [r for r in await asyncio.gather(*(check(p, timeout_s=timeout_s) for p in probes)) if r]
    if reasons:
        more = f" (and {len(reasons) - 1} more failing endpoint(s))" if len(reasons) > 1 else ""
        raise AtollError(
            "model_endpoint",
            f"model endpoint check failed: {reasons[0]}{more}; fix the endpoint or key, or skip this check "
            "with --no-preflight",
        )
    return len(probes)
