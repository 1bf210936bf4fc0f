"""The Kubernetes executor against an in-test stand-in of the Jobs/Pods API (no cluster is
available here): real Job manifests sent through the official client, real state
transitions, and — in the end-to-end case — a real trial run by the pod's command against
a real environment, its result collected from the artifact store."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from atoll.experiment import ExperimentSpec
from atoll.loader import load_benchmark
from atoll.trial import Outcome
from orchestrator.executors.base import InfraError
from orchestrator.executors.kubernetes import KubernetesExecutor, KubernetesSettings
from orchestrator.executors.kubernetes_trial import run_pod_trial
from orchestrator.planner import plan_trials
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark
from tests.deploy.kube_standin import StandInCluster, container_status, later

TEMPLATE = Path(__file__).resolve().parents[2] / "k8s" / "base" / "trial-job.yaml"


@pytest.fixture
def benchmark_dir(tmp_path):
    task = make_task(
        "t1",
        rubric=[
            {
                "verifier_id": "v1",
                "criteria": "States the fee cap of $250,000",
                "check": {"kind": "answer_regex", "pattern": r"250,000"},
            }
        ],
        reference_solution={"steps": [], "final_answer": "The fee cap is $250,000."},
    )
    return write_benchmark(tmp_path / "bench", tasks=[task])


@pytest.fixture
def cluster():
    with StandInCluster() as standin:
        yield standin


def _spec(tmp_path, benchmark_dir, **overrides) -> ExperimentSpec:
    fields = {
        "name": "K8s_Sample.1",  # not a valid DNS label: the executor must derive one
        "benchmark": str(benchmark_dir),
        "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
        "runs": 1,
        "executor": "kubernetes",
        "store": str(tmp_path / "store.db"),
        "artifacts": (tmp_path / "artifacts").as_uri(),
        "output_dir": str(tmp_path / "out"),
        "limits": {"timeout_s": 120},
    }
    fields.update(overrides)
    return ExperimentSpec.model_validate(fields)


def _settings(cluster, **overrides) -> KubernetesSettings:
    values = {
        "namespace": "atoll",
        "job_template": TEMPLATE,
        "api_url": cluster.url,
        "poll_s": 0.05,
        "image_pull_timeout_s": 0.4,
        "unschedulable_timeout_s": 0.4,
        "events_s": 0.05,
        "lease_s": 3,
        "reap_s": 0.2,
    }
    values.update(overrides)
    return KubernetesSettings(**values)


def _executor(tmp_path, benchmark_dir, cluster, **settings):
    spec = _spec(tmp_path, benchmark_dir)
    benchmark = load_benchmark(spec.benchmark)
    return KubernetesExecutor(benchmark, spec, _settings(cluster, **settings)), plan_trials(benchmark, spec)[
        0
    ]


@pytest.fixture
def environment(tmp_path):
    from environment import EnvironmentServer, EnvironmentSettings

    roots = tmp_path / "pod-world"
    settings = EnvironmentSettings(
        fs_root=roots / "filesystem",
        apps_data_root=roots / ".apps_data",
        json_logs=False,
        log_level="WARNING",
    )
    (roots / "filesystem").mkdir(parents=True)
    (roots / ".apps_data").mkdir(parents=True)
    server = EnvironmentServer(settings).start()
    yield server
    server.stop()


def _input_uri(job) -> str:
    return job["spec"]["template"]["spec"]["containers"][0]["args"][-1]


def _run_end_to_end(tmp_path, benchmark_dir, cluster, environment, artifacts: str):
    def kubelet(standin, job):
        name = job["metadata"]["name"]

        def run_pod():
            standin.set_pod(name, phase="Running", containers=[container_status("trial", running=True)])
            outcome = asyncio.run(run_pod_trial(_input_uri(job), environment_url=environment.url))
            assert outcome.result is not None, outcome.infra_error
            standin.finish(name, succeeded=True)

        later(0.1, run_pod)

    cluster.on_create = kubelet
    spec = _spec(tmp_path, benchmark_dir, artifacts=artifacts)
    settings, trial, result = _run_one_trial(spec, cluster)
    return spec, settings, trial, result


def _run_one_trial(spec: ExperimentSpec, cluster):
    """Run the experiment's one trial through a KubernetesExecutor on ``cluster``; its
    settings, trial and recorded result."""
    settings = _settings(cluster)
    outcome = asyncio.run(
        run_experiment(
            spec, quiet=True, executor_factory=lambda benchmark, s: KubernetesExecutor(benchmark, s, settings)
        )
    )
    assert outcome.counts["done"] == 1
    store = TrialStore(spec.store)
    [(trial, result, _state, _attempts)] = store.results(spec.name)
    store.dispose()
    return settings, trial, result


@pytest.mark.slow
def test_one_job_per_trial_runs_the_trial_in_its_pod_and_the_result_is_collected(
    tmp_path, benchmark_dir, cluster, environment
):
    spec, settings, trial, result = _run_end_to_end(
        tmp_path, benchmark_dir, cluster, environment, (tmp_path / "artifacts").as_uri()
    )
    assert result.outcome is Outcome.passed and result.checks_met == 1
    # Artifacts written by the pod are where the result says.
    assert json.loads(Path(result.trajectory_uri.removeprefix("file://")).read_text())["final_answer"]
    assert Path(result.snapshot_after_uri.removeprefix("file://")).stat().st_size > 0
    # The Job: labelled with run and trial, the trial command, deadline and TTL; deleted after.
    [job] = cluster.created
    labels = job["metadata"]["labels"]
    assert labels["atoll.dev/run"].startswith("k8s-sample-1-") and len(labels["atoll.dev/run"]) <= 63
    assert labels["atoll.dev/trial"] == trial.trial_id[:40]
    assert job["spec"]["template"]["metadata"]["labels"]["atoll.dev/run"] == labels["atoll.dev/run"]
    assert job["metadata"]["annotations"]["atoll.dev/trial-id"] == trial.trial_id
    assert job["spec"]["template"]["spec"]["containers"][0]["args"][:3] == ["atoll", "trial", "run"]
    assert job["spec"]["template"]["spec"]["activeDeadlineSeconds"] == 120 + settings.deadline_grace_s
    assert job["spec"]["activeDeadlineSeconds"] == 120 + settings.deadline_grace_s + settings.schedule_grace_s
    assert job["spec"]["ttlSecondsAfterFinished"] == settings.ttl_s and job["spec"]["backoffLimit"] == 0
    assert cluster.deleted == [job["metadata"]["name"]] and not cluster.jobs


S3_KEYS = ("worker-key", "worker-secret-0123456789")  # the only identity the store accepts


@pytest.fixture
def s3_store(tmp_path, monkeypatch):
    """A SeaweedFS S3 server that checks signatures (anonymous requests refused) and a bucket
    `atoll`; the worker's credentials come from environment variables only (FSSPEC_S3_ENDPOINT_URL
    and AWS keys, as the k8s Secret atoll-artifact-store gives them to workers)."""
    import fsspec.config
    import s3fs

    from tests.environment.seaweed import SeaweedS3

    with SeaweedS3(tmp_path / "seaweed", credentials=S3_KEYS) as s3:
        monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", s3.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_KEYS[0])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_KEYS[1])
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setattr(fsspec.config, "conf", {})
        fsspec.config.set_conf_env(fsspec.config.conf)  # what a fresh process does at import
        s3fs.S3FileSystem.clear_instance_cache()
        s3fs.S3FileSystem(endpoint_url=s3.endpoint_url, key=S3_KEYS[0], secret=S3_KEYS[1]).mkdir("atoll")
        yield s3
    s3fs.S3FileSystem.clear_instance_cache()


def _pod_environ() -> dict[str, str]:
    """A trial pod's environment: no store credentials or endpoint of any kind."""
    import os

    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "FSSPEC_", "BOTO", "S3_"))
    }


