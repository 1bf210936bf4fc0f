"""Trial checkpoints through the real local executor (in-process environments, the agent's
model served by the scripted OpenAI-compatible server): where they are written, what a new
attempt resumes from, and what makes it start over instead, saying why."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from atoll.loader import load_benchmark
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import Trajectory
from orchestrator.artifacts import ArtifactStore, stored_snapshots
from orchestrator.executors.checkpoints import checkpoint_folder
from orchestrator.executors.local import LocalExecutor, ServiceSettings
from orchestrator.planner import plan_trials
from tests.orchestrator.checkpoint_trial import SUBJECT, StepModel, spec
from tests.orchestrator.test_kubernetes_executor import s3_store  # noqa: F401 (a fixture)


def _attempts(experiment, *attempts: int, services: ServiceSettings | None = None):
    """Run the experiment's one trial as the given attempts, one after the other, in one executor."""
    benchmark = load_benchmark(experiment.benchmark)
    (trial,) = plan_trials(benchmark, experiment)

    async def run():
        executor = LocalExecutor(benchmark, experiment, services)
        try:
            return [await executor.run(trial, attempt=attempt) for attempt in attempts]
        finally:
            await executor.aclose()

    return trial, asyncio.run(run())


def _trajectory(result) -> Trajectory:
    return Trajectory.model_validate_json(Path(result.trajectory_uri.removeprefix("file://")).read_bytes())


def sent_canaries(artifacts: ArtifactStore, result) -> int:
    """How many times the canary mail is in the result's final world (its mbox files)."""
    with stored_snapshots(artifacts, result.snapshot_before_uri, result.snapshot_after_uri) as (
        before,
        after,
    ):
        assert after.manifest.base_digest == before.manifest.digest()  # a delta on the seed
        mboxes = [e.path for e in after.manifest.entries if e.type == "file" and e.path.endswith(".mbox")]
        contents = after.read_many(mboxes)
    return sum(data.count(f"Subject: {SUBJECT}".encode()) for data in contents.values())


def _folder(tmp_path: Path, trial) -> Path:
    return tmp_path / "artifacts" / checkpoint_folder(trial)


def test_checkpoints_alternate_between_two_slots_and_a_new_attempt_resumes_from_the_latest(tmp_path):
    model = StepModel(12)
    with ScriptedLLM(model) as llm:
        experiment = spec(tmp_path, llm.api_base, steps=12, checkpoint={"every_steps": 1, "every_s": None})
        trial, (first, second) = _attempts(experiment, 1, 2)
    folder = _folder(tmp_path, trial)
    # Eleven checkpoints (steps 1-11) in two slots: nothing else, nothing half-written.
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "latest.json",
        "slot-a/agent.json",
        "slot-a/world.delta.tar.gz",
        "slot-b/agent.json",
        "slot-b/world.delta.tar.gz",
    ]
    latest = json.loads((folder / "latest.json").read_text())
    # The second attempt resumed from step 11 and wrote no checkpoint (none was due after it).
    assert latest["step"] == 11 and latest["attempt"] == 1 and latest["slot"] == "slot-a"
    assert first.run_status == second.run_status == "completed" and first.steps == second.steps == 12
    resumed = _trajectory(second)
    assert [(r.from_step, r.attempt) for r in resumed.resumes] == [(11, 2)]
    assert resumed.resume_refused is None
    # Each step asked once, the last twice (once per attempt); the mail sent once in each world.
    assert model.requests == {**dict.fromkeys(range(1, 12), 1), 12: 2}
    artifacts = ArtifactStore((tmp_path / "artifacts").as_uri())
    assert sent_canaries(artifacts, first) == sent_canaries(artifacts, second) == 1
    # The resumed attempt's final state is a delta on the seed that carries the mail itself.
    assert second.snapshot_before_uri == first.snapshot_before_uri


