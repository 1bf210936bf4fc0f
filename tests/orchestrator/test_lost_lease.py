"""A worker that loses a running trial's lease (another worker took it over) stops the trial
at once instead of finishing and grading it for a result the store would refuse."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import update

from atoll.loader import load_benchmark
from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.executors import get_executor
from orchestrator.planner import plan_trials
from orchestrator.scheduler import Scheduler
from orchestrator.store import TrialStore
from orchestrator.store_schema import trials
from tests.orchestrator.judge_only import judge_only_experiment

MODEL_DELAY_S = 6.0  # the agent's first model call: the trial is in flight meanwhile


def _take_over(store: TrialStore, name: str):
    """What another worker does when this one's lease expires: lease the trial itself."""
    with store.engine.begin() as connection:
        connection.execute(
            update(trials).where(trials.c.experiment == name).values(lease_expires=time.time() - 1)
        )
    (lease,) = store.lease("other-worker", limit=1, lease_s=600, experiment=name)
    return lease


def test_a_trial_whose_lease_is_taken_over_is_stopped_before_it_is_graded(tmp_path):
    answer = {
        "tool_calls": [{"name": "final_answer", "arguments": {"answer": "done", "status": "completed"}}]
    }
    with (
        ScriptedLLM(lambda request: {**answer, "delay_s": MODEL_DELAY_S}) as model,
        ScriptedLLM(lambda request: {"content": '{"verdict": "met", "rationale": "ok"}'}) as judge,
    ):
        spec = judge_only_experiment(
            tmp_path,
            "taken",
            {"model": "openai/judge", "api_base": judge.api_base},
            agents=[
                {
                    "name": "react",
                    "agent": "react_toolbelt",
                    "model": "openai/scripted",
                    "api_base": model.api_base,
                    "config": {"max_steps": 2},
                }
            ],
        )
        benchmark = load_benchmark(spec.benchmark)
        store = TrialStore(spec.store)
        store.save_experiment(spec.name, spec.model_dump(mode="json"))
        store.enqueue(plan_trials(benchmark, spec))
        executor = get_executor("local")(benchmark, spec)
        events: list[tuple[str, float]] = []
        scheduler = Scheduler(
            store,
            lambda _run: executor,
            worker_id="this-worker",
            concurrency=1,
            experiment=spec.name,
            poll_s=0.05,
            lease_s=600,
            on_event=lambda kind, _lease, _result: events.append((kind, time.monotonic())),
        )

        async def scenario():
            running = asyncio.create_task(scheduler.run())
            deadline = time.monotonic() + 120
            while not model.requests:  # the agent waits on its first model reply
                assert time.monotonic() < deadline and not running.done()
                await asyncio.sleep(0.05)
            taken_at = time.monotonic()
            await asyncio.to_thread(_take_over, store, spec.name)
            while not any(kind == "lost" for kind, _ in events):
                assert time.monotonic() - taken_at < 10, f"not stopped: {events}"
                await asyncio.sleep(0.05)
            stopped_after = next(at for kind, at in events if kind == "lost") - taken_at
            # Past the model's reply: a trial left running would be judged by now.
            await asyncio.sleep(MODEL_DELAY_S + 1)
            scheduler.interrupt()
            scheduler.interrupt()
            try:
                return stopped_after, await asyncio.wait_for(running, 60)
            finally:
                await executor.aclose()

        try:
            stopped_after, summary = asyncio.run(scenario())
        finally:
            store.dispose()
        assert stopped_after < 2.5
        assert summary.stopped_lost == 1 and summary.completed == 0
        assert judge.requests == []  # grading never started
        assert not list((tmp_path / "artifacts").rglob("grade.json"))