@pytest.mark.slow
def test_trial_pods_hold_no_store_credentials_and_write_through_presigned_urls(
    tmp_path, benchmark_dir, cluster, environment, s3_store
):
    """The production wiring: the pod process runs `atoll trial run` with no AWS_* variable
    and no endpoint; it reads its input, the seed and writes every artifact and its outcome
    through the presigned URLs the worker made, and the worker reads the result back."""
    import subprocess
    import sys

    import s3fs

    def kubelet(standin, job):
        name = job["metadata"]["name"]

        def run_pod():
            standin.set_pod(name, phase="Running", containers=[container_status("trial", running=True)])
            pod = subprocess.run(
                [sys.executable, "-m", "atoll_cli", "trial", "run", "--input", _input_uri(job)],
                env={**_pod_environ(), "ATOLL_ENVIRONMENT_URL": environment.url},
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert pod.returncode == 0, pod.stderr
            standin.finish(name, succeeded=True)

        later(0.1, run_pod)

    cluster.on_create = kubelet
    spec = _spec(tmp_path, benchmark_dir, artifacts="s3://atoll/runs")
    _settings_used, _trial, result = _run_one_trial(spec, cluster)
    assert result.outcome is Outcome.passed
    assert result.trajectory_uri.startswith("s3://atoll/runs/")
    fs = s3fs.S3FileSystem()
    assert fs.exists(result.snapshot_after_uri) and fs.exists(result.snapshot_before_uri)
    assert fs.exists(result.grade_uri) and result.snapshot_before_uri.startswith("s3://atoll/runs/seeds/")
    [job] = cluster.created
    pod_input = _input_uri(job)
    # The pod was given a presigned URL; the store URI (where the worker reads) is annotated.
    assert pod_input.startswith(s3_store.endpoint_url) and "X-Amz-Signature=" in pod_input
    input_uri = job["metadata"]["annotations"]["atoll.dev/input"]
    assert input_uri.startswith("s3://atoll/runs/") and fs.exists(
        input_uri.rsplit("/", 1)[0] + "/outcome.json"
    )
    # Nothing in the trial pod's spec names store credentials.
    trial_container = job["spec"]["template"]["spec"]["containers"][0]
    assert "AWS_" not in json.dumps(trial_container) and "atoll-artifact-store" not in json.dumps(job)
    # The URLs expire with the Job: its deadline plus the margin, not the 7-day maximum.
    presigned = json.loads(fs.cat(input_uri))["presigned"]
    horizon = job["spec"]["activeDeadlineSeconds"] + 300
    assert time.time() < presigned["expires_at"] <= time.time() + horizon
    assert f"X-Amz-Expires={horizon}" in pod_input


def _presigned_attempt(s3_store, tmp_path, benchmark_dir, folder: str, *, expires_s: float = 600):
    """An attempt's input (seed stored) in the S3 store, as the executor writes it, and the
    presigned GET of that input the pod would be given."""
    from orchestrator.artifacts import ArtifactStore
    from orchestrator.executors.kubernetes_trial import PodTrialInput, presign_attempt

    spec = _spec(tmp_path, benchmark_dir, artifacts="s3://atoll/runs")
    benchmark = load_benchmark(spec.benchmark)
    [trial] = plan_trials(benchmark, spec)
    store = ArtifactStore(spec.artifacts)
    store.put_bytes("seeds/world.tar.gz", b"seed bytes")
    pod_input, access = presign_attempt(store, folder, "seeds/world.tar.gz", expires_s)
    trial_input = PodTrialInput(
        spec=trial,
        attempt=1,
        task=benchmark.tasks[0],
        seed_key="seeds/world.tar.gz",
        seed_manifest_key="seeds/world.manifest.json",
        seed_digest="0" * 64,
        artifacts=store.url,
        presigned=access,
    )
    store.put_bytes(f"{folder}/input.json", trial_input.model_dump_json().encode())
    return store, pod_input, access


@pytest.mark.slow
def test_an_attempts_presigned_urls_reach_its_own_folder_only(tmp_path, benchmark_dir, s3_store):
    import httpx

    store, url_a, access_a = _presigned_attempt(s3_store, tmp_path, benchmark_dir, "exp/a/attempt-1")
    store.put_bytes("exp/b/attempt-1/input.json", b'{"secret": "of trial b"}')
    store.put_bytes("exp/b/attempt-1/outcome.json", b'{"result": "b"}')
    assert httpx.get(url_a).status_code == 200 and httpx.get(access_a.seed_url).content == b"seed bytes"
    put_outcome = access_a.put_urls["outcome.json"]
    assert httpx.put(put_outcome, content=b"{}").status_code == 200
    assert store.get_bytes("exp/a/attempt-1/outcome.json") == b"{}"
    # The same signatures on another attempt's keys: refused, nothing read or written.
    other_input = httpx.get(url_a.replace("/exp/a/", "/exp/b/"))
    assert other_input.status_code == 403 and b"of trial b" not in other_input.content
    for name, put_url in access_a.put_urls.items():
        forged = httpx.put(put_url.replace("/exp/a/", "/exp/b/"), content=b"forged")
        assert forged.status_code == 403, name
    assert store.get_bytes("exp/b/attempt-1/outcome.json") == b'{"result": "b"}'
    assert not store.exists("exp/b/attempt-1/trajectory.json")
    # A PUT URL does not read, and a file the pod does not write has no URL at all.
    assert httpx.get(put_outcome).status_code == 403
    assert set(access_a.put_urls) == {
        "outcome.json",
        "trajectory.json",
        "atif.json",
        "grade.json",
        "after.delta.tar.gz",
        "after.tar.gz",
    }
    # Without a signature the store refuses (the pod has nothing else).
    endpoint = s3_store.endpoint_url
    assert httpx.put(f"{endpoint}/atoll/runs/exp/b/attempt-1/outcome.json", content=b"x").status_code == 403


@pytest.mark.slow
def test_the_final_snapshot_is_streamed_from_disk_not_read_into_memory(
    tmp_path, benchmark_dir, s3_store, monkeypatch
):
    """A final state may be larger than the trial container's memory (an agent that wrote a
    big file): the pod's PUT streams the delta (with its length, which a presigned PUT needs)
    instead of reading it whole."""
    import pathlib
    from datetime import UTC, datetime

    from atoll.trajectory import RunStatus, Trajectory
    from orchestrator.executors.kubernetes_folders import PresignedFolder
    from orchestrator.executors.kubernetes_trial import load_input

    store, pod_input, access = _presigned_attempt(s3_store, tmp_path, benchmark_dir, "exp/a/attempt-1")
    trial_input, _ = load_input(pod_input)
    after = tmp_path / "after.delta.tar.gz"
    payload = os.urandom(3 << 20)
    after.write_bytes(payload)
    read_whole = pathlib.Path.read_bytes

    def refuse_snapshots(self: pathlib.Path) -> bytes:
        assert self.name != after.name, "the snapshot was read into memory"
        return read_whole(self)

    now = datetime(2025, 1, 1, tzinfo=UTC)
    trajectory = Trajectory(agent="a", model="m", status=RunStatus.completed, started_at=now, ended_at=now)
    with monkeypatch.context() as pod:
        pod.setattr(pathlib.Path, "read_bytes", refuse_snapshots)
        uris = PresignedFolder(
            access, store, seed_key=trial_input.seed_key, seed_manifest_key=trial_input.seed_manifest_key
        ).store(trajectory, None, after)
    assert uris["snapshot_after_uri"].endswith("exp/a/attempt-1/after.delta.tar.gz")
    assert uris["snapshot_before_uri"] == store.uri("seeds/world.manifest.json")
    assert store.get_bytes("exp/a/attempt-1/after.delta.tar.gz") == payload
    # The trajectory went up twice: atoll's, and as ATIF beside it (docs/interop.md).
    assert Trajectory.model_validate_json(store.get_bytes("exp/a/attempt-1/trajectory.json")) == trajectory
    assert json.loads(store.get_bytes("exp/a/attempt-1/atif.json"))["schema_version"] == "ATIF-v1.7"


@pytest.mark.slow
def test_a_pod_with_only_presigned_urls_records_its_outcome(tmp_path, benchmark_dir, s3_store, monkeypatch):
    """In process, with the credentials removed after the worker's part: the seed comes and
    the outcome goes through the URLs (the seed is not a world, so the trial fails early:
    an infrastructure error, recorded)."""
    import fsspec.config
    import s3fs

    from orchestrator.executors.kubernetes_trial import PodTrialOutcome

    store, pod_input, _access = _presigned_attempt(s3_store, tmp_path, benchmark_dir, "exp/a/attempt-1")
    with monkeypatch.context() as pod_env:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "FSSPEC_S3_ENDPOINT_URL"):
            pod_env.delenv(name)
        pod_env.setattr(fsspec.config, "conf", {})
        s3fs.S3FileSystem.clear_instance_cache()
        outcome = asyncio.run(
            run_pod_trial(pod_input, environment_url="http://127.0.0.1:9", health_timeout_s=0.1)
        )
    assert outcome.infra_error and "127.0.0.1:9" in outcome.infra_error
    assert PodTrialOutcome.model_validate_json(store.get_bytes("exp/a/attempt-1/outcome.json")) == outcome


