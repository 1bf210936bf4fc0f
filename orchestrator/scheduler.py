"""The lease-execute-record loop shared by ``atoll run`` and ``atoll worker``.

It keeps up to ``concurrency`` trials running, heartbeats their leases, retries
infrastructure failures with backoff, stops scheduling before the cost ceiling would be
passed, and aborts when the infrastructure error rate passes a threshold.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from atoll.trial import Outcome, TrialResult
from orchestrator.executors.base import Executor, InfraError
from orchestrator.store import Lease, TrialStore

log = logging.getLogger("atoll.orchestrator")

# Abort only once enough attempts were seen for the rate to mean something.
MIN_ATTEMPTS_FOR_ABORT = 6


@dataclass
class SchedulerSummary:
    completed: int = 0
    infra_errors: int = 0
    lost_leases: int = 0
    attempts: int = 0
    cost_usd: float = 0.0
    stopped_reason: str | None = None  # "cost_ceiling" | "infra_error_rate" | None
    outcomes: dict[str, int] = field(default_factory=dict)


EventSink = Callable[[str, Lease, TrialResult | None], None]


class Scheduler:
    def __init__(
        self,
        store: TrialStore,
        executor_for: Callable[[str], Executor],
        *,
        worker_id: str,
        concurrency: int,
        experiment: str | None = None,
        lease_s: float = 120.0,
        max_attempts: int = 3,
        infra_abort_rate: float = 0.5,
        cost_ceiling_usd: float | None = None,
        spent_usd: float = 0.0,
        retry_backoff_s: float = 2.0,
        poll_s: float = 0.5,
        on_event: EventSink | None = None,
    ) -> None:
        self.store = store
        self.executor_for = executor_for
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.experiment = experiment
        self.lease_s = lease_s
        self.max_attempts = max_attempts
        self.infra_abort_rate = infra_abort_rate
        self.cost_ceiling_usd = cost_ceiling_usd
        self.spent_usd = spent_usd
        self.retry_backoff_s = retry_backoff_s
        self.poll_s = poll_s
        self.on_event = on_event or (lambda kind, lease, result: None)
        self.summary = SchedulerSummary()
        self._running: dict[asyncio.Task, Lease] = {}
        self._completed_costs: list[float] = []
        # Results waiting to be written; one writer commits them in batches.
        self._unwritten: list[tuple[Lease, TrialResult, asyncio.Future]] = []
        self._writer: asyncio.Task | None = None

    async def _record(self, lease: Lease, result: TrialResult) -> bool:
        """Queue a final result and wait until it is committed; results that finish while a
        commit is in flight go together in the next one."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        self._unwritten.append((lease, result, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_results())
        return await done

    async def _write_results(self) -> None:
        while self._unwritten:
            batch, self._unwritten = self._unwritten, []
            try:
                flags = await asyncio.to_thread(
                    self.store.complete_many, [(lease, self.worker_id, result) for lease, result, _ in batch]
                )
            except Exception as exc:  # every waiter learns the write failed
                for _, _, done in batch:
                    done.set_exception(exc)
                continue
            for (_, _, done), accepted in zip(batch, flags, strict=True):
                done.set_result(accepted)

    # --- policy -----------------------------------------------------------------------------

    def _budget_allows_another(self) -> bool:
        if self.cost_ceiling_usd is None:
            return True
        expected = (sum(self._completed_costs) / len(self._completed_costs)) if self._completed_costs else 0.0
        projected = self.spent_usd + expected * (len(self._running) + 1)
        if projected > self.cost_ceiling_usd or self.spent_usd >= self.cost_ceiling_usd:
            self.summary.stopped_reason = "cost_ceiling"
            return False
        return True

    def _infra_rate_exceeded(self) -> bool:
        attempts = self.summary.attempts
        return attempts >= MIN_ATTEMPTS_FOR_ABORT and self.summary.infra_errors / attempts > self.infra_abort_rate

    # --- loop -------------------------------------------------------------------------------

    async def run(self, *, wait_for_others: bool = True) -> SchedulerSummary:
        """Run until nothing is left to lease (and, with ``wait_for_others``, until trials
        leased by other workers are finished too), or until a stop condition holds."""
        heartbeat = asyncio.create_task(self._heartbeat_loop())
        try:
            while True:
                if self.summary.stopped_reason is None:
                    free = self.concurrency - len(self._running)
                    if free > 0 and self._budget_allows_another():
                        leases = await asyncio.to_thread(
                            self.store.lease, self.worker_id, limit=free, lease_s=self.lease_s,
                            experiment=self.experiment,
                        )
                        for lease in leases:
                            self.on_event("started", lease, None)
                            self._running[asyncio.create_task(self._execute(lease))] = lease
                if not self._running:
                    if self.summary.stopped_reason is not None or not await self._others_busy(wait_for_others):
                        break
                    await asyncio.sleep(self.poll_s)
                    continue
                done, _ = await asyncio.wait(
                    list(self._running), timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED
                )
                for finished in done:
                    self._running.pop(finished)
                    finished.result()
        finally:
            heartbeat.cancel()
            for task in self._running:
                task.cancel()
        return self.summary

    async def _others_busy(self, wait_for_others: bool) -> bool:
        if not wait_for_others or self.experiment is None:
            return False
        counts = await asyncio.to_thread(self.store.counts, self.experiment)
        return counts["pending"] + counts["leased"] > 0

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            leases = list(self._running.values())
            if leases:
                try:
                    await asyncio.to_thread(self.store.heartbeat, leases, lease_s=self.lease_s)
                except Exception:  # a missed beat is survivable; the next one retries
                    log.warning("lease heartbeat failed", exc_info=True)

    async def _execute(self, lease: Lease) -> None:
        executor = self.executor_for(lease.experiment)
        self.summary.attempts += 1
        try:
            result = await executor.run(lease.spec, attempt=lease.attempt)
        except InfraError as exc:
            await self._infra_failure(lease, str(exc))
            return
        except Exception as exc:  # our own bug: never the agent's failure
            detail = "".join(traceback.format_exception(exc))
            log.error("trial %s crashed: %s", lease.trial_id, detail)
            await self._infra_failure(lease, f"{type(exc).__name__}: {exc}")
            return
        if result.outcome is Outcome.infra_error:
            await self._infra_failure(lease, result.error or "infrastructure error", result)
            return
        accepted = await self._record(lease, result)
        cost = result.agent_cost_usd + result.judge_cost_usd
        self.spent_usd += cost
        self.summary.cost_usd += cost
        self._completed_costs.append(cost)
        if accepted:
            self.summary.completed += 1
            self.summary.outcomes[result.outcome.value] = self.summary.outcomes.get(result.outcome.value, 0) + 1
            self.on_event("finished", lease, result)
        else:
            self.summary.lost_leases += 1
            self.on_event("lost", lease, result)

    async def _infra_failure(self, lease: Lease, error: str, result: TrialResult | None = None) -> None:
        self.summary.infra_errors += 1
        if lease.attempt < self.max_attempts:
            # Back off before the trial becomes leasable again (its slot stays taken).
            await asyncio.sleep(min(self.retry_backoff_s * 2 ** (lease.attempt - 1), 60.0))
        if result is None:
            result = TrialResult(
                trial_id=lease.trial_id, outcome=Outcome.infra_error, error=error, attempt=lease.attempt,
                finished_at=datetime.now(UTC),
            )
        state = await asyncio.to_thread(
            self.store.fail_infra, lease, self.worker_id, error, max_attempts=self.max_attempts, result=result
        )
        self.on_event("infra_error" if state == "infra_error" else "retry", lease, result)
        if self._infra_rate_exceeded() and self.summary.stopped_reason is None:
            self.summary.stopped_reason = "infra_error_rate"
            log.error("aborting: %d of %d attempts failed in our infrastructure", self.summary.infra_errors,
                      self.summary.attempts)