def test_checkpoint_off_writes_none_and_a_new_attempt_starts_over(tmp_path):
    model = StepModel(6)
    with ScriptedLLM(model) as llm:
        experiment = spec(tmp_path, llm.api_base, steps=6, checkpoint="off")
        trial, (first, second) = _attempts(experiment, 1, 2)
    assert not _folder(tmp_path, trial).exists()
    assert not list((tmp_path / "artifacts").rglob("checkpoints-*"))
    assert _trajectory(second).resumes == [] and first.steps == second.steps == 6
    assert model.requests == dict.fromkeys(range(1, 7), 2)


@pytest.mark.parametrize(
    "damage, why",
    [
        (
            lambda folder, latest: (folder / "latest.json").write_text("{not json"),
            "is not a checkpoint pointer",
        ),
        (
            lambda folder, latest: (folder / latest["slot"] / "agent.json").write_text("{}"),
            "agent.json is not the one latest.json names",
        ),
        (
            lambda folder, latest: (folder / latest["slot"] / "world.delta.tar.gz").write_bytes(b"\x1f\x8b"),
            "world.delta.tar.gz is not the one latest.json names",
        ),
        (
            lambda folder, latest: (folder / "latest.json").write_text(
                json.dumps({**latest, "model": "openai/other"})
            ),
            "is of model 'openai/other'",
        ),
    ],
    ids=["latest.json", "agent.json", "world", "another model"],
)
def test_an_unusable_checkpoint_starts_the_trial_over_saying_why(tmp_path, damage, why):
    model = StepModel(8)
    with ScriptedLLM(model) as llm:
        experiment = spec(tmp_path, llm.api_base, steps=8, checkpoint={"every_steps": 3, "every_s": None})
        trial, (first,) = _attempts(experiment, 1)
        folder = _folder(tmp_path, trial)
        latest = json.loads((folder / "latest.json").read_text())
        assert latest["step"] == 6
        damage(folder, latest)
        _, (second,) = _attempts(experiment, 2)
    started_over = _trajectory(second)
    assert started_over.resumes == []
    assert started_over.resume_refused is not None and why in started_over.resume_refused
    assert second.run_status == "completed" and second.steps == 8
    assert model.requests == dict.fromkeys(range(1, 9), 2)  # every step again
    assert sent_canaries(ArtifactStore((tmp_path / "artifacts").as_uri()), second) == 1


def refuse_toolbelt(folder: Path) -> dict:
    """Make the latest checkpoint one the agent refuses once it has started (its toolbelt holds a
    tool the world does not serve) while its files still match ``latest.json``; the pointer."""
    latest = json.loads((folder / "latest.json").read_text())
    agent = folder / latest["slot"] / "agent.json"
    state = json.loads(agent.read_text())
    state["agent_state"]["toolbelt"] = ["mail_recall_everything"]
    agent.write_text(json.dumps(state))
    latest["agent_sha256"] = hashlib.sha256(agent.read_bytes()).hexdigest()
    (folder / "latest.json").write_text(json.dumps(latest))
    return latest


def test_a_checkpoint_the_agent_refuses_once_started_starts_the_trial_over_once_saying_why(tmp_path):
    """Not an infrastructure error to retry (every retry would meet the same checkpoint): the
    attempt starts over from the seed, once, and completes."""
    model = StepModel(8)
    with ScriptedLLM(model) as llm:
        experiment = spec(tmp_path, llm.api_base, steps=8, checkpoint={"every_steps": 3, "every_s": None})
        trial, (first,) = _attempts(experiment, 1)
        refused = refuse_toolbelt(_folder(tmp_path, trial))
        assert refused["step"] == 6
        _, (second,) = _attempts(experiment, 2)
    started_over = _trajectory(second)
    assert second.run_status == "completed" and second.attempt == 2 and second.steps == 8
    assert started_over.resumes == [] and started_over.resume_refused is not None
    assert started_over.resume_refused.startswith("the agent refused the checkpoint of step 6: ")
    assert "mail_recall_everything" in started_over.resume_refused
    assert model.requests == dict.fromkeys(range(1, 9), 2)  # the refused run asked for nothing
    assert sent_canaries(ArtifactStore((tmp_path / "artifacts").as_uri()), second) == 1
    # The new checkpoints went into the slots in turn (step 3 beside the refused one, then 6).
    latest = json.loads((_folder(tmp_path, trial) / "latest.json").read_text())
    assert (latest["step"], latest["attempt"], latest["slot"]) == (6, 2, refused["slot"])


