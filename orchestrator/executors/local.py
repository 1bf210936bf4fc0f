"""The local executor: every trial in a fresh world, driven from this process.

Per trial: an environment (by default in-process, on a free loopback port, with its own
temporary roots; reused across trials only after the freshness check) is populated from the
world's cached extracted seed (world zip + task overlay, extracted once), the digest of the
populated world's manifest must equal the seed's, the app servers are configured, the agent
runs over MCP HTTP, the final state is taken as a delta on the seed, the grader grades from
manifests (reading only what changed), and trajectory, grade and delta go to the artifact
store, where the seed is stored once by content. From the environment's populate on, the steps
are the Kubernetes trial pod's too (:mod:`orchestrator.executors.trial_phases`): checkpoints and
resume (with the agent in process or in the agents runner service), grading and the result.

The same executor drives separately deployed services (``docker compose``) when
``ATOLL_ENVIRONMENT_URLS`` names running environments (the seed's full archive is then
uploaded instead of read from disk), ``ATOLL_AGENTS_RUNNER_URL`` an agents runner and
``ATOLL_GRADER_URL`` a grading service (sent full archives, rebuilt from the manifests). The
steps themselves live in :mod:`orchestrator.executors.steps`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx
from pydantic import Field, SecretStr

from atoll import telemetry
from atoll.apps import servers_for_world
from atoll.benchmark import Benchmark, Task
from atoll.experiment import ExperimentSpec
from atoll.grade import Grade
from atoll.judge import judge_request as wire_judge
from atoll.llm.profiles import experiment_judge
from atoll.runtime import end_world_lane, loaded, share_world_lane
from atoll.settings import EnvironmentTokens, secret_text
from atoll.trajectory import Trajectory
from atoll.trial import TrialResult, TrialSpec
from atoll.world_manifest import WorldManifest
from atoll.world_store import seed_manifest_key
from orchestrator.artifacts import ArtifactStore, claim_trial_folder
from orchestrator.executors import agent_runs, executor, steps
from orchestrator.executors import checkpoints as checkpoint_files
from orchestrator.executors.base import InfraError, attach_result, failure_message
from orchestrator.executors.evidence import TrialProgress
from orchestrator.executors.scratch_pools import PoolFolder, sweep_abandoned
from orchestrator.executors.seeds import Seed, SeedCache
from orchestrator.executors.steps import EnvironmentEndpoint, trial_outcome
from orchestrator.executors.trial_phases import TrialSeed, finish_trial, grade_world, run_agent_phase

logger = logging.getLogger("atoll.executor")

if TYPE_CHECKING:
    from environment import EnvironmentServer
    from grader import VerdictCache

_GRADE_HINT = "or set ATOLL_GRADER_URL to grade through the grading service"


class ServiceSettings(EnvironmentTokens):
    """Where the services are when they are not in this process (``ATOLL_*`` variables), and
    the environments' tokens (``ATOLL_ENV_TOKEN``, ``ATOLL_MCP_TOKEN``, shared with theirs)."""

    environment_urls: str = Field("", description="comma-separated base URLs of running environments")
    agents_runner_url: str | None = Field(None, description="agents runner service; unset = in-process")
    grader_url: str | None = Field(None, description="grading service; unset = in-process")
    environments_dir: Path | None = Field(
        None,
        description="where the in-process environments keep their worlds; unset = <output>/.cache/environments "
        "(a tmpfs here spares a disk the files every trial creates and deletes: docs/performance.md)",
    )
    # Secrets, as in every service's settings: never shown by repr() or a settings dump.
    agent_token: SecretStr | None = Field(None, description="bearer token of the agents runner")
    grader_token: SecretStr | None = Field(None, description="bearer token of the grading service")

    def environments(self) -> list[EnvironmentEndpoint]:
        return [
            EnvironmentEndpoint(url.strip(), secret_text(self.env_token), secret_text(self.mcp_token))
            for url in self.environment_urls.split(",")
            if url.strip()
        ]


def _endpoint_of(environment: EnvironmentServer) -> EnvironmentEndpoint:
    """An in-process environment's endpoint, with the tokens its own settings require (an
    operator who sets ``ATOLL_ENV_TOKEN``/``ATOLL_MCP_TOKEN`` protects these too)."""
    settings = environment.settings
    return EnvironmentEndpoint(
        environment.url, secret_text(settings.env_token), secret_text(settings.mcp_token)
    )


