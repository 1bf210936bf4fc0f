"""Experiment spec (the YAML a user writes for ``atoll run``)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from atoll.coworkers import CoworkerSpec
from atoll.defaults import DEFAULT_ARTIFACTS, DEFAULT_STORE, OUTPUT_DIR
from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.model_arguments import INLINE_KEY_HELP, argument_problem, key_like_fields

_SECRET_HELP = "name of a secret the operator provisioned for api_base (never the key itself)"

Thinking = Literal["off", "low", "medium", "high"]
_THINKING = (
    "how hard the model thinks (off|low|medium|high), mapped for its provider (docs/models.md); "
    "None = the model's default"
)

#: A run name is a folder name in every output folder and a key in the store: letters, digits,
#: ``.``, ``_`` and ``-``, starting with a letter or digit (no separators, no leading dot, no
#: ``..``), at most 128 characters.
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RUN_NAME_RULE = (
    "letters, digits, '.', '_' and '-', starting with a letter or digit, no '..', at most 128 characters"
)


def run_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a run (None when it can): see :data:`RUN_NAME_RULE`."""
    if not isinstance(name, str) or not _RUN_NAME.fullmatch(name) or ".." in name:
        return f"{name!r} is not a valid run name: {RUN_NAME_RULE}"
    return None


def check_run_name(name: str) -> str:
    """``name`` when it can name a run; AtollError(``bad_run_name``) saying why not."""
    problem = run_name_problem(name)
    if problem:
        raise AtollError(ErrorCode.bad_run_name, problem)
    return name


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskFilter(_Spec):
    ids: list[str] = Field(default_factory=list)
    domains: list[str] = Field(default_factory=list)
    worlds: list[str] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1)


class AgentSpec(_Spec):
    """One contestant: an agent implementation driving a model."""

    name: str = Field(description="Label in reports, unique within the experiment")
    agent: str = "react_toolbelt"
    model: str = "replay"
    api_base: str | None = None
    thinking: Thinking | None = Field(default=None, description=_THINKING)
    api_key_secret: str | None = Field(default=None, description=_SECRET_HELP)
    extra_args: dict[str, Any] = Field(
        default_factory=dict, description="generation parameters passed to litellm (temperature, …)"
    )
    config: dict[str, Any] = Field(default_factory=dict, description="agent options")


class JudgeSpec(_Spec):
    model: str | None = Field(default=None, description="None = programmatic checks only")
    api_base: str | None = None
    api_key_secret: str | None = Field(default=None, description=_SECRET_HELP)
    # At most atoll.judge.JudgeConfig's 15: more was accepted here and failed every trial later.
    samples: int = Field(default=1, ge=1, le=15)
    quorum: int | None = Field(default=None, ge=1, description="verdicts needed of the samples; None = all")
    thinking: Thinking | None = Field(default=None, description=_THINKING)
    extra_args: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _quorum_within_samples(self) -> JudgeSpec:
        if self.quorum is not None and self.quorum > self.samples:
            raise ValueError(f"quorum {self.quorum} is more than samples {self.samples}")
        return self


