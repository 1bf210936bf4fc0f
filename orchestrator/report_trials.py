"""The parts of a report a user acts on: one row per trial (with links to its artifacts or
its viewer page), the failures grouped by why, the agents × tasks matrix, the one-line
outcome and the banner of a run that stopped early."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from atoll.costs import cost_known
from atoll.errors import AtollError, ErrorCode
from atoll.grade import Grade
from atoll.report_rows import ReportArtifacts, ReportTrial
from atoll.trajectory import RunStatus
from atoll.trial import Outcome, TrialResult, short_reason
from orchestrator.artifacts import read_artifact
from orchestrator.store import TrialRow

# The outcomes that count in pass rates (ungradeable and infra_error trials are excluded).
GRADED = (Outcome.passed, Outcome.failed)
# A failure group lists this many trials in report.md / .html; report.json has them all.
GROUP_LISTED = 20
# report.md / .html list this many check/judge disagreements; report.json has them all.
DISAGREEMENTS_LISTED = 50
# Characters of the judge's rationale a listed disagreement shows.
RATIONALE_SHOWN = 200


def viewer_trial_url(viewer_url: str, run: str, trial_id: str) -> str:
    """The trial's page in `atoll view` (``/trials/{id}?run=NAME``, as the viewer serves it)."""
    return f"{viewer_url.rstrip('/')}/trials/{quote(trial_id, safe='')}?run={quote(run, safe='')}"


def failure_key(row: ReportTrial) -> str | None:
    """The group a trial that did not pass is listed under; None for a pass and for a trial
    that has not ended (pending, or running under a lease: not a failure; the banner and the
    run's progress count those)."""
    if row.outcome is Outcome.passed or row.outcome is None:
        return None
    if row.left_out:
        return f"left out: {row.left_out}"
    if row.outcome is Outcome.failed:
        if row.error:
            return f"fail: {short_reason(row.error)}"
        if row.end_reason in (None, RunStatus.completed):
            return "fail: criteria not met"
        return f"fail: run ended {row.end_reason}"
    return f"{row.outcome}: {short_reason(row.error)}"


def costs_known(result: TrialResult) -> tuple[bool, bool, bool]:
    """Whether the agent's, the personas' and the judge's costs of a trial are known
    (``atoll.costs``'s rule: tokens spent with no price make a cost unknown, not zero)."""
    return (
        cost_known(result.agent_cost_usd, result.prompt_tokens + result.completion_tokens),
        cost_known(
            result.coworker_cost_usd, result.coworker_prompt_tokens + result.coworker_completion_tokens
        ),
        cost_known(result.judge_cost_usd, result.judge_prompt_tokens + result.judge_completion_tokens),
    )


def _folder(uri: str | None) -> str | None:
    return uri.rsplit("/", 1)[0] + "/" if uri and "/" in uri else None


def trial_rows(
    rows: list[TrialRow],
    *,
    task_names: dict[str, str],
    viewer_url: str | None,
    judged_elsewhere: Callable[[TrialResult], str | None] | None = None,
) -> list[ReportTrial]:
    """One ReportTrial per stored row (:func:`trial_row`), in (task, agent, run) order."""
    return [
        trial_row(
            row,
            task_name=task_names.get(row.spec.task_id),
            viewer_url=viewer_url,
            judged_elsewhere=judged_elsewhere,
        )
        for row in sorted(rows, key=lambda r: (r.spec.task_id, r.spec.agent_name, r.spec.run_index))
    ]


