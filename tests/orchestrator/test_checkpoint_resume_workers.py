"""A trial whose `atoll worker` is killed with SIGKILL mid-trajectory is finished by another
worker from its last checkpoint: real CLI processes, a real PostgreSQL, the local executor's
in-process environments, and the agent's model served by the scripted OpenAI-compatible
server in this process (which counts the requests of each step)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.artifacts import ArtifactStore
from orchestrator.store import TrialStore
from tests.orchestrator.checkpoint_trial import StepModel, experiment
from tests.orchestrator.test_checkpoints import _trajectory, sent_canaries

STEPS = 30


def _worker(store_url: str, tmp_path) -> subprocess.Popen:
    environment = {**os.environ, "ATOLL_SPOOL_DIR": str(tmp_path / "spool"), "ATOLL_LEASE_S": "4"}
    return subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", "worker", "--store", store_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


@pytest.mark.slow
def test_a_killed_workers_trial_is_finished_by_another_from_its_last_checkpoint(tmp_path, postgres_url):
    model = StepModel(STEPS, delay_s=0.15)
    with ScriptedLLM(model) as llm:
        spec = experiment(
            tmp_path,
            llm.api_base,
            steps=STEPS,
            store=postgres_url,
            executor="local",
            checkpoint={"every_steps": 5, "every_s": None},
        )
        (tmp_path / "exp.yaml").write_text(yaml.safe_dump(spec))
        planned = subprocess.run(
            [sys.executable, "-m", "atoll_cli", "run", str(tmp_path / "exp.yaml"), "--enqueue-only"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert planned.returncode == 0, planned.stderr
        latest_files = lambda: list((tmp_path / "artifacts").rglob("checkpoints-*/latest.json"))  # noqa: E731

        def checkpointed_past(step: int) -> bool:
            found = latest_files()
            return bool(found) and json.loads(found[0].read_text())["step"] >= step

        doomed = _worker(postgres_url, tmp_path)
        deadline = time.monotonic() + 120
        # Killed two steps past a stored checkpoint of step 10 or later, mid-trajectory.
        while not (checkpointed_past(10) and max(model.requests, default=0) >= 12):
            assert time.monotonic() < deadline and doomed.poll() is None, (
                doomed.stderr and doomed.stderr.read()
            )
            time.sleep(0.02)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        killed_at = max(model.requests)
        assert killed_at < STEPS  # mid-trajectory
        latest = json.loads(latest_files()[0].read_text())
        resumed_from = latest["step"]
        assert 10 <= resumed_from < killed_at

        survivor = _worker(postgres_url, tmp_path)
        out, err = survivor.communicate(timeout=180)
        assert survivor.returncode == 0, err

    store = TrialStore(postgres_url)
    try:
        ((_spec, result, status, attempt),) = store.results("ckpt")
    finally:
        store.dispose()
    assert status == "done" and attempt == 2 and result.run_status == "completed", result.error
    assert not latest_files()  # the result is recorded for good: its checkpoints are gone
    assert result.steps == STEPS
    trajectory = _trajectory(result)
    assert [(r.from_step, r.attempt) for r in trajectory.resumes] == [(resumed_from, 2)]
    assert trajectory.resume_refused is None
    # Each step's request exactly once, plus at most the steps since the checkpoint.
    assert set(model.requests) == set(range(1, STEPS + 1))
    repeated = {step for step, count in model.requests.items() if count > 1}
    assert repeated <= set(range(resumed_from + 1, killed_at + 1))
    assert max(model.requests.values()) <= 2
    assert sum(model.requests.values()) <= STEPS + (killed_at - resumed_from)
    # Steps are numbered once each: none repeated, none lost.
    assert [call["name"] for call in _sent(trajectory)] == ["mail_send_mail"]
    # The mail sent at step 2, before the checkpoint, is in the final world exactly once.
    assert sent_canaries(ArtifactStore((tmp_path / "artifacts").as_uri()), result) == 1


def _sent(trajectory):
    return [
        call["function"]
        for message in trajectory.messages
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
        if call["function"]["name"] == "mail_send_mail"
    ]
