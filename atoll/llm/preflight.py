"""Preflight: the exact call the run will make, once per distinct call, before any trial runs.

A wrong ``api_base``, a missing key, an unknown model or a parameter the provider refuses
otherwise surfaces only after the first trials have spent their retries (or, for the judge,
as every criterion "ungradeable"). :func:`preflight` tries, at once, one tool-calling turn per
distinct agent call (model, endpoint, the agent's real litellm arguments, streamed or not,
with a tool of the shape the run's tools have) and one verdict per distinct judge call (the
judge's real arguments and verdict form), and raises one :class:`~atoll.errors.AtollError`
(code ``model_endpoint``) naming the endpoint, the model, who uses it and the provider's own
words. Only a rate limit counts as an answer: any other refusal of the exact call is what
every call of the run would get.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from atoll.errors import AtollError, ErrorCode
from atoll.experiment import ExperimentSpec

# One call with the run's parameters: a reasoning model at thinking high may take a while to
# answer; a misconfigured one is refused at once.
PREFLIGHT_TIMEOUT_S = 90.0
# A tool of the shape the agents' tools have (the gateway's ``{server}_{tool}`` names, an
# object of typed properties with a required one), so a provider that refuses the run's tool
# definitions refuses this one too.
PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "filesystem_read_text_file",
        "description": "Read a text file of the world's filesystem.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the filesystem root."},
                "max_chars": {"type": "integer", "description": "Most characters to return."},
            },
            "required": ["path"],
        },
    },
}
AGENT_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are checking that tool calls work. Use the tools you are given."},
    {"role": "user", "content": "Read the file notes.txt with the filesystem_read_text_file tool."},
]
_PROBE = [{"role": "user", "content": "Reply with the word ok."}]
_SHOWN = (
    "temperature",
    "top_p",
    "seed",
    "reasoning_effort",
    "thinking",
    "max_tokens",
    "max_completion_tokens",
)


@dataclass
class Probe:
    """One call to try and who makes it (``agent NAME``, ``judge``): the model, its endpoint,
    the messages, tools and litellm arguments the run sends, and whether it streams."""

    model: str
    api_base: str | None
    used_by: list[str] = field(default_factory=list)
    arguments: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = field(default=None, repr=False)
    secret: str | None = None  # name of an operator-provisioned secret (atoll.llm.endpoints)
    messages: list[dict[str, Any]] = field(default_factory=lambda: list(_PROBE))
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    tries: str = "one completion"

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two probes the same call (who makes it does not)."""
        return (
            self.model,
            self.api_base,
            self.secret,
            json.dumps(self.arguments, sort_keys=True, default=str),
            json.dumps(self.tools, sort_keys=True),
            self.stream,
            self.tries,
        )


# (JudgeConfig) -> (messages, arguments) of one verdict call: the grader's prompt and verdict
# form, supplied by the command layer (atoll does not import the grader).
JudgeCall = Callable[[Any], tuple[list[dict[str, Any]], dict[str, Any]]]


def experiment_probes(
    spec: ExperimentSpec,
    *,
    uses_model: Callable[[str], bool],
    agents: bool = True,
    judge: bool = True,
    judge_call: JudgeCall | None = None,
) -> list[Probe]:
    """The distinct calls of ``spec``'s agents and judge, each with the arguments the run sends.

    ``uses_model(agent_name)`` tells whether an agent implementation calls a model (its
    registry flag: the replay agent does not); ``agents``/``judge`` False leave those out (their
    calls are made by a remote service that holds its own credentials). ``judge_call`` builds
    the judge's verdict call (without it the judge is tried with its arguments and a plain
    prompt). Raises :class:`~atoll.llm.profiles.ProfileError` for a parameter a model refuses."""
    from atoll.agent_config import AgentConfig
    from atoll.llm.profiles import agent_arguments, experiment_judge, judge_arguments

    probes: dict[tuple[Any, ...], Probe] = {}

    def add(probe: Probe, who: str) -> None:
        probes.setdefault(probe.key, probe).used_by.append(who)

    if agents:
        for agent in spec.agents:
            if agent.model == "replay" or not uses_model(agent.agent):
                continue
            config = AgentConfig.model_validate(
                {
                    **agent.config,
                    **({"extra_args": dict(agent.extra_args)} if agent.extra_args else {}),
                    **({"thinking": agent.thinking} if agent.thinking is not None else {}),
                }
            )
            who = f"agent {agent.name}"
            probe = Probe(
                agent.model,
                agent.api_base or config.api_base,
                secret=agent.api_key_secret,
                arguments=agent_arguments(agent.model, config, where=who),
                messages=list(AGENT_MESSAGES),
                tools=[PROBE_TOOL],
                stream=config.stream,
                tries="a tool-calling turn",
            )
            add(probe, who)
    judge_config = experiment_judge(spec) if judge else None
    if judge_config is not None:
        if judge_call is not None:
            messages, arguments = judge_call(judge_config)
        else:
            messages, arguments = list(_PROBE), judge_arguments(judge_config)
        probe = Probe(
            judge_config.model,
            judge_config.api_base,
            secret=judge_config.api_key_secret,
            arguments=arguments,
            messages=messages,
            tries="a verdict",
        )
        add(probe, "judge")
    return list(probes.values())