@pytest.mark.slow
def test_expired_presigned_urls_fail_the_pod_with_a_clear_reason(tmp_path, benchmark_dir, s3_store):
    from atoll.errors import AtollError
    from orchestrator.executors.kubernetes_trial import load_input

    store, pod_input, access = _presigned_attempt(
        s3_store, tmp_path, benchmark_dir, "exp/a/attempt-1", expires_s=1
    )
    time.sleep(2.5)
    with pytest.raises(AtollError) as caught:
        load_input(pod_input)
    assert caught.value.code == "bad_trial_input"
    message = caught.value.message
    assert message.startswith("trial input http") and "X-Amz-Signature" not in message
    assert (
        "HTTP 403 AccessDenied: Request has expired" in message and "ran past its Job's deadline" in message
    )
    # The input still readable, its URLs expired: the seed's refusal is the outcome, which
    # cannot be written either — the pod fails with that line (its termination message).
    _store, fresh_input, _ = _presigned_attempt(s3_store, tmp_path, benchmark_dir, "exp/c/attempt-1")
    fresh = load_input(fresh_input)[0]
    fresh.presigned = access
    store.put_bytes("exp/c/attempt-1/input.json", fresh.model_dump_json().encode())
    with pytest.raises(AtollError) as caught:
        asyncio.run(run_pod_trial(fresh_input, environment_url="http://127.0.0.1:9", health_timeout_s=0.1))
    assert caught.value.code == "outcome_not_written"
    assert caught.value.message.startswith(
        "outcome not written: s3://atoll/runs/exp/a/attempt-1/outcome.json:"
    )
    assert "Request has expired" in caught.value.message and not store.exists("exp/a/attempt-1/outcome.json")


