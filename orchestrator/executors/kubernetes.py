"""The Kubernetes executor (``--executor kubernetes``): one Job per trial.

Per trial: the world's seed snapshot and a trial input go to the artifact store; a Job is
made from the template (``ATOLL_K8S_JOB_TEMPLATE``, shipped as ``k8s/base/trial-job.yaml``)
— an environment sidecar and the ``atoll trial run`` container sharing localhost — labelled
with the run and trial; admission waits while ``max_pending`` trial pods are pending; the
Job is followed until it succeeds or fails; the outcome is read back from the artifact store;
the Job is deleted (``ttlSecondsAfterFinished`` is the safety net). Pod failures become
InfraError with the pod's real reason (see :mod:`kubernetes_state`).

Following costs the API server little: one list-and-watch of the run's Jobs and one of its
Pods per executor (:mod:`kubernetes_watch`), not a GET and a LIST per trial per poll.

Ownership: every executor holds a Lease (coordination.k8s.io) named after its owner id and
renews it; each Job it creates is labelled with that owner when it is created (after
admission, never before). A reaper in every executor deletes Jobs whose owner's Lease has
expired (or vanished) for ``orphan_after_s``; a trial re-leased from the store whose Job is
still alive (its worker died or drained) is adopted — relabelled and followed — instead of
started twice. A cancelled trial (a drain, Ctrl-C) leaves its Job for adoption; the reaper
removes it when nobody does.

The API calls go through :mod:`kubernetes_api` (timeouts, retries, a rate limit). Only a
terminal Job or pod state fails a trial: while the API cannot be reached the trial waits
(up to the Job's own deadline), and a Job that cannot be deleted is left to its TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from atoll.apps import servers_for_world
from atoll.benchmark import Benchmark
from atoll.experiment import ExperimentSpec
from atoll.jsonio import model_json
from atoll.settings import AtollSettings
from atoll.trial import TrialResult, TrialSpec
from atoll.world_store import seed_manifest_key
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors import checkpoints as checkpoint_files
from orchestrator.executors import executor, steps
from orchestrator.executors.base import InfraError, attach_result, attached_result, failure_message
from orchestrator.executors.checkpoints import checkpoint_folder
from orchestrator.executors.evidence import evidence_in_folder
from orchestrator.executors.kubernetes_api import ApiError, ApiPolicy, KubernetesCluster, ResilientApi
from orchestrator.executors.kubernetes_job import (
    ANNOTATION_CREATED,
    ANNOTATION_HEARTBEAT,
    ANNOTATION_INPUT,
    ANNOTATION_TRIAL_ID,
    LABEL_ATTEMPT,
    LABEL_MANAGED_BY,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_TRIAL,
    MANAGED_BY,
    JobOptions,
    build_job,
    job_name,
    load_template,
    run_label,
)
from orchestrator.executors.kubernetes_state import is_terminal, needs_events, read_state
from orchestrator.executors.kubernetes_trial import (
    PRESIGN_MARGIN_S,
    PodTrialInput,
    PodTrialOutcome,
    input_key,
    outcome_key,
    outcome_uri,
    presign_attempt,
)
from orchestrator.executors.kubernetes_watch import Informer
from orchestrator.executors.local import judge_request
from orchestrator.executors.seeds import SeedCache

log = logging.getLogger("atoll.orchestrator.kubernetes")

_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
LEASE_PREFIX = "atoll-worker-"
JOB_SETTLE_S = 30.0  # a failed pod's Job not marked failed after this: fail with the pod's reason


def default_owner() -> str:
    """This process's owner id: the host (the pod's name) and a random suffix, as a label value
    (a restarted worker is a new owner; its predecessor's Jobs are adopted or reaped)."""
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-")[:50] or "worker"
    return f"{host}-{secrets.token_hex(3)}"


def _micro_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _created_by(job: dict[str, Any], owner: str, stamp: str) -> bool:
    """Whether ``job`` is the one this worker's create (owner label, creation stamp) made."""
    metadata = job.get("metadata") or {}
    return (metadata.get("labels") or {}).get(LABEL_OWNER) == owner and (
        metadata.get("annotations") or {}
    ).get(ANNOTATION_CREATED) == stamp


def _input_of(job: dict[str, Any]) -> str | None:
    return ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_INPUT)


