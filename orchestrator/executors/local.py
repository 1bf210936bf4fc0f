"""The local executor: every trial in a fresh world on this machine.

Per trial: an environment (in-process, on a free loopback port, with its own temporary
roots; reused across trials only after the freshness check) is populated from the
world's cached extracted seed (world zip + task overlay, extracted once), its initial
snapshot digest must equal the seed's, the app servers are configured, the agent runs
over MCP HTTP, the final snapshot is taken, the grader grades, and trajectory, grade and
snapshots go to the artifact store.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from atoll.benchmark import Benchmark, Task
from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.grade import Grade
from atoll.trajectory import ErrorKind, RunStatus, Trajectory
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.artifacts import ArtifactStore, trial_prefix
from orchestrator.executors.base import InfraError
from orchestrator.ratelimit import ProviderLimiter, provider_of

log = logging.getLogger("atoll.orchestrator.local")

# Keys of a trial's agent config that are the orchestrator's, not the agent's.
_ORCHESTRATOR_KEYS = frozenset({"api_base", "api_key_env"})
_INCOMPLETE = (RunStatus.max_steps, RunStatus.timeout, RunStatus.budget_exhausted)


class SeedCache:
    """Extracted world seeds (world zip + task overlay), one per (world, overlay) digest,
    with the sha256 of the snapshot a freshly populated environment must reproduce."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, asyncio.Lock] = {}
        self._digests: dict[str, str] = {}

    async def get(self, spec: TrialSpec, benchmark: Benchmark) -> tuple[Path, str]:
        key = hashlib.sha256(f"{spec.world_digest}:{spec.overlay_digest}".encode()).hexdigest()[:24]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._digests:
                self._digests[key] = await asyncio.to_thread(self._build, key, spec, benchmark)
        return self.root / key, self._digests[key]

    def _build(self, key: str, spec: TrialSpec, benchmark: Benchmark) -> str:
        from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
        from environment.snapshot import write_snapshot

        folder = self.root / key
        roots = WorldRoots(folder / "filesystem", folder / ".apps_data")
        digest_file = self.root / f"{key}.sha256"
        if folder.is_dir() and digest_file.is_file():
            return digest_file.read_text().strip()
        shutil.rmtree(folder, ignore_errors=True)
        roots.fs_root.mkdir(parents=True)
        roots.apps_data_root.mkdir(parents=True)
        world = Subsystem.parse("world")
        sources = [PopulateSource(world, url=Path(benchmark.world_archives[spec.world_id]).as_uri())]
        overlay = benchmark.task_overlays.get(spec.task_id)
        if overlay:
            sources.append(PopulateSource(world, url=Path(overlay).as_uri()))
        populate(sources, roots, mode="merge")
        with open(self.root / f"{key}.tar.gz", "wb") as sink:
            info = write_snapshot(roots, sink)
        digest_file.write_text(info.sha256)
        return info.sha256

    def snapshot_path(self, folder: Path) -> Path:
        return folder.parent / f"{folder.name}.tar.gz"


class _EnvironmentPool:
    """Environments on free loopback ports, each with its own temporary roots."""

    def __init__(self, size: int, scratch: Path) -> None:
        self._free: asyncio.Queue = asyncio.Queue()
        self._all: list[Any] = []
        self._size = size
        self._scratch = scratch

    async def acquire(self) -> Any:
        if self._free.empty() and len(self._all) < self._size:
            self._free.put_nowait(await asyncio.to_thread(self._start))
        return await self._free.get()

    def release(self, environment: Any, *, healthy: bool) -> None:
        if healthy:
            self._free.put_nowait(environment)
            return
        self._all.remove(environment)
        environment.stop()

    def _start(self) -> Any:
        from environment import EnvironmentServer, EnvironmentSettings

        root = Path(tempfile.mkdtemp(prefix="env-", dir=self._scratch))
        (root / "filesystem").mkdir()
        (root / ".apps_data").mkdir()
        settings = EnvironmentSettings(fs_root=root / "filesystem", apps_data_root=root / ".apps_data",
                                       json_logs=False, log_level="WARNING")
        server = EnvironmentServer(settings).start()
        self._all.append(server)
        return server

    def close(self) -> None:
        for environment in self._all:
            environment.stop()
        self._all.clear()