async def check(probe: Probe, *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """None when the endpoint answers ``probe``'s call (or rate-limits it); else the one-line
    reason it cannot be used: the endpoint, the model, who uses it and the provider's words."""
    failure = await _failure(probe, timeout_s=timeout_s)
    return None if failure is None else _reason(probe, failure, probe.used_by)


def _reason(probe: Probe, error: Any, used_by: list[str]) -> str:
    return (
        f"{error.where} ({', '.join(used_by)}): {error.kind.value} error: {error.detail} "
        f"[tried {probe.tries}{_settings(probe)}]"
    )


async def _failure(probe: Probe, *, timeout_s: float) -> Any:
    """The :class:`~atoll.llm.ModelError` of ``probe``'s call; None when it was answered."""
    from atoll.llm.client import Endpoint, complete
    from atoll.llm.errors import ModelError, ModelErrorKind
    from atoll.llm.limits import CostLedger, ProviderLimiter
    from atoll.llm.retry import RetryBudget, RetryPolicy

    # One quick retry for a blip; a private limiter and ledger, so a probe never waits
    # behind or counts against the run's own calls.
    policy = RetryPolicy(
        max_retries=1, initial_wait_s=0.5, max_wait_s=2.0, deadline_s=timeout_s, budget=RetryBudget(1)
    )
    try:
        await complete(
            Endpoint(probe.model, probe.api_base, probe.api_key, secret=probe.secret),
            probe.messages,
            role="preflight",
            tools=probe.tools,
            arguments=dict(probe.arguments),
            timeout_s=timeout_s,
            retry=policy,
            stream=probe.stream,
            limiter=ProviderLimiter(),
            ledger=CostLedger(),
        )
    except ModelError as error:
        if error.kind is ModelErrorKind.rate_limited:
            return None  # it answered: reachable, and the key was accepted
        return error
    return None


def _settings(probe: Probe) -> str:
    # Only the profiled parameters: extra_args may hold headers or keys, never shown.
    shown = {k: v for k, v in probe.arguments.items() if k in _SHOWN}
    return f" with {json.dumps(shown, sort_keys=True, default=str)}" if shown else ""


async def preflight(probes: Iterable[Probe], *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> int:
    """Check every probe at once; returns how many were checked.

    Raises AtollError("model_endpoint") with one line for the first endpoint that failed
    (and how many others did)."""
    probes = list(probes)
    failures = await asyncio.gather(*(_failure(p, timeout_s=timeout_s) for p in probes))
    # Calls to one endpoint that fail alike (a wrong key, nothing listening) are one reason.
    grouped: dict[tuple[str, str, str], tuple[Any, list[Probe]]] = {}
    for probe, error in zip(probes, failures, strict=True):
        if error is not None:
            grouped.setdefault((error.where, error.kind.value, error.detail), (error, []))[1].append(probe)
    reasons = [
        _reason(failing[0], error, [who for probe in failing for who in probe.used_by])
        for error, failing in grouped.values()
    ]
    if reasons:
        more = f" (and {len(reasons) - 1} more failing endpoint(s))" if len(reasons) > 1 else ""
        raise AtollError(
            ErrorCode.model_endpoint,
            f"model endpoint check failed: {reasons[0]}{more}; fix the endpoint, key, model or its "
            "parameters (docs/models.md), or skip this check with --no-preflight",
        )
    return len(probes)
