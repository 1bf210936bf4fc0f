"""Two runs side by side: per-task outcome changes, metric deltas and McNemar's paired test.

Agents are matched by name (an agent in both runs is compared with itself); two runs of one
agent each are compared with each other whatever the names. Trials pair on (task, run index)
when both are graded (pass or fail); the McNemar exact test counts the pairs that only one
side passed, and Benjamini–Hochberg adjusts across the agent pairs compared. Records are the
report's (``orchestrator.report.collect``: one per agent, task and run; finished trials only).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from atoll.errors import AtollError
from atoll.trial import Outcome
from orchestrator.stats import TrialRecord, benjamini_hochberg, mcnemar_exact
from orchestrator.store import TrialStore
from orchestrator.viewer.data import RunCache, run_detail

_GRADED = (Outcome.passed, Outcome.failed)
_METRICS = ("pass_at_1", "mean_score", "checks_pass")


def _records(store: TrialStore, name: str, cache: RunCache) -> list[TrialRecord]:
    from orchestrator.report import collect

    def compute() -> list[TrialRecord]:
        try:
            return collect(store, name)[0]
        except AtollError as exc:
            if exc.code == "unknown_run":  # a run with no trials yet compares as empty
                return []
            raise

    return cache.get(store, name, "records", compute)


def _agent_pairs(agents_a: list[str], agents_b: list[str]) -> list[tuple[str, str]]:
    common = sorted(set(agents_a) & set(agents_b))
    if common:
        return [(agent, agent) for agent in common]
    if len(agents_a) == 1 and len(agents_b) == 1:
        return [(agents_a[0], agents_b[0])]
    return []


def _side(records: list[TrialRecord]) -> dict[str, Any]:
    graded = [r for r in records if r.outcome in _GRADED]
    return {
        "passes": sum(r.outcome is Outcome.passed for r in graded),
        "graded": len(graded),
        "runs": len(records),
        "outcomes": [r.outcome.value for r in sorted(records, key=lambda r: r.run_index)],
    }


def _change(a: dict[str, Any], b: dict[str, Any]) -> str:
    if not a["runs"]:
        return "only in b"
    if not b["runs"]:
        return "only in a"
    if not a["graded"] or not b["graded"]:
        return "not comparable"  # no graded run on one side (ungradeable or infra errors only)
    rate_a, rate_b = a["passes"] / a["graded"], b["passes"] / b["graded"]
    return "better" if rate_b > rate_a else "worse" if rate_b < rate_a else "same"


def _metric_deltas(row_a: dict[str, Any] | None, row_b: dict[str, Any] | None) -> dict[str, Any]:
    deltas: dict[str, Any] = {}
    for key in _METRICS:
        entry_a = (row_a or {}).get(key) or {}
        entry_b = (row_b or {}).get(key) or {}
        value_a = entry_a.get("value") if entry_a.get("tasks") else None
        value_b = entry_b.get("value") if entry_b.get("tasks") else None
        deltas[key] = _with_reasons(
            {
                "a": value_a,
                "b": value_b,
                "delta": None if value_a is None or value_b is None else value_b - value_a,
            },
            a=_undefined_because(row_a, entry_a, "a"),
            b=_undefined_because(row_b, entry_b, "b"),
        )
    cost_a, cost_b = (row_a or {}).get("cost_usd"), (row_b or {}).get("cost_usd")
    known = (row_a or {}).get("cost_known", True) and (row_b or {}).get("cost_known", True)
    deltas["cost_usd"] = _with_reasons(
        {
            "a": cost_a,
            "b": cost_b,
            "delta": cost_b - cost_a if known and cost_a is not None and cost_b is not None else None,
            # As the leaderboard writes them ("$0.0240", "unknown", "$0.04 + unknown (…)").
            "a_text": (row_a or {}).get("cost"),
            "b_text": (row_b or {}).get("cost"),
        },
        a="the agent is not in run a",
        b="the agent is not in run b",
        delta="some tokens have no price (cost unknown)",
    )
    return deltas


def _undefined_because(row: dict[str, Any] | None, entry: dict[str, Any], side: str) -> str:
    if row is None:
        return f"the agent is not in run {side}"
    return (entry.get("undefined") or {}).get("value", f"undefined in run {side}")


def _with_reasons(values: dict[str, Any], **reasons: str) -> dict[str, Any]:
    """``values`` with ``undefined``: {field: reason} for each of a, b and delta that is null
    (docs/orchestrator.md, "Strict JSON")."""
    why = {side: reasons[side] for side in ("a", "b") if values[side] is None}
    if values["delta"] is None:
        why["delta"] = "; ".join(f"{side}: {reason}" for side, reason in why.items()) or reasons["delta"]
    return {**values, "undefined": why} if why else values


def _compare_agents(
    agent_a: str,
    agent_b: str,
    records_a: list[TrialRecord],
    records_b: list[TrialRecord],
    row_a: dict[str, Any] | None,
    row_b: dict[str, Any] | None,
) -> dict[str, Any]:
    by_task_a: dict[str, list[TrialRecord]] = defaultdict(list)
    by_task_b: dict[str, list[TrialRecord]] = defaultdict(list)
    for record in records_a:
        if record.agent == agent_a:
            by_task_a[record.task_id].append(record)
    for record in records_b:
        if record.agent == agent_b:
            by_task_b[record.task_id].append(record)
    graded_a = {
        (r.task_id, r.run_index): r.outcome is Outcome.passed
        for records in by_task_a.values()
        for r in records
        if r.outcome in _GRADED
    }
    graded_b = {
        (r.task_id, r.run_index): r.outcome is Outcome.passed
        for records in by_task_b.values()
        for r in records
        if r.outcome in _GRADED
    }
    paired = sorted(set(graded_a) & set(graded_b))
    a_only = sum(graded_a[key] and not graded_b[key] for key in paired)
    b_only = sum(graded_b[key] and not graded_a[key] for key in paired)
    tasks = []
    for task_id in sorted(set(by_task_a) | set(by_task_b)):
        side_a, side_b = _side(by_task_a.get(task_id, [])), _side(by_task_b.get(task_id, []))
        domain = next((r.domain for r in by_task_a.get(task_id, []) + by_task_b.get(task_id, [])), "")
        tasks.append(
            {
                "task_id": task_id,
                "domain": domain,
                "a": side_a,
                "b": side_b,
                "change": _change(side_a, side_b),
            }
        )
    changes: dict[str, int] = defaultdict(int)
    for task in tasks:
        changes[task["change"]] += 1
    return {
        "agent_a": agent_a,
        "agent_b": agent_b,
        "metrics": _metric_deltas(row_a, row_b),
        "mcnemar": {
            "pairs": len(paired),
            "a_only": a_only,
            "b_only": b_only,
            "p_value": mcnemar_exact(a_only, b_only),
        },
        "changes": dict(changes),
        "tasks": tasks,
    }


def compare_runs(store: TrialStore, a: str, b: str, *, cache: RunCache | None = None) -> dict[str, Any]:
    """Run ``b`` against run ``a``: for each agent pair, metric deltas (b − a), the McNemar
    exact test on paired (task, run) outcomes with a Benjamini–Hochberg q-value, and each
    task's outcome change (``better``, ``worse``, ``same``, ``only in a``, ``only in b``,
    ``not comparable``). AtollError("unknown_run") when either run is not in the store."""
    cache = cache or RunCache()
    detail_a, detail_b = run_detail(store, a, cache=cache), run_detail(store, b, cache=cache)
    records_a, records_b = _records(store, a, cache), _records(store, b, cache)
    agents_a = [agent["name"] for agent in detail_a["spec"]["agents"]] or sorted({r.agent for r in records_a})
    agents_b = [agent["name"] for agent in detail_b["spec"]["agents"]] or sorted({r.agent for r in records_b})
    board_a = {row["agent"]: row for row in detail_a["leaderboard"]}
    board_b = {row["agent"]: row for row in detail_b["leaderboard"]}
    pairs = [
        _compare_agents(x, y, records_a, records_b, board_a.get(x), board_b.get(y))
        for x, y in _agent_pairs(agents_a, agents_b)
    ]
    q_values, significant = benjamini_hochberg([pair["mcnemar"]["p_value"] for pair in pairs])
    for pair, q_value, flag in zip(pairs, q_values, significant, strict=True):
        pair["mcnemar"].update(q_value=q_value, significant=flag)
    keep = (
        "name",
        "status",
        "counts",
        "outcomes",
        "cost_usd",
        "started_at",
        "ended_at",
        "fingerprint",
        "spec",
    )
    notes = []
    if not pairs:
        notes.append(
            f"no agent to compare: {a} has {', '.join(agents_a) or 'none'}, "
            f"{b} has {', '.join(agents_b) or 'none'} (agents are matched by name)"
        )
    return {
        "a": {key: detail_a[key] for key in keep},
        "b": {key: detail_b[key] for key in keep},
        "pairs": pairs,
        "notes": notes,
    }


__all__ = ["compare_runs"]