def test_trials_run_by_the_agents_runner_service_take_checkpoints_and_resume_from_them(tmp_path, monkeypatch):
    """With ATOLL_AGENTS_RUNNER_URL the agent runs in the service: it pauses at each checkpoint
    while the executor snapshots the world, a new attempt resumes from the latest through the
    service, and a checkpoint the agent refuses there starts the attempt over, saying why."""
    from agents_runner.service import create_app
    from tests.served_app import ServedApp

    model = StepModel(8)
    with ScriptedLLM(model) as llm, ServedApp(create_app(token="svc")) as runner:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={llm.api_base}")  # the runner's operator
        services = ServiceSettings(agents_runner_url=runner.url, agent_token="svc")
        experiment = spec(tmp_path, llm.api_base, steps=8, checkpoint={"every_steps": 3, "every_s": None})
        trial, (first, second) = _attempts(experiment, 1, 2, services=services)
        folder = _folder(tmp_path, trial)
        latest = json.loads((folder / "latest.json").read_text())
        refuse_toolbelt(folder)
        _, (third,) = _attempts(experiment, 3, services=services)
    assert (latest["step"], latest["attempt"]) == (6, 1)  # taken while the service's run waited
    assert first.steps == second.steps == third.steps == 8
    resumed = _trajectory(second)
    assert [(r.from_step, r.attempt) for r in resumed.resumes] == [(6, 2)]
    artifacts = ArtifactStore((tmp_path / "artifacts").as_uri())
    assert sent_canaries(artifacts, first) == sent_canaries(artifacts, second) == 1
    started_over = _trajectory(third)
    assert started_over.resumes == [] and "mail_recall_everything" in started_over.resume_refused
    assert sent_canaries(artifacts, third) == 1
    # Steps 1-6 asked by attempt 1 (and again by 3), 7-8 by each attempt.
    assert model.requests == {**dict.fromkeys(range(1, 7), 2), 7: 3, 8: 3}


def test_a_recorded_result_removes_its_checkpoints_and_deleting_the_run_removes_any_left(tmp_path):
    from orchestrator.run_deletion import delete_run
    from orchestrator.runner import run_experiment
    from orchestrator.store import TrialStore

    with ScriptedLLM(StepModel(6)) as llm:
        experiment = spec(tmp_path, llm.api_base, steps=6, checkpoint={"every_steps": 2, "every_s": None})
        asyncio.run(run_experiment(experiment, quiet=True))
    (trial,) = plan_trials(load_benchmark(experiment.benchmark), experiment)
    folder = _folder(tmp_path, trial)
    # Its result is recorded for good, so its checkpoints went with the attempt that ended it.
    assert not folder.exists() and (tmp_path / "artifacts" / "ckpt").is_dir()
    # One left behind (by a trial whose retries ended in infrastructure errors) goes with the run.
    (folder / "slot-a").mkdir(parents=True)
    (folder / "latest.json").write_text("{}")
    store = TrialStore(experiment.store)
    try:
        report = delete_run(store, "ckpt", gc=False)
    finally:
        store.dispose()
    assert not folder.exists()
    assert folder.as_uri() in report.folders and not report.problems
    assert not (tmp_path / "artifacts" / "ckpt").exists()


@pytest.fixture(params=["store", "presigned"])
def pod_store(request):
    """How the trial pod reaches the artifact store: with the store's own credentials (a local
    folder), or an S3 store (SeaweedFS, signatures checked) through presigned URLs only."""
    return None if request.param == "store" else request.getfixturevalue("s3_store")