def trial_row(
    row: TrialRow,
    *,
    task_name: str | None = None,
    viewer_url: str | None = None,
    judged_elsewhere: Callable[[TrialResult], str | None] | None = None,
) -> ReportTrial:
    """A stored trial as report.json and the viewer's trial table show it: the one trial-row
    function of both. ``judged_elsewhere`` says why a finished trial is left out of the
    metrics for its judge (``left_out``); ``viewer_url`` makes it link to its viewer page."""
    spec, result = row.spec, row.result
    trial = ReportTrial(
        trial_id=spec.trial_id,
        run=spec.experiment,
        task_id=spec.task_id,
        task_name=task_name or None,
        domain=spec.domain,
        agent=spec.agent_name,
        model=spec.model,
        run_index=spec.run_index,
        state=row.state,
        attempts=row.attempts,
    )
    if result is not None:
        priced, personas_priced, judge_priced = costs_known(result)
        trial = trial.model_copy(
            update={
                "attempt": result.attempt,
                "outcome": result.outcome,
                "judge_id": result.judge_id,
                "left_out": judged_elsewhere(result) if judged_elsewhere else None,
                "score": result.score,
                "end_reason": result.run_status,
                "error": result.error,
                "error_kind": result.error_kind,
                "checks_met": result.checks_met,
                "checks_total": result.checks_total,
                "check_disagreements": result.check_disagreements,
                "steps": result.steps,
                "tool_calls": result.tool_calls,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "reasoning_tokens": result.reasoning_tokens,
                "cached_tokens": result.cached_tokens,
                "cache_write_tokens": result.cache_write_tokens,
                "agent_cost_usd": result.agent_cost_usd if priced else None,
                "judge_prompt_tokens": result.judge_prompt_tokens,
                "judge_completion_tokens": result.judge_completion_tokens,
                "judge_reasoning_tokens": result.judge_reasoning_tokens,
                "judge_cached_tokens": result.judge_cached_tokens,
                "judge_cost_usd": result.judge_cost_usd if judge_priced else None,
                "coworker_cost_usd": result.coworker_cost_usd if personas_priced else None,
                "cost_usd": result.cost_usd if priced and personas_priced and judge_priced else None,
                "duration_s": result.duration_s,
                "finished_at": result.finished_at.isoformat(timespec="seconds")
                if result.finished_at
                else None,
                "artifacts": ReportArtifacts(
                    folder=_folder(result.trajectory_uri or result.grade_uri or result.snapshot_after_uri),
                    trajectory=result.trajectory_uri,
                    grade=result.grade_uri,
                    snapshot_before=result.snapshot_before_uri,
                    snapshot_after=result.snapshot_after_uri,
                ),
            }
        )
    viewer = viewer_trial_url(viewer_url, spec.experiment, spec.trial_id) if viewer_url else None
    trial.viewer_url = viewer
    trial.link = viewer or trial.artifacts.folder
    trial.failure = failure_key(trial)
    return trial


def check_disagreements(trials: list[ReportTrial]) -> dict[str, Any]:
    """The criteria where the judge's verdict differs from its programmatic check's: ``count``
    (as the trials' results recorded it), ``trials`` (how many have one), ``rows`` (one per
    criterion, read from the trial's grade: trial, task, agent, run index, link, verifier id,
    criterion, the check's and the judge's verdicts, the judge's rationale cut to
    RATIONALE_SHOWN characters) and ``unreadable`` (``{trial_id, problem}`` where a grade could
    not be read: its disagreements are counted, not listed). Trials left out for their judge
    are not among them."""
    rows: list[dict[str, Any]] = []
    unreadable: list[dict[str, str]] = []
    # A trial graded by another judge than the run's (left_out) speaks for that judge, not this run's.
    disagreeing = [trial for trial in trials if trial.check_disagreements and not trial.left_out]
    for trial in disagreeing:
        try:
            if not trial.artifacts.grade:
                raise AtollError(ErrorCode.artifact_unreadable, "no grade recorded")
            grade = Grade.model_validate_json(read_artifact(trial.artifacts.grade))
        except (AtollError, ValueError) as exc:
            unreadable.append({"trial_id": trial.trial_id, "problem": getattr(exc, "message", str(exc))})
            continue
        for verdict in grade.criteria:
            if verdict.check_agrees is not False:
                continue
            rationale, check = verdict.rationale, verdict.known_check_verdict()
            rows.append(
                {
                    "trial_id": trial.trial_id,
                    "task_id": trial.task_id,
                    "agent": trial.agent,
                    "run_index": trial.run_index,
                    "link": trial.link,
                    "verifier_id": verdict.verifier_id,
                    "criterion": verdict.criterion,
                    "check_verdict": check.value if check else None,
                    "judge_verdict": verdict.verdict.value,
                    "rationale": rationale
                    if len(rationale) <= RATIONALE_SHOWN
                    else rationale[:RATIONALE_SHOWN] + "…",
                }
            )
    return {
        "count": sum(trial.check_disagreements or 0 for trial in disagreeing),
        "trials": len(disagreeing),
        "rows": rows,
        "unreadable": unreadable,
    }