_Environment = TypeVar("_Environment")


class _Pool(Protocol[_Environment]):
    """Where trials get their environment: in-process servers, or running services. A pool
    takes back only the environments it lent."""

    async def acquire(self) -> _Environment: ...

    def release(self, environment: _Environment, *, healthy: bool) -> None: ...

    def close(self) -> None: ...


_PARKED = "parked"  # in the pool's folder


class _EnvironmentPool:
    """Environments on free loopback ports, each with its own temporary roots."""

    def __init__(self, size: int, scratch: Path, coworker: dict[str, Any] | None = None) -> None:
        self._free: asyncio.Queue = asyncio.Queue()
        self._all: list[EnvironmentServer] = []
        self._size = size
        self._scratch = scratch
        self._coworker = coworker or {}
        # This process's folder in the scratch folder (scratch_pools: swept if it is killed),
        # holding each environment's worlds and, in parked/, the replaced worlds that wait
        # for the next trial of their seed, whichever environment runs it
        # (environment.world_parking); made with the first environment.
        self._folder: PoolFolder | None = None

    async def acquire(self) -> EnvironmentServer:
        if self._free.empty() and len(self._all) < self._size:
            self._free.put_nowait(await asyncio.to_thread(self._start))
        return await self._free.get()

    def release(self, environment: EnvironmentServer, *, healthy: bool) -> None:
        if healthy:
            self._free.put_nowait(environment)
            return
        self._all.remove(environment)
        environment.stop()

    def _start(self) -> EnvironmentServer:
        from environment import EnvironmentServer, EnvironmentSettings

        if self._folder is None:
            sweep_abandoned(self._scratch)
            self._folder = PoolFolder(self._scratch)
            (self._folder.path / _PARKED).mkdir()
            # The environments share this process: their world work takes turns (atoll.runtime).
            share_world_lane()
        root = Path(tempfile.mkdtemp(prefix="env-", dir=self._folder.path))
        (root / "filesystem").mkdir()
        (root / ".apps_data").mkdir()
        settings = EnvironmentSettings(
            fs_root=root / "filesystem",
            apps_data_root=root / ".apps_data",
            parked_worlds_dir=self._folder.path / _PARKED,
            json_logs=False,
            log_level="WARNING",
            **self._coworker,
        )
        server = EnvironmentServer(settings).start()
        self._all.append(server)
        return server

    def close(self) -> None:
        for environment in self._all:
            environment.stop()
        self._all.clear()
        if self._folder is not None:
            from environment.world_parking import parking_for

            parking_for(self._folder.path / _PARKED, 0).clear()
            self._folder.remove()
            self._folder = None
            end_world_lane()


def _coworker_settings(spec: ExperimentSpec, output: Path) -> dict[str, Any]:
    """The environment settings of the experiment's ``coworker:`` block (docs/coworkers.md):
    its model (else the operator's ``ATOLL_COWORKER_*``), the run's seed, and a reply cache kept
    beside the verdict cache, so a re-run reproduces the personas without calling the model."""
    coworker = spec.coworker
    settings: dict[str, Any] = {
        "coworker_seed": spec.seed,
        "coworker_max_replies": coworker.max_replies,
        "coworker_cache_dir": output / ".cache" / "coworkers",
    }
    if coworker.model:
        settings.update(
            coworker_model=coworker.model,
            coworker_api_base=coworker.api_base,
            coworker_api_key_secret=coworker.api_key_secret,
            coworker_thinking=coworker.thinking,
            coworker_extra_args=dict(coworker.extra_args),
        )
    return settings


class _RemotePool:
    """Running environment services, one trial at a time each. A trial that failed leaves
    the environment in the pool: the next trial's freshness check catches a broken world."""

    def __init__(self, endpoints: list[EnvironmentEndpoint]) -> None:
        self._free: asyncio.Queue = asyncio.Queue()
        for endpoint in endpoints:
            self._free.put_nowait(endpoint)

    async def acquire(self) -> EnvironmentEndpoint:
        return await self._free.get()

    def release(self, environment: EnvironmentEndpoint, *, healthy: bool) -> None:
        self._free.put_nowait(environment)

    def close(self) -> None:
        return None


