"""Per-model parameter profiles: what a model accepts, and the call arguments that follow.

One mechanism for the agent and the judge. A :class:`Profile` says how a model takes a
thinking level (``off|low|medium|high``), whether it accepts ``temperature``/``top_p``, how
many output tokens it may produce and which structured-output form it supports. It comes from
a small table of ours for the models the APEX-Agents paper ran (their providers' documented
rules, see docs/models.md) and from litellm's model information for every other model.

:func:`call_arguments` turns what an experiment asks for into the litellm arguments: a
thinking level is mapped (OpenAI and Gemini 3: ``reasoning_effort``, which litellm sends as
``reasoning_effort`` or ``thinkingLevel``; Anthropic: ``thinking: {type: enabled,
budget_tokens}`` with ``max_tokens`` above the budget and no temperature), and a parameter the
model refuses raises :class:`ProfileError` naming the model and the parameter — when the
experiment is loaded, not at the first call. ``preferred`` values (the judge's temperature 0)
are sent only where the model accepts them.

Nothing here imports litellm unless a model is missing from the table.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from atoll.errors import AtollError, ErrorCode
from atoll.llm.model_table import (
    ANTHROPIC_ANSWER_ROOM,
    EFFORT3,
    FAMILIES,
    THINKING_LEVELS,
    Sampling,
    StructuredOutput,
    Thinking,
    ThinkingStyle,
)
from atoll.settings import set_default

if TYPE_CHECKING:
    from atoll.experiment import ExperimentSpec
    from atoll.judge import JudgeConfig

_SAMPLING = ("temperature", "top_p")
_OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens")


class ProfileError(AtollError):
    """A parameter the model refuses; the message names the model and the parameter."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.model_parameters, message)


@dataclass(frozen=True)
class Profile:
    """What one model accepts. ``levels`` maps each accepted thinking level to the value sent
    (a ``reasoning_effort`` or an Anthropic budget); a level missing from it is refused, and
    ``default_off`` says the model does not reason unless asked (gpt-5.1/5.2's effort none)."""

    model: str
    family: str
    thinking: ThinkingStyle
    levels: Mapping[str, Any] = field(default_factory=dict)
    sampling: Sampling = "free"
    default_off: bool = False
    max_output_tokens: int | None = None
    structured: StructuredOutput = "prompt"
    source: str = "atoll"
    why: str = ""  # the provider's rule, quoted in refusals
    refused: tuple[str, ...] = ()

    def output_limit(self) -> int | None:
        """The most output tokens the model produces (ours, else litellm's; None: unknown).
        Asked only when a limit matters, so a table model is profiled without litellm."""
        if self.max_output_tokens is None and self.source == "atoll":
            known = _litellm_info(self.model).get("max_output_tokens")
            return int(known) if known else None
        return self.max_output_tokens


def base_name(model: str) -> str:
    """The model's own name: ``openrouter/openai/gpt-5`` → ``gpt-5``,
    ``bedrock/us.anthropic.claude-opus-4-5-v1:0`` → ``claude-opus-4-5-v1:0``."""
    name = model.rsplit("/", 1)[-1]
    return re.sub(r"^(?:[a-z-]+\.)+(?=[a-z])", "", name) if "." in name.split("-", 1)[0] else name


@functools.lru_cache(maxsize=256)
def profile_of(model: str) -> Profile:
    """The profile of ``model`` (a litellm model string): our table's, else litellm's."""
    name = base_name(model)
    for family in FAMILIES:
        if re.match(family.pattern, name):
            return Profile(
                model=model,
                family=family.pattern,
                thinking=family.thinking,
                levels=family.levels,
                sampling=family.sampling,
                default_off=family.default_off,
                max_output_tokens=family.max_output_tokens,
                structured=family.structured,
                why=family.why,
                refused=family.refused,
            )
    return _from_litellm(model)