def failure_groups(trials: list[ReportTrial]) -> list[dict[str, Any]]:
    """Trials that did not pass, grouped by end reason / error (largest group first)."""
    groups: dict[str, list[ReportTrial]] = defaultdict(list)
    for trial in trials:
        if trial.failure is not None:
            groups[trial.failure].append(trial)
    return [
        {
            "reason": key,
            "count": len(members),
            "outcome": members[0].outcome or "unfinished",
            "error_kind": members[0].error_kind,
            "trials": [m.trial_id for m in members],
        }
        for key, members in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    ]


def failed_criteria(trial: ReportTrial) -> list[tuple[str, str]]:
    """The criteria of a failed trial's grade that were not met (``(verifier_id, criterion)``),
    read from its grade artifact; empty for any other trial, or when no grade can be read."""
    if trial.outcome is not Outcome.failed or trial.left_out or not trial.artifacts.grade:
        return []
    try:
        grade = Grade.model_validate_json(read_artifact(trial.artifacts.grade))
    except (AtollError, ValueError):
        return []
    return [(v.verifier_id, v.criterion) for v in grade.criteria if v.verdict.value == "not_met"]


def failure_analysis(
    trials: list[ReportTrial],
    *,
    target_kinds: dict[str, str] | None = None,
    criteria_of: Callable[[ReportTrial], list[tuple[str, str]]] = failed_criteria,
) -> dict[str, list[dict[str, Any]]]:
    """The trials that ended without passing (``failure`` set), grouped five ways: ``criterion``
    (``verifier_id: criterion`` of each criterion a failed trial did not meet; a trial under
    every one it missed), ``target_kind`` (the grading target kind of those criteria, from
    ``target_kinds``: verifier id -> kind, ``unknown`` where it has none; a trial with no
    missed criterion is under ``(none)``), ``end_reason`` (how the agent's run ended),
    ``error_kind`` (:func:`atoll.trial.error_kind`) and ``outcome``. Each group is ``{key, count,
    trials}`` with exactly its trials' ids, largest first; a trial with no value for a
    dimension is under ``(none)`` (``criterion`` has no such group)."""
    kinds = target_kinds or {}
    failed = [trial for trial in trials if trial.failure is not None]
    dimensions: dict[str, dict[str, list[str]]] = {
        "criterion": defaultdict(list),
        "target_kind": defaultdict(list),
        "end_reason": defaultdict(list),
        "error_kind": defaultdict(list),
        "outcome": defaultdict(list),
    }
    for trial in failed:
        missed = criteria_of(trial)
        for verifier_id, criterion in dict.fromkeys(missed):
            dimensions["criterion"][f"{verifier_id}: {criterion}"].append(trial.trial_id)
        for kind in dict.fromkeys(kinds.get(verifier_id, "unknown") for verifier_id, _ in missed) or [
            "(none)"
        ]:
            dimensions["target_kind"][kind].append(trial.trial_id)
        dimensions["end_reason"][trial.end_reason or "(none)"].append(trial.trial_id)
        dimensions["error_kind"][trial.error_kind or "(none)"].append(trial.trial_id)
        dimensions["outcome"][trial.outcome or "(none)"].append(trial.trial_id)
    return {
        name: [
            {"key": key, "count": len(ids), "trials": ids}
            for key, ids in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
        ]
        for name, groups in dimensions.items()
    }


