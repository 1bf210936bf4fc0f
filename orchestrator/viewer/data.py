"""What the viewer shows, as plain JSON-ready dicts read from the trial store and artifacts.

No HTTP here: the routes of ``orchestrator.viewer.app`` are thin wrappers over these
functions, so they can be tested (and reused by other tools) without a server.
Errors are ``AtollError`` with the codes ``unknown_run`` and ``unknown_trial``.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar, cast

from atoll.costs import cost_text
from atoll.errors import AtollError, ErrorCode
from atoll.trial import Outcome, TrialResult, TrialSpec, TrialState
from orchestrator import report_trials
from orchestrator.artifacts import read_artifact
from orchestrator.judging import judge_summary, judged_elsewhere
from orchestrator.store import TrialStore, shown_store_url
from orchestrator.store_runs import FINISHED, TrialRow, one_per_key

Row = tuple[TrialSpec, TrialResult | None, TrialState, int]
T = TypeVar("T")


class RunCache:
    """What the viewer computed from a run (summary, trial table, leaderboard), kept until the
    store's change marker for that run moves (``TrialStore.change_marker``: trial count,
    latest update, archived trials, fingerprint). A refresh of an unchanged run costs three
    small queries;
    a run in progress changes its marker with every enqueue, lease and result, so pages stay
    live. Thread-safe (routes compute off the event loop)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[tuple[int, float, int, str | None], object]] = {}
        self._lock = threading.Lock()

    def get(self, store: TrialStore, name: str, what: str, compute: Callable[[], T]) -> T:
        # The marker is read before computing: a change during the computation moves it again,
        # so a value is never kept under a marker newer than what it saw.
        marker = store.change_marker(name)
        with self._lock:
            hit = self._entries.get((name, what))
        if hit is not None and hit[0] == marker:
            return cast(T, hit[1])  # stored by this method from the same ``compute``
        value = compute()
        with self._lock:
            self._entries[(name, what)] = (marker, value)
        return value


def _uncached() -> RunCache:
    return RunCache()


def run_rows(store: TrialStore, name: str) -> tuple[list[Row], int]:
    """The run's trials, one per (agent, task, run index) by the report's rule
    (``orchestrator.store_runs.one_per_key``), and how many duplicates were left out."""
    chosen, duplicates = one_per_key(store.trial_rows(name))
    return [(row.spec, row.result, row.state, row.attempts) for row in chosen], duplicates


def shown_url(store: TrialStore) -> str:
    """The store's URL as pages and messages show it: any password replaced by ``***``."""
    return shown_store_url(store.url)


def _known_runs(store: TrialStore) -> list[str]:
    return store.experiments()


def unknown_run(store: TrialStore, name: str) -> AtollError:
    known = _known_runs(store)
    listing = ", ".join(known) if known else "none"
    return AtollError(
        ErrorCode.unknown_run, f"no run named {name!r} in {shown_url(store)}; runs known: {listing}"
    )


def _status(counts: dict[str, int]) -> str:
    if counts["total"] == 0:
        return "empty"
    if counts["leased"]:
        return "running"
    if counts["pending"]:
        return "incomplete"
    if counts.get("cancelled"):
        return "cancelled"
    if counts["infra_error"]:
        return "finished with infra errors"
    return "finished"


def _times(rows: list[Row]) -> tuple[str | None, str | None]:
    """When the run's first finished trial started and its last one ended (store times)."""
    starts, ends = [], []
    for _spec, result, _state, _attempts in rows:
        if result is None or result.finished_at is None:
            continue
        end = result.finished_at if result.finished_at.tzinfo else result.finished_at.replace(tzinfo=UTC)
        ends.append(end)
        starts.append(end - timedelta(seconds=result.duration_s))
    as_text = lambda moment: moment.isoformat(timespec="seconds") if moment else None  # noqa: E731
    return as_text(min(starts, default=None)), as_text(max(ends, default=None))


def _spec_summary(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "benchmark": spec.get("benchmark"),
        "agents": [
            {"name": a.get("name"), "agent": a.get("agent"), "model": a.get("model")}
            for a in spec.get("agents") or []
        ],
        "runs": spec.get("runs", 1),
        "judge_model": (spec.get("judge") or {}).get("model"),
        "executor": spec.get("executor"),
        "artifacts": spec.get("artifacts"),
    }


