"""A run's fingerprint (DESIGN §6): the parts of its experiment that decide trial identities.

The identity document lists, for every agent, what enters its trials' identities (agent
implementation, model, config without secrets, endpoints or concurrency — limits included),
for every selected task its world and overlay digests, the number of runs, and the judge
(its :class:`~atoll.judge.JudgeIdentity`: model, the parameters that move a verdict,
samples and quorum, prompt and grader versions; not its endpoint, key or concurrency). The
fingerprint is the sha256 of its canonical JSON and is stored with the run.

Running a run name again compares the new document with the stored one:
- the same: a resume;
- only additions (more runs, more tasks, another agent): an extension — every recorded
  trial keeps its meaning, the new ones are added;
- anything else (an agent's config, model or limits changed, a world or overlay changed,
  fewer runs, a task or agent dropped): refused unless the user asks for ``--new-run NAME``
  or ``--replace`` (the trials outside the new plan are archived under the run, not deleted);
- another coworker model (docs/coworkers.md: its model, parameters or bound on replies; recorded
  only for runs that name one): refused as a changed configuration, since the personas' replies
  are part of what the recorded trials did;
- another judge: refused too (the recorded verdicts are the old judge's), the way out being
  ``atoll regrade RUN --judge-model MODEL`` (which records the new judge, so the run then
  resumes) or ``--new-run NAME``. A document recorded before runs had a judge names none:
  no judge change is seen, and the judge is recorded from then on.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import ValidationError

from atoll.errors import AtollError, ErrorCode
from atoll.experiment import ExperimentSpec
from atoll.trial import TrialSpec, canonical_json, identity_config
from orchestrator.judging import judge_change, spec_judge
from orchestrator.policy import stored_spec


def identity_document(spec: ExperimentSpec, trials: list[TrialSpec]) -> dict[str, Any]:
    """What decides the identities of ``trials`` (the plan of ``spec``)."""
    agents: dict[str, Any] = {}
    tasks: dict[str, Any] = {}
    for trial in trials:
        agents.setdefault(
            trial.agent_name,
            {"agent": trial.agent, "model": trial.model, "config": identity_config(trial.agent_config)},
        )
        tasks.setdefault(
            trial.task_id, {"world_digest": trial.world_digest, "overlay_digest": trial.overlay_digest}
        )
    document = {
        "agents": agents,
        "tasks": tasks,
        "runs": spec.runs,
        "judge": spec_judge(spec).model_dump(mode="json"),
    }
    if spec.coworker.model:  # (absent without one: the documents of earlier runs stay as they were)
        document["coworker"] = coworker_identity(spec)
    return document


def coworker_identity(spec: ExperimentSpec) -> dict[str, Any]:
    """What of the ``coworker:`` block moves the personas' replies (docs/coworkers.md): its
    model and parameters and the bound on replies, not its endpoint or secret."""
    coworker = spec.coworker
    return {
        "model": coworker.model,
        "thinking": coworker.thinking,
        "extra_args": coworker.extra_args,
        "max_replies": coworker.max_replies,
    }


def fingerprint(document: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(document).encode()).hexdigest()


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def incompatible_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What in ``new`` changes the meaning of trials recorded under ``old``, readably
    (empty when ``new`` only adds runs, tasks or agents)."""
    changes: list[str] = []
    for name, before in old.get("agents", {}).items():
        after = new["agents"].get(name)
        if after is None:
            changes.append(f"agent {name} removed")
            continue
        flat_before, flat_after = _flat(before), _flat(after)
        for key in sorted(flat_before.keys() | flat_after.keys()):
            if flat_before.get(key) != flat_after.get(key):
                changes.append(
                    f"agent {name} {key}: {flat_before.get(key, '(unset)')!r} → "
                    f"{flat_after.get(key, '(unset)')!r}"
                )
    removed = sorted(set(old.get("tasks", {})) - set(new["tasks"]))
    if removed:
        changes.append(
            f"{len(removed)} task(s) no longer selected ({', '.join(removed[:5])}"
            f"{', …' if len(removed) > 5 else ''})"
        )
    edited = sorted(
        task
        for task, digests in old.get("tasks", {}).items()
        if task in new["tasks"] and new["tasks"][task] != digests
    )
    if edited:
        changes.append(
            f"world or task files changed for {len(edited)} task(s) ({', '.join(edited[:5])}"
            f"{', …' if len(edited) > 5 else ''})"
        )
    if new["runs"] < old.get("runs", 0):
        changes.append(f"runs {old['runs']} → {new['runs']}")
    if judged := judge_change(old, new):
        changes.append(judged)
    if old.get("coworker") != new.get("coworker"):
        before, after = old.get("coworker") or {}, new.get("coworker") or {}
        changes.append(
            f"coworker: {before.get('model') or '(none)'} → {after.get('model') or '(none)'}"
            + (" (its parameters changed)" if before.get("model") == after.get("model") else "")
        )
    return changes


def configuration_changed(
    spec: ExperimentSpec, recorded_spec: dict[str, Any], changes: list[str], recorded: int
) -> AtollError:
    """The refusal of a changed configuration, naming the changes and the ways out. Another
    judge points to ``atoll regrade RUN --judge-model M`` when the model or endpoint is all that
    changed of it (a regrade overrides only those), else to ``--replace`` then ``atoll regrade
    RUN`` (the new judge recorded first, the recorded trials judged under it after)."""
    shown = "; ".join(changes[:6]) + ("; …" if len(changes) > 6 else "")
    judge_changed = any(change.startswith("judge: ") for change in changes)
    if judge_changed and len(changes) == 1:
        if spec.judge.model and _regrade_reaches(spec, recorded_spec):
            regrade = f"atoll regrade {spec.name} --judge-model {spec.judge.model}"
            if spec.judge.api_base:
                regrade += f" --api-base {spec.judge.api_base}"
            way = f"with `{regrade}` (then this experiment resumes)"
        else:
            way = (
                f"by recording the new judge with --replace, then `atoll regrade {spec.name}` (until "
                "then reports leave the old judge's verdicts out)"
            )
        return AtollError(
            ErrorCode.fingerprint_changed,
            f"run {spec.name!r} was judged by another judge ({shown}); its {recorded} recorded trials "
            f"carry the old judge's verdicts and would be reported as the new one's. Judge the recorded "
            f"trajectories again under the new judge {way}, or run it under a new name with --new-run NAME",
        )
    return AtollError(
        ErrorCode.fingerprint_changed,
        f"run {spec.name!r} already exists with another configuration ({shown}); its {recorded} recorded "
        f"trials would mix with the new ones in one report. Run it under a new name with --new-run NAME, "
        f"or archive the recorded trials that no longer fit (kept under the run, not deleted) with --replace"
        + (
            f" (then `atoll regrade {spec.name}` judges the recorded trials under the new judge)"
            if judge_changed
            else ""
        ),
    )


def _regrade_reaches(spec: ExperimentSpec, recorded_spec: dict[str, Any]) -> bool:
    """Whether ``atoll regrade --judge-model/--api-base`` over the recorded spec makes ``spec``'s judge."""
    try:
        before = stored_spec(recorded_spec)
        return spec_judge(before, model=spec.judge.model, api_base=spec.judge.api_base) == spec_judge(spec)
    except (AtollError, ValidationError):
        return False
