"""Ctrl-C during a run: scheduling stops at once, running trials get a short grace (a second
Ctrl-C abandons them), abandoned trials' leases go back to the store, and running the same
command resumes. In-process against the scheduler, and through `atoll run` in a subprocess
sent a real SIGINT while the react agent waits on slow scripted model replies."""

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

import pytest

from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.scheduler import Scheduler
from orchestrator.store import Completion, TrialStore
from tests.shared_sample import fresh_sample_benchmark


def _spec(task: str) -> TrialSpec:
    return TrialSpec(
        experiment="r",
        task_id=task,
        world_id="w",
        world_digest="d",
        agent_name="a",
        agent="replay",
        model="m",
        run_index=0,
    )


class _GatedExecutor:
    """Trials of ``quick`` finish when ``release_quick`` is set; the others never do (until cancelled)."""

    def __init__(self, quick: set[str]) -> None:
        self.quick, self.release_quick, self.cancelled = quick, asyncio.Event(), []

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        try:
            if spec.task_id in self.quick:
                await self.release_quick.wait()
            else:
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(spec.task_id)
            raise
        return TrialResult(
            trial_id=spec.trial_id,
            outcome=Outcome.passed,
            score=1.0,
            attempt=attempt,
            finished_at=datetime.now(UTC),
        )

    async def aclose(self) -> None:
        pass