def _parse_time(value: object) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class KubernetesSettings(AtollSettings):
    """``ATOLL_K8S_*`` variables of the orchestrator/worker that creates trial Jobs."""

    model_config = SettingsConfigDict(env_prefix="ATOLL_K8S_")

    namespace: str | None = Field(
        None, description="namespace of trial Jobs (default: the pod's own, else 'atoll')"
    )
    job_template: Path = Field(Path("/etc/atoll/trial-job.yaml"), description="trial Job template")
    trial_image: str | None = Field(None, description="override the template's trial container image")
    environment_image: str | None = Field(None, description="override the template's environment image")
    runtime_class: str | None = Field(None, description="e.g. gvisor: the pod is the sandbox")
    priority_class: str | None = Field(None, description="priorityClassName of trial pods")
    max_pending: int = Field(
        8, ge=1, description="most trial pods pending at once (capacity-aware admission)"
    )
    poll_s: float = Field(
        5.0,
        gt=0,
        description="how often a waiting trial re-checks its timers and admission "
        "re-counts pending pods (the Job's state comes from the watch)",
    )
    watch_timeout_s: float = Field(300.0, gt=0, description="one watch stream's length before it is resumed")
    events_s: float = Field(
        15.0, gt=0, description="least seconds between Event reads of one unexplained pending pod"
    )
    ttl_s: int = Field(600, ge=0, description="ttlSecondsAfterFinished of trial Jobs")
    deadline_grace_s: int = Field(
        900,
        ge=0,
        description="added to limits.timeout_s for the pod's activeDeadlineSeconds (the trial's run time)",
    )
    schedule_grace_s: int = Field(
        1800,
        ge=0,
        description="added to the pod's deadline for the Job's: time to be "
        "scheduled and started (keep it above "
        "unschedulable_timeout_s)",
    )
    image_pull_timeout_s: float = Field(
        300.0, ge=0, description="a pod failing to pull its image longer fails"
    )
    unschedulable_timeout_s: float = Field(
        1800.0, ge=0, description="an unschedulable pod longer than this fails"
    )
    start_timeout_s: float = Field(
        300.0,
        ge=0,
        description="a pod not created (FailedCreate) or not starting "
        "(FailedMount, config errors) longer than this fails",
    )
    owner: str | None = Field(
        None,
        description="owner id of this executor's Lease and Jobs (default: host name and a random suffix)",
    )
    lease_s: int = Field(
        60, ge=3, description="leaseDurationSeconds of the executor's Lease (renewed every third)"
    )
    reap_s: float = Field(60.0, gt=0, description="how often Jobs of expired owners are looked for")
    orphan_after_s: float = Field(
        300.0,
        gt=0,
        description="a Job whose owner's Lease expired this long ago is an "
        "orphan (time for a re-leased trial to adopt it first)",
    )
    keep_failed_jobs: bool = Field(
        False, description="leave failed Jobs for inspection (their TTL still applies)"
    )
    api_url: str | None = Field(
        None, description="API server URL (e.g. kubectl proxy); default in-cluster/kubeconfig"
    )
    api_timeout_s: float = Field(
        30.0, gt=0, description="read timeout of one API call (connect: 5 s at most)"
    )
    api_retry_budget_s: float = Field(60.0, ge=0, description="how long one API call retries 429/5xx/resets")
    api_retry_after_max_s: float = Field(30.0, ge=0, description="a longer Retry-After is cut to this")
    api_qps: float = Field(50.0, gt=0, description="client-side rate limit of API calls per executor")
    api_burst: int = Field(100, ge=1, description="API calls allowed at once above api_qps")

    def api_policy(self) -> ApiPolicy:
        return ApiPolicy(
            connect_timeout_s=min(5.0, self.api_timeout_s),
            read_timeout_s=self.api_timeout_s,
            retry_budget_s=self.api_retry_budget_s,
            retry_after_max_s=self.api_retry_after_max_s,
            qps=self.api_qps,
            burst=self.api_burst,
        )

    def resolved_namespace(self) -> str:
        if self.namespace:
            return self.namespace
        if _SERVICE_ACCOUNT_NAMESPACE.is_file():
            return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        return "atoll"