def matrix(trials: list[ReportTrial]) -> dict[str, Any]:
    """Agents × tasks: passes of graded runs per cell; excluded and unfinished counted apart."""
    agents = sorted({t.agent for t in trials})
    tasks = sorted({(t.task_id, t.domain, t.task_name or "") for t in trials})
    cells: dict[str, dict[str, dict[str, int]]] = {agent: {} for agent in agents}
    for trial in trials:
        cell = cells[trial.agent].setdefault(
            trial.task_id, {"passes": 0, "graded": 0, "runs": 0, "excluded": 0, "unfinished": 0}
        )
        cell["runs"] += 1
        if trial.outcome is None:
            cell["unfinished"] += 1
        elif trial.outcome in GRADED and not trial.left_out:
            cell["graded"] += 1
            cell["passes"] += trial.outcome is Outcome.passed
        else:
            cell["excluded"] += 1
    return {
        "agents": agents,
        "tasks": [{"task_id": t, "domain": d, "task_name": n or None} for t, d, n in tasks],
        "cells": cells,
    }


def cost_summary(trials: list[ReportTrial]) -> dict[str, Any]:
    """Total cost of the finished trials, and how many of them had no price."""
    finished = [t for t in trials if t.outcome is not None]
    unpriced = sum(t.cost_usd is None for t in finished)
    return {
        # What was priced: a trial whose judge had no price still adds its agent's cost.
        "known_usd": sum(
            (t.agent_cost_usd or 0.0) + (t.coworker_cost_usd or 0.0) + (t.judge_cost_usd or 0.0)
            for t in finished
        ),
        "unpriced_trials": unpriced,
        "finished_trials": len(finished),
    }


def cost_words(known_usd: float, unpriced: int, finished: int) -> str:
    """``$0.1234``; ``unknown`` when nothing was priced; ``$0.1234 + unknown (3 unpriced trials)``."""
    if unpriced and unpriced == finished:
        return "unknown"
    text = f"${known_usd:.4f}"
    return f"{text} + unknown ({unpriced} unpriced trial{'s' * (unpriced != 1)})" if unpriced else text


def banner(stop: dict[str, Any] | None, counts: dict[str, int]) -> dict[str, Any] | None:
    """Why the run is not complete, or None when every trial is finished and nothing stopped it.

    ``title`` (the kind in capitals) and ``message`` (when, the cause, what is left, how to
    resume) are the words report.md, report.html and the viewer's run page all show."""
    unfinished = counts.get("pending", 0) + counts.get("leased", 0)
    if stop is not None:
        kind = "aborted" if stop.get("reason") in ("infra_error_rate", "model_configuration") else "stopped"
        if stop.get("reason") == "interrupted":
            kind = "interrupted"
        if stop.get("reason") == "cancelled":  # orchestrator.lifecycle: its trials were cancelled
            kind = "cancelled"
            unfinished += counts.get("cancelled", 0)
        shown: dict[str, Any] = {
            "kind": kind,
            "reason": stop.get("reason"),
            "detail": stop.get("detail"),
            "at": stop.get("at"),
            "unfinished": unfinished,
        }
    elif unfinished:
        shown = {
            "kind": "not finished",
            "reason": None,
            "unfinished": unfinished,
            "at": None,
            "detail": f"{unfinished} of {counts.get('total', 0)} trials are not finished "
            f"({counts.get('pending', 0)} pending, {counts.get('leased', 0)} running or held by a "
            "lease): the run was interrupted, or is still running",
        }
    else:
        return None
    return {**shown, "title": shown["kind"].upper(), "message": _banner_message(shown)}


def _banner_message(shown: dict[str, Any]) -> str:
    when = (
        f" (at {datetime.fromtimestamp(shown['at'], UTC).isoformat(timespec='seconds')})"
        if shown.get("at")
        else ""
    )
    resume = {
        "aborted": " Fix the cause, then run the experiment again to resume: finished trials are kept.",
        "cancelled": " `atoll resume RUN` (POST /runs/RUN/resume) makes its cancelled trials pending "
        "again: finished trials are kept.",
    }.get(shown["kind"], " Running the experiment again resumes it: finished trials are kept.")
    left = (
        f" {shown['unfinished']} trial(s) not finished."
        if shown["kind"] != "not finished" and shown["unfinished"]
        else ""
    )
    return f"{when}: {shown['detail']}.{left}{resume}"


