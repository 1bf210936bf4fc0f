import threading
import time

import pytest

from atoll.errors import AtollError
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.store import TrialStore


def _specs(n: int, experiment: str = "exp") -> list[TrialSpec]:
    return [
        TrialSpec(
            experiment=experiment,
            task_id=f"t{i % 7}",
            world_id="w",
            world_digest="d",
            agent_name="a",
            agent="replay",
            model="replay",
            run_index=i // 7,
        )
        for i in range(n)
    ]


def _result(lease, outcome=Outcome.passed) -> TrialResult:
    return TrialResult(trial_id=lease.trial_id, outcome=outcome, score=1.0, attempt=lease.attempt)


def test_enqueue_is_idempotent(store):
    assert store.enqueue(_specs(10)) == 10
    assert store.enqueue(_specs(12)) == 2
    assert store.counts("exp")["total"] == 12


def test_lease_complete_and_no_second_lease(store):
    store.enqueue(_specs(3))
    leases = store.lease("w1", limit=10, lease_s=60)
    assert len({lease.trial_id for lease in leases}) == 3
    assert store.lease("w2", limit=10, lease_s=60) == []
    assert all(store.complete(lease, "w1", _result(lease)) for lease in leases)
    assert store.counts("exp")["done"] == 3
    assert store.lease("w2", limit=10, lease_s=60) == []


def test_expired_lease_moves_to_another_worker_and_the_first_cannot_complete(store):
    store.enqueue(_specs(1))
    (first,) = store.lease("w1", limit=1, lease_s=0.05)
    time.sleep(0.1)
    (second,) = store.lease("w2", limit=1, lease_s=60)
    assert second.trial_id == first.trial_id and second.attempt == 2
    assert store.heartbeat([first], lease_s=60) == 0  # w1 learns it lost the lease
    assert store.complete(first, "w1", _result(first)) is False
    assert store.complete(second, "w2", _result(second, Outcome.failed)) is True
    (spec, result, state, attempts) = store.results("exp")[0]
    assert (result.outcome, state, attempts) == (Outcome.failed, "done", 2)
    history = store.attempt_history("exp")
    assert [(h["worker"], h["accepted"]) for h in history] == [("w1", 0), ("w2", 1)]


def test_heartbeat_keeps_a_lease(store):
    store.enqueue(_specs(1))
    (lease,) = store.lease("w1", limit=1, lease_s=0.2)
    for _ in range(3):
        time.sleep(0.1)
        assert store.heartbeat([lease], lease_s=0.2) == 1
    assert store.lease("w2", limit=1, lease_s=60) == []


def test_infra_errors_retry_then_stick_and_resume_retries_them(store):
    store.enqueue(_specs(1))
    (lease,) = store.lease("w1", limit=1, lease_s=60)
    assert store.fail_infra(lease, "w1", "environment crashed", max_attempts=2) == "pending"
    (lease,) = store.lease("w1", limit=1, lease_s=60)
    assert store.fail_infra(lease, "w1", "environment crashed", max_attempts=2) == "infra_error"
    assert store.lease("w1", limit=1, lease_s=60) == []
    assert store.counts("exp")["infra_error"] == 1
    assert store.reclaim("exp") == 1
    (lease,) = store.lease("w1", limit=1, lease_s=60)
    assert lease.attempt == 3


def test_reclaim_takes_back_leases_of_dead_local_processes(store):
    store.enqueue(_specs(2))
    store.lease("host-that-is-not-this-one:1:x", limit=1, lease_s=600)
    import socket

    store.lease(f"{socket.gethostname()}:999999999:dead", limit=1, lease_s=600)
    assert store.reclaim("exp", retry_infra_errors=False) == 1  # only the dead local one
    assert len(store.lease("w", limit=5, lease_s=60)) == 1


def test_concurrent_workers_complete_each_trial_exactly_once(store):
    store.enqueue(_specs(60))
    completed: list[str] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        while True:
            leases = store.lease(name, limit=3, lease_s=60)
            if not leases:
                return
            for lease in leases:
                if store.complete(lease, name, _result(lease)):
                    with lock:
                        completed.append(lease.trial_id)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(completed) == 60 and len(set(completed)) == 60
    assert store.counts("exp")["done"] == 60


def test_unreachable_store_is_a_clear_error():
    with pytest.raises(AtollError, match="trial store postgresql://postgres@127.0.0.1:1/none"):
        TrialStore("postgresql://postgres@127.0.0.1:1/none")


def test_a_retried_write_whose_first_commit_landed_is_not_applied_twice(store):
    from orchestrator.store import Completion

    store.enqueue(_specs(3))
    # A lease call retried after its commit landed (the reply was lost) finds its leases again.
    first = store._lease("w1", 2, 60, "exp", None, "token-1", [])
    again = store._lease("w1", 2, 60, "exp", None, "token-1", [1])
    assert {lease.trial_id for lease in again[0]} == {lease.trial_id for lease in first[0]}
    assert store.counts("exp")["leased"] == 2 and {lease.attempt for lease in again[0]} == {1}
    items = [Completion(lease, "w1", _result(lease)) for lease in first[0]]
    assert store.complete_many(items) == [True, True]
    assert store.complete_many(items) == [True, True]  # the retry: same answer, nothing written
    (third,) = store.lease("w1", limit=1, lease_s=60)
    assert store.fail_infra(third, "w1", "boom", max_attempts=3, write_id="infra-1") == "pending"
    assert store.fail_infra(third, "w1", "boom", max_attempts=3, write_id="infra-1") == "pending"
    history = store.attempt_history("exp")
    assert len(history) == 3 and len({h["write_id"] for h in history}) == 3
