"""What a client asks of a run is obeyed inside the lease transaction, on SQLite and
PostgreSQL alike: a paused or cancelled run gives no trial to any worker, a concurrency cap
holds across workers, a cancelled run's expired leases are cancelled rather than taken over,
and idempotency keys are claimed once."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

import pytest

from atoll.errors import AtollError
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.scheduler import Scheduler
from orchestrator.store_control import PAUSED, RUNNING


def _specs(run: str, count: int) -> list[TrialSpec]:
    return [
        TrialSpec(
            experiment=run,
            task_id=f"t{index}",
            world_id="w",
            world_digest="d",
            agent_name="a",
            agent="replay",
            model="m",
            run_index=0,
        )
        for index in range(count)
    ]


@pytest.fixture
def runs(store):
    for run in ("one", "two"):
        store.save_experiment(run, {"name": run})
        store.enqueue(_specs(run, 4))
    return store


def test_a_paused_run_is_skipped_by_every_lease_and_a_resumed_one_is_not(runs):
    runs.set_control("one", PAUSED)
    assert runs.lease("w", limit=4, lease_s=60, experiment="one") == []
    assert {lease.experiment for lease in runs.lease("w", limit=8, lease_s=60)} == {"two"}
    runs.set_control("one", RUNNING)
    assert len(runs.lease("w", limit=8, lease_s=60)) == 4


def test_a_cap_holds_across_workers_and_expired_leases_of_a_cancelled_run_are_cancelled(runs):
    runs.set_max_in_flight("one", 3)
    assert len(runs.lease("w1", limit=2, lease_s=60, experiment="one")) == 2
    assert len(runs.lease("w2", limit=4, lease_s=60, experiment="one")) == 1
    assert runs.lease("w3", limit=4, lease_s=60, experiment="one") == []
    # A short lease that expires: its worker is gone. Cancelled, it is not taken over.
    short = runs.lease("w", limit=1, lease_s=0.01, experiment="two")
    time.sleep(0.05)
    assert runs.cancel_run("two", stop_in_flight=False) == (4, 0)  # 3 pending + the expired one
    assert runs.lease("w", limit=4, lease_s=60, experiment="two") == []
    assert runs.counts("two")["cancelled"] == 4
    assert runs.stopped_leases(short) == {("two", short[0].trial_id): "cancelled"}
    assert runs.uncancel_run("two") == 4


def test_an_idempotency_key_is_claimed_once(store):
    holder, stored = store.reserve_submission("key", "digest-a")
    assert holder and stored is None
    with pytest.raises(AtollError) as busy:
        store.reserve_submission("key", "digest-a")
    assert busy.value.code == "idempotency_in_progress"
    store.record_submission("key", holder, '{"name": "r"}')
    assert store.reserve_submission("key", "digest-a") == ("", '{"name": "r"}')
    with pytest.raises(AtollError) as conflict:
        store.reserve_submission("key", "digest-b")
    assert conflict.value.code == "idempotency_conflict"
    other, _ = store.reserve_submission("other", "digest-a")
    store.drop_submission("other", other)
    assert store.reserve_submission("other", "digest-b")[1] is None  # free again


def test_an_idempotency_key_whose_request_was_never_answered_is_claimed_again(store):
    """The API stopped while answering the key's first request: the reply never came."""
    from sqlalchemy import update

    from orchestrator.store_control import ABANDONED_SUBMISSION_S
    from orchestrator.store_schema import submissions

    lost, _ = store.reserve_submission("key", "digest-a")
    with pytest.raises(AtollError):  # while it may still be answered: retry later
        store.reserve_submission("key", "digest-a")
    with store.engine.begin() as tx:
        tx.execute(update(submissions).values(created_at=time.time() - ABANDONED_SUBMISSION_S - 1))
    with pytest.raises(AtollError) as conflict:  # another request with it is still refused
        store.reserve_submission("key", "digest-b")
    assert conflict.value.code == "idempotency_conflict"
    retried, stored = store.reserve_submission("key", "digest-a")
    assert retried and retried != lost and stored is None
    store.record_submission("key", lost, '{"name": "late"}')  # the lost holder no longer writes it
    store.record_submission("key", retried, '{"name": "r"}')
    assert store.reserve_submission("key", "digest-a") == ("", '{"name": "r"}')


