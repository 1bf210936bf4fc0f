"""A run's execution policy, saved with the run so that every worker enforces the same one,
and the infrastructure-health tracker behind the abort-on-error-rate rule."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from atoll.experiment import ExperimentSpec
from orchestrator.judging import JUDGES_KEY
from orchestrator.store import Budget

# Abort only once enough attempts were seen for the rate to mean something.
MIN_ATTEMPTS_FOR_ABORT = 6

# Keys the stored spec carries for reports beside the experiment's own fields.
_REPORT_KEYS = ("excluded_tasks", "task_names", "target_kinds", JUDGES_KEY)


def stored_spec(raw: dict[str, Any]) -> ExperimentSpec:
    """The ExperimentSpec of a spec as saved with a run (report-only keys set aside)."""
    return ExperimentSpec.model_validate(
        {key: value for key, value in raw.items() if key not in _REPORT_KEYS}
    )


@dataclass(frozen=True)
class RunPolicy:
    """Cost ceiling, infra retries and backoff, and the abort rate of one run."""

    max_attempts: int = 3
    retry_backoff_s: float = 2.0
    infra_abort_rate: float = 0.5
    cost_ceiling_usd: float | None = None
    # While no attempt has a cost yet, at most this many trials run at once (all workers).
    unpriced_in_flight: int = 2

    @classmethod
    def of(cls, spec: ExperimentSpec | dict[str, Any]) -> RunPolicy:
        """The policy an experiment spec (as saved in the store) sets."""
        if isinstance(spec, dict):
            spec = stored_spec(spec)
        return cls(
            max_attempts=1 + spec.max_infra_retries,
            retry_backoff_s=spec.infra_retry_backoff_s,
            infra_abort_rate=spec.infra_error_abort_rate,
            cost_ceiling_usd=spec.max_total_cost_usd,
            unpriced_in_flight=spec.concurrency.trials,
        )

    @property
    def budget(self) -> Budget | None:
        if self.cost_ceiling_usd is None:
            return None
        return Budget(self.cost_ceiling_usd, unpriced_in_flight=self.unpriced_in_flight)


class InfraHealth:
    """Attempts and infrastructure failures of one run as this worker saw them.

    The run is stopped for this worker once more than ``rate`` of at least
    ``MIN_ATTEMPTS_FOR_ABORT`` attempts failed. With ``healthy_interval_s`` (long-running
    ``--forever`` workers) the tally starts afresh once that long passed without an
    infrastructure failure — a stopped run is then tried again — so one bad hour does not
    stop a worker for good. Without it, a stop is final (``atoll run``, one-shot workers).
    """

    def __init__(self, rate: float, *, healthy_interval_s: float | None = None) -> None:
        self.rate = rate
        self.healthy_interval_s = healthy_interval_s
        self.attempts = 0
        self.failures = 0
        self.last_failure: float | None = None
        self.stopped = False

    def record(self, *, failed: bool) -> None:
        self._maybe_reset()
        self.attempts += 1
        if failed:
            self.failures += 1
            self.last_failure = time.monotonic()
        if self.attempts >= MIN_ATTEMPTS_FOR_ABORT and self.failures / self.attempts > self.rate:
            self.stopped = True

    def allows(self) -> bool:
        """Whether trials of this run may be started now."""
        self._maybe_reset()
        return not self.stopped

    def _maybe_reset(self) -> None:
        if self.healthy_interval_s is None or self.last_failure is None:
            return
        if time.monotonic() - self.last_failure >= self.healthy_interval_s:
            self.attempts = self.failures = 0
            self.last_failure = None
            self.stopped = False