@executor("local")
class LocalExecutor:
    def __init__(
        self, benchmark: Benchmark, spec: ExperimentSpec, services: ServiceSettings | None = None
    ) -> None:
        steps.validate_agents(spec)
        self.benchmark = benchmark
        self.spec = spec
        self.services = services or ServiceSettings()
        self.tasks: dict[str, Task] = {task.task_id: task for task in benchmark.tasks}
        output = Path(spec.output_dir).resolve()  # seeds are handed to environments as file:// URLs
        self.seeds = SeedCache(output / ".cache" / "seeds")
        self._seed_locks: dict[str, asyncio.Lock] = {}
        self._stored_seeds: dict[str, str] = {}  # seed key -> its manifest's URI, once stored
        remote = self.services.environments()
        if remote:
            # Either kind: each trial releases the environment to the pool that lent it.
            self.pool: _Pool[Any] = _RemotePool(remote)
        else:
            scratch = self.services.environments_dir or output / ".cache" / "environments"
            scratch.mkdir(parents=True, exist_ok=True)
            self.pool = _EnvironmentPool(spec.concurrency.trials, scratch, _coworker_settings(spec, output))
        self._remote_environments = bool(remote)
        self.artifacts = ArtifactStore(spec.artifacts)
        self._limits_set = False  # set on the first trial: importing the model client costs seconds
        self._judge = experiment_judge(spec)
        # Opened by the first in-process grading: importing the grader loads the model client.
        self._output = output
        self._cache: VerdictCache | None = None
        # W3C traceparent on every call to the services when traces are on (atoll.telemetry)
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(600.0, connect=10.0), event_hooks=telemetry.httpx_hooks()
        )

    def _verdicts(self) -> VerdictCache:
        if self._cache is None:
            from grader import VerdictCache

            self._cache = VerdictCache(self._output / ".cache" / "verdicts.sqlite")
        return self._cache

    async def discard_checkpoints(self, spec: TrialSpec) -> None:
        """The trial's result is recorded for good: its checkpoints go (the scheduler calls it)."""
        await asyncio.to_thread(checkpoint_files.discard_checkpoints, self.artifacts, spec)

    async def aclose(self) -> None:
        await self._http.aclose()
        await asyncio.to_thread(self.pool.close)

    # --- one trial ------------------------------------------------------------------------

    def _configure_limits(self) -> None:
        """Every model call of this process (agents and judge) shares these windows."""
        if not self._limits_set:
            from atoll.llm import configure_limits

            concurrency = self.spec.concurrency
            configure_limits(concurrency.per_provider, default=concurrency.default_per_provider)
            self._limits_set = True

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        self._configure_limits()
        task = self.tasks[spec.task_id]
        missing = self.benchmark.unavailable_for(task)
        if missing:  # never run a task without an app it needs as if it had it
            raise InfraError(
                f"world {spec.world_id} lists apps atoll cannot serve: "
                + "; ".join(f"{app} ({why})" for app, why in sorted(missing.items()))
                + " (set skip_unavailable_apps: true to skip such tasks)"
            )
        progress = TrialProgress(spec, task, attempt)
        scratch = Path(tempfile.mkdtemp(prefix="atoll-trial-"))
        try:
            return await self._run(spec, task, attempt, progress, scratch)
        except Exception as exc:
            # Whatever failed, the attempt keeps what it did (turns so far, prompt, duration).
            await progress.stop()
            evidence = await asyncio.to_thread(progress.keep_evidence, failure_message(exc))
            if evidence is not None:
                attach_result(exc, evidence)
            raise
        finally:
            await progress.close()
            shutil.rmtree(scratch, ignore_errors=True)
            # The first trial has loaded what runs trials in this process (`atoll run` freezes
            # that heap then: atoll.runtime.freeze_once_loaded).
            loaded()

    async def _run(
        self, spec: TrialSpec, task: Task, attempt: int, progress: TrialProgress, scratch: Path
    ) -> TrialResult:
        # Claimed first: the trajectory so far, and a failed attempt's evidence, go there too.
        prefix = await asyncio.to_thread(claim_trial_folder, self.artifacts, spec, attempt)

        def put(name: str, data: bytes | Path) -> str:
            key = f"{prefix}/{name}"
            return (
                self.artifacts.put_file(key, data)
                if isinstance(data, Path)
                else self.artifacts.put_bytes(key, data)
            )

        progress.attach(put)
        seed = await self.seeds.get(spec, self.benchmark)
        before_uri = await self._stored_seed(seed)
        progress.before_uri = lambda: before_uri
        environment = await self.pool.acquire()
        endpoint = environment if isinstance(environment, EnvironmentEndpoint) else _endpoint_of(environment)
        world = self.benchmark.world(spec.world_id)
        healthy = False
        try:
            prepare = functools.partial(
                steps.prepare_world,
                self._http,
                endpoint,
                world_id=spec.world_id,
                world_options=steps.world_options(world),
                servers=servers_for_world(world),
            )

            async def populate() -> WorldManifest:
                if self._remote_environments:  # another machine's: the seed's archive, uploaded
                    return await prepare(seed_digest=seed.digest, seed_archive=await self.seeds.archive(seed))
                return await prepare(seed_digest=seed.digest, seed_folder=seed.folder)

            async def seed_manifest() -> WorldManifest:
                return seed.manifest

            phase = await run_agent_phase(
                self._http,
                endpoint,
                spec,
                attempt=attempt,
                seed=TrialSeed(
                    digest=seed.digest,
                    manifest_key=seed_manifest_key(seed.key),
                    read=steps.folder_reader(seed.folder),
                    manifest=seed_manifest,
                    populate=populate,
                ),
                prepare=prepare,
                checkpoints=self.artifacts,
                policy=self.spec.checkpoints(),
                run_agent=functools.partial(self._run_agent, endpoint, task, spec, progress),
                progress=progress,
                scratch=scratch,
                final_base=steps.delta_base(prefix, seed.key),
            )
            healthy = True
        finally:
            self.pool.release(environment, healthy=healthy)

        def store(trajectory: Trajectory, grade: Grade | None, after: Path) -> dict[str, str | None]:
            return steps.store_artifacts(
                self.artifacts, prefix, trajectory, grade, after, before_uri=before_uri
            )

        return await finish_trial(
            spec,
            task,
            phase,
            progress,
            attempt=attempt,
            grade_incomplete=self.spec.limits.grade_incomplete,
            read_populated=steps.folder_reader(seed.folder),
            grade=lambda snapshots, trajectory: grade_world(
                task,
                spec,
                trajectory,
                snapshots,
                scratch,
                judge=self._judge,
                judge_request=judge_request(self.spec),
                grader_url=self.services.grader_url,
                grader_token=secret_text(self.services.grader_token),
                in_process_hint=_GRADE_HINT,
                cache=None if self.services.grader_url else self._verdicts(),
            ),
            store=store,
        )

    async def _stored_seed(self, seed: Seed) -> str:
        """The URI of the seed's manifest in the artifact store, storing the seed (its blobs
        that the store lacks, then its manifest) the first time this process uses it."""
        lock = self._seed_locks.setdefault(seed.key, asyncio.Lock())
        async with lock:
            if seed.key not in self._stored_seeds:
                self._stored_seeds[seed.key] = await asyncio.to_thread(steps.store_seed, self.artifacts, seed)
        return self._stored_seeds[seed.key]

    async def _run_agent(
        self,
        environment: EnvironmentEndpoint,
        task: Task,
        spec: TrialSpec,
        progress: TrialProgress,
        **checkpoints: Any,
    ) -> Trajectory:
        """The agent in the agents runner service when one is configured, else in this process
        (both take checkpoints and resume: :mod:`orchestrator.executors.agent_runs`)."""
        if self.services.agents_runner_url:
            return await agent_runs.run_agent_remote(
                self._http,
                self.services.agents_runner_url,
                environment,
                task,
                spec,
                token=secret_text(self.services.agent_token),
                on_trajectory=progress.observe_trajectory,
                **checkpoints,
            )
        return await agent_runs.run_agent_in_process(
            environment, task, spec, on_change=progress.observe, **checkpoints
        )


def judge_request(spec: ExperimentSpec) -> dict[str, Any]:
    """The experiment's judge as the grading service takes it (never a key: the service holds
    the judge's credentials). A null judge model asks for programmatic checks only."""
    return wire_judge(experiment_judge(spec))


__all__ = ["LocalExecutor", "SeedCache", "ServiceSettings", "judge_request", "trial_outcome"]
