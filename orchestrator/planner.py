"""Expand an experiment into trials: agents × selected tasks × runs, content-addressed."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from atoll.benchmark import Benchmark, Task
from atoll.errors import AtollError, ErrorCode
from atoll.experiment import AgentSpec, ExperimentSpec
from atoll.trial import TrialSpec


@lru_cache(maxsize=256)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (cached by path, size and mtime)."""
    stat = Path(path).stat()
    return _file_digest(str(path), stat.st_size, stat.st_mtime_ns)


def tree_digest(folder: str | Path) -> str:
    """sha256 over the sorted (relative path, content digest) pairs of a folder's files."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(
            path.relative_to(folder).as_posix().encode() + b"\0" + file_digest(path).encode() + b"\n"
        )
    return digest.hexdigest()


def select_tasks(benchmark: Benchmark, spec: ExperimentSpec) -> list[Task]:
    """Tasks that pass the experiment's filter, in benchmark order. Unknown ids are an error."""
    task_filter = spec.tasks
    tasks = benchmark.tasks
    if task_filter.ids:
        known = {task.task_id for task in tasks}
        unknown = [task_id for task_id in task_filter.ids if task_id not in known]
        if unknown:
            raise AtollError(ErrorCode.bad_experiment, f"tasks.ids: unknown task ids {', '.join(unknown)}")
        wanted = set(task_filter.ids)
        tasks = [task for task in tasks if task.task_id in wanted]
    if task_filter.domains:
        domains = {domain.lower() for domain in task_filter.domains}
        tasks = [task for task in tasks if task.domain.lower() in domains]
    if task_filter.worlds:
        worlds = set(task_filter.worlds)
        tasks = [task for task in tasks if task.world_id in worlds]
    if spec.skip_unavailable_apps:
        tasks = [task for task in tasks if not benchmark.unavailable_for(task)]
    if task_filter.limit is not None:
        tasks = tasks[: task_filter.limit]
    if not tasks:
        raise AtollError(ErrorCode.bad_experiment, f"{spec.name}: the task filter selects no task")
    return tasks


def unavailable_app_exclusions(benchmark: Benchmark, spec: ExperimentSpec) -> dict[str, str]:
    """task_id -> why it is skipped, for the tasks ``skip_unavailable_apps`` leaves out."""
    if not spec.skip_unavailable_apps:
        return {}
    return {
        task.task_id: "world lists apps atoll cannot serve: "
        + "; ".join(f"{app} ({why})" for app, why in sorted(missing.items()))
        for task in benchmark.tasks
        if (missing := benchmark.unavailable_for(task))
    }


def agent_config(agent: AgentSpec, spec: ExperimentSpec) -> dict:
    """The configuration a trial runs with; limits are part of what a trial measures."""
    config = dict(agent.config)
    config.setdefault("max_steps", spec.limits.max_steps)
    config.setdefault("timeout_s", spec.limits.timeout_s)
    if spec.limits.max_tokens is not None:
        config.setdefault("token_budget", spec.limits.max_tokens)
    if spec.limits.max_cost_usd is not None:
        config.setdefault("cost_budget_usd", spec.limits.max_cost_usd)
    if agent.extra_args:
        config["extra_args"] = dict(agent.extra_args)
    if agent.thinking is not None:
        config["thinking"] = agent.thinking
    if agent.api_base:
        config["api_base"] = agent.api_base  # not part of the identity (see atoll.trial)
    if agent.api_key_secret:
        config["api_key_secret"] = agent.api_key_secret  # a secret's name, not the secret; not identity
    return config


def plan_trials(
    benchmark: Benchmark,
    spec: ExperimentSpec,
    *,
    max_trials: int | None = None,
    max_plan_bytes: int | None = None,
) -> list[TrialSpec]:
    """Every (agent, task, run) of the experiment as a TrialSpec with a stable id.

    With ``max_trials`` (the API's ``ATOLL_MAX_TRIALS``), an experiment that would plan more
    is refused (AtollError ``too_many_trials``) before a single trial is built. With
    ``max_plan_bytes`` (``ATOLL_MAX_PLAN_BYTES``), so is one whose agent configurations,
    copied into every trial the store keeps, would add up to more: a 1 MiB body with a
    0.5 MiB system prompt and 200 runs wrote 100 MB to the store."""
    tasks = select_tasks(benchmark, spec)
    planned = len(spec.agents) * len(tasks) * spec.runs
    if max_trials is not None and planned > max_trials:
        raise AtollError(
            ErrorCode.too_many_trials,
            f"experiment {spec.name!r} plans {planned} trials ({len(spec.agents)} agents x "
            f"{len(tasks)} tasks x {spec.runs} runs); this service takes at most {max_trials} per run",
        )
    if max_plan_bytes is not None:
        per_trial = sum(len(json.dumps(agent_config(agent, spec), default=str)) for agent in spec.agents)
        stored = per_trial * len(tasks) * spec.runs
        if stored > max_plan_bytes:
            raise AtollError(
                ErrorCode.too_many_trials,
                f"experiment {spec.name!r} would store {stored} bytes of agent configuration "
                f"({per_trial} bytes per task and run, copied into each of {planned} trials); "
                f"this service takes at most {max_plan_bytes} (shorten agents[].config or plan "
                "fewer runs)",
            )
    world_digests = {world_id: file_digest(archive) for world_id, archive in benchmark.world_archives.items()}
    for world_id, seeds in benchmark.world_seeds.items():  # v1.1: one archive per subsystem
        world_digests[world_id] = hashlib.sha256(
            "".join(f"{name}:{file_digest(path)}\n" for name, path in sorted(seeds.items())).encode()
        ).hexdigest()
    overlay_digests = {task_id: tree_digest(folder) for task_id, folder in benchmark.task_overlays.items()}
    trials = []
    for agent in spec.agents:
        config = agent_config(agent, spec)
        for task in tasks:
            for run_index in range(spec.runs):
                trials.append(
                    TrialSpec(
                        experiment=spec.name,
                        task_id=task.task_id,
                        world_id=task.world_id,
                        world_digest=world_digests[task.world_id],
                        overlay_digest=overlay_digests.get(task.task_id, ""),
                        agent_name=agent.name,
                        agent=agent.agent,
                        model=agent.model,
                        agent_config=config,
                        run_index=run_index,
                        domain=task.domain,
                    )
                )
    return trials
