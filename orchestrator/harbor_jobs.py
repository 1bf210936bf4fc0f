"""Harbor job output as atoll runs, for the viewer (docs/interop.md, "A Harbor job folder").

Harbor writes a job to ``jobs/<job>/`` and each trial to ``jobs/<job>/<trial>/``: ``result.json``
(its TrialResult: task, agent, model, timings, an exception if one ended it),
``agent/trajectory.json`` (the agent's trajectory, in ATIF when the agent writes one) and
``verifier/reward.json`` (a flat object of named rewards) or ``verifier/reward.txt`` (one number);
an APEX-Agents v1.1 verifier (atoll's included, :mod:`grader.harbor_verifier`) also writes
``verifier/grade_details.json``, whose per-criterion results become the trial's verdicts.
:func:`import_harbor_jobs` records each job as a run of a trial store and each trial as a trial
whose trajectory URI is the trial's own ``agent/trajectory.json`` (the viewer reads ATIF), so
nothing is copied. The outcome: pass when the reward is 1 (every criterion met, as atoll
counts a pass), fail below it, and an infrastructure error when there is no reward (a missing
reward is never a zero).

A job folder is someone else's output: only regular files inside the trial's own folder are
read (a link is refused, never followed), each under a size limit, and a file that cannot be
read leaves its trial with the problem named as its error, never the import failed.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import model_json
from atoll.trajectory import Trajectory
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.store import TrialStore

TRAJECTORY = ("agent", "trajectory.json")
REWARD_JSON = ("verifier", "reward.json")
REWARD_TEXT = ("verifier", "reward.txt")
GRADE_DETAILS = ("verifier", "grade_details.json")
RESULT = "result.json"
MAX_TRAJECTORY_BYTES = 256 << 20
MAX_SMALL_BYTES = 4 << 20  # result.json and reward files
MAX_TRIALS = 100_000
WORKER = "harbor-import"


def is_trial_folder(folder: Path) -> bool:
    """A Harbor trial folder: ``agent/`` or ``verifier/`` beside, or a ``result.json``."""
    return (
        folder.is_dir()
        and not folder.is_symlink()
        and any((folder / name).exists() for name in ("agent", "verifier", RESULT))
    )


def find_harbor_jobs(folder: Path) -> list[Path]:
    """The Harbor job folders at ``folder``: itself when it holds trial folders, else its
    sub-folders that do (``folder`` is then a ``jobs/`` folder); sorted by name."""
    if not folder.is_dir():
        return []
    if _trial_folders(folder):
        return [folder]
    return sorted(
        child
        for child in folder.iterdir()
        if child.is_dir() and not child.is_symlink() and _trial_folders(child)
    )


def _trial_folders(job: Path) -> list[Path]:
    try:
        return sorted(child for child in job.iterdir() if is_trial_folder(child))
    except OSError:
        return []


@dataclass
class _Trial:
    spec: TrialSpec
    result: TrialResult


def import_harbor_jobs(folder: Path, store: TrialStore, grades: Path | None = None) -> list[str]:
    """Record each Harbor job under ``folder`` (a job folder or a ``jobs/`` folder) as a run of
    ``store``, named after the job folder; the names. A trial's verdicts (from its
    ``grade_details.json``) are written as atoll grades into ``grades`` (None: not read).
    Raises AtollError("bad_input") when ``folder`` holds no Harbor trial folder."""
    jobs = find_harbor_jobs(folder)
    if not jobs:
        raise AtollError(
            ErrorCode.bad_input,
            f"{folder}: no Harbor job here (a job folder holds trial folders with agent/, verifier/ or result.json)",
        )
    names = []
    for job in jobs:
        name = job.resolve().name
        trials = [_read_trial(name, trial, grades) for trial in _trial_folders(job)[:MAX_TRIALS]]
        _number_runs(trials)
        agents = [{"name": agent} for agent in sorted({t.spec.agent_name for t in trials})]
        store.save_experiment(
            name, {"name": name, "benchmark": str(job.resolve()), "source": "harbor", "agents": agents}
        )
        store.enqueue(t.spec for t in trials)
        by_id = {t.spec.trial_id: t for t in trials}
        for lease in store.lease(WORKER, limit=len(trials), lease_s=3600, experiment=name):
            trial = by_id[lease.trial_id]
            result = trial.result.model_copy(update={"trial_id": lease.trial_id})
            if result.outcome is Outcome.infra_error:
                store.fail_infra(lease, WORKER, result.error or "no reward", max_attempts=1, result=result)
            else:
                store.complete(lease, WORKER, result)
        names.append(name)
    return names


def _number_runs(trials: list[_Trial]) -> None:
    """Repeated trials of one task, agent and model are runs 0, 1, 2 … (in folder order)."""
    seen: dict[tuple[str, str, str], int] = {}
    for trial in trials:
        key = (trial.spec.task_id, trial.spec.agent_name, trial.spec.model)
        trial.spec = trial.spec.model_copy(update={"run_index": seen.get(key, 0)})
        seen[key] = seen.get(key, 0) + 1
        trial.result = trial.result.model_copy(update={"trial_id": trial.spec.trial_id})


def _read_inside(folder: Path, parts: tuple[str, ...] | str, limit: int) -> bytes | None:
    """The bytes of ``folder/parts`` when it is a regular file inside ``folder`` of at most
    ``limit`` bytes; None when absent. Raises AtollError("bad_input") otherwise.

    Opened one component at a time from the folder's own descriptor with ``O_NOFOLLOW``, and
    checked on the descriptor it reads: a link put in place after a check (the folder is
    someone else's) is refused by the open itself, never followed."""
    names = (parts,) if isinstance(parts, str) else parts
    shown = "/".join((folder.name, *names))
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(folder, flags | os.O_DIRECTORY)
    except OSError as exc:
        raise AtollError(ErrorCode.bad_input, f"{folder.name}: not a folder ({exc.strerror})") from None
    try:
        for index, name in enumerate(names):
            last = index == len(names) - 1
            try:
                next_fd = os.open(name, flags | (0 if last else os.O_DIRECTORY), dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(
                    os.path.join(f"/proc/self/fd/{fd}", name)
                ):
                    raise AtollError(ErrorCode.bad_input, f"{shown}: a link (not followed)") from None
                raise AtollError(ErrorCode.bad_input, f"{shown}: cannot be opened ({exc.strerror})") from None
            os.close(fd)
            fd = next_fd
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AtollError(ErrorCode.bad_input, f"{shown}: not a regular file")
        if info.st_size > limit:
            raise AtollError(ErrorCode.bad_input, f"{shown}: larger than {limit} bytes")
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            data = handle.read(limit + 1)
        if len(data) > limit:  # grew after the fstat
            raise AtollError(ErrorCode.bad_input, f"{shown}: larger than {limit} bytes")
        return data
    finally:
        if fd >= 0:
            os.close(fd)


def _keep(scratch: Path, name: str, text: str) -> str:
    """``text`` written to ``scratch/name`` (the viewer's own folder); its file URI."""
    scratch.mkdir(parents=True, exist_ok=True)
    target = scratch / name
    target.write_text(text, encoding="utf-8")
    return target.resolve().as_uri()


def _read_trial(job: str, folder: Path, grades: Path | None) -> _Trial:
    problems: list[str] = []
    info: dict[str, Any] = {}
    try:
        data = _read_inside(folder, RESULT, MAX_SMALL_BYTES)
        info = json.loads(data.decode("utf-8")) if data is not None else {}
        info = info if isinstance(info, dict) else {}
    except (AtollError, ValueError, OSError) as exc:
        problems.append(f"result.json: {getattr(exc, 'message', exc)}")
    trajectory, trajectory_uri = None, None
    try:
        data = _read_inside(folder, TRAJECTORY, MAX_TRAJECTORY_BYTES)
        if data is not None:
            from grader.inputs import trajectory_from_data

            trajectory = trajectory_from_data(json.loads(data), f"{folder.name}/agent/trajectory.json")
            # The viewer reads what was checked here, kept in its own scratch folder, never
            # the job folder again (whose file may have been replaced since).
            trajectory_uri = (
                _keep(grades, f"{uuid.uuid4().hex}.trajectory.json", model_json(trajectory))
                if grades is not None
                else (folder / "agent" / "trajectory.json").resolve().as_uri()
            )
    except (AtollError, ValueError, OSError) as exc:
        problems.append(getattr(exc, "message", str(exc)))
    reward, reward_problem = _reward(folder)
    if reward_problem:
        problems.append(reward_problem)
    agent_info = _object(info.get("agent_info"))
    model_info = _object(agent_info.get("model_info"))
    agent = str(agent_info.get("name") or (trajectory.agent if trajectory else None) or "unknown")
    model = str(model_info.get("name") or (trajectory.model if trajectory else None) or "unknown")
    task = str(info.get("task_name") or folder.name.rsplit("__", 1)[0])
    spec = TrialSpec(
        experiment=job,
        task_id=task,
        world_id="harbor",
        world_digest=str(info.get("task_checksum") or ""),
        agent_name=agent,
        agent=agent,
        model=model,
        run_index=0,
        agent_config={"harbor_trial": folder.name},
    )
    exception = info.get("exception_info") if isinstance(info.get("exception_info"), dict) else None
    if reward is None:
        why = (
            f"{exception.get('exception_type', 'exception')}: {exception.get('exception_message', '')}"
            if exception
            else "no reward (verifier/reward.txt or verifier/reward.json)"
        )
        problems.insert(0, why)
    grade_columns: dict[str, Any] = {}
    if grades is not None and reward is not None:
        try:
            grade_columns = _grade(folder, task, grades / f"{spec.trial_id}.json")
        except (AtollError, ValueError, OSError) as exc:
            problems.append(f"grade_details.json: {getattr(exc, 'message', exc)}")
    result = TrialResult(
        trial_id=spec.trial_id,
        outcome=Outcome.infra_error
        if reward is None
        else Outcome.passed
        if reward >= 1.0
        else Outcome.failed,
        score=reward,
        run_status=trajectory.status if trajectory else None,
        error="; ".join(problems) or None,
        trajectory_uri=trajectory_uri,
        **grade_columns,
        **_usage_columns(trajectory, info),
    )
    return _Trial(spec=spec, result=result)


def _grade(folder: Path, task: str, target: Path) -> dict[str, Any]:
    """The verdicts of the trial's ``grade_details.json`` (the v1.1 verifier's
    ``verifier_results``) written to ``target`` as an atoll grade; the result's grade columns
    (none without the file). Raises ValueError or AtollError when the file is not of that shape."""
    from atoll.grade import CriterionVerdict, Grade, Verdict

    data = _read_inside(folder, GRADE_DETAILS, MAX_SMALL_BYTES)
    if data is None:
        return {}
    details = json.loads(data.decode("utf-8"))
    results = details.get("verifier_results") if isinstance(details, dict) else None
    if not isinstance(results, list) or not all(
        isinstance(r, dict) and r.get("verifier_id") for r in results
    ):
        raise ValueError("no verifier_results list of objects with a verifier_id")
    verdicts = []
    for item in results:
        values = (
            item.get("verifier_result_values") if isinstance(item.get("verifier_result_values"), dict) else {}
        )
        verdict = values.get("verdict")
        if verdict not in {v.value for v in Verdict}:
            ok = item.get("status", "ok") == "ok" and isinstance(item.get("score"), int | float)
            verdict = ("met" if item["score"] >= 1 else "not_met") if ok else "ungradeable"
        decided_by = (
            values.get("decided_by") if values.get("decided_by") in ("check", "judge", "rule") else "judge"
        )
        message = str(item.get("message") or "")
        verdicts.append(
            CriterionVerdict(
                verifier_id=str(item["verifier_id"]),
                criterion=str(values.get("criterion") or item["verifier_id"]),
                verdict=verdict,
                rationale=str(values.get("rationale") or message),
                evidence=[str(e) for e in values.get("evidence") or [] if isinstance(e, str)],
                judge_model=values.get("judge_model") if isinstance(values.get("judge_model"), str) else None,
                decided_by=decided_by,
                ungradeable_reason=(message or "the verifier could not decide")
                if verdict == "ungradeable"
                else None,
            )
        )
    grade = Grade.from_verdicts(task, verdicts)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(model_json(grade, indent=2), encoding="utf-8")
    return {
        "grade_uri": target.resolve().as_uri(),
        "criteria_total": len(verdicts),
        "criteria_ungradeable": grade.ungradeable,
    }


def _reward(folder: Path) -> tuple[float | None, str | None]:
    """The trial's reward: ``reward.json``'s ``reward`` (or its only value), else
    ``reward.txt``'s number; with the problem when a file is there but unreadable."""
    try:
        data = _read_inside(folder, REWARD_JSON, MAX_SMALL_BYTES)
        if data is not None:
            rewards = json.loads(data.decode("utf-8"))
            if isinstance(rewards, dict):
                value = rewards.get("reward", next(iter(rewards.values())) if len(rewards) == 1 else None)
            else:
                value = rewards
            return _number(value, "verifier/reward.json")
        data = _read_inside(folder, REWARD_TEXT, MAX_SMALL_BYTES)
        if data is not None:
            return _number(data.decode("utf-8").strip(), "verifier/reward.txt")
    except (AtollError, ValueError, OSError) as exc:
        return None, getattr(exc, "message", str(exc))
    return None, None


def _number(value: Any, where: str) -> tuple[float | None, str | None]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None, f"{where}: no overall reward in it"
    if not math.isfinite(number):
        return None, f"{where}: the reward is not a finite number"
    return number, None


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _usage_columns(trajectory: Trajectory | None, info: dict[str, Any]) -> dict[str, Any]:
    """Steps, tool calls, tokens and cost: the trajectory's, else result.json's agent_result."""
    if trajectory is not None:
        usage = trajectory.usage
        return {
            "steps": trajectory.steps,
            "tool_calls": len(trajectory.tool_calls),
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            "agent_cost_usd": usage.cost_usd,
            "duration_s": max(0.0, trajectory.duration_s),
        }
    context = _object(info.get("agent_result"))
    return {
        "prompt_tokens": int(context.get("n_input_tokens") or 0),
        "completion_tokens": int(context.get("n_output_tokens") or 0),
        "cached_tokens": int(context.get("n_cache_tokens") or 0),
        "agent_cost_usd": float(context.get("cost_usd") or 0.0),
    }


def harbor_store(folder: Path, scratch: Path) -> TrialStore:
    """A SQLite trial store in ``scratch`` holding the Harbor jobs under ``folder``."""
    store = TrialStore(str(scratch / f"harbor-{uuid.uuid4().hex[:8]}.db"))
    try:
        import_harbor_jobs(folder, store, grades=scratch / "grades")
    except BaseException:
        store.dispose()
        raise
    return store
