"""The steps of one trial, shared by every executor that drives an environment over HTTP.

The local executor (in-process environments, or the services of a compose deployment) and
the per-trial Kubernetes pod (``atoll trial run``) run the same sequence: populate the world
from its seed, check that it is fresh (the populated world's manifest digest = the seed's),
configure the app servers, run the agent over MCP, take the final state (a delta on the seed),
grade, store the artifacts and build the :class:`TrialResult`. Every failure of the machinery raises :class:`InfraError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import httpx

from atoll.apps import DEFAULT_SERVERS
from atoll.benchmark import Task, World
from atoll.errors import AtollError, describe_validation
from atoll.experiment import ExperimentSpec
from atoll.grade import Grade, Verdict
from atoll.jsonio import model_json
from atoll.trajectory import ErrorKind, RunStatus, Trajectory
from atoll.trial import Outcome, TrialResult, TrialSpec
from atoll.world_manifest import Delta, Entry, WorldManifest, sha256_of, write_archive
from atoll.world_store import relative_reference, seed_manifest_key, store_world
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors.base import InfraError, ModelEndpointError
from orchestrator.executors.evidence import AFTER_NAME, FULL_AFTER_NAME
from orchestrator.executors.instant import InstantOptions

if TYPE_CHECKING:
    from agents_runner.state import AgentRun
    from atoll.agent_checkpoint import AgentCheckpoint
    from atoll.experiment import Checkpoints
    from grader.snapshot import ManifestSnapshot, Snapshot
    from orchestrator.executors.seeds import Seed

# Keys of a trial's agent config that are not the agent's: the orchestrator's endpoint keys
# and the instant executor's declared dry-run knobs. Everything else must be a field of
# the agent's options model (validate_agents rejects a typo before anything runs).
ORCHESTRATOR_KEYS = frozenset({"api_base", "api_key_env", "api_key_secret"}) | frozenset(
    InstantOptions.model_fields
)
INCOMPLETE = (RunStatus.max_steps, RunStatus.timeout, RunStatus.budget_exhausted)


@dataclass(frozen=True)
class EnvironmentEndpoint:
    """Where an environment answers: its base URL, and the bearer tokens of its control plane
    (``/apps``, ``/data/*``) and of ``/mcp`` when the service requires them."""

    url: str
    env_token: str | None = None
    mcp_token: str | None = None

    @property
    def mcp_url(self) -> str:
        return f"{self.url.rstrip('/')}/mcp"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.env_token}"} if self.env_token else {}


async def environment_post(
    http: httpx.AsyncClient, environment: EnvironmentEndpoint, path: str, **kwargs: Any
) -> httpx.Response:
    """POST to the environment; transport failures and HTTP errors raise InfraError."""
    try:
        response = await http.post(
            f"{environment.url.rstrip('/')}{path}", headers=environment.headers(), **kwargs
        )
    except httpx.HTTPError as exc:
        raise InfraError(f"environment {path}: {type(exc).__name__}: {exc}") from exc
    if response.status_code >= 400:
        raise InfraError(f"environment {path}: HTTP {response.status_code}: {response.text[:500]}")
    return response


async def wait_until_healthy(
    http: httpx.AsyncClient, url: str, *, timeout_s: float = 120.0, what: str = "environment"
) -> None:
    """Poll ``GET url/health`` until it answers 200; InfraError after ``timeout_s``, with the
    last answer's reason. An environment whose MCP gateway failed to start (503
    ``mcp_unavailable``) will not recover: that is an InfraError at once, naming the cause."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = await http.get(f"{url.rstrip('/')}/health", timeout=5.0)
            if response.status_code == 200:
                return
            code, message = _error_of(response)
            last = f"HTTP {response.status_code}" + (f": {message}" if message else "")
            if code == "mcp_unavailable":
                raise InfraError(f"{what} at {url} is not healthy ({last})")
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        await asyncio.sleep(0.5)
    raise InfraError(f"{what} at {url} not healthy after {timeout_s:.0f} s ({last})")


def _error_of(response: httpx.Response) -> tuple[str | None, str | None]:
    """The code and message of an error reply in atoll's one error body, when it is one."""
    try:
        body = response.json()
    except ValueError:
        return None, None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, None
    code, message = error.get("code"), error.get("message")
    return (code if isinstance(code, str) else None), (message if isinstance(message, str) else None)


async def prepare_world(
    http: httpx.AsyncClient,
    environment: EnvironmentEndpoint,
    *,
    seed_digest: str,
    world_id: str,
    world_options: dict[str, Any],
    servers: tuple[str, ...] | None = None,
    seed_folder: Path | None = None,
    seed_archive: Path | None = None,
) -> WorldManifest:
    """Replace the environment's world with the seed, check it is fresh, configure the apps.

    The seed is given either as an extracted folder the environment can read
    (``seed_folder``, same machine) or as the seed's snapshot archive, uploaded
    (``seed_archive``, any machine). Raises InfraError when the digest of the populated
    world's manifest (:mod:`atoll.world_manifest`) differs from ``seed_digest``; returns that
    manifest (the world the agent starts from, which the final delta builds on)."""
    if seed_folder is not None:
        await environment_post(
            http,
            environment,
            "/data/populate",
            json={"sources": [{"url": seed_folder.as_uri(), "subsystem": "world"}], "mode": "replace"},
        )
    elif seed_archive is not None:
        with seed_archive.open("rb") as archive:
            await environment_post(
                http,
                environment,
                "/data/populate",
                params={"subsystem": "world", "mode": "replace"},
                files={"archive": ("seed.tar.gz", archive, "application/gzip")},
            )
    else:  # pragma: no cover - a programming error
        raise ValueError("prepare_world needs seed_folder or seed_archive")
    answer = await environment_post(http, environment, "/data/snapshot/manifest")
    try:
        populated = WorldManifest.from_bytes(answer.content, "the environment's manifest")
    except AtollError as exc:
        raise InfraError(f"world {world_id}: {exc.message}") from exc
    digest = populated.digest()
    if digest != seed_digest:
        raise InfraError(
            f"world {world_id} is not fresh: the populated world {digest[:12]} differs from seed {seed_digest[:12]}"
        )
    # The one server table (atoll/apps.py); the world's optional servers (market_data) come in ``servers``.
    names = servers or DEFAULT_SERVERS
    config = {name: {"transport": "inprocess", "server": name, "options": world_options} for name in names}
    await environment_post(http, environment, "/apps", json={"mcpServers": config})
    return populated


async def take_snapshot(http: httpx.AsyncClient, environment: EnvironmentEndpoint) -> bytes:
    return (await environment_post(http, environment, "/data/snapshot")).content


def delta_request(base: str, base_digest: str, base_manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    """The body of ``POST /data/snapshot/delta``: with ``base_manifest`` (the seed's manifest as
    JSON) when the world was populated from something else (a checkpoint), so the delta still
    builds on the seed."""
    body: dict[str, Any] = {"base": base, "base_digest": base_digest}
    if base_manifest is not None:
        body["base_manifest"] = base_manifest
    return body


async def take_world_delta(
    http: httpx.AsyncClient, environment: EnvironmentEndpoint, target: Path, body: dict[str, Any]
) -> Path:
    """The world as a delta (``body``: :func:`delta_request`), streamed into ``target``; every
    refusal (``world_not_manifestable`` included) and failure is an InfraError."""
    try:
        return await _stream_to(http, environment, "/data/snapshot/delta", target, json=body)
    except _Refused as refused:
        raise InfraError(refused.message) from None


async def take_final_state(
    http: httpx.AsyncClient,
    environment: EnvironmentEndpoint,
    folder: Path,
    *,
    base: str,
    base_digest: str,
    base_manifest: dict[str, Any] | None = None,
) -> Path:
    """The world's final state, streamed into ``folder``: as a delta on the seed it was
    populated from (``after.delta.tar.gz``: its manifest, and the contents the seed lacks;
    ``base`` is the seed's stored manifest as the attempt's folder names it), or, when the
    agent left a file that no manifest can list (a name that is not UTF-8, say), as the full
    snapshot (``after.tar.gz``). An environment whose populated world is not ``base_digest``
    refuses (409 base_mismatch): an InfraError, as every failure here. A world populated from
    a checkpoint passes the seed's manifest as ``base_manifest`` (JSON)."""
    body = delta_request(base, base_digest, base_manifest)
    try:
        return await _stream_to(http, environment, "/data/snapshot/delta", folder / AFTER_NAME, json=body)
    except _Refused as refused:
        if refused.code != "world_not_manifestable":
            raise InfraError(refused.message) from None
    return await _stream_to(http, environment, "/data/snapshot", folder / FULL_AFTER_NAME)


class _Refused(AtollError):
    """The environment refused with an error body (its code, or None)."""

    def __init__(self, code: str | None, message: str) -> None:
        super().__init__(code or "environment_refused", message)


async def _stream_to(
    http: httpx.AsyncClient, environment: EnvironmentEndpoint, path: str, target: Path, **kwargs: Any
) -> Path:
    url = f"{environment.url.rstrip('/')}{path}"
    try:
        async with http.stream("POST", url, headers=environment.headers(), **kwargs) as response:
            if response.status_code >= 400:
                await response.aread()
                code, _ = _error_of(response)
                raise _Refused(
                    code, f"environment {path}: HTTP {response.status_code}: {response.text[:500]}"
                )
            with target.open("wb") as sink:
                async for block in response.aiter_bytes(1 << 20):
                    sink.write(block)
    except httpx.HTTPError as exc:
        raise InfraError(f"environment {path}: {type(exc).__name__}: {exc}") from exc
    except _Refused as refused:
        if path != "/data/snapshot/delta":
            raise InfraError(refused.message) from None
        raise
    return target


def delta_base(prefix: str, seed_key: str) -> str:
    """How the delta of the attempt folder ``prefix`` names its seed's stored manifest."""
    return relative_reference(f"{prefix}/{AFTER_NAME}", seed_manifest_key(seed_key))


def agent_config(spec: TrialSpec) -> dict[str, Any]:
    """The agent's own options: the orchestrator's keys and dry-run knobs removed."""
    return _agent_options(spec.agent_config)


def _agent_options(config: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key not in ORCHESTRATOR_KEYS}


def validate_agents(experiment: ExperimentSpec) -> None:
    """Check every agent of the experiment before anything runs: a known agent, and options
    its options model accepts. Raises AtollError naming the field (``agents.0.config: …``).

    Read from the registry's table, so no agent is imported (an agent's module loads litellm
    and fastmcp's client): a resume with nothing left to run never imports them."""
    from pydantic import ValidationError

    from agents_runner.registry import agent_entry
    from orchestrator.planner import agent_config as planned_config

    for index, agent in enumerate(experiment.agents):
        try:
            options = agent_entry(agent.agent).options
        except AtollError:
            raise AtollError(
                "bad_experiment", f"agents.{index}.agent: unknown agent {agent.agent!r}"
            ) from None
        try:
            options.model_validate(_agent_options(planned_config(agent, experiment)))
        except ValidationError as exc:
            raise AtollError("bad_experiment", f"agents.{index}.config: {describe_validation(exc)}") from None


async def run_agent_in_process(
    environment: EnvironmentEndpoint,
    task: Task,
    spec: TrialSpec,
    *,
    on_change: Callable[[AgentRun], None] | None = None,
    checkpoint: Checkpoints | None = None,
    on_checkpoint: Callable[[AgentCheckpoint], Any] | None = None,
    resume: AgentCheckpoint | None = None,
    attempt: int | None = None,
) -> Trajectory:
    """The agent runs in this process and reaches the world over the environment's /mcp;
    ``on_change`` sees the run after every message (for the trajectory so far); with
    ``checkpoint`` and ``on_checkpoint`` it takes checkpoints, with ``resume`` it continues
    from one (:mod:`orchestrator.executors.checkpoints`)."""
    from agents_runner import CheckpointPolicy, run_agent

    policy = (
        CheckpointPolicy(every_steps=checkpoint.every_steps, every_s=checkpoint.every_s)
        if checkpoint is not None and on_checkpoint is not None
        else None
    )

    return await run_agent(
        model=spec.model,
        gateway_url=environment.mcp_url,
        gateway_token=environment.mcp_token,
        prompt=task.prompt,
        api_base=spec.agent_config.get("api_base"),
        api_key_secret=spec.agent_config.get("api_key_secret"),
        agent=spec.agent,
        config=agent_config(spec),
        task_id=task.task_id,
        trial_id=spec.trial_id,
        reference_solution=task.reference_solution,
        on_change=on_change,
        checkpoint=policy,
        on_checkpoint=on_checkpoint if policy is not None else None,
        resume=resume,
        attempt=attempt,
    )


async def run_agent_remote(
    http: httpx.AsyncClient,
    agents_url: str,
    environment: EnvironmentEndpoint,
    task: Task,
    spec: TrialSpec,
    *,
    token: str | None = None,
    poll_s: float = 1.0,
    busy_wait_s: float = 600.0,
    on_trajectory: Callable[[Trajectory], None] | None = None,
) -> Trajectory:
    """The agent runs in the agents runner service (``POST /runs``, poll, fetch the trajectory).
    A runner at its limit of running runs (429) is asked again every ``poll_s`` for up to
    ``busy_wait_s`` before the trial counts it as an infrastructure error. ``on_trajectory``
    gets the trajectory so far (``?so_far=true``) whenever a poll finds a new step."""
    base = agents_url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {
        "model": spec.model,
        "gateway_url": environment.mcp_url,
        "gateway_token": environment.mcp_token,
        "prompt": task.prompt,
        "agent": spec.agent,
        "config": agent_config(spec) or None,
        "api_base": spec.agent_config.get("api_base"),
        "api_key_secret": spec.agent_config.get("api_key_secret"),
        "task_id": task.task_id,
        "trial_id": spec.trial_id,
        "reference_solution": task.reference_solution.model_dump(mode="json")
        if task.reference_solution
        else None,
    }
    try:
        started = await http.post(f"{base}/runs", json=body, headers=headers)
        busy_until = time.monotonic() + busy_wait_s
        # 429 too_many_runs: the runner is at ATOLL_AGENT_MAX_RUNNING; wait for a free slot.
        while started.status_code == 429 and time.monotonic() < busy_until:
            await asyncio.sleep(poll_s)
            started = await http.post(f"{base}/runs", json=body, headers=headers)
        if started.status_code >= 400:
            raise InfraError(f"agents runner /runs: HTTP {started.status_code}: {started.text[:300]}")
        run_id = started.json()["run_id"]
        seen_steps = 0
        while True:
            status = await http.get(f"{base}/runs/{run_id}", headers=headers)
            if status.status_code >= 400:
                raise InfraError(f"agents runner /runs/{run_id}: HTTP {status.status_code}")
            if status.json().get("state") == "finished":
                break
            steps = int(status.json().get("steps") or 0)
            if on_trajectory is not None and steps > seen_steps:
                so_far = await http.get(
                    f"{base}/runs/{run_id}/trajectory", params={"so_far": "true"}, headers=headers
                )
                if so_far.status_code == 200:  # an older runner answers 409: no progress then
                    seen_steps = steps
                    on_trajectory(Trajectory.model_validate(so_far.json()))
            await asyncio.sleep(poll_s)
        answer = await http.get(f"{base}/runs/{run_id}/trajectory", headers=headers)
        if answer.status_code >= 400:
            raise InfraError(f"agents runner trajectory: HTTP {answer.status_code}")
    except httpx.HTTPError as exc:
        raise InfraError(f"agents runner at {agents_url}: {type(exc).__name__}: {exc}") from exc
    return Trajectory.model_validate(answer.json())


def raise_for_infrastructure(trajectory: Trajectory) -> None:
    """A run that ended in our machinery's or the provider's failure is not the agent's
    failure: raise InfraError — ModelEndpointError for the model side — (retried, reported
    as infra_error if it persists)."""
    if trajectory.status is not RunStatus.error or trajectory.error is None:
        return
    error = trajectory.error
    if error.kind is ErrorKind.model_provider:
        raise ModelEndpointError(
            f"agent: {error.message}", configuration=error.model_error == "configuration"
        )
    if error.kind is ErrorKind.infrastructure:
        raise InfraError(f"{error.kind.value}: {error.message}")


def should_grade(trajectory: Trajectory, grade_incomplete: bool) -> bool:
    return trajectory.status not in INCOMPLETE or grade_incomplete


async def grade_with_service(
    grader_url: str,
    task: Task,
    before: Path,
    after: Path,
    trajectory: Trajectory,
    judge: dict[str, Any] | None,
    *,
    token: str | None = None,
) -> Grade:
    """Grade through the grading service (with its bearer ``token`` when it has one); its
    failures are InfraError."""
    from grader.client import grade_remote

    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:
        return await grade_remote(grader_url, task, before, after, trajectory, judge, headers=headers)
    except AtollError as exc:
        raise grader_failure(exc) from exc


def grader_failure(exc: AtollError) -> InfraError:
    """The InfraError for a failed grading: ModelEndpointError when the judge's endpoint
    is misconfigured (the grader says ``model_endpoint``)."""
    if exc.code == "model_endpoint":
        return ModelEndpointError(exc.message, configuration=True)
    return InfraError(f"grader: {exc.message}")


def store_seed(artifacts: ArtifactStore, seed: Seed) -> str:
    """Store the seed in the artifact store (the blobs it lacks, then the manifest, at
    ``seeds/<key>.manifest.json``) and give the manifest's URI: a trial's initial state."""
    return store_world(artifacts, seed_manifest_key(seed.key), seed.manifest, seed.open_member)


def folder_reader(folder: Path) -> Callable[[set[str]], dict[str, bytes]]:
    """Read members (``filesystem/…``, ``.apps_data/…``) of an extracted world by path."""

    def read(paths: set[str]) -> dict[str, bytes]:
        return {path: (folder / path).read_bytes() for path in paths}

    return read


def archive_reader(archive: Path) -> Callable[[set[str]], dict[str, bytes]]:
    """Read members of a world's full archive (a seed's ``.tar.gz``) by path, in one pass."""
    import tarfile

    def read(paths: set[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        if not paths:
            return found
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                if member.isreg() and member.name in paths:
                    handle = tar.extractfile(member)
                    found[member.name] = handle.read() if handle is not None else b""
                    if len(found) == len(paths):
                        break
        return found

    return read


def trial_snapshots(
    populated: WorldManifest, read_populated: Callable[[set[str]], dict[str, bytes]], delta_path: Path
) -> tuple[ManifestSnapshot, ManifestSnapshot | Snapshot]:
    """The grader's before and after snapshots of a trial, with nothing read or hashed until
    the grader asks for a file: before is the populated world (``populated``, its files read
    by path with ``read_populated``), after is the delta at ``delta_path`` (its own blobs, and
    the populated world's for what the agent left alone), or the full snapshot that stands
    for it (:func:`take_final_state`). A content that does not hash to its name is never
    handed on."""
    from grader.snapshot import ManifestSnapshot, Snapshot

    paths_of: dict[str, str] = {}
    for entry in populated.entries:
        if entry.sha256 is not None:
            paths_of.setdefault(entry.sha256, entry.path)

    def before_blobs(hashes: set[str]) -> dict[str, bytes]:
        wanted = {hash_: paths_of[hash_] for hash_ in hashes if hash_ in paths_of}
        found = read_populated(set(wanted.values()))
        blobs = {hash_: found[path] for hash_, path in wanted.items() if path in found}
        return {hash_: data for hash_, data in blobs.items() if sha256_of(data) == hash_}

    before = ManifestSnapshot(populated, before_blobs, location="the populated world")
    if delta_path.name == FULL_AFTER_NAME:
        return before, Snapshot(delta_path)
    delta = Delta(delta_path)

    def after_blobs(hashes: set[str]) -> dict[str, bytes]:
        blobs = delta.read_blobs(hashes)
        return blobs | before_blobs(set(hashes) - blobs.keys())

    return before, ManifestSnapshot(delta.manifest, after_blobs, location=delta_path)


def write_full_archive(
    snapshot: ManifestSnapshot | Snapshot, path: Path, *, batch_bytes: int = 64 << 20
) -> Path:
    """The world's full archive (the bytes ``/data/snapshot`` gives for it) written to ``path``
    (contents read ``batch_bytes`` at a time, in archive order); a snapshot that already is a
    full archive is its own file, returned as it is."""
    import io

    from grader.snapshot import Snapshot

    if isinstance(snapshot, Snapshot):
        return Path(snapshot.location)

    entries = snapshot.manifest.entries
    batch: dict[str, bytes] = {}

    def open_blob(entry: Entry) -> BinaryIO:
        if entry.path not in batch:
            batch.clear()
            wanted, size = set(), 0
            for later in entries[entries.index(entry) :]:
                if later.type == "file" and (not wanted or size + later.size <= batch_bytes):
                    wanted.add(later.path)
                    size += later.size
                elif later.type == "file":
                    break
            batch.update(snapshot.read_many(wanted))
        return io.BytesIO(batch.pop(entry.path))

    with path.open("wb") as sink:
        write_archive(snapshot.manifest, open_blob, sink)
    return path


def store_artifacts(
    artifacts: ArtifactStore,
    prefix: str,
    trajectory: Trajectory,
    grade: Grade | None,
    after: Path,
    *,
    before_uri: str,
) -> dict[str, str | None]:
    """Trajectory, grade and the final state (a delta on the seed, ``after.delta.tar.gz``, or
    the full ``after.tar.gz`` that stands for it) under ``prefix``; the initial state is the
    seed's, stored once, at ``before_uri``."""
    return {
        "trajectory_uri": artifacts.put_bytes(
            f"{prefix}/trajectory.json", model_json(trajectory, indent=2).encode()
        ),
        "grade_uri": artifacts.put_bytes(f"{prefix}/grade.json", model_json(grade, indent=2).encode())
        if grade
        else None,
        "snapshot_before_uri": before_uri,
        "snapshot_after_uri": artifacts.put_file(f"{prefix}/{after.name}", after),
    }


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


def check_columns(task: Task, grade: Grade | None) -> dict[str, int | None]:
    """A TrialResult's check columns from ``grade``: ``checks_total``, the criteria of ``task``
    that carry a programmatic check; ``checks_met``, those whose check passed (the check's own
    verdict whoever decided the criterion, so no judge moves it); ``check_disagreements``,
    those where the judge also decided and its verdict differs from the check's. All None when
    no criterion has a check; with no grade, none met and disagreements None."""
    checked = {c.verifier_id for c in task.rubric if c.check is not None}
    if not checked:
        return dict.fromkeys(("checks_met", "checks_total", "check_disagreements"))
    verdicts = [v for v in grade.criteria if v.verifier_id in checked] if grade else []
    return {
        "checks_met": sum(v.known_check_verdict() is Verdict.met for v in verdicts),
        "checks_total": len(checked),
        "check_disagreements": sum(v.check_agrees is False for v in verdicts) if grade else None,
    }


def build_result(
    spec: TrialSpec,
    task: Task,
    trajectory: Trajectory,
    grade: Grade | None,
    *,
    attempt: int,
    duration_s: float,
    uris: dict[str, str | None],
) -> TrialResult:
    """The TrialResult of a finished trial (outcome, usage, checks, artifact URIs, and the id of
    the judge whose grading it counts: None for a trial that was never graded)."""
    outcome = trial_outcome(trajectory, grade)
    return TrialResult(
        **check_columns(task, grade),
        criteria_total=len(grade.criteria) if grade else None,
        criteria_ungradeable=grade.ungradeable if grade else None,
        judge_id=grade.judge.id if grade is not None and grade.judge is not None else None,
        trial_id=spec.trial_id,
        outcome=outcome,
        score=grade.score if grade else 0.0,
        run_status=trajectory.status.value,
        error=trajectory.error.message
        if trajectory.error
        else ("; ".join(grade.ungradeable_reasons) if grade and outcome is Outcome.ungradeable else None),
        attempt=attempt,
        steps=trajectory.steps,
        tool_calls=len(trajectory.tool_calls),
        prompt_tokens=trajectory.usage.prompt_tokens,
        completion_tokens=trajectory.usage.completion_tokens,
        reasoning_tokens=trajectory.usage.reasoning_tokens,
        cached_tokens=trajectory.usage.cached_tokens,
        cache_write_tokens=trajectory.usage.cache_write_tokens,
        agent_cost_usd=trajectory.usage.cost_usd,
        judge_cost_usd=grade.judge_cost_usd if grade else 0.0,
        judge_prompt_tokens=grade.judge_prompt_tokens if grade else 0,
        judge_completion_tokens=grade.judge_completion_tokens if grade else 0,
        judge_reasoning_tokens=grade.judge_reasoning_tokens if grade else 0,
        judge_cached_tokens=grade.judge_cached_tokens if grade else 0,
        duration_s=duration_s,
        finished_at=datetime.now(UTC),
        **uris,
    )


def world_options(world: World) -> dict[str, Any]:
    """The app servers' identity options from a World (its user_name/user_email extras)."""
    extra = world.model_extra or {}
    return {key: extra[key] for key in ("user_email", "user_name") if extra.get(key)}


__all__ = [
    "EnvironmentEndpoint",
    "agent_config",
    "archive_reader",
    "build_result",
    "check_columns",
    "environment_post",
    "folder_reader",
    "grade_with_service",
    "grader_failure",
    "prepare_world",
    "raise_for_infrastructure",
    "run_agent_in_process",
    "run_agent_remote",
    "should_grade",
    "delta_base",
    "delta_request",
    "store_artifacts",
    "store_seed",
    "take_final_state",
    "take_world_delta",
    "take_snapshot",
    "trial_outcome",
    "trial_snapshots",
    "validate_agents",
    "wait_until_healthy",
    "world_options",
    "write_full_archive",
]
