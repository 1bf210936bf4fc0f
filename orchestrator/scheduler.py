"""The lease-execute-record loop shared by ``atoll run`` and ``atoll worker``.

It keeps up to ``concurrency`` trials running, heartbeats their leases, retries
infrastructure failures with backoff, and follows each run's policy as saved in the store
(orchestrator.policy): the cost ceiling is enforced by the store across every worker, and a
run whose infrastructure error rate passes its threshold is stopped for this worker.

Database faults do not stop it: store operations retry (orchestrator.store_retry); a result
that still cannot be written is kept in memory and in the worker's spool file
(orchestrator.spool) and written when the database answers again. It exits only when no
trial in its scope is pending or leased — leases of dead workers are taken over when they
expire — or, with ``forever``, never — or when interrupted (:meth:`Scheduler.interrupt`):
then it leases nothing more, gives the running trials ``interrupt_grace_s`` to finish (a
second interrupt abandons them at once), cancels the rest and gives their leases back to the
store (``TrialStore.release``) so they are pending again, not held until the lease expires.

It obeys what clients ask of a run (orchestrator.lifecycle): the store leases nothing of a
paused or cancelled run and no more than a run's concurrency cap; a trial whose run was
cancelled with its running trials stopped is cancelled here within ``CANCEL_CHECK_S``. So is
a trial whose lease this worker lost (it expired while the worker stalled and another worker
took it over): its result would be history only, so it is not worth finishing and grading.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from atoll import telemetry
from atoll.errors import AtollError, ErrorCode
from atoll.retry import backoff, pause_s
from atoll.trial import Outcome, TrialResult
from orchestrator.executors.base import (
    Executor,
    InfraError,
    ModelEndpointError,
    attached_result,
    failure_message,
)
from orchestrator.policy import InfraHealth, RunPolicy
from orchestrator.spool import ResultSpool, SpooledWrite
from orchestrator.store import Completion, Lease, TrialStore
from orchestrator.store_runs import Outstanding

log = logging.getLogger("atoll.orchestrator")

# Configuration errors of a model endpoint are deterministic: a few of them say enough.
MIN_CONFIGURATION_ERRORS_FOR_ABORT = 3
# How long an interrupted scheduler waits for its running trials before it abandons them.
INTERRUPT_GRACE_S = 5.0
# How long abandoned trials get to unwind (their cleanup) once cancelled.
CANCEL_WAIT_S = 10.0
# How often running trials are checked for a cancel of their run that stops them, or a lost lease.
CANCEL_CHECK_S = 1.0
# How often an idle scheduler of one paused run says that it waits.
PAUSED_NOTICE_S = 60.0


@dataclass
class SchedulerSummary:
    completed: int = 0
    infra_errors: int = 0
    lost_leases: int = 0
    attempts: int = 0
    cost_usd: float = 0.0
    # "cost_ceiling" | "infra_error_rate" | "model_configuration" | "bad_spec" | "interrupted" | None
    # (the last stop)
    stopped_reason: str | None = None
    stopped: dict[str, str] = field(default_factory=dict)  # run -> why this worker stopped it
    stop_details: dict[str, str] = field(default_factory=dict)  # run -> the words of a "bad_spec" stop
    spooled: int = 0  # writes that had to wait in the spool for the database
    outcomes: dict[str, int] = field(default_factory=dict)
    # Of infra_errors, those on the model side (agent or judge endpoint), and of those the
    # configuration errors (bad key, unknown model, nothing listening at the api_base).
    model_endpoint_errors: int = 0
    configuration_errors: int = 0
    last_model_endpoint_error: str | None = None
    # After an interrupt: trials cancelled before they finished, and of them the leases given back.
    abandoned: int = 0
    released: int = 0
    # Running trials stopped because their run was cancelled (``in_flight: stop``).
    cancelled: int = 0
    # Running trials stopped because their lease was lost (taken over by another worker).
    stopped_lost: int = 0


EventSink = Callable[[str, Lease, TrialResult | None], None]


def _unavailable(exc: BaseException) -> bool:
    return isinstance(exc, AtollError) and exc.code == "store_unavailable"


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
        policy: RunPolicy | None = None,
        policy_for: Callable[[str], RunPolicy] | None = None,
        poll_s: float = 0.5,
        on_event: EventSink | None = None,
        spool: ResultSpool | None = None,
        healthy_interval_s: float | None = None,
        give_up_after_s: float | None = 600.0,
        on_tick: Callable[[], None] | None = None,
        interrupt_grace_s: float = INTERRUPT_GRACE_S,
    ) -> None:
        self.store = store
        self.executor_for = executor_for
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.experiment = experiment
        self.lease_s = lease_s
        fixed = policy or RunPolicy()
        self.policy_for = policy_for or (lambda _experiment: fixed)
        self.poll_s = poll_s
        self.on_event = on_event or (lambda kind, lease, result: None)
        self.spool = spool
        self.healthy_interval_s = healthy_interval_s
        self.give_up_after_s = give_up_after_s
        self.on_tick = on_tick or (lambda: None)  # each round of the loop (a worker's liveness file)
        self.interrupt_grace_s = interrupt_grace_s
        self.summary = SchedulerSummary()
        self._interrupts = 0
        self._running: dict[asyncio.Task, Lease] = {}
        self._health: dict[str, InfraHealth] = {}
        self._exhausted: set[str] = set()  # runs whose cost ceiling is reached
        self._active: tuple[float, dict[str, Outstanding]] = (0.0, {})
        # Results waiting to be written; one writer commits them in batches.
        self._unwritten: list[tuple[Completion, asyncio.Future]] = []
        self._writer: asyncio.Task | None = None
        self._cancel_checked = 0.0
        self._executing: set[str] = set()  # tokens of the leases whose executor runs (no result yet)
        self._paused_said = self._paused_checked = -PAUSED_NOTICE_S

    # --- writing results --------------------------------------------------------------------

    async def _record(self, completion: Completion) -> bool | None:
        """Queue a final result and wait until it is committed (True/False: accepted or the
        lease was lost) or, the database being unreachable, spooled (None). Results that
        finish while a commit is in flight go together in the next one."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        self._unwritten.append((completion, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_results())
        # Shielded: a trial cancelled while its result waits (Ctrl-C, SIGTERM drain) must not
        # cancel the future the writer will resolve; the result is still committed, and the
        # writer goes on with the results queued behind it.
        return await asyncio.shield(done)

    async def _write_results(self) -> None:
        while self._unwritten:
            batch, self._unwritten = self._unwritten, []
            try:
                flags = await asyncio.to_thread(
                    self.store.complete_many, [completion for completion, _ in batch]
                )
            except Exception as exc:
                if self.spool is None or not _unavailable(exc):
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for completion, done in batch:
                    self._spool(SpooledWrite("complete", completion))
                    if not done.done():
                        done.set_result(None)
                continue
            for (_, done), accepted in zip(batch, flags, strict=True):
                if not done.done():
                    done.set_result(accepted)

    def _spool(self, entry: SpooledWrite) -> None:
        assert self.spool is not None
        self.spool.add(entry)
        self.summary.spooled += 1
        log.warning(
            "trial store unreachable: %s of trial %s kept in %s until it answers",
            "result" if entry.kind == "complete" else "infra failure",
            entry.completion.lease.trial_id[:12],
            self.spool.path,
        )

    async def _flush_spool(self) -> None:
        if self.spool is not None and len(self.spool):
            left = await asyncio.to_thread(self.spool.flush, self.store)
            if not left:
                log.warning("trial store answers again: every spooled write is recorded")

    # --- policy -----------------------------------------------------------------------------

    def _health_of(self, experiment: str) -> InfraHealth:
        if experiment not in self._health:
            rate = self.policy_for(experiment).infra_abort_rate
            self._health[experiment] = InfraHealth(rate, healthy_interval_s=self.healthy_interval_s)
        return self._health[experiment]

    def _may_start(self, experiment: str) -> bool:
        if experiment in self._exhausted:
            return False
        if self._health_of(experiment).allows():
            if self.summary.stopped.get(experiment) == "infra_error_rate":
                del self.summary.stopped[experiment]
                log.warning(
                    "run %s: no infrastructure failure for %.0f s; starting its trials again",
                    experiment,
                    self.healthy_interval_s or 0,
                )
            return True
        return False

    def _stop(self, experiment: str, reason: str) -> None:
        self.summary.stopped[experiment] = reason
        self.summary.stopped_reason = reason

    # --- interruption -----------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Trials this scheduler is running now."""
        return len(self._running)

    @property
    def interrupts(self) -> int:
        """How many times :meth:`interrupt` was called."""
        return self._interrupts

    def interrupt(self) -> None:
        """Stop scheduling (call it from a signal handler on the scheduler's loop). The first
        call: lease nothing more, wait up to ``interrupt_grace_s`` for the running trials; a
        second call: abandon them now. Abandoned trials are cancelled and their leases released."""
        self._interrupts += 1
        self.summary.stopped_reason = "interrupted"

    async def _wind_down(self) -> None:
        deadline = time.monotonic() + self.interrupt_grace_s
        while self._running and self._interrupts < 2 and (left := deadline - time.monotonic()) > 0:
            done, _ = await asyncio.wait(
                list(self._running), timeout=min(left, 0.2), return_when=asyncio.FIRST_COMPLETED
            )
            for finished in done:
                lease = self._running.pop(finished)
                if not finished.cancelled() and finished.exception() is not None:
                    log.error("trial %s failed while stopping: %s", lease.trial_id[:12], finished.exception())
        abandoned = list(self._running.items())
        self._running.clear()
        for task, _lease in abandoned:
            task.cancel()
        if abandoned:
            await asyncio.wait([task for task, _ in abandoned], timeout=CANCEL_WAIT_S)
        if self._writer is not None and not self._writer.done():  # results already finished: let them land
            await asyncio.wait([self._writer], timeout=CANCEL_WAIT_S)
        self.summary.abandoned = len(abandoned)
        if abandoned:
            try:
                self.summary.released = await asyncio.to_thread(
                    self.store.release, [lease for _, lease in abandoned]
                )
            except Exception as exc:  # they expire by themselves; a resume on this host takes them at once
                log.warning(
                    "could not give back %d leases (they expire in %.0f s): %s",
                    len(abandoned),
                    self.lease_s,
                    exc,
                )

    async def _stop_cancelled(self) -> None:
        """Cancel the running trials whose run was cancelled with its trials stopped (the store
        already took their leases back), and those still executing whose lease was lost; at
        most every ``CANCEL_CHECK_S``. A trial whose result is being written is left to finish
        it (the store refuses a lost lease's result; the scheduler counts it)."""
        if not self._running or time.monotonic() - self._cancel_checked < CANCEL_CHECK_S:
            return
        self._cancel_checked = time.monotonic()
        running = list(self._running.items())
        found = await asyncio.to_thread(self.store.stopped_leases, [lease for _, lease in running])
        for task, lease in running:
            why = found.get((lease.experiment, lease.trial_id))
            if why is None or task.done() or (why == "lost" and lease.token not in self._executing):
                continue
            task.cancel()
            if why == "cancelled":
                self.summary.cancelled += 1
                log.warning(
                    "trial %s: its run %s was cancelled; stopping it", lease.trial_id[:12], lease.experiment
                )
                self.on_event("cancelled", lease, None)
            else:
                self.summary.stopped_lost += 1
                self.summary.lost_leases += 1
                log.warning(
                    "trial %s: its lease was taken over by another worker; stopping it", lease.trial_id[:12]
                )
                self.on_event("lost", lease, None)

    async def _say_if_paused(self) -> None:
        """An idle scheduler of one run that is paused says so (looked up every few seconds,
        said at most every ``PAUSED_NOTICE_S``): it waits for ``atoll resume`` rather than exiting."""
        now = time.monotonic()
        if (
            self.experiment is None
            or now - self._paused_checked < 5.0
            or now - self._paused_said < PAUSED_NOTICE_S
        ):
            return
        self._paused_checked = now
        controls = await asyncio.to_thread(self.store.run_controls, self.experiment)
        control = controls.get(self.experiment)
        if control is not None and control.control == "paused":
            self._paused_said = time.monotonic()
            log.warning(
                "run %s is paused: waiting for `atoll resume %s` (or POST /runs/%s/resume)",
                self.experiment,
                self.experiment,
                self.experiment,
            )

    # --- loop -------------------------------------------------------------------------------

    async def _outstanding(self, *, max_age_s: float = 0.0) -> dict[str, Outstanding]:
        at, cached = self._active
        if max_age_s and time.monotonic() - at < max_age_s:
            return cached
        found = await asyncio.to_thread(self.store.outstanding, self.experiment)
        self._active = (time.monotonic(), found)
        return found

    async def _lease_more(self, free: int) -> None:
        if self.experiment is not None:
            candidates = [self.experiment]
        else:  # every run with runnable trials (refreshed every few polls)
            outstanding = await self._outstanding(max_age_s=4 * self.poll_s)
            candidates = [name for name, counts in outstanding.items() if counts.runnable]
        for experiment in candidates:
            if free <= 0:
                break
            if experiment in self._exhausted:
                continue
            try:
                budget = self.policy_for(experiment).budget
            except AtollError as exc:
                if _unavailable(exc):
                    raise
                # A run whose stored spec cannot be used (one saved by an older atoll that
                # today's rules refuse) is stopped for this worker; the others go on.
                self._exhausted.add(experiment)
                self._stop(experiment, "bad_spec")
                self.summary.stop_details[experiment] = exc.message
                log.error("run %s: not running its trials: %s", experiment, exc.message)
                continue
            if not self._may_start(experiment):
                continue
            leases, exhausted = await asyncio.to_thread(
                self.store.lease_within_budget,
                self.worker_id,
                limit=free,
                lease_s=self.lease_s,
                experiment=experiment,
                budget=budget,
            )
            if exhausted:
                self._exhausted.add(experiment)
                self._stop(experiment, "cost_ceiling")
            for lease in leases:
                self.on_event("started", lease, None)
                self._running[asyncio.create_task(self._execute(lease))] = lease
            free -= len(leases)

    def _left_to_do(self, outstanding: dict[str, Outstanding]) -> bool:
        """Whether some run in scope still has trials this worker could end up running."""
        for experiment, counts in outstanding.items():
            if experiment in self._exhausted:
                continue
            if self.summary.stopped.get(experiment) == "infra_error_rate" and self.healthy_interval_s is None:
                continue
            if counts.pending or counts.leased:
                return True
        return False

    async def run(self, *, forever: bool = False) -> SchedulerSummary:
        """Run until no trial in scope is pending or leased (leases of dead workers are taken
        over once they expire) and nothing is left in the spool, or a stop condition holds
        for every run in scope; with ``forever``, keep polling for new work.

        Raises AtollError("store_unavailable") when the store stayed unreachable for
        ``give_up_after_s`` with nothing running (unwritten results stay in the spool)."""
        heartbeat = asyncio.create_task(self._heartbeat_loop())
        outage_since: float | None = None
        if self.spool is not None:
            self.spool.adopt_orphans()
        try:
            while True:
                self.on_tick()
                if self._interrupts:
                    await self._wind_down()
                    break
                try:
                    await self._flush_spool()
                    await self._stop_cancelled()
                    free = self.concurrency - len(self._running)
                    if free > 0:
                        await self._lease_more(free)
                    idle_and_done = not self._running and not self._left_to_do(await self._outstanding())
                    if not self._running and not idle_and_done:
                        await self._say_if_paused()
                    outage_since = None
                except AtollError as exc:
                    if not _unavailable(exc):
                        raise
                    outage_since = outage_since or time.monotonic()
                    idle_and_done = False
                    log.warning("%s", exc.message)
                    if (
                        not forever
                        and not self._running
                        and self.give_up_after_s is not None
                        and time.monotonic() - outage_since > self.give_up_after_s
                    ):
                        kept = (
                            f"; {len(self.spool)} unwritten results kept in {self.spool.path}"
                            if self.spool
                            else ""
                        )
                        raise AtollError(ErrorCode.store_unavailable, f"{exc.message}{kept}") from None
                if not self._running:
                    if idle_and_done and not (self.spool and len(self.spool)) and not forever:
                        break
                    await asyncio.sleep(self.poll_s)
                    continue
                done, _ = await asyncio.wait(
                    list(self._running), timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED
                )
                for finished in done:
                    self._running.pop(finished)
                    if not finished.cancelled():  # cancelled: its run was cancelled or its lease lost (above)
                        finished.result()
        finally:
            heartbeat.cancel()
            for task in self._running:
                task.cancel()
        return self.summary

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            leases = list(self._running.values())
            if leases:
                try:
                    await asyncio.to_thread(self.store.heartbeat, leases, lease_s=self.lease_s)
                except Exception:  # a missed beat is survivable; the next one retries
                    log.warning("lease heartbeat failed", exc_info=True)

    async def _attempt(self, lease: Lease) -> TrialResult:
        self._executing.add(lease.token)
        try:
            if not telemetry.ENABLED:
                return await self.executor_for(lease.experiment).run(lease.spec, attempt=lease.attempt)
            # With traces on (atoll.telemetry), the attempt is the root span of the trial's trace.
            spec = lease.spec
            with telemetry.span(
                "trial",
                attributes={
                    "atoll.run": spec.experiment,
                    "atoll.trial.id": spec.trial_id,
                    "atoll.task.id": spec.task_id,
                    "atoll.world.id": spec.world_id,
                    "atoll.agent": spec.agent_name,
                    "atoll.model": spec.model,
                    "atoll.run_index": spec.run_index,
                    "atoll.attempt": lease.attempt,
                },
            ) as current:
                result = await self.executor_for(lease.experiment).run(spec, attempt=lease.attempt)
                telemetry.set_attributes(
                    current, {"atoll.outcome": result.outcome.value, "atoll.score": result.score}
                )
                return result
        finally:
            self._executing.discard(lease.token)

    async def _execute(self, lease: Lease) -> None:
        self.summary.attempts += 1
        try:
            result = await self._attempt(lease)
        except ModelEndpointError as exc:
            self._model_endpoint_failure(lease.experiment, exc)
            await self._infra_failure(lease, failure_message(exc), attached_result(exc))
            return
        except InfraError as exc:
            await self._infra_failure(lease, failure_message(exc), attached_result(exc))
            return
        except Exception as exc:  # our own bug: never the agent's failure
            detail = "".join(traceback.format_exception(exc))
            log.error("trial %s crashed: %s", lease.trial_id, detail)
            await self._infra_failure(lease, failure_message(exc), attached_result(exc))
            return
        if result.outcome is Outcome.infra_error:
            await self._infra_failure(lease, result.error or "infrastructure error", result)
            return
        self._health_of(lease.experiment).record(failed=False)
        accepted = await self._record(Completion(lease, self.worker_id, result))
        cost = result.cost_usd
        self.summary.cost_usd += cost
        if accepted is False:
            self.summary.lost_leases += 1
            self.on_event("lost", lease, result)
            return
        if accepted:  # recorded for good: the trial never runs again, its checkpoints are dead weight
            discard = getattr(self.executor_for(lease.experiment), "discard_checkpoints", None)
            if discard is not None:
                await discard(lease.spec)
        # Accepted, or spooled: it is written (once) when the database answers again.
        self.summary.completed += 1
        self.summary.outcomes[result.outcome.value] = self.summary.outcomes.get(result.outcome.value, 0) + 1
        self.on_event("finished", lease, result)

    def _model_endpoint_failure(self, experiment: str, exc: ModelEndpointError) -> None:
        summary = self.summary
        summary.model_endpoint_errors += 1
        summary.last_model_endpoint_error = str(exc)
        if not exc.configuration:
            return
        summary.configuration_errors += 1
        rate = self.policy_for(experiment).infra_abort_rate
        if (
            summary.configuration_errors >= MIN_CONFIGURATION_ERRORS_FOR_ABORT
            and summary.configuration_errors / summary.attempts > rate
            and self.summary.stopped.get(experiment) != "model_configuration"
        ):
            # No more trials of this run from this worker: the endpoint will not fix itself.
            self._exhausted.add(experiment)
            self._stop(experiment, "model_configuration")
            log.error(
                "run %s: stopping: %d of %d attempts met a model endpoint configuration error; last: %s",
                experiment,
                summary.configuration_errors,
                summary.attempts,
                exc,
            )

    async def _infra_failure(self, lease: Lease, error: str, result: TrialResult | None = None) -> None:
        self.summary.infra_errors += 1
        policy = self.policy_for(lease.experiment)
        if lease.attempt < policy.max_attempts:
            # Back off before the trial becomes leasable again (its slot stays taken).
            await asyncio.sleep(pause_s(backoff(policy.retry_backoff_s, 60.0, jitter=False), lease.attempt))
        if result is None:
            result = TrialResult(
                trial_id=lease.trial_id,
                outcome=Outcome.infra_error,
                error=error,
                attempt=lease.attempt,
                finished_at=datetime.now(UTC),
            )
        elif result.error != error:  # the evidence the executor kept, with the error as recorded
            result = result.model_copy(update={"error": error})
        write = SpooledWrite("infra", Completion(lease, self.worker_id, result), error, policy.max_attempts)
        try:
            state = await asyncio.to_thread(
                self.store.fail_infra,
                lease,
                self.worker_id,
                error,
                max_attempts=policy.max_attempts,
                result=result,
                write_id=write.completion.write_id,
            )
        except AtollError as exc:
            if self.spool is None or not _unavailable(exc):
                raise
            self._spool(write)
            state = "infra_error" if lease.attempt >= policy.max_attempts else "pending"
        self.on_event("infra_error" if state == "infra_error" else "retry", lease, result)
        health = self._health_of(lease.experiment)
        health.record(failed=True)
        if not health.allows() and self.summary.stopped.get(lease.experiment) != "infra_error_rate":
            self._stop(lease.experiment, "infra_error_rate")
            log.error(
                "run %s: stopping: %d of %d attempts failed (%d of this worker's on the model endpoint)",
                lease.experiment,
                health.failures,
                health.attempts,
                self.summary.model_endpoint_errors,
            )
