"""The steps of one trial, shared by every executor that drives an environment over HTTP.

The local executor (in-process environments, or the services of a compose deployment) and
the per-trial Kubernetes pod (``atoll trial run``) run the same sequence: populate the world
from its seed, check that it is fresh (the populated world's manifest digest = the seed's),
configure the app servers, run the agent over MCP, take the final state (a delta on the seed),
grade, store the artifacts and build the :class:`TrialResult`. Every failure of the machinery raises :class:`InfraError`.

Here are the steps one by one; :mod:`orchestrator.executors.agent_runs` runs the agent (in
process or in the agents runner service), and :mod:`orchestrator.executors.trial_phases` puts
the steps together from the populated world to the result (checkpoints and resume included).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import httpx

from atoll.apps import DEFAULT_SERVERS
from atoll.benchmark import Task, World
from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.experiment import ExperimentSpec
from atoll.grade import Grade, Verdict
from atoll.jsonio import model_json
from atoll.trajectory import RAW_MODEL_CALLS_NAME, ErrorKind, RunStatus, Trajectory, Usage, raw_lines
from atoll.trial import Outcome, TrialResult, TrialSpec
from atoll.world_deltas import Delta, read_manifest, write_archive
from atoll.world_manifest import Entry, WorldManifest, sha256_of
from atoll.world_store import relative_reference, seed_manifest_key, store_world
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors.base import InfraError, ModelEndpointError
from orchestrator.executors.evidence import AFTER_NAME, ATIF_NAME, FULL_AFTER_NAME
from orchestrator.executors.instant import InstantOptions

if TYPE_CHECKING:
    from grader.snapshot import ManifestSnapshot, Snapshot
    from orchestrator.executors.seeds import Seed

# Keys of a trial's agent config that are not the agent's: the orchestrator's endpoint keys
# and the instant executor's declared dry-run knobs. Everything else must be a field of
# the agent's options model (validate_agents rejects a typo before anything runs).
ORCHESTRATOR_KEYS = frozenset({"api_base", "api_key_env", "api_key_secret"}) | frozenset(
    InstantOptions.model_fields
)
INCOMPLETE = (RunStatus.max_steps, RunStatus.timeout, RunStatus.budget_exhausted)

log = logging.getLogger("atoll.orchestrator")


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
        populated = read_manifest(answer.content, "the environment's manifest")
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
        try:
            relayed = ErrorCode(code or ErrorCode.environment_refused)
        except ValueError:  # a code this version does not declare: only its message is read
            relayed = ErrorCode.environment_refused
        super().__init__(relayed, message)


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

    Read from the agent registry's declarations, so no agent is imported (an agent's module loads litellm
    and fastmcp's client): a resume with nothing left to run never imports them."""
    from pydantic import ValidationError

    from agents_runner.registry import agent_entry
    from orchestrator.planner import agent_config as planned_config

    for index, agent in enumerate(experiment.agents):
        try:
            options = agent_entry(agent.agent).options
        except AtollError:
            raise AtollError(
                ErrorCode.bad_experiment, f"agents.{index}.agent: unknown agent {agent.agent!r}"
            ) from None
        try:
            options.model_validate(_agent_options(planned_config(agent, experiment)))
        except ValidationError as exc:
            raise AtollError(
                ErrorCode.bad_experiment, f"agents.{index}.config: {describe_validation(exc)}"
            ) from None


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

    def before_blobs(hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = {hash_: paths_of[hash_] for hash_ in hashes if hash_ in paths_of}
        found = read_populated(set(wanted.values()))
        blobs = {hash_: found[path] for hash_, path in wanted.items() if path in found}
        return {hash_: data for hash_, data in blobs.items() if sha256_of(data) == hash_}

    before = ManifestSnapshot(populated, before_blobs, location="the populated world")
    if delta_path.name == FULL_AFTER_NAME:
        return before, Snapshot(delta_path)
    delta = Delta(delta_path)

    def after_blobs(hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = set(hashes)
        blobs = delta.read_blobs(wanted)
        return blobs | before_blobs(wanted - blobs.keys())

    return before, ManifestSnapshot(delta.manifest, after_blobs, location=delta_path)


def coworker_environment(spec: ExperimentSpec) -> dict[str, str]:
    """The ``ATOLL_COWORKER_*`` variables of an environment service that runs ``spec``'s trials
    (docs/coworkers.md): the run's seed and bound on replies, and the ``coworker:`` block's model
    when it names one (else the service's own settings apply)."""
    import json

    coworker = spec.coworker
    variables = {
        "ATOLL_COWORKER_SEED": str(spec.seed),
        "ATOLL_COWORKER_MAX_REPLIES": str(coworker.max_replies),
    }
    if coworker.model:
        variables["ATOLL_COWORKER_MODEL"] = coworker.model
        variables["ATOLL_COWORKER_EXTRA_ARGS"] = json.dumps(coworker.extra_args)
        for name, value in (
            ("API_BASE", coworker.api_base),
            ("API_KEY_SECRET", coworker.api_key_secret),
            ("THINKING", coworker.thinking),
        ):
            if value is not None:
                variables[f"ATOLL_COWORKER_{name}"] = value
    return variables


def with_coworker_turns(trajectory: Trajectory, before: Any, after: Any) -> Trajectory:
    """``trajectory`` with the exchanges between the agent and the world's personas that the
    trial's final world records and its populated world did not (docs/coworkers.md), and their
    model usage, counted apart from the agent's. ``before``/``after``: the grader's snapshots."""
    from atoll.coworkers import EXCHANGES_FILE
    from grader.appdata import coworker_exchanges

    path = f".apps_data/{EXCHANGES_FILE}"
    if path not in after.entries:
        return trajectory
    old = before.read_many({path}).get(path) if path in before.entries else None
    turns = coworker_exchanges(old, after.read_many({path}).get(path))
    if not turns:
        return trajectory
    usage = Usage(
        prompt_tokens=sum(t.usage.prompt_tokens for t in turns),
        completion_tokens=sum(t.usage.completion_tokens for t in turns),
        cost_usd=sum(t.cost_usd for t in turns),
    )
    return trajectory.model_copy(update={"coworker_turns": turns, "coworker_usage": usage})


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
            wanted: set[str] = set()
            size = 0
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
    """Trajectory (atoll's and, beside it, ATIF's: :func:`atif_bytes`), grade and the final
    state (a delta on the seed, ``after.delta.tar.gz``, or the full ``after.tar.gz`` that
    stands for it) under ``prefix``; the initial state is the seed's, stored once, at
    ``before_uri``. A trajectory with raw model exchanges (``record_raw``) has them written
    beside it, ``raw_model_calls.jsonl``, not inside it."""
    atif = atif_bytes(trajectory)
    if atif is not None:
        artifacts.put_bytes(f"{prefix}/{ATIF_NAME}", atif)
    if trajectory.raw_model_calls:
        artifacts.put_bytes(f"{prefix}/{RAW_MODEL_CALLS_NAME}", raw_lines(trajectory.raw_model_calls))
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


def atif_bytes(trajectory: Trajectory) -> bytes | None:
    """The trial's ``atif.json``: its trajectory as ATIF (docs/interop.md); None, logged, in
    the unexpected case the export fails (an extra file never costs the trial its record)."""
    from atoll.atif import atif_json

    try:
        return atif_json(trajectory).encode()
    except Exception as exc:  # our bug if it happens: the trial's own trajectory is still stored
        log.warning("trial %s: no atif.json: %s", (trajectory.trial_id or "?")[:12], exc)
        return None


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
        run_status=trajectory.status,
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
        coworker_cost_usd=trajectory.coworker_usage.cost_usd,
        coworker_prompt_tokens=trajectory.coworker_usage.prompt_tokens,
        coworker_completion_tokens=trajectory.coworker_usage.completion_tokens,
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