def test_a_pause_that_lands_after_a_cancel_leaves_the_run_cancelled(runs):
    """pause_run checked the run before a cancel committed: its write must not undo the cancel."""
    runs.cancel_run("one", stop_in_flight=False)
    runs.set_control("one", PAUSED)
    runs.set_control("one", RUNNING)
    assert runs.run_controls("one")["one"].control == "cancelled"
    assert runs.lease("w", limit=4, lease_s=60, experiment="one") == []
    assert [event.type for event in runs.events("one")][-1] == "run.cancelled"  # nothing else logged


def test_idempotency_keys_are_kept_a_day_so_the_table_stays_bounded(store):
    from sqlalchemy import func, select, update

    from orchestrator.store_control import SUBMISSION_KEPT_S
    from orchestrator.store_schema import submissions

    for index in range(50):
        holder, _ = store.reserve_submission(f"old-{index}", "digest")
        store.record_submission(f"old-{index}", holder, '{"name": "r"}')
    with store.engine.begin() as tx:
        tx.execute(update(submissions).values(created_at=time.time() - SUBMISSION_KEPT_S - 1))
    store.reserve_submission("new", "digest")
    with store.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(submissions)).scalar_one() == 1
    # An old key is a new submission again (its request plans nothing new: trials enqueue once).
    assert store.reserve_submission("old-0", "another digest")[1] is None


def test_every_verb_is_logged_in_the_runs_event_log(runs):
    runs.set_control("one", PAUSED)
    runs.set_control("one", RUNNING)
    runs.set_max_in_flight("one", 2)
    runs.cancel_run("one", stop_in_flight=True)
    runs.uncancel_run("one")
    kinds = [(event.type, event.payload) for event in runs.events("one")][-5:]
    assert [kind for kind, _ in kinds] == [
        "run.paused",
        "run.resumed",
        "run.resized",
        "run.cancelled",
        "run.resumed",
    ]
    assert kinds[2][1] == {"concurrency": 2}
    assert kinds[3][1]["cancelled"] == 4 and kinds[3][1]["reason"] == "cancelled"
    assert kinds[4][1] == {"trials": 4}


def test_pending_trials_of_a_cancelled_run_keep_no_worker_waiting(runs):
    runs.cancel_run("one", stop_in_flight=False)
    runs.enqueue(_specs("one", 6))  # two more, enqueued after the cancel (a resubmission)
    assert runs.counts("one")["pending"] == 2
    assert "one" not in runs.outstanding() and runs.outstanding("one") == {}
    runs.uncancel_run("one")
    assert runs.outstanding("one")["one"].pending == 6


class _QuickExecutor:
    """Every trial passes at once; remembers which ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        self.ran.append(spec.task_id)
        return TrialResult(
            trial_id=spec.trial_id,
            outcome=Outcome.passed,
            score=1.0,
            attempt=attempt,
            finished_at=datetime.now(UTC),
        )

    async def aclose(self) -> None:
        pass


def test_a_running_scheduler_waits_on_a_paused_run_says_so_and_finishes_it_once_resumed(runs, caplog):
    runs.set_control("one", PAUSED)
    executor = _QuickExecutor()
    scheduler = Scheduler(
        runs, lambda _run: executor, worker_id="w", concurrency=2, experiment="one", poll_s=0.02
    )

    async def scenario() -> None:
        running = asyncio.create_task(scheduler.run())
        await asyncio.sleep(1.0)
        assert executor.ran == [] and not running.done()  # paused: nothing leased, still waiting
        await asyncio.to_thread(runs.set_control, "one", RUNNING)
        summary = await asyncio.wait_for(running, timeout=30)
        assert summary.completed == 4

    with caplog.at_level(logging.WARNING, logger="atoll.orchestrator"):
        asyncio.run(scenario())
    assert sorted(executor.ran) == ["t0", "t1", "t2", "t3"]
    assert "run one is paused: waiting for `atoll resume one`" in caplog.text