@executor("kubernetes")
class KubernetesExecutor:
    def __init__(
        self,
        benchmark: Benchmark,
        spec: ExperimentSpec,
        settings: KubernetesSettings | None = None,
        cluster: KubernetesCluster | None = None,
    ) -> None:
        steps.validate_agents(spec)
        self.benchmark = benchmark
        self.spec = spec
        self.settings = settings or KubernetesSettings()
        self.namespace = self.settings.resolved_namespace()
        self.template = load_template(self.settings.job_template)
        self.tasks = {task.task_id: task for task in benchmark.tasks}
        self.seeds = SeedCache(Path(spec.output_dir).resolve() / ".cache" / "seeds")
        self.artifacts = ArtifactStore(spec.artifacts)
        self.cluster = cluster or KubernetesCluster(self.settings.api_url, self.settings.api_policy())
        self.api = ResilientApi(self.cluster, self.settings.api_policy())
        self.owner = self.settings.owner or default_owner()
        self.lease_name = f"{LEASE_PREFIX}{self.owner}"
        self.options = JobOptions(
            namespace=self.namespace,
            ttl_s=self.settings.ttl_s,
            deadline_s=int(spec.limits.timeout_s) + self.settings.deadline_grace_s,
            trial_image=self.settings.trial_image,
            environment_image=self.settings.environment_image,
            runtime_class=self.settings.runtime_class,
            priority_class=self.settings.priority_class,
            schedule_s=self.settings.schedule_grace_s,
            environment_env=tuple(steps.coworker_environment(spec).items()),
        )
        self._admission = asyncio.Lock()
        self._unobserved: set[str] = set()  # created Jobs whose pod has not been seen running yet
        self._following: set[str] = set()  # Jobs a trial of this process is following
        self._start_lock = asyncio.Lock()
        self._seed_lock = asyncio.Lock()
        self._uploaded_seeds: set[str] = set()
        self._started = False
        self._closed = False
        self._tick = asyncio.Event()
        self._background: list[asyncio.Task] = []
        self._missing_leases: dict[str, float] = {}  # owner -> when its Lease was first seen missing
        self.reaped: list[str] = []
        self.adopted: list[str] = []
        self._events_warned = False
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_RUN}={run_label(spec.name)}"
        self.jobs = Informer(
            self.api,
            self.cluster,
            "Job",
            self.namespace,
            selector,
            watch_timeout_s=self.settings.watch_timeout_s,
            on_change=self._changed,
        )
        self.pods = Informer(
            self.api,
            self.cluster,
            "Pod",
            self.namespace,
            selector,
            watch_timeout_s=self.settings.watch_timeout_s,
            on_change=self._changed,
        )

    def _changed(self) -> None:
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    async def _wait_change(self, timeout_s: float) -> None:
        tick = self._tick
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tick.wait(), timeout_s)

    async def discard_checkpoints(self, spec: TrialSpec) -> None:
        """The trial's result is recorded for good: its checkpoints go (the scheduler calls it)."""
        await asyncio.to_thread(checkpoint_files.discard_checkpoints, self.artifacts, spec)

    async def aclose(self) -> None:
        """Stop watching, renewing and reaping, and release the Lease (Jobs still running
        are left for a re-leased trial to adopt, or for another executor's reaper)."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.jobs.stop()
        await self.pods.stop()
        try:
            await self.api(self.cluster.delete_lease, self.namespace, self.lease_name)
        except ApiError as exc:
            log.warning(
                "Lease %s not released (it expires in %d s): %s", self.lease_name, self.settings.lease_s, exc
            )

    # --- lifecycle -----------------------------------------------------------------------

    async def _ensure_started(self) -> None:
        async with self._start_lock:
            if self._closed:
                raise InfraError("the Kubernetes executor is closed (draining)")
            if self._started:
                return
            await self._hold_lease()
            self.jobs.start()
            self.pods.start()
            self._background = [
                asyncio.create_task(self._renew_loop(), name="lease-renewal"),
                asyncio.create_task(self._reap_loop(), name="reaper"),
            ]
            self._started = True
        budget = self.settings.api_retry_budget_s + self.settings.api_timeout_s
        await self.jobs.synced(budget)
        await self.pods.synced(budget)

    def _lease_spec(self, now: float) -> dict[str, Any]:
        return {
            "holderIdentity": self.owner,
            "leaseDurationSeconds": self.settings.lease_s,
            "renewTime": _micro_time(now),
        }

    async def _hold_lease(self) -> None:
        """Create this owner's Lease before any Job: without it every other executor's reaper
        would take this one's Jobs for orphans. Failing that, no trial starts."""
        now = time.time()
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.lease_name,
                "namespace": self.namespace,
                "labels": {LABEL_MANAGED_BY: MANAGED_BY},
            },
            "spec": {**self._lease_spec(now), "acquireTime": _micro_time(now)},
        }
        try:
            await self.api(self.cluster.create_lease, self.namespace, lease, conflict_ok_on_retry=True)
        except ApiError as exc:
            raise InfraError(
                f"cannot hold the executor's Lease {self.lease_name} (coordination.k8s.io leases: "
                f"create/get/patch/delete in namespace {self.namespace}): {exc}"
            ) from exc

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.lease_s / 3)
            try:
                if not await self.api(
                    self.cluster.renew_lease, self.namespace, self.lease_name, self._lease_spec(time.time())
                ):
                    log.warning("Lease %s vanished; holding it again", self.lease_name)
                    await self._hold_lease()
            except (ApiError, InfraError) as exc:  # the next renewal tries again, well within the duration
                log.warning("Lease %s not renewed: %s", self.lease_name, exc)

    async def _reap_loop(self) -> None:
        while True:
            self.reaped += await self.reap_orphans()
            await asyncio.sleep(self.settings.reap_s)

    async def _owner_expired_since(self, owner: str, now: float) -> float | None:
        """When ``owner``'s Lease expired (or was first seen missing); None while it is held."""
        try:
            lease = await self.api(self.cluster.lease, self.namespace, f"{LEASE_PREFIX}{owner}")
        except ApiError:
            return None  # cannot tell: keep the Job
        if lease is None:
            return self._missing_leases.setdefault(owner, now)
        self._missing_leases.pop(owner, None)
        spec = lease.get("spec") or {}
        renewed = _parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime")) or 0.0
        expires = renewed + float(spec.get("leaseDurationSeconds") or 0)
        return expires if expires < now else None

    async def reap_orphans(self) -> list[str]:
        """Delete atoll trial Jobs of this namespace (any run) whose owner's Lease expired or
        vanished more than ``orphan_after_s`` ago: nobody follows them, nobody adopted them.
        Jobs without an owner label (an older atoll) go by their heartbeat annotation."""
        try:
            jobs = await self.api(self.cluster.jobs, self.namespace, f"{LABEL_MANAGED_BY}={MANAGED_BY}")
        except ApiError as exc:  # housekeeping: the next round tries again
            log.warning("could not list trial Jobs to reap orphans: %s", exc)
            return []
        now = time.time()
        expired: dict[str, float | None] = {}
        reaped = []
        for job in jobs:
            metadata = job.get("metadata") or {}
            owner = (metadata.get("labels") or {}).get(LABEL_OWNER)
            if owner == self.owner or metadata.get("name") in self._following:
                continue
            if owner:
                if owner not in expired:
                    expired[owner] = await self._owner_expired_since(owner, now)
                since = expired[owner]
            else:
                beat = (metadata.get("annotations") or {}).get(ANNOTATION_HEARTBEAT)
                try:
                    since = float(beat or "")  # no heartbeat: ValueError, the creation time
                except (TypeError, ValueError):
                    since = _parse_time(metadata.get("creationTimestamp"))
            if (
                since is not None
                and now - since > self.settings.orphan_after_s
                # Only the version listed: a Job adopted (relabelled) since is not reaped.
                and await self._delete(metadata["name"], metadata.get("resourceVersion"))
            ):
                reaped.append(metadata["name"])
        if reaped:
            log.warning("reaped %d orphaned trial Jobs: %s", len(reaped), ", ".join(reaped))
        return reaped

    async def _admit(self, name: str) -> None:
        """Wait until fewer than ``max_pending`` trial pods are pending in the namespace
        (counting Jobs this process created whose pod is not yet running), then claim a slot."""
        async with self._admission:
            while True:
                try:
                    pending_pods = await self.api(
                        self.cluster.pods,
                        self.namespace,
                        f"{LABEL_MANAGED_BY}={MANAGED_BY}",
                        "status.phase=Pending",
                    )
                except ApiError as exc:
                    if not exc.transient:
                        raise
                    log.warning("admission waits for the API: %s", exc)
                    await asyncio.sleep(self.settings.poll_s)
                    continue
                pending = {
                    (pod.get("metadata") or {}).get("labels", {}).get("job-name") for pod in pending_pods
                }
                if len(pending | self._unobserved) < self.settings.max_pending:
                    self._unobserved.add(name)
                    return
                await asyncio.sleep(self.settings.poll_s)

    # --- one trial ------------------------------------------------------------------------

    async def _adoptable(self, spec: TrialSpec) -> dict[str, Any] | None:
        """A live Job of this trial that no trial of this process follows (its worker died or
        drained, and the store leased the trial again). Asked of the API, not the watch's
        cache: a cache not yet listed (or stale) would show none, and the trial would get a
        second Job writing into the same attempt's folder. When the API cannot say, the trial
        fails as an infrastructure error (retried) rather than risk that."""
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_TRIAL}={spec.trial_id[:40]}"
        try:
            jobs = await self.api(self.cluster.jobs, self.namespace, selector)
        except ApiError as exc:
            raise InfraError(
                f"trial {spec.trial_id[:12]}: cannot tell whether a Job of it is still running "
                f"(not starting another): {exc}"
            ) from exc
        for job in jobs:
            if await self._worth_adopting(spec, job):
                return job
        return None

    async def _worth_adopting(self, spec: TrialSpec, job: dict[str, Any]) -> bool:
        """Whether ``job`` is a Job of this trial to adopt: not followed here, not being
        deleted, not failed, and — when finished — with a result as its outcome (one whose
        outcome is an error would fail every retry the same way)."""
        metadata = job.get("metadata") or {}
        name: str = metadata.get("name") or ""
        if (
            (metadata.get("annotations") or {}).get(ANNOTATION_TRIAL_ID) != spec.trial_id
            or name in self._following
            or metadata.get("deletionTimestamp")
        ):
            return False
        if is_terminal(job):
            if read_state(job, self._pods_of(name)).phase == "failed":
                return False
            # Finished (its follower died, or could not delete it): worth adopting only for a result.
            job_attempt = int((metadata.get("labels") or {}).get(LABEL_ATTEMPT) or 0)
            try:
                await asyncio.to_thread(self._read_outcome, spec, job_attempt, name, input_uri=_input_of(job))
            except InfraError:
                return False
        return True

    async def _adopt(self, job: dict[str, Any]) -> bool:
        name = job["metadata"]["name"]
        try:
            found = await self.api(
                self.cluster.label_job,
                self.namespace,
                name,
                {LABEL_OWNER: self.owner},
                {ANNOTATION_CREATED: str(int(time.time()))},
            )
        except ApiError as exc:
            log.warning("trial Job %s not adopted: %s", name, exc)
            return False
        return bool(found)

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        started = time.monotonic()
        try:
            return await self._run(spec, attempt)
        except InfraError as exc:
            if attached_result(exc) is None:
                # A pod that died without an outcome may have left its trajectory so far.
                evidence = await asyncio.to_thread(
                    evidence_in_folder,
                    self.artifacts,
                    spec,
                    self.tasks[spec.task_id],
                    attempt,
                    failure_message(exc),
                    time.monotonic() - started,
                )
                if evidence is not None:
                    attach_result(exc, evidence)
            raise

    async def _run(self, spec: TrialSpec, attempt: int) -> TrialResult:
        await self._ensure_started()
        adopted = await self._adoptable(spec)
        if adopted is not None and await self._adopt(adopted):
            return await self._follow_adopted(spec, attempt, adopted)
        name = job_name(spec, attempt)
        await self._admit(name)
        try:
            # After admission, which can wait long: presigned URLs are valid from now on.
            input_uri, pod_input = await self._write_input(spec, attempt)
            # Admission may have waited minutes: another worker may have started the trial
            # meanwhile (its store lease expired during an outage). Look again, right before.
            adopted = await self._adoptable(spec)
            if adopted is None:
                adopted, name = await self._create(spec, attempt, name, input_uri, pod_input)
        except BaseException:
            self._following.discard(name)
            self._unobserved.discard(name)
            raise
        if adopted is not None:
            self._unobserved.discard(name)  # the admission slot taken for a Job not created
            if not await self._adopt(adopted):
                raise InfraError(
                    f"trial {spec.trial_id[:12]}: another worker started its Job "
                    f"{adopted['metadata']['name']} at the same time and it could not be adopted"
                )
            return await self._follow_adopted(spec, attempt, adopted)
        log.info("trial %s attempt %d: Job %s created", spec.trial_id[:12], attempt, name)
        return await self._follow_to_end(spec, attempt, name, input_uri, created=True)

    async def _create(
        self, spec: TrialSpec, attempt: int, name: str, input_uri: str, pod_input: str | None
    ) -> tuple[dict[str, Any] | None, str]:
        """Create the attempt's Job under its shared name; ``(None, name)`` when created, or
        ``(job, name)`` with the Job another worker created under that name since the last
        check (409 AlreadyExists), to adopt. A name held by a Job not worth adopting (a failed
        one kept for inspection) gives way to a unique name."""
        try:
            for unique in (False, True):
                if unique:
                    self._unobserved.discard(name)
                    name = job_name(spec, attempt, unique=True)
                    self._unobserved.add(name)  # the admission slot moves with the name
                manifest = build_job(
                    self.template, spec, attempt, input_uri, self.options, name=name, pod_input=pod_input
                )
                # Stamped now, after admission: the owner's Lease, not the manifest's age, says it is alive.
                manifest["metadata"]["labels"][LABEL_OWNER] = self.owner
                stamp = manifest["metadata"]["annotations"][ANNOTATION_CREATED] = str(int(time.time()))
                self._following.add(name)
                try:
                    await self.api(self.cluster.create_job, self.namespace, manifest)
                    return None, name
                except ApiError as exc:
                    self._following.discard(name)
                    if exc.status != 409:
                        raise
                existing = await self.api(self.cluster.job, self.namespace, name)
                if existing and _created_by(existing, self.owner, stamp):
                    # A retried create whose first answer was lost met the Job it made. (Names
                    # are shared between workers, so a 409 alone does not say whose Job it is.)
                    self._following.add(name)
                    return None, name
                if unique:
                    raise ApiError(f"Job {name} already exists and was created by another worker", status=409)
                if existing and await self._worth_adopting(spec, existing):
                    log.warning(
                        "trial %s attempt %d: Job %s was created by another worker meanwhile",
                        spec.trial_id[:12],
                        attempt,
                        name,
                    )
                    return existing, name
        except BaseException:
            self._following.discard(name)
            self._unobserved.discard(name)
            raise
        raise AssertionError("the unique-name create either returns or raises")

    async def _follow_adopted(self, spec: TrialSpec, attempt: int, adopted: dict[str, Any]) -> TrialResult:
        name = adopted["metadata"]["name"]
        job_attempt = int((adopted["metadata"].get("labels") or {}).get(LABEL_ATTEMPT) or attempt)
        self.adopted.append(name)
        log.warning(
            "trial %s attempt %d: adopted the still-live Job %s of attempt %d",
            spec.trial_id[:12],
            attempt,
            name,
            job_attempt,
        )
        result = await self._follow_to_end(spec, job_attempt, name, _input_of(adopted), created=False)
        return result.model_copy(update={"attempt": attempt})

    async def _follow_to_end(
        self, spec: TrialSpec, attempt: int, name: str, input_uri: str | None, *, created: bool
    ) -> TrialResult:
        self._following.add(name)
        failed = True
        abandoned = False
        vanished = False
        try:
            vanished = await self._follow(name)
            failed = False
        except asyncio.CancelledError:
            abandoned = True  # drained or interrupted: the Job is left to be adopted (or reaped)
            raise
        finally:
            self._unobserved.discard(name)
            self._following.discard(name)
            if not abandoned and not (failed and self.settings.keep_failed_jobs):
                await self._delete(name)
        return await asyncio.to_thread(
            self._read_outcome, spec, attempt, name, input_uri=input_uri, vanished=vanished
        )

    async def _write_input(self, spec: TrialSpec, attempt: int) -> tuple[str, str | None]:
        """Store the seed (once) and the attempt's input; the input's store URI and, with an
        S3 store, the presigned GET of it the pod is given instead (its input then carries
        the presigned URLs of the attempt's folder: the pod holds no store credentials)."""
        missing = self.benchmark.unavailable_for(self.tasks[spec.task_id])
        if missing:  # never run a task without an app it needs as if it had it
            raise InfraError(
                f"world {spec.world_id} lists apps atoll cannot serve: "
                + "; ".join(f"{app} ({why})" for app, why in sorted(missing.items()))
                + " (set skip_unavailable_apps: true to skip such tasks)"
            )
        seed = await self.seeds.get(spec, self.benchmark)
        archive = await self.seeds.archive(seed)  # what the pod downloads and populates from
        seed_key = f"seeds/{archive.name}"
        trial_input = PodTrialInput(
            spec=spec,
            attempt=attempt,
            task=self.tasks[spec.task_id],
            world_options=steps.world_options(self.benchmark.world(spec.world_id)),
            servers=list(servers_for_world(self.benchmark.world(spec.world_id))),
            seed_key=seed_key,
            seed_manifest_key=seed_manifest_key(seed.key),
            seed_digest=seed.digest,
            artifacts=self.artifacts.url,
            grade_incomplete=self.spec.limits.grade_incomplete,
            judge=judge_request(self.spec),
            checkpoint=self.spec.checkpoints(),
        )

        def upload_seed() -> None:
            if not self.artifacts.exists(seed_key):
                self.artifacts.put_file(seed_key, archive)
            steps.store_seed(self.artifacts, seed)  # its blobs and manifest: the initial state

        def write_input() -> tuple[str, str | None]:
            key = input_key(self.artifacts, spec, attempt)
            pod_input = None
            if self.artifacts.presigns:
                # Valid as long as the Job may live (scheduling, then run time), and no longer.
                expires_s = self.options.deadline_s + self.options.schedule_s + PRESIGN_MARGIN_S
                folder = key.rsplit("/", 1)[0]
                try:
                    pod_input, trial_input.presigned = presign_attempt(
                        self.artifacts,
                        folder,
                        seed_key,
                        expires_s,
                        seed_manifest_key=trial_input.seed_manifest_key,
                        checkpoints=checkpoint_folder(spec) if trial_input.checkpoint else None,
                    )
                except Exception as exc:  # botocore's credential and configuration errors
                    raise InfraError(
                        f"artifact store {self.artifacts.url}: cannot presign the trial pod's URLs: {exc}"
                    ) from exc
            data = model_json(trial_input, by_alias=True).encode()
            return self.artifacts.put_bytes(key, data), pod_input

        try:
            async with self._seed_lock:  # concurrent trials of one world upload its seed once
                if seed_key not in self._uploaded_seeds:
                    await asyncio.to_thread(upload_seed)
                    self._uploaded_seeds.add(seed_key)
            return await asyncio.to_thread(write_input)
        except OSError as exc:
            raise InfraError(f"artifact store {self.artifacts.url}: {exc}") from exc

    async def _delete(self, name: str, resource_version: str | None = None) -> bool:
        """Delete a Job, best effort: an API that cannot be reached now must not turn a
        finished trial into a failure (the Job's TTL and the reaper remove it later). With
        ``resource_version`` only the version read: one changed since is left (409)."""
        try:
            await self.api(self.cluster.delete_job, self.namespace, name, resource_version)
            return True
        except ApiError as exc:
            if exc.status == 409 and resource_version:
                log.info("trial Job %s changed since it was listed (adopted?): not deleted", name)
            else:
                log.warning("trial Job %s not deleted (its TTL will): %s", name, exc)
            return False

    def _pods_of(self, name: str | None) -> list[dict[str, Any]]:
        return [
            pod
            for pod in list(self.pods.items.values())
            if ((pod.get("metadata") or {}).get("labels") or {}).get("job-name") == name
        ]

    async def _events(self, name: str, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Events of the Job and its pods, to explain a pod that is not starting (best
        effort: without RBAC on events, or while the API fails, there are none)."""
        events: list[dict[str, Any]] = []
        names = [name] + [(pod.get("metadata") or {}).get("name") for pod in pods]
        try:
            for object_name in filter(None, names):
                events += await self.api(self.cluster.events, self.namespace, object_name)
        except ApiError as exc:
            if not self._events_warned:
                log.warning(
                    "cannot read Events (pods that cannot start are reported less precisely): %s", exc
                )
                self._events_warned = True
        return events

    async def _follow(self, name: str) -> bool:
        """Wait for the Job's end, reading its state from the watch caches (no API call per
        trial, except Events of a pod that does not start and one read of a Job the watch has
        not shown for a while). True when the Job vanished instead: another worker following
        it too (its store lease expired meanwhile, and the trial was adopted) may have
        finished and deleted it, so the caller looks for the outcome before failing."""
        started = time.time()
        seen = False
        checked = False
        stuck_seen: dict[str, float] = {}
        events: list[dict[str, Any]] = []
        events_read = 0.0
        # Past this the pod's own activeDeadlineSeconds has ended it in any case.
        blind_limit = self.options.deadline_s + self.settings.api_retry_budget_s
        settle_s = max(2.0, 4 * self.settings.poll_s)
        while True:
            now = time.time()
            stale = [
                informer.stale_since
                for informer in (self.jobs, self.pods)
                if informer.stale_since is not None
            ]
            if stale:
                if now - min(stale) > blind_limit:
                    raise InfraError(
                        f"trial Job {name}: Kubernetes API unreachable for {now - min(stale):.0f} s "
                        f"(past the Job's deadline)"
                    )
                await self._wait_change(self.settings.poll_s)
                continue
            job = self.jobs.items.get(name)
            if job is None:
                if seen:
                    return True
                if now - started > settle_s and not checked:
                    checked = True  # the watch should have shown it by now: ask once
                    try:
                        found = await self.api(self.cluster.job, self.namespace, name)
                    except ApiError as exc:
                        if not exc.transient:
                            raise
                        found = {}
                    if found is None:
                        return True
                await self._wait_change(self.settings.poll_s)
                continue
            seen = True
            pods = self._pods_of(name)
            if is_terminal(job):
                # The two watches are not ordered with each other: the Job's end can come
                # before its pod's last change. Read the pods once, for the real reason.
                with contextlib.suppress(ApiError):
                    pods = await self.api(self.cluster.pods, self.namespace, f"job-name={name}")
            state = read_state(job, pods)
            if needs_events(state):
                if now - events_read >= self.settings.events_s:
                    events, events_read = await self._events(name, pods), now
                state = read_state(job, pods, events)
            if state.phase != "pending":
                self._unobserved.discard(name)
            if state.phase == "succeeded":
                return False
            if state.phase == "failed":
                raise InfraError(f"trial Job {name}: {state.reason}")
            if state.stuck_kind:
                # Measured from when this process first saw it: the API's timestamps have
                # one-second resolution and say when the pod started, not when it got stuck.
                since = stuck_seen.setdefault(state.stuck_kind, now)
                limit = {
                    "unschedulable": self.settings.unschedulable_timeout_s,
                    "image_pull": self.settings.image_pull_timeout_s,
                    "finishing": JOB_SETTLE_S,
                }.get(state.stuck_kind, self.settings.start_timeout_s)
                if now - since >= limit:
                    if needs_events(state):  # the freshest explanation, not one from events_s ago
                        state = read_state(job, pods, await self._events(name, pods))
                    raise InfraError(f"trial Job {name}: {state.reason} (for {now - since:.0f} s)")
            await self._wait_change(self.settings.poll_s)

    def _read_outcome(
        self, spec: TrialSpec, attempt: int, name: str, *, input_uri: str | None, vanished: bool = False
    ) -> TrialResult:
        """The outcome the Job's pod wrote beside its input (a Job without the input
        annotation, of an older atoll: in the attempt's claimed folder)."""
        key = f"the artifact folder of attempt {attempt}"
        try:
            key = outcome_uri(input_uri) if input_uri else outcome_key(self.artifacts, spec, attempt)
            outcome = PodTrialOutcome.model_validate_json(self.artifacts.get_bytes(key))
        except (OSError, ValueError) as exc:
            what = "disappeared (deleted outside atoll) and" if vanished else "succeeded but"
            raise InfraError(
                f"trial Job {name} {what} left no readable outcome at {key}: {str(exc).splitlines()[0]}"
            ) from exc
        if outcome.infra_error or outcome.result is None:
            error = InfraError(f"trial Job {name}: {outcome.infra_error or 'no result'}")
            if outcome.result is not None:  # the failed attempt's evidence, kept by its pod
                attach_result(error, outcome.result)
            raise error
        return outcome.result


__all__ = ["KubernetesCluster", "KubernetesExecutor", "KubernetesSettings"]
