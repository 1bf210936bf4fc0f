"""The dry-run executor (``--executor instant``): nothing is executed."""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime

from atoll.benchmark import Benchmark
from atoll.experiment import ExperimentSpec
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.executors import executor
from orchestrator.executors.base import InfraError


@executor("instant")
class InstantExecutor:
    """A dry-run executor for planning/queue benchmarks and tests: nothing is executed and
    the outcome is a pure function of the trial id (``pass_rate`` of trials pass).

    Agent-config keys ``instant_delay_s``, ``instant_cost_usd`` and ``instant_pass_rate``
    let an experiment file simulate slow, costly or always-passing trials;
    ``instant_ungradeable_tasks`` and ``instant_infra_error_tasks`` (task ids) make those
    tasks' trials ungradeable or infrastructure failures, and ``instant_ungradeable_criteria``
    gives every failed trial that many undecidable criteria (of 4); ``instant_slow_attempts``
    delays only the first that many attempts of a trial (a trial that hangs once)."""

    def __init__(self, benchmark: Benchmark | None = None, experiment: ExperimentSpec | None = None,
                 *, pass_rate: float = 0.5, infra_error_rate: float = 0.0) -> None:
        self.pass_rate = pass_rate
        self.infra_error_rate = infra_error_rate

    @staticmethod
    def _fraction(trial_id: str, salt: str) -> float:
        digest = hashlib.sha256((salt + trial_id).encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        started = time.perf_counter()
        delay = float(spec.agent_config.get("instant_delay_s", 0.0))
        slow_attempts = spec.agent_config.get("instant_slow_attempts")
        if delay and (slow_attempts is None or attempt <= int(slow_attempts)):
            await asyncio.sleep(delay)
        trial_id = spec.trial_id
        config = spec.agent_config
        if (self._fraction(trial_id, f"infra{attempt}") < self.infra_error_rate
                or spec.task_id in config.get("instant_infra_error_tasks", ())):
            raise InfraError("simulated infrastructure failure")
        pass_rate = float(config.get("instant_pass_rate", self.pass_rate))
        passed = self._fraction(trial_id, "pass") < pass_rate
        undecided = 0 if passed else int(config.get("instant_ungradeable_criteria", 0))
        outcome = Outcome.passed if passed else Outcome.failed
        error = None
        if spec.task_id in config.get("instant_ungradeable_tasks", ()):
            outcome, undecided, error = Outcome.ungradeable, 1, f"{spec.task_id}-v1: simulated judge failure"
        return TrialResult(
            trial_id=trial_id,
            outcome=outcome,
            score=1.0 if passed else 0.0,
            criteria_total=4,
            criteria_ungradeable=undecided,
            error=error,
            run_status="completed",
            attempt=attempt,
            agent_cost_usd=float(config.get("instant_cost_usd", 0.0)),
            duration_s=time.perf_counter() - started,
            finished_at=datetime.now(UTC),
        )

    async def aclose(self) -> None:
        return None
