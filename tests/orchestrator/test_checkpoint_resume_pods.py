"""A trial whose pod is deleted in the middle is finished by a new pod from its last checkpoint:
the Kubernetes executor against the API stand-in, each pod a real process running
``atoll trial run`` beside an environment of its own (tests/deploy/kube_pods.py), killed with
SIGKILL when deleted; the agent's model is the scripted OpenAI-compatible server in this
process, which counts the requests of each step."""

from __future__ import annotations

import asyncio
import json
import time

from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors.checkpoints import LATEST_NAME
from orchestrator.executors.kubernetes import KubernetesExecutor
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.deploy.kube_pods import ProcessKubelet
from tests.deploy.kube_standin import StandInCluster
from tests.orchestrator.checkpoint_trial import StepModel, spec
from tests.orchestrator.test_checkpoints import _trajectory, sent_canaries
from tests.orchestrator.test_kubernetes_executor import _settings

STEPS = 20
CHECKPOINT_EVERY = 5
# The pod dies waiting for its model's reply of these steps, once the checkpoint before is stored:
# evicted at step 7 (a drain: the Job replaces its pod, and the attempt goes on in the new one),
# then deleted at step 12 (the Job fails: the executor retries the trial as its next attempt).
DELETIONS = {7: "EvictionByEvictionAPI", 12: None}


class DeletesThePod(StepModel):
    """The scripted model; the first request of a step in :data:`DELETIONS` first deletes the
    pod that sent it."""

    def __init__(self, delete) -> None:
        super().__init__(STEPS)
        self.delete = delete
        self.deleted: dict[int, int] = {}  # step -> the pid of the pod deleted at it

    def __call__(self, request):
        reply = super().__call__(request)
        step = sum(1 for message in request["messages"] if message["role"] == "assistant") + 1
        if step in DELETIONS and step not in self.deleted:
            self.deleted[step] = self.delete(step, DELETIONS[step])
        return reply


def test_a_trial_pod_deleted_mid_trial_is_finished_by_a_new_pod_from_its_last_checkpoint(tmp_path):
    artifacts_root = tmp_path / "artifacts"

    def latest_step() -> int:
        found = list(artifacts_root.rglob(f"checkpoints-*/{LATEST_NAME}"))
        return json.loads(found[0].read_text())["step"] if found else 0

    with StandInCluster() as cluster, ProcessKubelet() as kubelet:

        def delete(step: int, disruption: str | None) -> int:
            checkpoint = (step - 1) // CHECKPOINT_EVERY * CHECKPOINT_EVERY
            deadline = time.monotonic() + 30
            while latest_step() < checkpoint:  # stored in the background meanwhile
                assert time.monotonic() < deadline, f"no checkpoint of step {checkpoint} in 30 s"
                time.sleep(0.01)
            (name,) = [job["metadata"]["name"] for job in cluster.jobs.values()]
            return kubelet.delete_pod(cluster, name, disruption=disruption)

        model = DeletesThePod(delete)
        cluster.on_create = kubelet
        with ScriptedLLM(model) as llm:
            experiment = spec(
                tmp_path,
                llm.api_base,
                steps=STEPS,
                executor="kubernetes",
                checkpoint={"every_steps": CHECKPOINT_EVERY, "every_s": None},
                infra_retry_backoff_s=0,
                limits={"timeout_s": 120},
            )
            settings = _settings(cluster)
            outcome = asyncio.run(
                run_experiment(
                    experiment,
                    quiet=True,
                    executor_factory=lambda benchmark, s: KubernetesExecutor(benchmark, s, settings),
                )
            )
    assert outcome.counts["done"] == 1
    # Both pods really died by SIGKILL, mid-trajectory; the third finished the trial.
    assert sorted(model.deleted) == [7, 12]
    assert [kubelet.exits[pid] for pid in model.deleted.values()] == [-9, -9]
    assert sorted(kubelet.exits.values()) == [-9, -9, 0]
    store = TrialStore(experiment.store)
    try:
        ((trial, result, status, attempt),) = store.results("ckpt")
        history = store.attempt_history("ckpt", trial.trial_id)
    finally:
        store.dispose()
    assert status == "done" and attempt == 2 and result.run_status == "completed", result.error
    # The evicted pod was replaced within its Job; the deleted one failed it, and the executor,
    # seeing why, retried the trial in a new Job.
    assert len(cluster.created) == 2 and len(cluster.retired) == 0
    assert "trial pod was deleted before it finished" in history[0]["error"]
    assert result.steps == STEPS
    trajectory = _trajectory(result)
    assert [(r.from_step, r.attempt) for r in trajectory.resumes] == [(5, 1), (10, 2)]
    assert trajectory.resume_refused is None
    # Each step's request exactly once, plus the steps since each checkpoint again.
    assert model.requests == {**dict.fromkeys(range(1, STEPS + 1), 1), 6: 2, 7: 2, 11: 2, 12: 2}
    # The mail sent at step 2, before the checkpoints, is in the final world exactly once.
    assert sent_canaries(ArtifactStore(artifacts_root.as_uri()), result) == 1
