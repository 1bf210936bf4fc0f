"""atoll's grader as the verifier of an APEX-Agents v1.1 Harbor task (``atoll grade verifier``).

The v1.1 verifier contract, as Mercor's conversion publishes it (docs/interop.md):

inputs
    ``/tests/grading_config.json``         ``{metadata, grading_settings, verifiers, eval_configs,
                                           scoring_config}`` (the task's ``tests/`` folder)
    ``/tests/needs_snapshot``               marker: grading reads world files, so a missing or
                                           empty snapshot is a grading error, not an empty diff
    ``/logs/agent/trajectory.json``         the agent's trajectory (ATIF)
    ``/logs/world/initial_snapshot.tar.gz`` the world before and after the run (copied from the
    ``/logs/world/final_snapshot.tar.gz``   world service by ``artifacts`` and ``[[verifier.collect]]``)

outputs (``/logs/verifier``)
    ``reward.txt``          the overall reward, ``str(float)``
    ``reward.json``         ``{"reward": float, "<verifier_id>": float, …}`` (one entry per criterion)
    ``grade_details.json``  ``{grading_run_id, grading_run_status, verifier_results: [{verifier_id,
                            verifier_version, score, verifier_result_values, status, message}],
                            scoring_results: {final_score, scoring_method_result_values}}``
    ``grading_error.json``  on failure only: ``{"grading_error": true, "detail": "Type: message"}``,
                            with a non-zero exit and no reward file (a missing reward is an infra
                            error, never a zero)

Who writes where: the output folder may not be, hold or lie inside an input's folder (the
agent's logs or the world's), every reward file already there is removed before grading (a
reward planted by anyone else never survives), and each file is written to a temporary name and
renamed over (a link there is replaced, never followed).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from atoll.benchmark import Task
from atoll.errors import AtollError, CodedError, ErrorCode
from atoll.grade import Grade, Verdict
from atoll.settings import AtollSettings, secret_text
from atoll.trajectory import Trajectory

REWARD_TXT = "reward.txt"
REWARD_JSON = "reward.json"
GRADE_DETAILS = "grade_details.json"
GRADING_ERROR = "grading_error.json"
OUTPUT_FILES = (REWARD_TXT, REWARD_JSON, GRADE_DETAILS, GRADING_ERROR)
INITIAL_SNAPSHOT = "initial_snapshot.tar.gz"
FINAL_SNAPSHOT = "final_snapshot.tar.gz"
# A trajectory larger than this is refused (an agent controls it).
MAX_TRAJECTORY_BYTES = 256 * 1024**2


class GradingError(CodedError):
    """A grading that produced no reward: written as grading_error.json, never as a zero."""

    code = ErrorCode.grading_error


@dataclass(frozen=True)
class VerifierPaths:
    """Where the verifier reads and writes (the v1.1 container's paths by default)."""

    tests: Path = Path("/tests")
    trajectory: Path = Path("/logs/agent/trajectory.json")
    snapshots: Path = Path("/logs/world")
    output: Path = Path("/logs/verifier")

    @property
    def initial(self) -> Path:
        return self.snapshots / INITIAL_SNAPSHOT

    @property
    def final(self) -> Path:
        return self.snapshots / FINAL_SNAPSHOT


def tests_folder(path: Path) -> Path:
    """The task's ``tests/`` folder: ``path`` itself or its ``tests/`` (a whole task folder)."""
    if (path / "grading_config.json").is_file():
        return path
    if (path / "tests" / "grading_config.json").is_file():
        return path / "tests"
    raise AtollError(
        ErrorCode.bad_input, f"{path}: neither a v1.1 task folder nor its tests/ (no grading_config.json)"
    )


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def check_output_folder(paths: VerifierPaths) -> None:
    """Refuse an output folder an input's writer could also write: one that is, holds or lies
    inside the trajectory's or the snapshots' folder."""
    for label, folder in (("trajectory", paths.trajectory.parent), ("snapshots", paths.snapshots)):
        if _inside(paths.output, folder) or _inside(folder, paths.output):
            raise AtollError(
                ErrorCode.bad_input,
                f"output folder {paths.output} overlaps the {label} folder {folder}: the reward must be "
                "written where only the verifier writes",
            )


def clear_outputs(output: Path) -> None:
    """Remove every reward and error file in ``output`` (stale or planted); a folder in the
    way is refused."""
    output.mkdir(parents=True, exist_ok=True)
    for name in OUTPUT_FILES:
        path = output / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            raise AtollError(
                ErrorCode.bad_input, f"{path} is not a file: the verifier cannot write its {name}"
            )


def _write(output: Path, name: str, text: str) -> None:
    """Write ``output/name`` through a temporary file renamed over it (a link is replaced)."""
    handle, temporary = tempfile.mkstemp(dir=output, prefix=f".{name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, output / name)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_config(tests: Path) -> dict[str, Any]:
    path = tests / "grading_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GradingError(f"{path}: unreadable or not JSON ({exc})") from None
    if not isinstance(config, dict) or not isinstance(config.get("verifiers"), list):
        raise GradingError(f"{path}: expected an object with a 'verifiers' array")
    return config


def task_from_config(tests: Path, config: dict[str, Any], prompt: str | None) -> Task:
    """The atoll Task a v1.1 ``tests/`` folder describes: ids and expected output from the
    config's metadata, the rubric from its verifiers (as the v1.1 loader reads them), the
    prompt from the task's ``instruction.md`` beside ``tests/`` when present, else ``prompt``."""
    from atoll.loader_harbor import criteria_from_config, strip_preamble

    metadata = dict(config.get("metadata") or {})
    instruction = tests.parent / "instruction.md"
    if instruction.is_file():
        prompt = strip_preamble(instruction.read_text(encoding="utf-8"))
    try:
        return Task.model_validate(
            {
                "task_id": metadata.get("task_id") or "task_unknown",
                "task_name": metadata.get("task_name"),
                "domain": metadata.get("domain") or "",
                "world_id": metadata.get("world_id") or "unknown",
                "prompt": prompt or "(the task's prompt is not in the verifier's inputs)",
                "expected_output": metadata.get("expected_output") or None,
                "rubric": criteria_from_config(tests / "grading_config.json", config),
            }
        )
    except AtollError as exc:
        raise GradingError(exc.message) from None
    except ValueError as exc:
        raise GradingError(f"{tests / 'grading_config.json'}: {exc}") from None


def load_verifier_trajectory(path: Path) -> Trajectory:
    """The agent's trajectory, bounded in size; a missing or unreadable one is a GradingError."""
    from grader.inputs import trajectory_from_data

    if not path.is_file():
        raise GradingError(f"no agent trajectory at {path}")
    if path.stat().st_size > MAX_TRAJECTORY_BYTES:
        raise GradingError(f"trajectory {path} is larger than {MAX_TRAJECTORY_BYTES} bytes")
    try:
        data = json.loads(path.read_bytes())
    except ValueError as exc:
        raise GradingError(f"trajectory {path}: not valid JSON ({exc})") from None
    try:
        return trajectory_from_data(data, f"trajectory {path}")
    except AtollError as exc:
        raise GradingError(exc.message) from None


def empty_snapshot(folder: Path) -> Path:
    """An empty tar.gz (a final-answer task's missing snapshot: nothing changed)."""
    path = folder / "empty.tar.gz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w"):
        pass
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return path


def snapshot_or_empty(path: Path, label: str, *, required: bool, scratch: Path) -> Path:
    """``path`` when it holds a snapshot; an empty one for a task that grades no world files;
    GradingError when the task needs it (a broken capture would grade as "changed nothing")."""
    if path.is_file() and path.stat().st_size > 0:
        return path
    if required:
        raise GradingError(
            f"{label} snapshot missing or empty at {path} (the task is graded from world files)"
        )
    return empty_snapshot(scratch)


def details(task: Task, grade: Grade, scoring_config: dict[str, Any] | None) -> dict[str, Any]:
    """grade_details.json: Archipelago's grading-run output, atoll's verdicts inside it."""
    results = []
    for verdict in grade.criteria:
        values: dict[str, Any] = {
            "verdict": verdict.verdict.value,
            "rationale": verdict.rationale,
            "decided_by": verdict.decided_by,
            "judge_model": verdict.judge_model,
            "evidence": verdict.evidence,
        }
        results.append(
            {
                "verifier_id": verdict.verifier_id,
                "verifier_version": 1,
                "score": 1.0 if verdict.verdict is Verdict.met else 0.0,
                "verifier_result_values": values,
                "status": "ok" if verdict.verdict is not Verdict.ungradeable else "error",
                "message": verdict.ungradeable_reason or "",
            }
        )
    met = sum(v.verdict is Verdict.met for v in grade.criteria)
    return {
        "grading_run_id": f"gr_{task.task_id}",
        "grading_run_status": "completed",
        "verifier_results": results,
        "scoring_results": {
            "final_score": float(grade.score),
            "scoring_method_result_values": {
                "scoring_method": "share_of_criteria_met",
                "scoring_config_id": (scoring_config or {}).get("scoring_config_id"),
                "criteria_met": met,
                "criteria_total": len(grade.criteria),
                "passed": grade.passed,
                "grader": "atoll",
                "judge_model": grade.judge.model if grade.judge else None,
            },
        },
    }


def rewards(grade: Grade) -> dict[str, float]:
    """reward.json: the overall reward, then one entry per criterion (1.0 met, else 0.0)."""
    out = {"reward": float(grade.score)}
    for verdict in grade.criteria:
        out[verdict.verifier_id] = 1.0 if verdict.verdict is Verdict.met else 0.0
    return out


def write_rewards(output: Path, task: Task, grade: Grade, config: dict[str, Any]) -> None:
    """The three reward files; reward.txt last (what a reader of the reward looks at first)."""
    _write(output, GRADE_DETAILS, json.dumps(details(task, grade, config.get("scoring_config")), indent=2))
    _write(output, REWARD_JSON, json.dumps(rewards(grade)))
    _write(output, REWARD_TXT, str(float(grade.score)))


def write_error(output: Path, exc: BaseException) -> None:
    """grading_error.json, and no reward file: Harbor then errors the trial instead of scoring it 0."""
    for name in (REWARD_TXT, REWARD_JSON, GRADE_DETAILS):
        (output / name).unlink(missing_ok=True)
    message = exc.message if isinstance(exc, AtollError) else str(exc)
    _write(
        output,
        GRADING_ERROR,
        json.dumps({"grading_error": True, "detail": f"{type(exc).__name__}: {message}"}),
    )


class VerifierSettings(AtollSettings):
    """The v1.1 verifier's own variables (no ``ATOLL_`` prefix: Harbor's task files set them)."""

    model_config = SettingsConfigDict(env_prefix="")

    grading_model: str | None = Field(None, description="litellm model of the judge, over the task's")
    litellm_proxy_api_base: str | None = Field(None, description="proxy every judge call goes through")
    litellm_proxy_api_key: SecretStr | None = Field(None, description="the proxy's key")


def judge_from_settings(config: dict[str, Any]) -> dict[str, Any] | None:
    """JudgeConfig fields from the task's ``grading_settings`` and the verifier environment's
    variables, as the v1.1 verifier reads them: ``GRADING_MODEL`` overrides the model,
    ``LITELLM_PROXY_API_BASE``/``LITELLM_PROXY_API_KEY`` route it through a proxy."""
    settings = dict(config.get("grading_settings") or {})
    verifier = VerifierSettings()
    model = verifier.grading_model or settings.get("llm_judge_model")
    if not model:
        return None
    values: dict[str, Any] = {"model": model}
    extra = dict(settings.get("llm_judge_extra_args") or {})
    # Where the judge's key goes and the key itself come from the operator's environment, never
    # from the task's files.
    extra.pop("api_base", None)
    extra.pop("api_key", None)
    if verifier.litellm_proxy_api_base:
        values["api_base"] = verifier.litellm_proxy_api_base
    if secret_text(verifier.litellm_proxy_api_key):
        values["api_key_env"] = "LITELLM_PROXY_API_KEY"
    if extra:
        values["extra_args"] = extra
    return values


async def grade_as_verifier(
    paths: VerifierPaths,
    judge: Any,
    cache: Any = None,
    *,
    allow_incomplete: bool = False,
) -> tuple[Task, Grade]:
    """Grade the trial the verifier's inputs describe and write its reward files; on any
    failure write grading_error.json and raise GradingError (the caller exits non-zero)."""
    from grader.grading import grade_trial

    check_output_folder(paths)
    clear_outputs(paths.output)
    try:
        config = read_config(paths.tests)
        trajectory = load_verifier_trajectory(paths.trajectory)
        prompt = next(
            (m.get("content") for m in trajectory.messages if m.get("role") == "user" and m.get("content")),
            None,
        )
        task = task_from_config(paths.tests, config, prompt if isinstance(prompt, str) else None)
        required = (paths.tests / "needs_snapshot").exists()
        with tempfile.TemporaryDirectory(prefix="atoll-verifier-") as scratch:
            before = snapshot_or_empty(paths.initial, "initial", required=required, scratch=Path(scratch))
            after = snapshot_or_empty(paths.final, "final", required=required, scratch=Path(scratch))
            grade = await grade_trial(task, before, after, trajectory, judge, cache)
        if grade.ungradeable and not allow_incomplete:
            raise GradingError(
                f"{grade.ungradeable} of {len(grade.criteria)} criteria ungradeable: "
                + "; ".join(grade.ungradeable_reasons[:3])
            )
        write_rewards(paths.output, task, grade, config)
        return task, grade
    except Exception as exc:  # every failure surfaces the same way: grading_error.json
        write_error(paths.output, exc)
        if isinstance(exc, GradingError):
            raise
        raise GradingError(f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}") from exc
