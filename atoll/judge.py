"""The judge's configuration: the contract the orchestrator, the grading service and a
trial pod share (one model, built from an experiment in one place, sent in one wire form).

The wire form (``judge`` of ``POST /grade``, a pod's trial input) is :meth:`JudgeConfig.request`:
the fields the sender set, never a key, or ``{"model": null}`` for programmatic checks only;
:func:`atoll.llm.admission.judge_from_request` reads it back. The older ``{"none": true}`` is still read.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.model_arguments import check_arguments

if TYPE_CHECKING:
    from atoll.experiment import ExperimentSpec

VerdictFormat = Literal["auto", "json_schema", "json_object", "tool", "prompt"]
DEFAULT_BUDGET_CHARS = 400_000
#: The version of the judge's prompt (system prompt, blocks, instruction); a change that can
#: move a verdict bumps it.
PROMPT_VERSION = "judge-v2"
#: The version of the grading rules around the judge (evidence routing and selection, the
#: rules that decide without a judge, checks); a change that can move a verdict bumps it.
GRADER_VERSION = "grader-5"
#: The judge settings that decide what a verdict means (its identity): everything else
#: (endpoint, key, retries, timeouts, concurrency) only decides whether and how fast it comes.
_IDENTITY_PARAMETERS = (
    "thinking",
    "temperature",
    "top_p",
    "seed",
    "extra_args",
    "verdict_format",
    "selector",
    "context_budget_chars",
)
# The wire form of "no judge": the criteria are decided by their programmatic checks alone.
CHECKS_ONLY: dict[str, Any] = {"model": None}
#: The fields that hold or name a key: never in the wire form, never taken from a request.
KEY_FIELDS = ("api_key", "api_key_env")


class JudgeConfig(BaseModel):
    """How to reach and use the judge model.

    ``model`` is a litellm model string (``openai/<name>`` with ``api_base`` for any
    OpenAI-compatible server).  The key comes from ``api_key`` or the environment variable
    named by ``api_key_env`` (else litellm's provider defaults), or, for a submitter's own
    endpoint, the operator-provisioned secret named by ``api_key_secret``; where each may be
    sent is :mod:`atoll.llm.endpoints`'s rule.  ``extra_args`` are generation parameters
    only (:mod:`atoll.model_arguments`).  ``samples`` verdicts are
    asked per criterion; at least ``quorum`` of them (default: all) must come back, else the
    criterion is ungradeable.  ``verdict_format`` is how the verdict is asked for (see
    :mod:`grader.verdict`; ``auto`` picks the strongest the model supports).  ``max_retries``
    bounds the re-asks after a malformed reply; ``transient_retries`` the retries of one call
    after 429/5xx/timeouts, all calls of one grading drawing on ``retry_budget``;
    ``timeout_s`` bounds one attempt and ``deadline_s`` one call with its retries.
    ``thinking`` (off|low|medium|high) is mapped for the model's provider and ``temperature``
    None means 0 where the model accepts it, else the provider's default
    (:mod:`atoll.llm.profiles`); a parameter the model refuses is refused when the config is
    made.  ``context_budget_chars`` caps the evidence text of one prompt (None: from the model's
    context window when litellm knows it, else 400,000); beyond it the ``selector``
    (``rank`` or ``llm``) chooses artifacts.
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True)
    api_key_secret: str | None = Field(default=None, description="name of an operator-provisioned secret")
    samples: int = Field(default=1, ge=1, le=15)
    quorum: int | None = Field(default=None, ge=1, description="verdicts needed of the samples; None = all")
    extra_args: dict[str, Any] = Field(default_factory=dict)
    max_retries: int = Field(default=2, ge=0)
    transient_retries: int = Field(default=3, ge=0)
    retry_budget: int = Field(default=24, ge=0)
    retry_wait_s: float = Field(default=1.0, ge=0)
    retry_max_wait_s: float = Field(default=30.0, ge=0)
    timeout_s: float = Field(default=60.0, gt=0)
    deadline_s: float = Field(default=180.0, gt=0)
    thinking: Literal["off", "low", "medium", "high"] | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    verdict_format: VerdictFormat = "auto"
    context_budget_chars: int | None = Field(default=None, ge=1_000)
    selector: Literal["rank", "llm"] = "rank"
    concurrency: int = Field(default=8, ge=1)

    @model_validator(mode="after")
    def _quorum_within_samples(self) -> JudgeConfig:
        if self.quorum is not None and self.quorum > self.samples:
            raise ValueError(f"quorum {self.quorum} is more than samples {self.samples}")
        return self

    @field_validator("extra_args")
    @classmethod
    def _generation_arguments_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        return dict(check_arguments(value, "extra_args"))

    def identity(self) -> JudgeIdentity:
        """Who decides this config's verdicts (:class:`JudgeIdentity`)."""
        parameters = {
            name: value
            for name in _IDENTITY_PARAMETERS
            if (value := getattr(self, name)) is not None and value != {}
        }
        return JudgeIdentity(
            model=self.model,
            parameters=parameters,
            samples=self.samples,
            quorum=self.needed_votes,
            prompt_version=PROMPT_VERSION,
        )

    @property
    def needed_votes(self) -> int:
        return self.quorum or self.samples

    def budget_chars(self) -> int:
        """The evidence budget in characters (about 3 characters per token, minus room to reply)."""
        if self.context_budget_chars is not None:
            return self.context_budget_chars
        try:
            import litellm

            window = litellm.get_model_info(self.model).get("max_input_tokens")
        except Exception:  # noqa: BLE001 - unknown models have no info
            window = None
        if not window:
            return DEFAULT_BUDGET_CHARS
        return max(4_000, min(DEFAULT_BUDGET_CHARS, int(window) * 3 - 8_000))

    @classmethod
    def for_experiment(
        cls, spec: ExperimentSpec, *, model: str | None = None, api_base: str | None = None
    ) -> JudgeConfig | None:
        """The judge of ``spec`` (``model``/``api_base`` override its own, as a regrade does);
        None when it has no judge model (programmatic checks only). Raises AtollError
        ("bad_input") naming an invalid field. Whether the model accepts what the judge asks
        for is the kit's to check: :func:`atoll.llm.profiles.experiment_judge`."""
        model = model or spec.judge.model
        if not model:
            return None
        try:
            return cls._from_spec(spec, model, api_base)
        except ValidationError as exc:
            raise AtollError(ErrorCode.bad_input, f"judge {model}: {describe_validation(exc)}") from None

    @classmethod
    def _from_spec(cls, spec: ExperimentSpec, model: str, api_base: str | None) -> JudgeConfig:
        return cls(
            model=model,
            api_base=api_base or spec.judge.api_base,
            api_key_secret=spec.judge.api_key_secret if api_base is None else None,
            samples=spec.judge.samples,
            quorum=spec.judge.quorum,
            extra_args=spec.judge.extra_args,
            **({"thinking": spec.judge.thinking} if spec.judge.thinking is not None else {}),
            concurrency=spec.concurrency.judge,
        )

    def request(self) -> dict[str, Any]:
        """The wire form: the fields set on this config (they override the grading service's
        defaults, the others keep them), never a key."""
        return self.model_dump(mode="json", exclude_unset=True, exclude=set(KEY_FIELDS))