def outcome_line(report: dict[str, Any]) -> str:
    """What ran, how much of it finished, its cost and whether it stopped early, in one line;
    pass rates are per agent (:func:`agent_headlines`), never pooled across agents."""
    trials = report["trial_rows"]
    agents = sorted({t["agent"] for t in trials})
    tasks = {t["task_id"] for t in trials}
    finished = sum(t["outcome"] is not None for t in trials)
    cost = report["cost"]
    state = report["banner"]["kind"] if report["banner"] else "complete"
    return (
        f"{len(agents)} agent{'s' * (len(agents) != 1)} × {len(tasks)} task{'s' * (len(tasks) != 1)} × "
        f"{report['runs_per_task']} run{'s' * (report['runs_per_task'] != 1)}: {finished} of {len(trials)} "
        f"trials finished · cost "
        f"{cost_words(cost['known_usd'], cost['unpriced_trials'], cost['finished_trials'])} · {state}"
    )


def agent_headlines(trials: list[ReportTrial]) -> list[dict[str, Any]]:
    """One headline per agent, best pass rate first: ``{agent, model, passes, graded,
    pass_rate (null when none graded), finished, trials, cost, line}``, ``line`` as report.md
    shows it (``alpha (gpt-x): pass rate 60.0% (3 of 5 graded) · 6 of 8 finished · $0.0300``).
    Graded trials are pass/fail ones counted for the run's judge (not ``left_out``)."""
    by_agent: dict[str, list[ReportTrial]] = defaultdict(list)
    for trial in trials:
        by_agent[trial.agent].append(trial)
    headlines = []
    for agent, members in by_agent.items():
        graded = [t for t in members if t.outcome in GRADED and not t.left_out]
        passes = sum(t.outcome is Outcome.passed for t in graded)
        rate = passes / len(graded) if graded else None
        money = cost_summary(members)
        cost = cost_words(money["known_usd"], money["unpriced_trials"], money["finished_trials"])
        finished = money["finished_trials"]
        shown = (
            f"{100 * rate:.1f}% ({passes} of {len(graded)} graded)" if rate is not None else "— (none graded)"
        )
        headlines.append(
            {
                "agent": agent,
                "model": members[0].model,
                "passes": passes,
                "graded": len(graded),
                "pass_rate": rate,
                "finished": finished,
                "trials": len(members),
                "cost": cost,
                "line": f"{agent} ({members[0].model}): pass rate {shown} · {finished} of {len(members)} "
                f"finished · {cost}",
            }
        )
    return sorted(
        headlines, key=lambda h: (-(h["pass_rate"] if h["pass_rate"] is not None else -1), h["agent"])
    )


def relative_links(report: dict[str, Any], folder: str | Path) -> None:
    """Make each trial's ``link`` (and each listed disagreement's) that is a local artifact
    folder (``file://…``) a path relative to ``folder``, where the report is written, so that
    report.md and report.html open it from wherever the output folder is moved with its
    artifacts. Viewer and object-store links are kept."""

    def relative(link: str | None) -> str | None:
        if not link or not link.startswith("file://"):
            return link
        target = unquote(urlparse(link).path)
        shown = os.path.relpath(target, Path(folder).resolve())
        return shown.replace(os.sep, "/") + ("/" if link.endswith("/") else "")

    for trial in report["trial_rows"]:
        trial["link"] = relative(trial["link"])
    for row in report.get("check_disagreements", {}).get("rows", []):
        row["link"] = relative(row["link"])


__all__ = [
    "DISAGREEMENTS_LISTED",
    "GROUP_LISTED",
    "agent_headlines",
    "banner",
    "check_disagreements",
    "cost_summary",
    "cost_words",
    "costs_known",
    "failed_criteria",
    "failure_analysis",
    "failure_groups",
    "failure_key",
    "matrix",
    "outcome_line",
    "relative_links",
    "trial_rows",
    "viewer_trial_url",
]