def _fail_with(scenario):
    """on_create that drives the Job into a failure state after a short pending phase."""

    def on_create(standin, job):
        later(0.1, lambda: scenario(standin, job["metadata"]["name"]))

    return on_create


def _run_one(executor, trial):
    async def go():
        try:
            return await executor.run(trial, attempt=1)
        finally:
            await executor.aclose()

    return asyncio.run(go())


def test_oom_killed_pod_is_an_infra_error_with_the_reason(tmp_path, benchmark_dir, cluster):
    def oom(standin, name):
        standin.set_pod(name, containers=[container_status("trial", terminated=(137, "OOMKilled"))])
        standin.finish(
            name, succeeded=False, reason="BackoffLimitExceeded", message="Job has reached the limit"
        )

    cluster.on_create = _fail_with(oom)
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(InfraError, match=r"container trial OOMKilled \(exit 137\)"):
        _run_one(executor, trial)
    assert not cluster.jobs  # failed Jobs are deleted too (unless keep_failed_jobs)


def test_a_job_past_its_deadline_is_an_infra_error_naming_the_deadline(tmp_path, benchmark_dir, cluster):
    cluster.on_create = _fail_with(
        lambda standin, name: standin.finish(
            name,
            succeeded=False,
            reason="DeadlineExceeded",
            message="Job was active longer than specified deadline",
        )
    )
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, keep_failed_jobs=True)
    # timeout_s 120 + deadline_grace_s 900 + the scheduling allowance (unschedulable_timeout_s 1800)
    with pytest.raises(
        InfraError,
        match=r"DeadlineExceeded: trial Job ran past activeDeadlineSeconds 2820 "
        r"\(scheduling, start and run time\)",
    ):
        _run_one(executor, trial)
    assert list(cluster.jobs) == [cluster.created[0]["metadata"]["name"]]  # kept for inspection