class JudgeIdentity(BaseModel):
    """What a grading's verdicts mean: the judge model with every setting that can move a
    verdict (parameters, verdict form, samples and quorum), its prompt version and the
    grader's version. ``model`` None: programmatic checks alone decided (no prompt).

    Endpoints, keys, retries and concurrency are not part of it (as a trial's identity leaves
    out endpoints): the same model served elsewhere is the same judge. Two gradings with
    different identities are never counted as one; :attr:`id` is what runs, trial results,
    grades and calibration records carry.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None
    parameters: dict[str, Any] = Field(default_factory=dict)
    samples: int = 1
    quorum: int = 1
    prompt_version: str | None = None
    grader_version: str = GRADER_VERSION

    @property
    def id(self) -> str:
        """16 hex digits of the sha256 of the canonical JSON of this identity."""
        from atoll.trial import canonical_json

        return hashlib.sha256(canonical_json(self.model_dump(mode="json")).encode()).hexdigest()[:16]

    def describe(self) -> str:
        """One line for people: ``openai/gpt-5 (judge-v2, 3 samples quorum 2, thinking=low, grader-5)``."""
        if self.model is None:
            return f"programmatic checks only ({self.grader_version})"
        details = [self.prompt_version or "no prompt version"]
        if self.samples > 1:
            details.append(f"{self.samples} samples quorum {self.quorum}")
        details.extend(f"{name}={value}" for name, value in sorted(self.parameters.items()))
        details.append(self.grader_version)
        return f"{self.model} ({', '.join(details)})"


#: The identity of a grading with no judge: programmatic checks and rules alone.
CHECKS_ONLY_IDENTITY = JudgeIdentity(model=None, samples=0, quorum=0)


def judge_identity(config: JudgeConfig | None) -> JudgeIdentity:
    """The identity of ``config``'s gradings; :data:`CHECKS_ONLY_IDENTITY` for None."""
    return CHECKS_ONLY_IDENTITY if config is None else config.identity()


def judge_request(config: JudgeConfig | None) -> dict[str, Any]:
    """The wire form of ``config``; ``{"model": null}`` (checks only) for None."""
    return dict(CHECKS_ONLY) if config is None else config.request()


__all__ = [
    "CHECKS_ONLY",
    "CHECKS_ONLY_IDENTITY",
    "GRADER_VERSION",
    "KEY_FIELDS",
    "PROMPT_VERSION",
    "JudgeConfig",
    "JudgeIdentity",
    "VerdictFormat",
    "judge_identity",
    "judge_request",
]