def test_the_kubernetes_trial_pod_takes_checkpoints_and_resumes_from_them_the_same_way(
    tmp_path, pod_store, monkeypatch
):
    """``atoll trial run`` (the pod's side) shares the path: attempt 1 takes checkpoints, attempt
    2 resumes from the latest and its final delta is on the seed; with an S3 store the pod has no
    credentials and reaches the checkpoint folder through the presigned URLs of its input."""
    import fsspec.config
    import s3fs

    from atoll.apps import servers_for_world
    from atoll.world_store import seed_manifest_key
    from environment import EnvironmentServer, EnvironmentSettings
    from orchestrator.executors import steps
    from orchestrator.executors.kubernetes_trial import (
        PodTrialInput,
        input_key,
        presign_attempt,
        run_pod_trial,
    )

    roots = tmp_path / "pod-world"
    (roots / "filesystem").mkdir(parents=True)
    (roots / ".apps_data").mkdir()
    environment = EnvironmentServer(
        EnvironmentSettings(
            fs_root=roots / "filesystem",
            apps_data_root=roots / ".apps_data",
            json_logs=False,
            log_level="WARNING",
        )
    ).start()
    model = StepModel(8)
    presigned = pod_store is not None
    extra = {"artifacts": "s3://atoll/artifacts"} if presigned else {}
    try:
        with ScriptedLLM(model) as llm:
            experiment = spec(
                tmp_path, llm.api_base, steps=8, checkpoint={"every_steps": 3, "every_s": None}, **extra
            )
            benchmark = load_benchmark(experiment.benchmark)
            (trial,) = plan_trials(benchmark, experiment)
            artifacts = ArtifactStore(experiment.artifacts)
            world = benchmark.world(trial.world_id)

            async def prepare_seed():
                executor = LocalExecutor(benchmark, experiment)  # for its seed cache
                try:
                    seed = await executor.seeds.get(trial, benchmark)
                    return seed, await executor.seeds.archive(seed)
                finally:
                    await executor.aclose()

            seed, archive = asyncio.run(prepare_seed())
            seed_key = f"seeds/{seed.key}.tar.gz"
            artifacts.put_file(seed_key, archive)
            steps.store_seed(artifacts, seed)
            outcomes = []
            for attempt in (1, 2):
                pod_input = PodTrialInput(
                    spec=trial,
                    attempt=attempt,
                    task=next(t for t in benchmark.tasks if t.task_id == trial.task_id),
                    world_options=steps.world_options(world),
                    servers=list(servers_for_world(world)),
                    seed_key=seed_key,
                    seed_manifest_key=seed_manifest_key(seed.key),
                    seed_digest=seed.digest,
                    artifacts=artifacts.url,
                    judge={"model": None},
                    checkpoint=experiment.checkpoints(),
                )
                key = input_key(artifacts, trial, attempt)
                uri = None
                if presigned:
                    uri, pod_input.presigned = presign_attempt(
                        artifacts,
                        key.rsplit("/", 1)[0],
                        seed_key,
                        600,
                        seed_manifest_key=pod_input.seed_manifest_key,
                        checkpoints=checkpoint_folder(trial),
                    )
                stored = artifacts.put_bytes(key, pod_input.model_dump_json(by_alias=True).encode())
                with monkeypatch.context() as pod_env:
                    if presigned:  # the pod: no credentials, no endpoint
                        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "FSSPEC_S3_ENDPOINT_URL"):
                            pod_env.delenv(name)
                        pod_env.setattr(fsspec.config, "conf", {})
                        s3fs.S3FileSystem.clear_instance_cache()
                    outcomes.append(
                        asyncio.run(run_pod_trial(uri or stored, environment_url=environment.url))
                    )
                s3fs.S3FileSystem.clear_instance_cache()
            first, second = outcomes
    finally:
        environment.stop()
    assert first.result is not None and second.result is not None, (first.infra_error, second.infra_error)
    assert first.result.steps == second.result.steps == 8
    resumed = Trajectory.model_validate_json(artifacts.get_bytes(second.result.trajectory_uri))
    assert [(r.from_step, r.attempt) for r in resumed.resumes] == [(6, 2)]
    assert model.requests == {**dict.fromkeys(range(1, 7), 1), 7: 2, 8: 2}
    assert json.loads(artifacts.get_bytes(f"{checkpoint_folder(trial)}/latest.json"))["step"] == 6
    assert sent_canaries(artifacts, first.result) == sent_canaries(artifacts, second.result) == 1
