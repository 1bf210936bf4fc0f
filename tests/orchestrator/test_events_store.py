"""The run event log: every change the store makes appends its event in the same transaction,
nothing for a change that did not happen, and ids that a reader can resume from."""

from __future__ import annotations

import threading

from atoll.trial import Outcome, TrialResult, TrialSpec


def _specs(n: int, experiment: str = "exp") -> list[TrialSpec]:
    return [
        TrialSpec(
            experiment=experiment,
            task_id=f"t{i}",
            world_id="w",
            world_digest="d",
            agent_name="a",
            agent="replay",
            model="replay",
            run_index=0,
        )
        for i in range(n)
    ]


def _result(lease, outcome=Outcome.passed, score=1.0) -> TrialResult:
    return TrialResult(trial_id=lease.trial_id, outcome=outcome, score=score, attempt=lease.attempt)


def _types(store, run="exp"):
    return [event.type for event in store.events(run)]


def test_a_run_logs_enqueue_leases_finishes_and_its_end(store):
    store.enqueue(_specs(2))
    leases = store.lease("w1", limit=2, lease_s=60)
    store.complete(leases[0], "w1", _result(leases[0]))
    assert _types(store) == ["run.enqueued", "trial.leased", "trial.leased", "trial.finished"]
    store.complete(leases[1], "w1", _result(leases[1], Outcome.failed, None))
    events = store.events("exp")
    assert [event.type for event in events][-2:] == ["trial.finished", "run.finished"]
    leased = events[1].payload
    assert leased == {
        "trial_id": leases[0].trial_id,
        "agent": "a",
        "task": leases[0].spec.task_id,
        "run_index": 0,
        "attempt": 1,
        "worker": "w1",
    }
    # An undefined score is null.
    assert events[-2].payload["outcome"] == "fail" and events[-2].payload["score"] is None
    assert events[-1].payload == {"outcomes": {"pass": 1, "fail": 1}}
    ids = [event.id for event in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [event.type for event in store.events("exp", after=ids[2])] == [
        "trial.finished",
        "trial.finished",
        "run.finished",
    ]
    assert store.last_event_id() == ids[-1]


def test_a_refused_result_logs_nothing_and_a_replayed_write_logs_once(store):
    from orchestrator.store import Completion

    store.enqueue(_specs(1))
    (first,) = store.lease("w1", limit=1, lease_s=0.01)
    import time

    time.sleep(0.05)
    (second,) = store.lease("w2", limit=1, lease_s=60)
    assert store.complete(first, "w1", _result(first)) is False  # lost lease: no event
    completion = Completion(second, "w2", _result(second))
    assert store.complete_many([completion]) == [True]
    assert store.complete_many([completion]) == [True]  # the same write again: recorded once
    assert _types(store) == ["run.enqueued", "trial.leased", "trial.leased", "trial.finished", "run.finished"]


def test_infra_retries_stops_releases_and_requeues_are_logged(store):
    store.enqueue(_specs(2))
    first, second = store.lease("w1", limit=2, lease_s=60)
    assert store.release([second]) == 1
    assert store.fail_infra(first, "w1", "environment crashed", max_attempts=2) == "pending"
    store.record_stop("exp", "infra_error_rate", "2 of 2 attempts failed")
    events = store.events("exp")
    assert [event.type for event in events][-3:] == ["trial.released", "trial.retrying", "run.aborted"]
    assert events[-2].payload["error"] == "environment crashed"
    assert events[-1].payload == {"reason": "infra_error_rate", "detail": "2 of 2 attempts failed"}
    leases = store.lease("w1", limit=2, lease_s=60)
    again = next(lease for lease in leases if lease.trial_id == first.trial_id)
    assert store.fail_infra(again, "w1", "environment crashed", max_attempts=2) == "infra_error"
    other = next(lease for lease in leases if lease.trial_id != first.trial_id)
    store.complete(other, "w1", _result(other))
    tail = store.events("exp")[-3:]
    assert [event.type for event in tail] == ["trial.finished", "trial.finished", "run.finished"]
    assert tail[0].payload["outcome"] == "infra_error" and tail[0].payload["score"] is None
    assert tail[2].payload == {"outcomes": {"infra_error": 1, "pass": 1}}
    assert store.reclaim("exp") == 1
    assert store.events("exp")[-1].type == "run.requeued"


def test_concurrent_finishes_log_run_finished_exactly_once(store):
    """Two workers completing the last two trials at once: each transaction alone sees the
    other's trial still leased, so without the sequence lock neither would say the run ended."""
    for round_ in range(8):
        run = f"race{round_}"
        store.enqueue(_specs(2, experiment=run))
        leases = store.lease("w", limit=2, lease_s=60, experiment=run)
        barrier = threading.Barrier(2)

        def finish(lease, barrier=barrier):
            barrier.wait()
            store.complete(lease, "w", _result(lease))

        threads = [threading.Thread(target=finish, args=(lease,)) for lease in leases]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert _types(store, run).count("run.finished") == 1


def test_events_of_one_run_and_pruning(store):
    store.enqueue(_specs(1, experiment="one") + _specs(1, experiment="two"))
    assert [event.run for event in store.events()] == ["one", "two"] or [
        event.run for event in store.events()
    ] == ["two", "one"]
    assert [event.run for event in store.events("two")] == ["two"]
    assert store.prune_events("one") == 1
    assert store.events("one") == [] and len(store.events("two")) == 1


def test_archiving_a_runs_trials_is_logged(store):
    store.enqueue(_specs(3))
    assert store.archive_trials("exp", set(), archive="replaced-1", fingerprint=None) == 3
    assert store.events("exp")[-1].payload == {"archive": "replaced-1", "trials": 3}
    assert store.events("exp")[-1].type == "run.trials_archived"


def test_a_cancel_is_logged_as_run_cancelled_not_as_an_abort(store):
    store.enqueue(_specs(1))
    store.record_stop("exp", "cancelled", "cancelled: 1 trials not run")
    assert store.events("exp")[-1].type == "run.cancelled"
    assert store.events("exp")[-1].payload == {"reason": "cancelled", "detail": "cancelled: 1 trials not run"}


def test_a_finished_runs_stream_ends_after_a_regrade_too(store):
    """A regrade of a finished run logs trial.regraded after run.finished; the run has still
    nothing left to run, so a stream without follow ends, from the start or resumed at the end."""
    import asyncio

    from orchestrator.events import event_stream

    store.enqueue(_specs(1))
    (lease,) = store.lease("w1", limit=1, lease_s=60)
    store.complete(lease, "w1", _result(lease))
    store.replace_result("exp", lease.trial_id, _result(lease, Outcome.failed, 0.0), note="regrade x")
    assert _types(store)[-2:] == ["run.finished", "trial.regraded"]

    async def frames(after: int) -> list[bytes]:
        stream = event_stream(store, "exp", after=after, poll_s=0.01, max_s=5)
        return [frame async for frame in stream]

    start = asyncio.run(asyncio.wait_for(frames(0), 4))
    assert any(b"event: trial.regraded" in frame for frame in start)
    resumed = asyncio.run(asyncio.wait_for(frames(store.last_event_id()), 4))
    assert resumed and not any(b"event:" in frame for frame in resumed)


def test_one_batch_that_ends_two_runs_logs_each_runs_end_with_its_own_outcomes(store):
    store.enqueue(_specs(2, experiment="left") + _specs(1, experiment="right") + _specs(2, experiment="open"))
    leases = [
        *store.lease("w", limit=2, lease_s=60, experiment="left"),
        *store.lease("w", limit=1, lease_s=60, experiment="right"),
        *store.lease("w", limit=1, lease_s=60, experiment="open"),
    ]
    outcomes = [Outcome.passed, Outcome.failed, Outcome.failed, Outcome.passed]
    store.complete_many(
        [(lease, "w", _result(lease, outcome)) for lease, outcome in zip(leases, outcomes, strict=True)]
    )
    assert store.events("left")[-1].payload == {"outcomes": {"pass": 1, "fail": 1}}
    assert store.events("right")[-1].payload == {"outcomes": {"fail": 1}}
    assert "run.finished" not in _types(store, "open")  # one trial still pending
    ids = [event.id for event in store.events()]
    assert ids == list(range(1, len(ids) + 1))  # no id skipped or taken twice


def test_a_result_transaction_writes_its_rows_in_one_statement_each(store):
    """A result's transaction is as short as it can be: behind a proxy that batches small
    packets every executemany (a psycopg pipeline) stalls for tens of ms, and a longer
    transaction is more likely to be cut by a connection fault and tried again (the CLI test
    of terminated connections ran 5-10 times longer with one more executemany)."""
    from sqlalchemy import event

    store.enqueue(_specs(4))
    leases = store.lease("w", limit=3, lease_s=60)
    statements: list[tuple[str, bool]] = []

    def record(_conn, _cursor, statement, _params, _context, executemany):
        statements.append((" ".join(statement.split()[:3]), executemany))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        store.complete_many([(lease, "w", _result(lease)) for lease in leases])
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    inserts = [(statement, many) for statement, many in statements if statement.startswith("INSERT")]
    assert inserts == [("INSERT INTO attempts", False), ("INSERT INTO run_events", False)]
    # One statement takes the ids and the sequence's lock (the run goes on: nothing more).
    assert [statement for statement, _ in statements if "event_sequence" in statement] == [
        "UPDATE event_sequence SET"
    ]
    assert _types(store).count("trial.finished") == 3 and "run.finished" not in _types(store)