def test_a_trial_past_its_run_time_is_cut_by_the_pods_own_deadline(tmp_path, benchmark_dir, cluster):
    def too_long(standin, name):
        standin.set_pod(
            name,
            phase="Failed",
            reason="DeadlineExceeded",
            message="Pod was active on the node longer than the specified deadline",
        )
        standin.finish(name, succeeded=False, reason="BackoffLimitExceeded")

    cluster.on_create = _fail_with(too_long)
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(
        InfraError,
        match=r"DeadlineExceeded: the trial ran past the pod's activeDeadlineSeconds 1020 "
        r"\(limits.timeout_s \+ deadline_grace_s\)",
    ):
        _run_one(executor, trial)
    job = cluster.created[0]["spec"]
    # The run-time deadline is the pod's; the Job's adds time to be scheduled and started.
    assert job["template"]["spec"]["activeDeadlineSeconds"] == 1020
    assert job["activeDeadlineSeconds"] == 1020 + 1800


def test_image_pull_failure_fails_the_trial_after_the_grace_period(tmp_path, benchmark_dir, cluster):
    cluster.on_create = _fail_with(
        lambda standin, name: standin.set_pod(
            name,
            containers=[
                container_status(
                    "trial", waiting="ImagePullBackOff", message='Back-off pulling image "atoll:nope"'
                )
            ],
        )
    )
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    started = time.monotonic()
    with pytest.raises(
        InfraError, match=r'ImagePullBackOff: container trial: Back-off pulling image "atoll:nope"'
    ):
        _run_one(executor, trial)
    assert time.monotonic() - started >= 0.4
    assert not cluster.jobs


