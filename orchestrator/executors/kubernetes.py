"""The Kubernetes executor (``--executor kubernetes``): one Job per trial.

Per trial: the world's seed snapshot and a trial input go to the artifact store; a Job is
made from the template (``ATOLL_K8S_JOB_TEMPLATE``, shipped as ``k8s/base/trial-job.yaml``)
— an environment sidecar and the ``atoll trial run`` container sharing localhost — labelled
with the run and trial; admission waits while ``max_pending`` trial pods are pending; the
Job is polled until it succeeds or fails; the outcome is read back from the artifact store;
the Job is deleted (``ttlSecondsAfterFinished`` is the safety net). Pod failures become
InfraError with the pod's reason (OOMKilled, image pull, unschedulable, deadline). On start,
Jobs whose owner stopped heart-beating (an earlier, dead run) are reaped.

The API calls go through :mod:`kubernetes_api` (timeouts, retries, a rate limit). Only a
terminal Job or pod state fails a trial: while the API cannot be reached the trial waits
(up to the Job's own deadline), and a Job that cannot be deleted is left to its TTL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from atoll.apps import servers_for_world
from atoll.benchmark import Benchmark
from atoll.experiment import ExperimentSpec
from atoll.trial import TrialResult, TrialSpec
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors import executor, steps
from orchestrator.executors.base import InfraError
from orchestrator.executors.kubernetes_api import ApiError, ApiPolicy, KubernetesCluster, ResilientApi
from orchestrator.executors.kubernetes_job import (
    ANNOTATION_HEARTBEAT,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    JobOptions,
    build_job,
    load_template,
)
from orchestrator.executors.kubernetes_state import needs_events, read_state
from orchestrator.executors.kubernetes_trial import PodTrialInput, PodTrialOutcome, input_key, outcome_key
from orchestrator.executors.local import SeedCache, judge_request

log = logging.getLogger("atoll.orchestrator.kubernetes")

_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubernetesSettings(BaseSettings):
    """``ATOLL_K8S_*`` variables of the orchestrator/worker that creates trial Jobs."""

    model_config = SettingsConfigDict(env_prefix="ATOLL_K8S_", extra="ignore")

    namespace: str | None = Field(None, description="namespace of trial Jobs (default: the pod's own, else 'atoll')")
    job_template: Path = Field(Path("/etc/atoll/trial-job.yaml"), description="trial Job template")
    trial_image: str | None = Field(None, description="override the template's trial container image")
    environment_image: str | None = Field(None, description="override the template's environment image")
    runtime_class: str | None = Field(None, description="e.g. gvisor: the pod is the sandbox")
    max_pending: int = Field(8, ge=1, description="most trial pods pending at once (capacity-aware admission)")
    poll_s: float = Field(5.0, gt=0, description="seconds between Job status reads")
    ttl_s: int = Field(600, ge=0, description="ttlSecondsAfterFinished of trial Jobs")
    deadline_grace_s: int = Field(900, ge=0, description="added to limits.timeout_s for activeDeadlineSeconds")
    image_pull_timeout_s: float = Field(300.0, ge=0, description="a pod failing to pull its image longer fails")
    unschedulable_timeout_s: float = Field(1800.0, ge=0, description="an unschedulable pod longer than this fails")
    start_timeout_s: float = Field(300.0, ge=0, description="a pod not created (FailedCreate) or not starting "
                                                            "(FailedMount, config errors) longer than this fails")
    heartbeat_s: float = Field(60.0, gt=0, description="how often a watched Job's heartbeat annotation is renewed")
    orphan_after_s: float = Field(300.0, gt=0, description="a Job without heartbeat this long is an orphan")
    keep_failed_jobs: bool = Field(False, description="leave failed Jobs for inspection (their TTL still applies)")
    api_url: str | None = Field(None, description="API server URL (e.g. kubectl proxy); default in-cluster/kubeconfig")
    api_timeout_s: float = Field(30.0, gt=0, description="read timeout of one API call (connect: 5 s at most)")
    api_retry_budget_s: float = Field(60.0, ge=0, description="how long one API call retries 429/5xx/resets")
    api_retry_after_max_s: float = Field(30.0, ge=0, description="a longer Retry-After is cut to this")
    api_qps: float = Field(50.0, gt=0, description="client-side rate limit of API calls per executor")
    api_burst: int = Field(100, ge=1, description="API calls allowed at once above api_qps")

    def api_policy(self) -> ApiPolicy:
        return ApiPolicy(connect_timeout_s=min(5.0, self.api_timeout_s), read_timeout_s=self.api_timeout_s,
                         retry_budget_s=self.api_retry_budget_s, retry_after_max_s=self.api_retry_after_max_s,
                         qps=self.api_qps, burst=self.api_burst)

    def resolved_namespace(self) -> str:
        if self.namespace:
            return self.namespace
        if _SERVICE_ACCOUNT_NAMESPACE.is_file():
            return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        return "atoll"


@executor("kubernetes")
class KubernetesExecutor:
    def __init__(self, benchmark: Benchmark, spec: ExperimentSpec, settings: KubernetesSettings | None = None,
                 cluster: Any = None) -> None:
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
        self.options = JobOptions(
            namespace=self.namespace, ttl_s=self.settings.ttl_s,
            deadline_s=int(spec.limits.timeout_s) + self.settings.deadline_grace_s,
            trial_image=self.settings.trial_image, environment_image=self.settings.environment_image,
            runtime_class=self.settings.runtime_class,
        )
        self._admission = asyncio.Lock()
        self._unobserved: set[str] = set()  # created Jobs whose pod has not been seen running yet
        self._start_lock = asyncio.Lock()
        self._seed_lock = asyncio.Lock()
        self._uploaded_seeds: set[str] = set()
        self._started = False
        self.reaped: list[str] = []
        self._events_warned = False

    async def aclose(self) -> None:
        return None

    # --- lifecycle -----------------------------------------------------------------------

    async def _ensure_started(self) -> None:
        async with self._start_lock:
            if not self._started:
                self.reaped = await self.reap_orphans()
                self._started = True

    async def reap_orphans(self) -> list[str]:
        """Delete atoll trial Jobs of this namespace whose heartbeat is older than
        ``orphan_after_s``: their orchestrator is gone (an earlier run, a killed worker)."""
        try:
            jobs = await self.api(self.cluster.jobs, self.namespace, f"{LABEL_MANAGED_BY}={MANAGED_BY}")
        except ApiError as exc:  # housekeeping: the next executor start tries again
            log.warning("could not list trial Jobs to reap orphans: %s", exc)
            return []
        now = time.time()
        reaped = []
        for job in jobs:
            metadata = job.get("metadata") or {}
            beat = (metadata.get("annotations") or {}).get(ANNOTATION_HEARTBEAT)
            try:
                age = now - float(beat)
            except (TypeError, ValueError):
                age = float("inf")
            if age > self.settings.orphan_after_s and await self._delete(metadata["name"]):
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
                    pending_pods = await self.api(self.cluster.pods, self.namespace,
                                                  f"{LABEL_MANAGED_BY}={MANAGED_BY}", "status.phase=Pending")
                except ApiError as exc:
                    if not exc.transient:
                        raise
                    log.warning("admission waits for the API: %s", exc)
                    await asyncio.sleep(self.settings.poll_s)
                    continue
                pending = {(pod.get("metadata") or {}).get("labels", {}).get("job-name") for pod in pending_pods}
                if len(pending | self._unobserved) < self.settings.max_pending:
                    self._unobserved.add(name)
                    return
                await asyncio.sleep(self.settings.poll_s)

    # --- one trial ------------------------------------------------------------------------

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        await self._ensure_started()
        input_uri = await self._write_input(spec, attempt)
        manifest = build_job(self.template, spec, attempt, input_uri, self.options, now=time.time())
        name = manifest["metadata"]["name"]
        await self._admit(name)
        failed = True
        try:
            # A create whose answer was lost and that is retried meets its own Job: 409 is fine
            # (the name carries a random suffix, so no other Job has it).
            await self.api(self.cluster.create_job, self.namespace, manifest, conflict_ok_on_retry=True)
            log.info("trial %s attempt %d: Job %s created", spec.trial_id[:12], attempt, name)
            await self._watch(name)
            failed = False
        finally:
            self._unobserved.discard(name)
            if not (failed and self.settings.keep_failed_jobs):
                await self._delete(name)
        return await asyncio.to_thread(self._read_outcome, spec, attempt, name)

    async def _write_input(self, spec: TrialSpec, attempt: int) -> str:
        missing = self.benchmark.unavailable_for(self.tasks[spec.task_id])
        if missing:  # never run a task without an app it needs as if it had it
            raise InfraError(
                f"world {spec.world_id} lists apps atoll cannot serve: "
                + "; ".join(f"{app} ({why})" for app, why in sorted(missing.items()))
                + " (set skip_unavailable_apps: true to skip such tasks)"
            )
        seed, seed_digest = await self.seeds.get(spec, self.benchmark)
        archive = self.seeds.snapshot_path(seed)
        seed_key = f"seeds/{archive.name}"
        trial_input = PodTrialInput(
            spec=spec, attempt=attempt, task=self.tasks[spec.task_id],
            world_options=steps.world_options(self.benchmark.world(spec.world_id)),
            servers=list(servers_for_world(self.benchmark.world(spec.world_id))),
            seed_key=seed_key, seed_digest=seed_digest, artifacts=self.artifacts.url,
            grade_incomplete=self.spec.limits.grade_incomplete, judge=judge_request(self.spec),
        )

        def upload_seed() -> None:
            if not self.artifacts.exists(seed_key):
                self.artifacts.put_file(seed_key, archive)

        def write_input() -> str:
            return self.artifacts.put_bytes(input_key(self.artifacts, spec, attempt),
                                            trial_input.model_dump_json(by_alias=True).encode())

        try:
            async with self._seed_lock:  # concurrent trials of one world upload its seed once
                if seed_key not in self._uploaded_seeds:
                    await asyncio.to_thread(upload_seed)
                    self._uploaded_seeds.add(seed_key)
            return await asyncio.to_thread(write_input)
        except OSError as exc:
            raise InfraError(f"artifact store {self.artifacts.url}: {exc}") from exc

    async def _delete(self, name: str) -> bool:
        """Delete a Job, best effort: an API that cannot be reached now must not turn a
        finished trial into a failure (the Job's TTL and the reaper remove it later)."""
        try:
            await self.api(self.cluster.delete_job, self.namespace, name)
            return True
        except ApiError as exc:
            log.warning("trial Job %s not deleted (its TTL will): %s", name, exc)
            return False

    async def _observe(self, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]] | None:
        """The Job and its pods, or None when the API cannot tell now (transient failures
        past their retry budget): not knowing is not a failure of the trial."""
        try:
            job = await self.api(self.cluster.job, self.namespace, name)
            pods = [] if job is None else await self.api(self.cluster.pods, self.namespace, f"job-name={name}")
        except ApiError as exc:
            if not exc.transient:
                raise
            log.warning("trial Job %s: state unknown for now: %s", name, exc)
            return None
        return job, pods

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
                log.warning("cannot read Events (pods that cannot start are reported less precisely): %s", exc)
                self._events_warned = True
        return events

    async def _watch(self, name: str) -> None:
        last_seen = last_beat = time.time()
        stuck_seen: dict[str, float] = {}
        # Past this the Job's own activeDeadlineSeconds has ended it in any case.
        blind_limit = self.options.deadline_s + self.settings.api_retry_budget_s
        while True:
            observed = await self._observe(name)
            now = time.time()
            if observed is None:
                if now - last_seen > blind_limit:
                    raise InfraError(f"trial Job {name}: Kubernetes API unreachable for {now - last_seen:.0f} s "
                                     f"(past the Job's deadline)")
                await asyncio.sleep(self.settings.poll_s)
                continue
            last_seen = now
            job, pods = observed
            if job is None:
                raise InfraError(f"trial Job {name} disappeared (deleted outside atoll)")
            state = read_state(job, pods)
            if needs_events(state):
                state = read_state(job, pods, await self._events(name, pods))
            if state.phase != "pending":
                self._unobserved.discard(name)
            if state.phase == "succeeded":
                return
            if state.phase == "failed":
                raise InfraError(f"trial Job {name}: {state.reason}")
            if state.stuck_kind:
                # Measured from when this process first saw it: the API's timestamps have
                # one-second resolution and say when the pod started, not when it got stuck.
                since = stuck_seen.setdefault(state.stuck_kind, now)
                limit = {"unschedulable": self.settings.unschedulable_timeout_s,
                         "image_pull": self.settings.image_pull_timeout_s}.get(state.stuck_kind,
                                                                               self.settings.start_timeout_s)
                if now - since >= limit:
                    raise InfraError(f"trial Job {name}: {state.reason} (for {now - since:.0f} s)")
            if now - last_beat >= self.settings.heartbeat_s:
                try:
                    await self.api(self.cluster.annotate_job, self.namespace, name,
                                   {ANNOTATION_HEARTBEAT: str(int(now))})
                    last_beat = now
                except ApiError as exc:  # a late beat is renewed on the next round
                    log.warning("trial Job %s: heartbeat not renewed: %s", name, exc)
            await asyncio.sleep(self.settings.poll_s)

    def _read_outcome(self, spec: TrialSpec, attempt: int, name: str) -> TrialResult:
        key = f"the artifact folder of attempt {attempt}"
        try:
            key = outcome_key(self.artifacts, spec, attempt)
            outcome = PodTrialOutcome.model_validate_json(self.artifacts.get_bytes(key))
        except (OSError, ValueError) as exc:
            raise InfraError(f"trial Job {name} succeeded but left no readable outcome at {key}: "
                             f"{str(exc).splitlines()[0]}") from exc
        if outcome.infra_error or outcome.result is None:
            raise InfraError(f"trial Job {name}: {outcome.infra_error or 'no result'}")
        return outcome.result


__all__ = ["KubernetesCluster", "KubernetesExecutor", "KubernetesSettings"]
