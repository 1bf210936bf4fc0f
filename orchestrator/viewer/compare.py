"""Two runs side by side: per-task outcome changes, metric deltas and McNemar's paired test.

Agents are matched by name (an agent in both runs is compared with itself); two runs of one
agent each are compared with each other whatever the names. Trials pair on (task, run index)
when both are graded (pass or fail); the McNemar exact test counts the pairs that only one
side passed, and Benjamini–Hochberg adjusts across the agent pairs compared. Records are the
report's (``orchestrator.report.collect``: one per agent, task and run; finished trials only);
each task's side also lists its trials (finished or not, from the run's trial table) so a
page can link both sides, and a task whose trials have not ended on one side is ``pending in
a`` / ``pending in b``, not ``only in`` the other. A run that is not finished is flagged.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from atoll.errors import AtollError
from atoll.trial import Outcome
from orchestrator.stats import TrialRecord, benjamini_hochberg, mcnemar_exact
from orchestrator.store import TrialStore
from orchestrator.viewer.data import RunCache, run_detail, run_trials

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


def _side(records: list[TrialRecord], table_rows: list[dict[str, Any]]) -> dict[str, Any]:
    graded = [r for r in records if r.outcome in _GRADED]
    return {
        "passes": sum(r.outcome is Outcome.passed for r in graded),
        "graded": len(graded),
        "runs": len(records),
        "outcomes": [r.outcome.value for r in sorted(records, key=lambda r: r.run_index)],
        "unfinished": sum(row["outcome"] is None for row in table_rows),
        "trials": [
            {
                "trial_id": row["trial_id"],
                "run_index": row["run_index"],
                "outcome": row["outcome"],
                "state": row["state"],
            }
            for row in sorted(table_rows, key=lambda row: row["run_index"])
        ],
    }


def _change(a: dict[str, Any], b: dict[str, Any]) -> str:
    if not a["runs"]:
        return "pending in a" if a["unfinished"] else "only in b"
    if not b["runs"]:
        return "pending in b" if b["unfinished"] else "only in a"
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
    table_a: list[dict[str, Any]],
    table_b: list[dict[str, Any]],
) -> dict[str, Any]:
    trials_a: dict[str, list[dict[str, Any]]] = defaultdict(list)
    trials_b: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in table_a:
        if row["agent"] == agent_a:
            trials_a[row["task_id"]].append(row)
    for row in table_b:
        if row["agent"] == agent_b:
            trials_b[row["task_id"]].append(row)
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
    tasks: list[dict[str, Any]] = []
    for task_id in sorted(set(by_task_a) | set(by_task_b) | set(trials_a) | set(trials_b)):
        side_a = _side(by_task_a.get(task_id, []), trials_a.get(task_id, []))
        side_b = _side(by_task_b.get(task_id, []), trials_b.get(task_id, []))
        domain = next(
            (r.domain for r in by_task_a.get(task_id, []) + by_task_b.get(task_id, [])), ""
        ) or next((row["domain"] for row in trials_a.get(task_id, []) + trials_b.get(task_id, [])), "")
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
    ``pending in a``, ``pending in b``, ``not comparable``) with each side's trials.
    ``unfinished`` names the runs that are not finished (each also in ``notes``).
    AtollError("unknown_run") when either run is not in the store."""
    cache = cache or RunCache()
    detail_a, detail_b = run_detail(store, a, cache=cache), run_detail(store, b, cache=cache)
    records_a, records_b = _records(store, a, cache), _records(store, b, cache)
    agents_a = [agent["name"] for agent in detail_a["spec"]["agents"]] or sorted({r.agent for r in records_a})
    agents_b = [agent["name"] for agent in detail_b["spec"]["agents"]] or sorted({r.agent for r in records_b})
    board_a = {row["agent"]: row for row in detail_a["leaderboard"]}
    board_b = {row["agent"]: row for row in detail_b["leaderboard"]}
    table_a, table_b = run_trials(store, a, cache=cache), run_trials(store, b, cache=cache)
    pairs = [
        _compare_agents(x, y, records_a, records_b, board_a.get(x), board_b.get(y), table_a, table_b)
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
        "progress",
    )
    notes = []
    unfinished = [detail["name"] for detail in (detail_a, detail_b) if detail["progress"] is not None]
    for side, detail in (("a", detail_a), ("b", detail_b)):
        if detail["progress"] is not None:
            notes.append(
                f"run {side} ({detail['name']}) is not finished ({detail['status']}: "
                f"{detail['progress']['text']}): its numbers and changes can still move"
            )
    if not pairs:
        notes.append(
            f"no agent to compare: {a} has {', '.join(agents_a) or 'none'}, "
            f"{b} has {', '.join(agents_b) or 'none'} (agents are matched by name)"
        )
    return {
        "a": {key: detail_a[key] for key in keep},
        "b": {key: detail_b[key] for key in keep},
        "pairs": pairs,
        "unfinished": unfinished,
        "notes": notes,
    }


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _delta_text(value: float | None, percent: bool) -> str:
    if value is None:
        return "—"
    sign = "+" if value > 0 else "−" if value < 0 else "±"
    return f"{sign}{100 * abs(value):.1f} pp" if percent else f"{sign}${abs(value):.4f}"