def _litellm() -> Any:
    # Never fetch litellm's price map from the network at import (atoll.llm.client does the same).
    set_default("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def _litellm_info(model: str) -> dict[str, Any]:
    litellm = _litellm()
    try:
        return dict(litellm.get_model_info(model))
    except Exception:  # noqa: BLE001 - models litellm has never heard of have no information
        return {}


def _from_litellm(model: str) -> Profile:
    litellm = _litellm()

    info = _litellm_info(model)
    try:
        name, provider, _, _ = litellm.get_llm_provider(model)
        supported = set(litellm.get_supported_openai_params(model=name, custom_llm_provider=provider) or ())
    except Exception:  # noqa: BLE001 - no provider route: nothing is known, nothing is mapped
        supported = set()
    reasons = bool(info.get("supports_reasoning")) or (not info and "reasoning_effort" in supported)
    if "reasoning_effort" in supported and reasons:
        thinking: ThinkingStyle = "effort"
        levels: Mapping[str, Any] = EFFORT3
    else:
        thinking, levels = "none", {}
    structured: StructuredOutput = "prompt"
    try:
        if litellm.supports_response_schema(model=model):
            structured = "json_schema"
        elif litellm.supports_function_calling(model=model):
            structured = "tool"
    except Exception:  # noqa: BLE001 - litellm raises for models it has never heard of
        pass
    return Profile(
        model=model,
        family="litellm" if info else "unknown",
        thinking=thinking,
        levels=levels,
        sampling="free" if "temperature" in supported or not supported else "default",
        max_output_tokens=info.get("max_output_tokens"),
        structured=structured,
        source="litellm",
        why="litellm's model information"
        if info
        else "the model is unknown to litellm and to atoll's table (docs/models.md)",
    )


def call_arguments(
    model: str,
    requested: Mapping[str, Any],
    *,
    thinking: str | None = None,
    preferred: Mapping[str, Any] | None = None,
    where: str = "",
) -> dict[str, Any]:
    """The litellm arguments for ``model`` from what an experiment asks for.

    ``requested`` holds litellm arguments as the user wrote them (``temperature``, ``top_p``,
    ``max_tokens``/``max_completion_tokens``, ``reasoning_effort``, anything else passes
    through); ``thinking`` is a level of :data:`THINKING_LEVELS` (None: the model's default);
    ``preferred`` are sent only where the model accepts them. ``where`` (``agent NAME``,
    ``judge``) prefixes the error. Raises :class:`ProfileError` naming the model and the
    parameter it refuses."""
    profile = profile_of(model)
    arguments = dict(requested)
    prefix = f"{where}: " if where else ""

    def refuse(parameter: str, problem: str) -> ProfileError:
        return ProfileError(f"{prefix}model {model} does not accept {parameter}: {problem} ({profile.why})")

    for name in profile.refused:
        if arguments.get(name) is not None:
            raise refuse(f"{name}: {arguments[name]}", "the provider refuses it for this model")
    if profile.thinking in ("always", "none") and arguments.get("reasoning_effort") is not None:
        what = (
            "it always reasons and takes no effort"
            if profile.thinking == "always"
            else "it is not a reasoning model"
        )
        raise refuse(f"reasoning_effort: {arguments['reasoning_effort']}", what)
    if thinking is not None and isinstance(arguments.get("thinking"), Mapping):
        raise ProfileError(f"{prefix}give thinking as a level or in extra_args for model {model}, not both")
    if thinking is not None and "reasoning_effort" in arguments:
        raise ProfileError(f"{prefix}give thinking or reasoning_effort for model {model}, not both")
    if thinking is not None:
        if thinking not in THINKING_LEVELS:
            raise ProfileError(f"{prefix}thinking {thinking!r} is not one of {', '.join(THINKING_LEVELS)}")
        if profile.thinking == "always":
            raise refuse(
                f"thinking: {thinking}", "it always reasons and takes no level; leave thinking unset"
            )
        if profile.thinking == "none":
            raise refuse(f"thinking: {thinking}", "it is not a reasoning model")
        if thinking not in profile.levels:
            accepted = ", ".join(level for level in THINKING_LEVELS if level in profile.levels)
            raise refuse(f"thinking: {thinking}", f"accepted levels are {accepted}")
    thinking_on = _thinking_on(
        profile, thinking, arguments.get("reasoning_effort"), arguments.get("thinking")
    )

    limits = [name for name in _OUTPUT_LIMITS if arguments.get(name) is not None]
    if len(limits) > 1:
        raise ProfileError(f"{prefix}give max_tokens or max_completion_tokens for model {model}, not both")
    for name in _OUTPUT_LIMITS:
        arguments.pop(name, None)
    limit_name = limits[0] if limits else "max_tokens"
    limit = requested[limits[0]] if limits else None
    if limit is not None and (most := profile.output_limit()) and limit > most:
        raise refuse(f"{limit_name}: {limit}", f"it produces at most {most} output tokens")

    for name in _SAMPLING:
        value = arguments.get(name)
        if value is None:
            arguments.pop(name, None)
            continue
        if profile.sampling == "default" and value != 1:
            raise refuse(f"{name}: {value}", "only the default (1) is accepted")
        if (
            profile.sampling == "when_off"
            and thinking_on
            and not _sampling_allowed_with_thinking(profile, name, value)
        ):
            raise refuse(f"{name}: {value}", "not while thinking is on (set thinking: off to use it)")

    if profile.thinking == "anthropic" and thinking_on:
        _check_anthropic_thinking(arguments, refuse)
    if thinking is not None and profile.thinking == "effort":
        arguments["reasoning_effort"] = profile.levels[thinking]
    if profile.thinking == "anthropic" and thinking is not None and thinking != "off":
        budget = int(profile.levels[thinking])
        if limit is None:
            # At most 20,480 tokens: within the output limit of every Claude that thinks.
            limit = budget + ANTHROPIC_ANSWER_ROOM
        if limit <= budget:
            raise ProfileError(
                f"{prefix}model {model} does not accept {limit_name}: {limit} with thinking: {thinking}: "
                f"it must be above the thinking budget of {budget} tokens (Anthropic: budget_tokens "
                "must be below max_tokens)"
            )
        arguments["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if limit is not None:
        # OpenAI reasoning models refuse max_tokens (max_completion_tokens instead); Anthropic
        # names it max_tokens; any other model gets the name the user wrote.
        if profile.thinking == "anthropic":
            limit_name = "max_tokens"
        elif profile.thinking == "effort" and profile.sampling in ("default", "when_off"):
            limit_name = "max_completion_tokens"
        arguments[limit_name] = limit
    for name, value in (preferred or {}).items():
        if name in arguments or value is None:
            continue
        if name in _SAMPLING and not _sampling_preferred(profile, thinking_on):
            continue
        arguments[name] = value
    return arguments


def _thinking_on(profile: Profile, thinking: str | None, effort: Any, raw: Any) -> bool:
    if profile.thinking in ("always",):
        return True
    if profile.thinking == "none":
        return False
    if thinking is not None:
        return thinking != "off"
    if isinstance(raw, Mapping):  # Anthropic's own parameter, given verbatim in extra_args
        return raw.get("type") in ("enabled", "adaptive")
    if effort is not None:
        return str(effort) not in ("none", "minimal", "disable", "disabled")
    return profile.thinking == "effort" and not profile.default_off


def _sampling_allowed_with_thinking(profile: Profile, name: str, value: Any) -> bool:
    # Anthropic accepts temperature 1 and top_p between 0.95 and 1 with thinking on.
    if profile.thinking == "anthropic":
        return (name == "temperature" and value == 1) or (name == "top_p" and 0.95 <= value <= 1)
    return value == 1


def _check_anthropic_thinking(arguments: Mapping[str, Any], refuse: Any) -> None:
    """Anthropic's extended thinking "isn't compatible with temperature or top_k modifications
    as well as forced tool use": tool_choice may only be auto or none
    (docs.claude.com/en/docs/build-with-claude/extended-thinking, "Feature compatibility")."""
    off = "not while thinking is on (set thinking: off to use it)"
    if arguments.get("top_k") is not None:
        raise refuse(f"top_k: {arguments['top_k']}", off)
    choice = arguments.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else choice
    if choice is not None and kind not in ("auto", "none"):
        raise refuse(f"tool_choice: {json.dumps(choice)}", f"only auto or none; {off}")


def _sampling_preferred(profile: Profile, thinking_on: bool) -> bool:
    if profile.sampling == "free":
        return True
    if profile.sampling == "when_off":
        return not thinking_on
    return False


def agent_arguments(model: str, config: Any, *, where: str = "") -> dict[str, Any]:
    """The litellm arguments of an agent's every call: ``config`` (an
    :class:`~atoll.agent_config.AgentConfig`) ``thinking``, ``reasoning_effort``,
    ``temperature``, ``max_completion_tokens`` and ``extra_args`` through
    :func:`call_arguments`. Raises :class:`ProfileError`."""
    requested: dict[str, Any] = {}
    if config.reasoning_effort:
        requested["reasoning_effort"] = config.reasoning_effort
    if config.temperature is not None:
        requested["temperature"] = config.temperature
    if config.max_completion_tokens:
        requested["max_completion_tokens"] = config.max_completion_tokens
    requested.update(config.extra_args)
    return call_arguments(model, requested, thinking=config.thinking, where=where)


# The judge asks for temperature 0 where the model takes it: the same evidence should get the
# same verdict. Models that refuse it (reasoning models) or whose provider advises its default
# (Gemini 3) are called without one.
JUDGE_PREFERRED: Mapping[str, Any] = {"temperature": 0.0}


def judge_arguments(config: Any) -> dict[str, Any]:
    """The litellm arguments of every judge call of ``config`` (an
    :class:`~atoll.judge.JudgeConfig`), before the verdict form's own. Raises
    :class:`ProfileError`."""
    requested: dict[str, Any] = {}
    for name in ("temperature", "top_p", "seed"):
        value = getattr(config, name)
        if value is not None:
            requested[name] = value
    requested.update(config.extra_args)
    return call_arguments(
        config.model, requested, thinking=config.thinking, preferred=JUDGE_PREFERRED, where="judge"
    )


def checked_judge(config: JudgeConfig) -> JudgeConfig:
    """``config`` (an :class:`~atoll.judge.JudgeConfig`), once its model is known to accept what
    it asks for; :class:`ProfileError` naming the model and the parameter otherwise. Where judge
    configs are read (files, flags, requests) and where grading starts; a config that asks for
    nothing a model could refuse is passed without a look (litellm stays unimported)."""
    if (
        config.thinking is None
        and config.temperature is None
        and config.top_p is None
        and not config.extra_args
    ):
        return config
    judge_arguments(config)
    return config


def experiment_judge(
    spec: ExperimentSpec, *, model: str | None = None, api_base: str | None = None
) -> JudgeConfig | None:
    """The judge of ``spec`` (:meth:`atoll.judge.JudgeConfig.for_experiment`: ``model`` and
    ``api_base`` override its own, as a regrade does), checked by :func:`checked_judge`; None
    when it has no judge model. Raises AtollError("bad_input") naming the model and the
    parameter it refuses (a regrade's model that refuses the experiment's thinking, say)."""
    from atoll.judge import JudgeConfig

    judge = JudgeConfig.for_experiment(spec, model=model, api_base=api_base)
    if judge is None:
        return None
    try:
        return checked_judge(judge)
    except ProfileError as exc:
        raise AtollError(ErrorCode.bad_input, f"judge {judge.model}: {exc.message}") from None


_CHECKED_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "reasoning_effort",
        "thinking",
        "presence_penalty",
        "frequency_penalty",
        "stop",
    }
)


