"""The dry-run executor (``--executor instant``): nothing is executed."""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from atoll.benchmark import Benchmark
from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.experiment import ExperimentSpec
from atoll.trajectory import RunStatus
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.executors import executor
from orchestrator.executors.base import InfraError


class InstantOptions(BaseModel):
    """The dry-run knobs an experiment's agent config may carry (the instant executor's, never
    passed to an agent): simulate slow, costly, always-passing, ungradeable or failing trials."""

    model_config = ConfigDict(extra="ignore")  # the rest of the config is the agent's

    instant_delay_s: float = Field(0.0, ge=0, description="sleep this long per trial")
    instant_slow_attempts: int | None = Field(None, ge=0, description="sleep only in the first N attempts")
    instant_cost_usd: float = Field(0.0, ge=0, description="agent cost each trial reports")
    instant_pass_rate: float | None = Field(None, ge=0, le=1, description="share of trials that pass")
    instant_ungradeable_tasks: list[str] = Field(
        default_factory=list, description="task ids graded ungradeable"
    )
    instant_infra_error_tasks: list[str] = Field(
        default_factory=list, description="task ids failing as infra"
    )
    instant_ungradeable_criteria: int = Field(
        0, ge=0, le=4, description="undecided criteria of a failed trial"
    )


@executor("instant")
class InstantExecutor:
    """A dry-run executor for planning/queue benchmarks and tests: nothing is executed and
    the outcome is a pure function of the trial id (``pass_rate`` of trials pass).

    Agent-config keys (:class:`InstantOptions`) ``instant_delay_s``, ``instant_cost_usd`` and ``instant_pass_rate``
    let an experiment file simulate slow, costly or always-passing trials;
    ``instant_ungradeable_tasks`` and ``instant_infra_error_tasks`` (task ids) make those
    tasks' trials ungradeable or infrastructure failures, and ``instant_ungradeable_criteria``
    gives every failed trial that many undecidable criteria (of 4); ``instant_slow_attempts``
    delays only the first that many attempts of a trial (a trial that hangs once)."""

    def __init__(
        self,
        benchmark: Benchmark | None = None,
        experiment: ExperimentSpec | None = None,
        *,
        pass_rate: float = 0.5,
        infra_error_rate: float = 0.0,
    ) -> None:
        self.pass_rate = pass_rate
        self.infra_error_rate = infra_error_rate
        for index, agent in enumerate(experiment.agents if experiment else ()):
            try:
                InstantOptions.model_validate(agent.config)
            except ValidationError as exc:
                raise AtollError(
                    ErrorCode.bad_experiment, f"agents.{index}.config: {describe_validation(exc)}"
                ) from None

    @staticmethod
    def _fraction(trial_id: str, salt: str) -> float:
        digest = hashlib.sha256((salt + trial_id).encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        started = time.perf_counter()
        options = InstantOptions.model_validate(spec.agent_config)
        slow_attempts = options.instant_slow_attempts
        if options.instant_delay_s and (slow_attempts is None or attempt <= slow_attempts):
            await asyncio.sleep(options.instant_delay_s)
        trial_id = spec.trial_id
        if (
            self._fraction(trial_id, f"infra{attempt}") < self.infra_error_rate
            or spec.task_id in options.instant_infra_error_tasks
        ):
            raise InfraError("simulated infrastructure failure")
        pass_rate = self.pass_rate if options.instant_pass_rate is None else options.instant_pass_rate
        passed = self._fraction(trial_id, "pass") < pass_rate
        undecided = 0 if passed else options.instant_ungradeable_criteria
        outcome = Outcome.passed if passed else Outcome.failed
        error = None
        if spec.task_id in options.instant_ungradeable_tasks:
            outcome, undecided, error = Outcome.ungradeable, 1, f"{spec.task_id}-v1: simulated judge failure"
        return TrialResult(
            trial_id=trial_id,
            outcome=outcome,
            score=1.0 if passed else 0.0,
            criteria_total=4,
            criteria_ungradeable=undecided,
            error=error,
            run_status=RunStatus.completed,
            attempt=attempt,
            agent_cost_usd=options.instant_cost_usd,
            duration_s=time.perf_counter() - started,
            finished_at=datetime.now(UTC),
        )

    async def aclose(self) -> None:
        return None