def _run_summary(store: TrialStore, name: str, spec: dict[str, Any], rows: list[Row]) -> dict[str, Any]:
    record = store.run_record(name)
    counts = store.counts(name)
    started, ended = _times(rows)
    outcomes: dict[str, int] = defaultdict(int)
    cost, unpriced = 0.0, 0
    for _spec, result, _state, _attempts in rows:
        if result is not None:
            outcomes[result.outcome.value] += 1
            cost += result.cost_usd
            unpriced += not all(report_trials.costs_known(result))
    created = datetime.fromtimestamp(record.created_at, UTC).isoformat(timespec="seconds") if record else None
    return {
        "name": name,
        "status": _status(counts),
        "counts": counts,
        "outcomes": dict(outcomes),
        "cost_usd": cost,
        "unpriced_trials": unpriced,
        "cost": report_trials.cost_words(cost, unpriced, sum(outcomes.values())),
        "created_at": created,
        "started_at": started,
        "ended_at": ended,
        "fingerprint": record.fingerprint if record else None,
        # Named from the run's record and its gradings, never from the spec's judge model.
        "judge": judge_summary(
            store, record, (result for _s, result, state, _a in rows if state in FINISHED), name
        ),
        "spec": _spec_summary(spec),
    }


def _stored_run_summary(store: TrialStore, name: str) -> dict[str, Any]:
    return _run_summary(store, name, store.experiment_spec(name) or {}, run_rows(store, name)[0])


def list_runs(store: TrialStore, *, cache: RunCache | None = None) -> list[dict[str, Any]]:
    """Every run in the store, newest last, with status, counts, cost and times."""
    cache = cache or _uncached()
    return [
        cache.get(
            store,
            name,
            "summary",
            partial(_stored_run_summary, store, name),
        )
        for name in _known_runs(store)
    ]


def trial_row(
    spec: TrialSpec,
    result: TrialResult | None,
    state: TrialState,
    attempts: int,
    judged_elsewhere: Callable[[TrialResult], str | None] | None = None,
) -> dict[str, Any]:
    """One line of the trial table: the report's trial row (:func:`orchestrator.report_trials.trial_row`,
    the one rule for both) with the columns the page shows; ``judged_elsewhere``
    (:func:`orchestrator.judging.judged_elsewhere`) says why a finished trial is left out of the
    run's metrics for its judge (``left_out``)."""
    trial = report_trials.trial_row(
        TrialRow(spec, result, state, attempts, updated_at=0.0), judged_elsewhere=judged_elsewhere
    )
    finished = result is not None
    return {
        "trial_id": trial.trial_id,
        "run": trial.run,
        "task_id": trial.task_id,
        "domain": trial.domain,
        "agent": trial.agent,
        "model": trial.model,
        "run_index": trial.run_index,
        "state": trial.state,
        "attempts": trial.attempts,
        "outcome": trial.outcome,
        "score": trial.score,
        "judge_id": trial.judge_id,
        "left_out": trial.left_out,
        "end_reason": trial.end_reason,
        "error": trial.error,
        "error_kind": trial.error_kind,
        "steps": trial.steps,
        "tool_calls": trial.tool_calls,
        "tokens": (trial.prompt_tokens or 0) + (trial.completion_tokens or 0) if finished else None,
        "reasoning_tokens": trial.reasoning_tokens,
        "cached_tokens": trial.cached_tokens,
        "cost_usd": trial.cost_usd,
        "cost": None
        if not finished
        else "unknown"
        if trial.cost_usd is None
        else cost_text(trial.cost_usd, 0),
        "duration_s": trial.duration_s,
        "finished_at": trial.finished_at,
    }


def run_trials(store: TrialStore, name: str, *, cache: RunCache | None = None) -> list[dict[str, Any]]:
    """The trial table of a run (every trial, finished or not; one per agent, task and run)."""
    if store.experiment_spec(name) is None:
        raise unknown_run(store, name)
    return (cache or _uncached()).get(
        store, name, "trials", lambda: _trial_table(store, name, run_rows(store, name)[0])
    )


def _trial_table(store: TrialStore, name: str, rows: list[Row]) -> list[dict[str, Any]]:
    elsewhere = judged_elsewhere(store.run_record(name), name)
    return [trial_row(*row, judged_elsewhere=elsewhere) for row in rows]