def test_unschedulable_pod_fails_the_trial_with_the_scheduler_message(tmp_path, benchmark_dir, cluster):
    message = "0/3 nodes are available: 3 Insufficient memory."
    cluster.on_create = _fail_with(
        lambda standin, name: standin.set_pod(
            name,
            conditions=[
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ],
        )
    )
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(InfraError, match=r"Unschedulable: 0/3 nodes are available: 3 Insufficient memory"):
        _run_one(executor, trial)


def test_infra_error_reported_by_the_pod_is_raised(tmp_path, benchmark_dir, cluster):
    def pod_reports_infra_error(standin, job):
        from orchestrator.artifacts import ArtifactStore

        uri = _input_uri(job)
        outcome_uri = uri.rsplit("/", 1)[0] + "/outcome.json"
        ArtifactStore(uri.rsplit("/", 1)[0]).put_bytes(
            "outcome.json",
            json.dumps({"result": None, "infra_error": "environment /apps: HTTP 500"}).encode(),
        )
        assert Path(outcome_uri.removeprefix("file://")).exists()
        later(0.05, lambda: standin.finish(job["metadata"]["name"], succeeded=True))

    cluster.on_create = pod_reports_infra_error
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(InfraError, match=r"environment /apps: HTTP 500"):
        _run_one(executor, trial)


def test_pending_pods_are_capped_and_jobs_are_stamped_with_their_owner_when_created(
    tmp_path, benchmark_dir, cluster
):
    spec = _spec(tmp_path, benchmark_dir, runs=2)
    benchmark = load_benchmark(spec.benchmark)
    first, second = plan_trials(benchmark, spec)
    executor = KubernetesExecutor(benchmark, spec, _settings(cluster, max_pending=1))
    created_at: dict[str, float] = {}

    def on_create(standin, job):
        name = job["metadata"]["name"]
        created_at[name] = time.monotonic()
        if len(created_at) == 1:  # the first pod stays Pending for 0.6 s, then fails fast
            later(0.6, lambda: standin.set_pod(name, phase="Running"))
            later(0.9, lambda: standin.finish(name, succeeded=False, reason="BackoffLimitExceeded"))
        else:
            later(0.05, lambda: standin.finish(name, succeeded=False, reason="BackoffLimitExceeded"))

    cluster.on_create = on_create

    async def both():
        try:
            return await asyncio.gather(
                executor.run(first, attempt=1), executor.run(second, attempt=1), return_exceptions=True
            )
        finally:
            await executor.aclose()

    started = time.time()
    results = asyncio.run(both())
    assert all(isinstance(result, InfraError) for result in results), results
    starts = sorted(created_at.values())
    assert starts[1] - starts[0] >= 0.5  # the second Job waited for the first pod to leave Pending
    for job in cluster.created:
        assert job["metadata"]["labels"]["atoll.dev/owner"] == executor.owner
        assert int(job["metadata"]["annotations"]["atoll.dev/created-at"]) >= int(started)
    # The owner's Lease was held while it ran and released at the end.
    lease_calls = [method for _at, method, path, _s in cluster.requests if "/leases" in path]
    assert lease_calls[0] == "POST" and lease_calls[-1] == "DELETE" and not cluster.leases