def _p_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.1e}" if value < 0.001 else f"{value:.3f}"


_SHOWN_ORDER = ("worse", "better", "not comparable", "only in a", "only in b", "pending in a", "pending in b")


def compare_lines(result: dict[str, Any]) -> list[str]:
    """:func:`compare_runs`'s answer as terminal lines (``atoll compare``): the two runs, the
    notes (an unfinished run first), then per agent pair the metrics a → b with their deltas,
    the McNemar test and every task whose outcome is not ``same``."""
    a, b = result["a"], result["b"]
    lines = []
    for side, run in (("a", a), ("b", b)):
        outcomes = ", ".join(f"{n} {k}" for k, n in run["outcomes"].items()) or "no outcomes"
        lines.append(
            f"{side}: {run['name']} · {run['status']} · {run['counts']['done']}/{run['counts']['total']} done · {outcomes}"
        )
    lines += [f"note: {note}" for note in result["notes"]]
    for pair in result["pairs"]:
        label = (
            pair["agent_a"]
            if pair["agent_a"] == pair["agent_b"]
            else f"{pair['agent_a']} → {pair['agent_b']}"
        )
        lines += ["", f"agent {label}"]
        for key, name in (
            ("pass_at_1", "Pass@1"),
            ("mean_score", "mean score"),
            ("checks_pass", "checks pass"),
        ):
            metric = pair["metrics"][key]
            lines.append(
                f"  {name:<12} {_percent(metric['a']):>7} → {_percent(metric['b']):>7}  ({_delta_text(metric['delta'], True)})"
            )
        cost = pair["metrics"]["cost_usd"]
        lines.append(
            f"  {'cost':<12} {cost.get('a_text') or '—':>7} → {cost.get('b_text') or '—':>7}  "
            f"({_delta_text(cost['delta'], False)})"
        )
        test = pair["mcnemar"]
        verdict = (
            "no paired graded runs"
            if not test["pairs"]
            else ("significant" if test["significant"] else "not significant") + " at FDR 5%"
        )
        lines.append(
            f"  McNemar exact test on {test['pairs']} paired (task, run) outcomes: {test['a_only']} passed "
            f"only in a, {test['b_only']} only in b; p = {_p_text(test['p_value'])}, "
            f"q = {_p_text(test['q_value'])} — {verdict}"
        )
        lines.append(
            "  tasks: " + (", ".join(f"{n} {k}" for k, n in sorted(pair["changes"].items())) or "none")
        )
        changed = sorted(
            (task for task in pair["tasks"] if task["change"] != "same"),
            key=lambda task: (_SHOWN_ORDER.index(task["change"]), task["task_id"]),
        )
        for task in changed:
            sides = "  ".join(
                f"{side} {task[side]['passes']}/{task[side]['graded']} ({', '.join(task[side]['outcomes']) or '—'})"
                for side in ("a", "b")
            )
            lines.append(f"  {task['change']:<15} {task['task_id']}  {sides}")
    return lines


__all__ = ["compare_lines", "compare_runs"]