def failure_groups(
    chosen: list[TrialRow], target_kinds: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Trials that ended without passing, grouped exactly as report.json groups them (the
    report's :func:`orchestrator.report_trials.failure_groups` over its trial rows, each trial
    with its task, agent and run index for the page's links), and the report's
    :func:`orchestrator.report_trials.failure_analysis` (by criterion, grading target kind
    — ``target_kinds``, :func:`orchestrator.report.target_kinds` —, end reason, error kind and
    outcome; each group lists exactly its trials' ids)."""
    rows = report_trials.trial_rows(chosen, task_names={}, viewer_url=None)
    by_id = {row.trial_id: row for row in rows}
    groups = [
        {
            **group,
            "trials": [
                {
                    "trial_id": trial_id,
                    "task_id": by_id[trial_id].task_id,
                    "agent": by_id[trial_id].agent,
                    "run_index": by_id[trial_id].run_index,
                }
                for trial_id in group["trials"]
            ],
        }
        for group in report_trials.failure_groups(rows)
    ]
    return groups, report_trials.failure_analysis(rows, target_kinds=target_kinds)


def matrix(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Agents × tasks: passes over finished runs per cell (ungradeable/infra counted apart)."""
    agents = sorted({row["agent"] for row in rows})
    tasks = sorted({(row["domain"], row["task_id"]) for row in rows})
    cells: dict[str, dict[str, dict[str, int]]] = {agent: {} for agent in agents}
    for row in rows:
        cell = cells[row["agent"]].setdefault(
            row["task_id"], {"passes": 0, "graded": 0, "runs": 0, "excluded": 0, "unfinished": 0}
        )
        cell["runs"] += 1
        if row["outcome"] is None:
            cell["unfinished"] += 1
        elif row["outcome"] in report_trials.GRADED and not row.get("left_out"):
            cell["graded"] += 1
            cell["passes"] += row["outcome"] == Outcome.passed
        else:
            cell["excluded"] += 1
    return {"agents": agents, "tasks": [{"task_id": t, "domain": d} for d, t in tasks], "cells": cells}


def _leaderboard(store: TrialStore, name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    from orchestrator.report import build_report, leaderboard_rows

    report = build_report(store, name, seed=int(spec.get("seed", 0) or 0))
    return leaderboard_rows(report)


def _progress(counts: dict[str, int]) -> dict[str, Any]:
    """How far a run that is not finished has got: ended, running (leased), waiting (pending)."""
    ended = counts.get("done", 0) + counts.get("infra_error", 0)
    total = counts.get("total", 0)
    return {
        "ended": ended,
        "running": counts.get("leased", 0),
        "pending": counts.get("pending", 0),
        "total": total,
        "text": f"{ended} of {total} trials ended, {counts.get('leased', 0)} running, "
        f"{counts.get('pending', 0)} waiting",
    }


def run_detail(store: TrialStore, name: str, *, cache: RunCache | None = None) -> dict[str, Any]:
    """The run page: summary, leaderboard, matrix and failures (the trial table is separate).
    With ``cache``, computed once per change of the run in the store."""
    spec = store.experiment_spec(name)
    if spec is None:
        raise unknown_run(store, name)

    def compute() -> dict[str, Any]:
        chosen, duplicates = one_per_key(store.trial_rows(name))
        rows = [(row.spec, row.result, row.state, row.attempts) for row in chosen]
        table = _trial_table(store, name, rows)
        summary = _run_summary(store, name, spec, rows)
        summary["leaderboard"] = _leaderboard(store, name, spec) if rows else []
        summary["matrix"] = matrix(table)
        from orchestrator.report import target_kinds

        summary["failures"], summary["failure_analysis"] = failure_groups(chosen, target_kinds(spec))
        record = store.run_record(name)
        banner = report_trials.banner(record.stop if record else None, summary["counts"])
        # A run with trials under a lease and nothing stopping it is running, not broken: the
        # page shows its progress instead of the red "not finished" banner.
        running = banner is not None and banner["kind"] == "not finished" and summary["counts"]["leased"]
        summary["banner"] = None if running else banner
        summary["progress"] = (
            _progress(summary["counts"]) if summary["status"] in ("running", "incomplete") else None
        )
        summary["excluded_tasks"] = dict(spec.get("excluded_tasks") or {})
        summary["duplicate_trials"] = duplicates
        return summary

    return (cache or _uncached()).get(store, name, "detail", compute)


def find_trial(store: TrialStore, trial_id: str, run: str | None = None) -> tuple[Row, list[str]]:
    """The stored row of a trial (in ``run`` when given), and every run that holds this id.

    The same identity can appear in several runs (same tasks and agents); without ``run``
    the most recently created run wins. Both are indexed lookups by trial id.
    """
    holders = store.runs_holding(trial_id)
    if run is not None and run not in holders:
        raise AtollError(ErrorCode.unknown_trial, f"no trial {trial_id!r} in run {run!r}")
    if not holders:
        raise AtollError(ErrorCode.unknown_trial, f"no trial {trial_id!r} in {shown_url(store)}")
    found = store.trial_row(run or holders[-1], trial_id)
    if found is None:  # archived between the two reads
        raise AtollError(ErrorCode.unknown_trial, f"no trial {trial_id!r} in run {run or holders[-1]!r}")
    return (found.spec, found.result, found.state, found.attempts), list(reversed(holders))


def attempt_result(store: TrialStore, spec: TrialSpec, attempt: int) -> TrialResult | None:
    """The result recorded for attempt ``attempt`` of a trial (the last one recorded for that
    number), or None."""
    found = None
    for row in store.attempt_history(spec.experiment, spec.trial_id):
        if row.get("attempt") == attempt and row.get("result_json"):
            found = TrialResult.model_validate_json(row["result_json"])
    return found


def load_json_artifact(uri: str | None) -> dict[str, Any] | None:
    if not uri:
        return None
    return json.loads(read_artifact(uri))