def test_a_missing_job_template_is_a_one_line_error_naming_the_setting(tmp_path, benchmark_dir, cluster):
    from atoll.errors import AtollError

    with pytest.raises(
        AtollError, match=r"trial Job template .*no-such.yaml: no such file; set ATOLL_K8S_JOB_TEMPLATE"
    ):
        _executor(tmp_path, benchmark_dir, cluster, job_template=tmp_path / "no-such.yaml")


def test_a_crashed_trial_container_reports_its_exit_and_message(tmp_path, benchmark_dir, cluster):
    def crash(standin, name):
        standin.set_pod(
            name,
            containers=[
                container_status(
                    "trial", terminated=(2, "Error"), message="error: trial input s3://b/i.json: NoSuchKey"
                )
            ],
        )
        standin.finish(name, succeeded=False)

    cluster.on_create = _fail_with(crash)
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(
        InfraError, match=r"container trial exited 2 \(Error\): error: trial input s3://b/i.json"
    ):
        _run_one(executor, trial)


def test_trial_command_with_a_missing_input_fails_in_one_line(tmp_path):
    import subprocess
    import sys

    missing = (tmp_path / "nope" / "input.json").as_uri()
    result = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "trial", "run", "--input", missing],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr.startswith(f"error: trial input {missing}: ") and len(result.stderr.splitlines()) == 1
    )


def test_the_pod_writes_its_outcome_and_evidence_beside_the_input_it_was_given(tmp_path, benchmark_dir):
    # The pod must not claim a folder again: a second claim can differ from the executor's
    # (here the folder's trial.json names another trial, so a claim picks the fallback).
    from orchestrator.artifacts import ArtifactStore, trial_prefix
    from orchestrator.executors.kubernetes_trial import PodTrialInput, PodTrialOutcome

    spec = _spec(tmp_path, benchmark_dir)
    benchmark = load_benchmark(spec.benchmark)
    [trial] = plan_trials(benchmark, spec)
    store = ArtifactStore(spec.artifacts)
    folder = trial_prefix(trial, 1)
    store.put_bytes(f"{folder}/trial.json", json.dumps({"trial_id": "another-trial"}).encode())
    trial_input = PodTrialInput(
        spec=trial,
        attempt=1,
        task=benchmark.tasks[0],
        seed_key="seeds/missing.tar.gz",  # the pod fails early, with an outcome to write
        seed_manifest_key="seeds/missing.manifest.json",
        seed_digest="0" * 64,
        artifacts=store.url,
    )
    uri = store.put_bytes(f"{folder}/input.json", trial_input.model_dump_json(by_alias=True).encode())
    outcome = asyncio.run(run_pod_trial(uri, environment_url="http://127.0.0.1:9", health_timeout_s=0.1))
    assert outcome.infra_error and "seeds/missing.tar.gz" in outcome.infra_error
    assert PodTrialOutcome.model_validate_json(store.get_bytes(f"{folder}/outcome.json")) == outcome
    # The failed attempt keeps its evidence beside them: the prompt, its duration and error.
    evidence = outcome.result
    assert evidence is not None and evidence.outcome.value == "infra_error" and evidence.duration_s > 0
    assert evidence.trajectory_uri == store.uri(f"{folder}/trajectory.json")
    kept = json.loads(store.get_bytes(f"{folder}/trajectory.json"))
    assert kept["messages"] == [{"role": "user", "content": benchmark.tasks[0].prompt}]
    assert kept["status"] == "error" and "seeds/missing.tar.gz" in kept["error"]["message"]
    runs = Path(spec.artifacts.removeprefix("file://")) / folder.rsplit("/", 1)[0]
    assert sorted(path.name for path in runs.iterdir()) == ["attempt-1"]


def test_a_refusal_names_expired_signing_credentials_apart_from_an_expired_url():
    import httpx

    from orchestrator.executors.kubernetes_folders import refusal

    def body(code: str, message: str) -> str:
        return f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"

    token = refusal(
        "s3://b/k", httpx.Response(403, text=body("ExpiredToken", "The provided token has expired."))
    )
    assert "temporary credentials" in token and "deadline" not in token
    url = refusal("s3://b/k", httpx.Response(403, text=body("AccessDenied", "Request has expired")))
    assert "ran past its Job's deadline" in url
    other = refusal("s3://b/k", httpx.Response(403, text=body("AccessDenied", "Access Denied")))
    assert other == "s3://b/k: HTTP 403 AccessDenied: Access Denied"
