"""Two finished runs for the viewer tests, built once in one store: ``viewdemo``, the replay
agent on two sample tasks, one of which replays a wrong reference solution (a sheet cell set
to the wrong value, and a final answer carrying HTML that must never run in the viewer); and
``viewfixed``, made first, the same agent and tasks replaying the right solutions (so the same
trial ids are in both runs, and comparing the two shows the failed task fixed)."""

import asyncio
import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from atoll.experiment import ExperimentSpec
from atoll.trial import Outcome, TrialResult, TrialSpec
from atoll_sample import generate_sample_benchmark
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from orchestrator.viewer import create_app

PASSING, FAILING = "keystone-01-packaging-baseline", "keystone-02-update-targets"
HOSTILE_ANSWER = 'Done <script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


@dataclass
class FinishedRun:
    root: Path
    store_url: str
    name: str = "viewdemo"
    fixed: str = "viewfixed"
    passing: str = PASSING
    failing: str = FAILING
    hostile_answer: str = HOSTILE_ANSWER


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> FinishedRun:
    root = tmp_path_factory.mktemp("viewer-run")

    def run(name: str, benchmark: Path) -> None:
        spec = ExperimentSpec.model_validate(
            {
                "name": name,
                "benchmark": str(benchmark),
                "tasks": {"ids": [PASSING, FAILING]},
                "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
                "store": str(root / "atoll.db"),
                "artifacts": (root / "artifacts").as_uri(),
                "output_dir": str(root),
            }
        )
        asyncio.run(run_experiment(spec, quiet=True))

    run("viewfixed", generate_sample_benchmark(root / "bench-fixed"))
    benchmark = generate_sample_benchmark(root / "bench")
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    for task in tasks:
        if task["task_id"] == FAILING:
            operations = task["reference_solution"]["steps"][1]["arguments"]["operations"]
            assert operations[2]["cell"] == "B6"
            operations[2]["value"] = 0.07  # the rubric wants 0.08
            task["reference_solution"]["final_answer"] = HOSTILE_ANSWER
    (benchmark / "tasks_and_rubrics.json").write_text(json.dumps(tasks))
    run("viewdemo", benchmark)
    return FinishedRun(root=root, store_url=str(root / "atoll.db"))


@contextlib.contextmanager
def serve(store: TrialStore):
    """The viewer over ``store``, served by uvicorn on a free loopback port: its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(create_app(store, bind_host="127.0.0.1"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def viewer_url(finished_run):
    """The viewer over the finished run."""
    store = TrialStore(finished_run.store_url)
    with serve(store) as url:
        yield url
    store.dispose()


STOPPED_RUN = "halted"
STOP_DETAIL = "4 of 5 trials ended in infrastructure errors (limit 50%)"


def enqueue_run(store: TrialStore, name: str, tasks: int) -> list[TrialSpec]:
    """Record run ``name`` (agent ``a``, replay) and enqueue one trial for each of tasks
    ``t0`` … ``t<tasks-1>`` in world ``w``; its specs."""
    store.save_experiment(name, {"name": name, "benchmark": "b", "agents": [{"name": "a"}]})
    specs = [
        TrialSpec(
            experiment=name,
            task_id=f"t{i}",
            world_id="w",
            world_digest="d",
            agent_name="a",
            agent="replay",
            model="m",
            run_index=0,
        )
        for i in range(tasks)
    ]
    store.enqueue(specs)
    return specs


@pytest.fixture
def stopped_run(tmp_path):
    """A run the scheduler aborted (``record_stop``): one trial done, one never run."""
    store = TrialStore(str(tmp_path / "atoll.db"))
    enqueue_run(store, STOPPED_RUN, 2)
    lease = store.lease("w", limit=1, lease_s=60)[0]
    store.complete(
        lease, "w", TrialResult(trial_id=lease.trial_id, outcome=Outcome.infra_error, error="boom")
    )
    store.record_stop(STOPPED_RUN, "infra_error_rate", STOP_DETAIL)
    yield store
    store.dispose()