async def _until(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


@pytest.fixture
def store(tmp_path):
    store = TrialStore(str(tmp_path / "atoll.db"))
    store.save_experiment("r", {"name": "r"})
    store.enqueue([_spec(task) for task in ("quick", "slow1", "slow2")])
    yield store
    store.dispose()


def test_an_interrupt_lets_running_trials_finish_and_a_second_abandons_the_rest(store):
    executor = _GatedExecutor({"quick"})

    async def scenario():
        scheduler = Scheduler(
            store,
            lambda _run: executor,
            worker_id="here:1:x",
            concurrency=3,
            experiment="r",
            poll_s=0.02,
            interrupt_grace_s=600,
        )
        running = asyncio.create_task(scheduler.run())
        await _until(lambda: scheduler.running == 3)
        scheduler.interrupt()  # no new trials; the running ones may finish
        executor.release_quick.set()
        await _until(lambda: store.counts("r")["done"] == 1)
        assert not running.done()  # still waiting (grace 600 s) for the two slow ones
        scheduler.interrupt()  # the second one abandons them now
        return await asyncio.wait_for(running, 60)

    summary = asyncio.run(scenario())
    assert summary.stopped_reason == "interrupted" and summary.completed == 1
    assert (summary.abandoned, summary.released) == (2, 2) and sorted(executor.cancelled) == [
        "slow1",
        "slow2",
    ]
    counts = store.counts("r")
    assert (counts["done"], counts["pending"], counts["leased"]) == (1, 2, 0)
    # An interrupted attempt does not count against the trial's infra retries.
    assert {spec.task_id: attempts for spec, _r, _s, attempts in store.results("r")} == {
        "quick": 1,
        "slow1": 0,
        "slow2": 0,
    }


def test_an_interrupt_abandons_what_is_still_running_when_the_grace_ends(store):
    executor = _GatedExecutor(set())

    async def scenario():
        scheduler = Scheduler(
            store,
            lambda _run: executor,
            worker_id="here:1:x",
            concurrency=2,
            experiment="r",
            poll_s=0.02,
            interrupt_grace_s=0.2,
        )
        running = asyncio.create_task(scheduler.run())
        await _until(lambda: scheduler.running == 2)
        scheduler.interrupt()
        return await asyncio.wait_for(running, 60)

    summary = asyncio.run(scenario())
    assert summary.released == 2 and summary.completed == 0
    counts = store.counts("r")
    assert (counts["pending"], counts["leased"]) == (3, 0)  # the third was never leased


def test_release_gives_back_only_leases_still_held(store):
    leases = store.lease("w", limit=3, lease_s=60, experiment="r")
    store.complete(
        leases[0], "w", TrialResult(trial_id=leases[0].trial_id, outcome=Outcome.failed, score=0.0)
    )
    assert store.release(leases) == 2  # the finished one is left alone
    assert store.counts("r")["done"] == 1 and store.counts("r")["pending"] == 2


@pytest.mark.slow
def test_ctrl_c_during_atoll_run_releases_leases_says_how_to_resume_and_resume_completes(tmp_path):
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = {t["task_id"]: t for t in json.loads((benchmark / "tasks_and_rubrics.json").read_text())}
    quick, *slow = [
        "keystone-01-packaging-baseline",
        "keystone-02-update-targets",
        "atlas-01-comps-implied-ev",
    ]
    replies_slowly = threading.Event()
    replies_slowly.set()

    def model(request):
        prompt = str(next(m["content"] for m in request["messages"] if m["role"] == "user"))
        task = next(t for t in [quick, *slow] if tasks[t]["prompt"][:200] in prompt)
        answer = {
            "tool_calls": [{"name": "final_answer", "arguments": {"answer": "done", "status": "completed"}}]
        }
        if task != quick and replies_slowly.is_set():
            return {**answer, "delay_s": 120}  # a model that takes its time: the trial is in flight
        return answer

    with ScriptedLLM(model) as llm:
        experiment = tmp_path / "interrupt.yaml"
        store_path = tmp_path / "atoll.db"
        experiment.write_text(
            json.dumps(
                {
                    "name": "interrupt",
                    "benchmark": str(benchmark),
                    "tasks": {"ids": [quick, *slow]},
                    "agents": [
                        {
                            "name": "react",
                            "agent": "react_toolbelt",
                            "model": "openai/scripted",
                            "api_base": llm.api_base,
                            "config": {"max_steps": 3},
                        }
                    ],
                    "concurrency": {"trials": 3},
                    "store": str(store_path),
                    "artifacts": (tmp_path / "artifacts").as_uri(),
                    "output_dir": str(tmp_path / "out"),
                }
            )
        )
        command = [sys.executable, "-m", "atoll_cli", "run", str(experiment), "--no-preflight"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while True:  # the quick trial done, the two slow ones waiting on the model
                assert process.poll() is None and time.monotonic() < deadline
                counts = TrialStore(str(store_path)).counts("interrupt") if store_path.exists() else {}
                if counts.get("done") == 1 and counts.get("leased") == 2:
                    break
                time.sleep(0.5)
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, err
        assert "interrupting: no new trials; waiting up to 5 s for 2 running" in err
        assert err.rstrip().splitlines()[-1] == f"interrupted: 1/3 done; `atoll run {experiment}` resumes"
        counts = TrialStore(str(store_path)).counts("interrupt")
        assert (counts["done"], counts["pending"], counts["leased"]) == (1, 2, 0)
        # The report so far opens with the interrupt (recorded in the store for later reports too).
        banner = (tmp_path / "out" / "interrupt" / "report.md").read_text().splitlines()[2]
        assert banner.startswith("> **INTERRUPTED**") and "2 of 3 trials were not finished" in banner

        replies_slowly.clear()
        resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "3 of 3 trials done: 2 run now, 1 already done" in resumed.stdout
    assert "> **" not in (tmp_path / "out" / "interrupt" / "report.md").read_text()  # complete now: no banner


def test_results_queued_behind_a_commit_are_written_when_their_trials_are_cancelled(store):
    """Two trials finish while the store is slow to commit and both are then cancelled (the
    end of a drain): both results are still recorded, so neither trial is run or paid twice."""
    leases = store.lease("here:1:x", limit=2, lease_s=120)
    commit_started = threading.Event()
    real_complete_many = store.complete_many

    def slow_complete_many(completions):
        commit_started.set()
        time.sleep(0.5)
        return real_complete_many(completions)

    store.complete_many = slow_complete_many

    async def scenario():
        scheduler = Scheduler(store, lambda _run: None, worker_id="here:1:x", concurrency=2, experiment="r")

        def completion(lease):
            result = TrialResult(
                trial_id=lease.trial_id,
                outcome=Outcome.passed,
                score=1.0,
                attempt=lease.attempt,
                finished_at=datetime.now(UTC),
            )
            return Completion(lease=lease, worker="here:1:x", result=result)

        first = asyncio.create_task(scheduler._record(completion(leases[0])))
        await _until(commit_started.is_set)
        second = asyncio.create_task(scheduler._record(completion(leases[1])))
        await asyncio.sleep(0.05)  # queued behind the commit in flight
        first.cancel()
        second.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        await asyncio.wait_for(scheduler._writer, 30)
        assert scheduler._writer.exception() is None

    asyncio.run(scenario())
    assert store.counts("r")["done"] == 2