def check_experiment(spec: Any) -> None:
    """Raise :class:`ProfileError` for the first agent or judge of ``spec`` (an
    :class:`~atoll.experiment.ExperimentSpec`) that asks its model for a parameter it refuses.

    Agents and judges that ask for none of the profiled parameters are not looked at (so
    loading an ordinary experiment never imports litellm)."""
    from pydantic import ValidationError

    from atoll.agent_config import AgentConfig

    for agent in spec.agents:
        if agent.model == "replay":
            continue
        config = dict(agent.config)
        if agent.extra_args:
            config["extra_args"] = dict(agent.extra_args)
        if agent.thinking is not None:
            config["thinking"] = agent.thinking
        asked = _CHECKED_KEYS.intersection(config) or _CHECKED_KEYS.intersection(config.get("extra_args", {}))
        if not asked and config.get("thinking") is None:
            continue
        try:
            agent_config = AgentConfig.model_validate(config)
        except ValidationError:
            continue  # the agent's own configuration error is reported where it is read
        agent_arguments(agent.model, agent_config, where=f"agent {agent.name}")
    judge = spec.judge
    if judge.model and (judge.thinking is not None or _CHECKED_KEYS.intersection(judge.extra_args)):
        requested = dict(judge.extra_args)
        call_arguments(judge.model, requested, thinking=judge.thinking, where="judge")
    coworker = spec.coworker
    if coworker.model and (coworker.thinking is not None or _CHECKED_KEYS.intersection(coworker.extra_args)):
        call_arguments(
            coworker.model, dict(coworker.extra_args), thinking=coworker.thinking, where="coworker"
        )


def structured_output(model: str, thinking: str | None = None) -> StructuredOutput:
    """The strongest structured-output form ``model`` supports with ``thinking``: a forced
    tool call is refused while Anthropic's extended thinking is on, so it falls to the prompt."""
    profile = profile_of(model)
    if profile.structured == "tool" and profile.thinking == "anthropic" and thinking not in (None, "off"):
        return "prompt"
    return profile.structured


__all__ = [
    "THINKING_LEVELS",
    "Profile",
    "ProfileError",
    "Thinking",
    "agent_arguments",
    "base_name",
    "call_arguments",
    "check_experiment",
    "judge_arguments",
    "profile_of",
    "structured_output",
]
