"""One trial inside its own pod (``atoll trial run``): the other half of the Kubernetes executor.

The executor writes a :class:`PodTrialInput` to the attempt's artifact folder
(``<artifacts>/<experiment>/<task>/<agent>/run-<n>/attempt-<k>/input.json``, see
``orchestrator.artifacts``) and starts a Job whose pod holds an environment container and this command, which
share localhost. The command downloads the seed snapshot, populates the environment at
``--environment-url`` (upload, so the environment needs no network), checks freshness, runs
the agent in this process over MCP, takes the final snapshot, grades (grading service, or in
process), stores the artifacts and writes ``outcome.json`` beside the input:
``{"result": TrialResult | null, "infra_error": str | null}``. The executor reads it back.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

from atoll.benchmark import Task
from atoll.errors import AtollError
from atoll.judge import CHECKS_ONLY, judge_from_request
from atoll.trial import TrialResult, TrialSpec
from orchestrator.artifacts import ArtifactStore, claim_trial_folder
from orchestrator.executors import steps
from orchestrator.executors.base import InfraError

INPUT_NAME = "input.json"
OUTCOME_NAME = "outcome.json"


class PodTrialInput(BaseModel):
    """Everything a trial pod needs; secrets never enter it (they come from the pod's env)."""

    spec: TrialSpec
    attempt: int = Field(ge=1)
    task: Task
    world_options: dict[str, Any] = Field(default_factory=dict)
    servers: list[str] = Field(default_factory=list, description="MCP servers to configure (empty: the nine)")
    seed_key: str = Field(description="artifact key of the seed's snapshot (the initial world)")
    seed_digest: str
    artifacts: str = Field(description="artifact store root URL")
    grade_incomplete: bool = False
    judge: dict[str, Any] = Field(
        default_factory=lambda: dict(CHECKS_ONLY),
        description="the judge's wire form (atoll.judge; {'model': null} = checks only)",
    )


class PodTrialOutcome(BaseModel):
    result: TrialResult | None = None
    infra_error: str | None = None


def input_key(artifacts: ArtifactStore, spec: TrialSpec, attempt: int) -> str:
    """Where the executor writes the attempt's input (claiming its artifact folder)."""
    return f"{claim_trial_folder(artifacts, spec, attempt)}/{INPUT_NAME}"


def outcome_key(artifacts: ArtifactStore, spec: TrialSpec, attempt: int) -> str:
    """Where the pod writes the attempt's outcome: beside its input."""
    return f"{claim_trial_folder(artifacts, spec, attempt)}/{OUTCOME_NAME}"


def outcome_uri(input_uri: str) -> str:
    """Where the outcome of the attempt whose input is at ``input_uri`` goes: beside it. The
    executor claimed that folder when it wrote the input; the pod never claims one again
    (a second claim could, on a passing read error, land elsewhere)."""
    return f"{input_uri.rsplit('/', 1)[0]}/{OUTCOME_NAME}"


def _folder_of(artifacts: ArtifactStore, input_uri: str, spec: TrialSpec, attempt: int) -> str:
    key = artifacts.key_of(input_uri)
    if key and key.endswith(f"/{INPUT_NAME}"):
        return key[: -len(INPUT_NAME) - 1]
    return claim_trial_folder(artifacts, spec, attempt)  # an input outside the store's folders


def load_input(uri: str) -> tuple[PodTrialInput, ArtifactStore]:
    """Read the trial input at ``uri``; AtollError(bad_trial_input) when absent or invalid."""
    import fsspec

    try:
        with fsspec.open(uri, "rb") as handle:
            trial_input = PodTrialInput.model_validate_json(handle.read())
    except (OSError, ValueError) as exc:
        raise AtollError("bad_trial_input", f"trial input {uri}: {str(exc).splitlines()[0]}") from None
    return trial_input, ArtifactStore(trial_input.artifacts)


async def run_pod_trial(
    input_uri: str,
    *,
    environment_url: str,
    grader_url: str | None = None,
    env_token: str | None = None,
    mcp_token: str | None = None,
    health_timeout_s: float = 180.0,
) -> PodTrialOutcome:
    """Run the trial described at ``input_uri`` and write its outcome beside it.

    Infrastructure failures are recorded as ``infra_error`` in the outcome (and returned);
    a bad input raises AtollError (nothing can be recorded then)."""
    trial_input, artifacts = load_input(input_uri)
    prefix = _folder_of(artifacts, input_uri, trial_input.spec, trial_input.attempt)
    try:
        result = await _run(
            trial_input,
            artifacts,
            prefix,
            environment_url,
            grader_url,
            env_token,
            mcp_token,
            health_timeout_s,
        )
        outcome = PodTrialOutcome(result=result)
    except InfraError as exc:
        outcome = PodTrialOutcome(infra_error=str(exc))
    artifacts.put_bytes(f"{prefix}/{OUTCOME_NAME}", outcome.model_dump_json(indent=2).encode())
    return outcome


async def _run(
    trial_input: PodTrialInput,
    artifacts: ArtifactStore,
    prefix: str,
    environment_url: str,
    grader_url: str | None,
    env_token: str | None,
    mcp_token: str | None,
    health_timeout_s: float,
) -> TrialResult:
    spec, task = trial_input.spec, trial_input.task
    started = time.perf_counter()
    environment = steps.EnvironmentEndpoint(environment_url, env_token, mcp_token)
    scratch = Path(tempfile.mkdtemp(prefix="atoll-trial-"))
    try:
        before = scratch / "before.tar.gz"
        try:
            artifacts.get_file(artifacts.uri(trial_input.seed_key), before)
        except OSError as exc:
            raise InfraError(f"seed {trial_input.seed_key}: {exc}") from exc
        async with httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0)) as http:
            # The environment container starts beside this one; wait for it.
            await steps.wait_until_healthy(http, environment_url, timeout_s=health_timeout_s)
            await steps.prepare_world(
                http,
                environment,
                seed_digest=trial_input.seed_digest,
                world_id=spec.world_id,
                world_options=trial_input.world_options,
                servers=tuple(trial_input.servers) or None,
                seed_archive=before,
            )
            trajectory = await steps.run_agent_in_process(environment, task, spec)
            after = scratch / "after.tar.gz"
            after.write_bytes(await steps.take_snapshot(http, environment))
        steps.raise_for_infrastructure(trajectory)
        grade = None
        if steps.should_grade(trajectory, trial_input.grade_incomplete):
            grade = await _grade(trial_input, before, after, trajectory, grader_url)
        uris = steps.store_artifacts(
            artifacts, prefix, trajectory, grade, before, after, seed_key=trial_input.seed_key
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return steps.build_result(
        spec,
        task,
        trajectory,
        grade,
        attempt=trial_input.attempt,
        duration_s=time.perf_counter() - started,
        uris=uris,
    )


async def _grade(
    trial_input: PodTrialInput, before: Path, after: Path, trajectory: Any, grader_url: str | None
) -> Any:
    if grader_url:
        return await steps.grade_with_service(
            grader_url, trial_input.task, before, after, trajectory, trial_input.judge
        )
    from grader import grade_trial

    judge = judge_from_request(trial_input.judge)
    try:
        return await grade_trial(
            trial_input.task, before, after, trajectory, judge, None, trial_id=trial_input.spec.trial_id
        )
    except AtollError as exc:
        raise steps.grader_failure(exc) from exc


__all__ = [
    "PodTrialInput",
    "PodTrialOutcome",
    "input_key",
    "load_input",
    "outcome_key",
    "outcome_uri",
    "run_pod_trial",
]