def trial_outcome(trajectory: Trajectory, grade: Grade | None) -> Outcome:
    """pass = every criterion met; fail = a criterion not met, or the run ended without a
    gradeable result; ungradeable = nothing failed but some criterion could not be decided."""
    if grade is None:
        return Outcome.failed
    if grade.passed:
        return Outcome.passed
    if any(v.verdict.value == "not_met" for v in grade.criteria):
        return Outcome.failed
    return Outcome.ungradeable


class LocalExecutor:
    def __init__(self, benchmark: Benchmark, spec: ExperimentSpec) -> None:
        self.benchmark = benchmark
        self.spec = spec
        self.tasks: dict[str, Task] = {task.task_id: task for task in benchmark.tasks}
        output = Path(spec.output_dir)
        self.seeds = SeedCache(output / ".cache" / "seeds")
        scratch = output / ".cache" / "environments"
        scratch.mkdir(parents=True, exist_ok=True)
        self.pool = _EnvironmentPool(spec.concurrency.trials, scratch)
        self.artifacts = ArtifactStore(spec.artifacts)
        self.providers = ProviderLimiter(spec.concurrency.per_provider,
                                         default=spec.concurrency.default_per_provider)
        self._judge = self._judge_config()
        self._cache = self._verdict_cache(output)
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0))

    def _judge_config(self) -> Any:
        if not self.spec.judge.model:
            return None
        from grader import JudgeConfig

        return JudgeConfig(model=self.spec.judge.model, api_base=self.spec.judge.api_base,
                           samples=self.spec.judge.samples, extra_args=self.spec.judge.extra_args,
                           concurrency=self.spec.concurrency.judge)

    @staticmethod
    def _verdict_cache(output: Path) -> Any:
        from grader import VerdictCache

        return VerdictCache(output / ".cache" / "verdicts.sqlite")

    async def aclose(self) -> None:
        await self._http.aclose()
        await asyncio.to_thread(self.pool.close)

    # --- one trial ------------------------------------------------------------------------

    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        task = self.tasks[spec.task_id]
        started = time.perf_counter()
        seed, seed_digest = await self.seeds.get(spec, self.benchmark)
        environment = await self.pool.acquire()
        healthy = False
        try:
            before = await self._prepare_world(environment, seed, seed_digest, spec)
            trajectory = await self._run_agent(environment, task, spec)
            after = await self._snapshot(environment)
            healthy = True
        finally:
            self.pool.release(environment, healthy=healthy)

        if trajectory.status is RunStatus.error and trajectory.error is not None and trajectory.error.kind in (
            ErrorKind.infrastructure, ErrorKind.model_provider
        ):
            # Neither is the agent's failure: retry, and report infra_error if it persists.
            raise InfraError(f"{trajectory.error.kind.value}: {trajectory.error.message}")

        prefix = trial_prefix(spec.experiment, spec.trial_id, attempt)
        scratch = Path(tempfile.mkdtemp(prefix="grade-"))
        try:
            after_path = scratch / "after.tar.gz"
            after_path.write_bytes(after)
            grade = None
            if trajectory.status not in _INCOMPLETE or self.spec.limits.grade_incomplete:
                grade = await self._grade(task, before, after_path, trajectory, spec)
            uris = await asyncio.to_thread(self._store_artifacts, prefix, trajectory, grade, before, after_path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

        outcome = trial_outcome(trajectory, grade)
        checked = {c.verifier_id for c in task.rubric if c.check is not None}
        checks_met = sum(v.verifier_id in checked and v.verdict.value == "met" for v in grade.criteria) if grade else 0
        return TrialResult(
            checks_met=checks_met if checked else None,
            checks_total=len(checked) if checked else None,
            trial_id=spec.trial_id,
            outcome=outcome,
            score=grade.score if grade else 0.0,
            run_status=trajectory.status.value,
            error=trajectory.error.message if trajectory.error else (
                "; ".join(grade.ungradeable_reasons) if grade and outcome is Outcome.ungradeable else None
            ),
            attempt=attempt,
            steps=trajectory.steps,
            tool_calls=len(trajectory.tool_calls),
            prompt_tokens=trajectory.usage.prompt_tokens,
            completion_tokens=trajectory.usage.completion_tokens,
            agent_cost_usd=trajectory.usage.cost_usd,
            judge_cost_usd=grade.judge_cost_usd if grade else 0.0,
            duration_s=time.perf_counter() - started,
            finished_at=datetime.now(UTC),
            **uris,
        )

    async def _post(self, environment: Any, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._http.post(f"{environment.url}{path}", **kwargs)
        except httpx.HTTPError as exc:
            raise InfraError(f"environment {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise InfraError(f"environment {path}: HTTP {response.status_code}: {response.text[:500]}")
        return response

    async def _prepare_world(self, environment: Any, seed: Path, seed_digest: str, spec: TrialSpec) -> Path:
        await self._post(environment, "/data/populate",
                         json={"sources": [{"url": seed.as_uri(), "subsystem": "world"}], "mode": "replace"})
        snapshot = await self._post(environment, "/data/snapshot")
        digest = hashlib.sha256(snapshot.content).hexdigest()
        if digest != seed_digest:
            raise InfraError(
                f"world {spec.world_id} is not fresh: initial snapshot {digest[:12]} differs from seed {seed_digest[:12]}"
            )
        world = self.benchmark.world(spec.world_id)
        options = {key: value for key, value in {
            "user_email": (world.model_extra or {}).get("user_email"),
            "user_name": (world.model_extra or {}).get("user_name"),
        }.items() if value}
        from mcp_servers import SERVER_NAMES

        servers = {name: {"transport": "inprocess", "server": name, "options": options} for name in SERVER_NAMES}
        await self._post(environment, "/apps", json={"mcpServers": servers})
        return self.seeds.snapshot_path(seed)

    async def _snapshot(self, environment: Any) -> bytes:
        return (await self._post(environment, "/data/snapshot")).content

    async def _run_agent(self, environment: Any, task: Task, spec: TrialSpec) -> Trajectory:
        from agents_runner import run_agent

        config = {key: value for key, value in spec.agent_config.items()
                  if key not in _ORCHESTRATOR_KEYS and not key.startswith("instant_")}
        provider = provider_of(spec.model)
        async with self.providers.slot(provider):
            trajectory = await run_agent(
                model=spec.model,
                gateway_url=environment.mcp_url,
                prompt=task.prompt,
                api_base=spec.agent_config.get("api_base"),
                agent=spec.agent,
                config=config,
                task_id=task.task_id,
                trial_id=spec.trial_id,
                reference_solution=task.reference_solution,
            )
        if spec.agent != "replay":
            pressured = any(call.retries > 0 for call in trajectory.model_calls)
            await self.providers.report(provider, rate_limited=pressured)
        return trajectory

    async def _grade(self, task: Task, before: Path, after: Path, trajectory: Trajectory,
                     spec: TrialSpec) -> Grade:
        from grader import grade_trial

        try:
            return await grade_trial(task, before, after, trajectory, self._judge, self._cache,
                                     trial_id=spec.trial_id)
        except AtollError as exc:
            raise InfraError(f"grader: {exc.message}") from exc

    def _store_artifacts(self, prefix: str, trajectory: Trajectory, grade: Grade | None, before: Path,
                         after: Path) -> dict[str, str | None]:
        # The initial world equals the seed's snapshot: store it once per seed.
        seed_key = f"seeds/{before.name}"
        before_uri = self.artifacts.uri(seed_key)
        if not self.artifacts.exists(seed_key):
            before_uri = self.artifacts.put_file(seed_key, before)
        return {
            "trajectory_uri": self.artifacts.put_bytes(f"{prefix}/trajectory.json",
                                                       trajectory.model_dump_json(indent=2).encode()),
            "grade_uri": self.artifacts.put_bytes(f"{prefix}/grade.json",
                                                  grade.model_dump_json(indent=2).encode()) if grade else None,
            "snapshot_before_uri": before_uri,
            "snapshot_after_uri": self.artifacts.put_file(f"{prefix}/after.tar.gz", after),
        }


__all__ = ["LocalExecutor", "SeedCache", "trial_outcome"]