class Limits(_Spec):
    max_steps: int = Field(default=250, ge=1)
    timeout_s: float = Field(default=3600.0, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    grade_incomplete: bool = Field(
        default=False, description="grade what a max_steps/timeout run left instead of failing it"
    )


class Checkpoints(_Spec):
    """When a trial takes a checkpoint (its world and the agent's state), so that a trial whose
    worker died resumes from it (docs/orchestrator.md, "Checkpoints"). At the first step
    boundary after ``every_steps`` steps or ``every_s`` seconds since the last one; None turns
    a trigger off. Not part of a trial's identity: checkpoints change where a trial restarts
    after a crash, not what it measures."""

    every_steps: int | None = Field(
        default=10, ge=1, description="steps between checkpoints; None = no step trigger"
    )
    every_s: float | None = Field(
        default=300.0, gt=0, description="seconds between checkpoints; None = no time trigger"
    )


class Concurrency(_Spec):
    trials: int = Field(default=2, ge=1)
    per_provider: dict[str, int] = Field(default_factory=dict)
    default_per_provider: int = Field(default=8, ge=1)
    judge: int = Field(default=4, ge=1)


class ExperimentSpec(_Spec):
    name: str = Field(description=f"the run's name: {RUN_NAME_RULE}")
    benchmark: str = Field(description="benchmark directory, or hf://ORG/DATASET")
    tasks: TaskFilter = Field(default_factory=TaskFilter)
    agents: list[AgentSpec]
    runs: int = Field(default=1, ge=1)
    judge: JudgeSpec = Field(default_factory=JudgeSpec)
    coworker: CoworkerSpec = Field(
        default_factory=CoworkerSpec,
        description="the model that writes the world's personas' replies (docs/coworkers.md), with the "
        "judge block's key rules; its model None = personas say they are unavailable",
    )
    limits: Limits = Field(default_factory=Limits)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    checkpoint: Checkpoints | Literal["off"] = Field(
        default_factory=Checkpoints,
        description="checkpoints of each trial (world and agent state) to resume from after a "
        "worker died: {every_steps, every_s} (default every 10 steps and every 300 s), or off",
    )
    max_total_cost_usd: float | None = Field(default=None, gt=0)
    executor: str = Field(
        default="local",
        pattern=r"^[a-z][a-z0-9_]*$",
        description="a registered executor (orchestrator/executors/<name>.py): local, kubernetes, "
        "or instant (dry run: nothing executed); an unknown name is refused before anything is "
        "stored, naming the known ones",
        examples=["local", "kubernetes", "instant"],
    )
    store: str = Field(default=DEFAULT_STORE)
    artifacts: str = Field(default=DEFAULT_ARTIFACTS)
    output_dir: str = OUTPUT_DIR
    max_infra_retries: int = Field(default=2, ge=0)
    infra_retry_backoff_s: float = Field(
        default=2.0, ge=0, description="first retry delay; doubles per attempt"
    )
    infra_error_abort_rate: float = Field(default=0.5, gt=0, le=1)
    seed: int = 0
    skip_unavailable_apps: bool = Field(
        default=False,
        description="skip tasks whose world lists an app atoll cannot serve (reported as excluded, with "
        "the reason); when false they run and fail as infra_error naming the app",
    )

    @field_validator("checkpoint", mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML 1.1 reads a bare ``off`` as false

    def checkpoints(self) -> Checkpoints | None:
        """The checkpoint triggers, None when checkpoints are off (or both triggers are)."""
        if self.checkpoint == "off":
            return None
        checkpoint = self.checkpoint
        assert isinstance(checkpoint, Checkpoints)
        return checkpoint if checkpoint.every_steps or checkpoint.every_s else None

    @field_validator("name")
    @classmethod
    def _valid_run_name(cls, name: str) -> str:
        problem = run_name_problem(name)
        if problem:
            raise ValueError(problem)
        return name

    @model_validator(mode="after")
    def _unique_agent_names(self) -> ExperimentSpec:
        names = [agent.name for agent in self.agents]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(duplicates)}")
        if not self.agents:
            raise ValueError("agents: at least one agent is required")
        return self

    @model_validator(mode="after")
    def _no_keys_or_routing(self) -> ExperimentSpec:
        """Keys are never written in an experiment, and extra_args hold generation parameters
        only (atoll.model_arguments): nothing in it can move a call or carry a credential."""
        for problem in _key_problems(self):
            raise PydanticCustomError("refused_field", "{problem}", {"problem": problem})
        return self


def _key_problems(spec: ExperimentSpec) -> Iterator[str]:
    for index, agent in enumerate(spec.agents):
        path = f"agents[{index}]"
        for field in key_like_fields(agent.config, f"{path}.config"):
            yield f"{field}: {INLINE_KEY_HELP}"
        for where, arguments in (
            ("extra_args", agent.extra_args),
            ("config.extra_args", agent.config.get("extra_args")),
        ):
            if isinstance(arguments, dict) and (problem := argument_problem(arguments, f"{path}.{where}")):
                yield problem
    if problem := argument_problem(spec.judge.extra_args, "judge.extra_args"):
        yield problem
    if problem := argument_problem(spec.coworker.extra_args, "coworker.extra_args"):
        yield problem


def experiment_endpoints(spec: ExperimentSpec) -> list[tuple[str, str]]:
    """Every (model, endpoint) pair ``spec``'s agents, judge and coworker model name."""
    named = [(agent.model, agent.api_base or agent.config.get("api_base")) for agent in spec.agents]
    pairs = [*named, (spec.judge.model, spec.judge.api_base), (spec.coworker.model, spec.coworker.api_base)]
    return [(model, url) for model, url in pairs if model and isinstance(url, str) and url]


def _not_json(value: Any, path: str) -> str | None:
    """The first place below ``path`` holding what JSON cannot (a YAML date, set, binary, a
    non-string key, NaN or infinity), as one line; None when there is none. Experiments are
    stored, fingerprinted and sent as JSON: such a value failed later, as a 500."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path}: {value} is not a JSON number"
    if isinstance(value, list):
        return next((p for i, item in enumerate(value) if (p := _not_json(item, f"{path}[{i}]"))), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}: key {key!r} is a YAML {type(key).__name__}, not text (quote it)"
            problem = _not_json(item, f"{path}.{key}" if path else key)
            if problem:
                return problem
        return None
    return f"{path}: a YAML {type(value).__name__} is not a JSON value (quote it)"


def spec_from_data(raw: Any, *, source: str = "request body") -> ExperimentSpec:
    """An experiment from loaded YAML/JSON data, as data only; AtollError(code="bad_experiment")
    naming ``source`` and each invalid field. Whether each model accepts the parameters it is
    asked for is the kit's to check: :func:`atoll.experiment_file.experiment_from_data`, the
    one path of submissions and files."""
    if not isinstance(raw, dict):
        raise AtollError(ErrorCode.bad_experiment, f"{source}: expected a mapping at the top level")
    problem = _not_json(raw, "")
    if problem:
        raise AtollError(ErrorCode.bad_experiment, f"{source}: {problem}")
    try:
        return ExperimentSpec.model_validate(raw)
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_experiment, f"{source}: {describe_validation(exc)}") from None
