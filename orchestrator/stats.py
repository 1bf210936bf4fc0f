"""Metrics of DESIGN §6: Pass@1, Pass@k, Pass^k, mean score, bootstrap CIs, McNemar + BH.

Inputs are per-trial records ``TrialRecord(agent, task_id, run_index, outcome, score, domain)``.
Each (agent, task, run index) contributes at most one outcome to every metric: a repeated
key keeps its last record and the others are counted in ``duplicates_dropped``.
Only graded trials (``pass`` / ``fail``) enter the denominators; ``ungradeable`` and
``infra_error`` trials are excluded and counted, so a report can always state them.

Decision (n < k): Pass@k and Pass^k of a task with fewer graded runs n than k are
undefined (C(n, k) = 0); such tasks are left out of that k's mean, counted in
``excluded_tasks`` and named in ``excluded_task_ids`` for that k.

Decision (mean score): a graded trial's score is the share of *all* its criteria that were
met, so an ungradeable criterion inside a failed trial counts as not met. (A trial whose
only shortfall is ungradeable criteria is ungradeable, not failed, and is excluded.) The
metrics count such failed trials and criteria so that a report can say so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from math import comb
from typing import Any

import numpy as np

from atoll.trial import Outcome
from orchestrator.bootstrap import BOOTSTRAP_RESAMPLES, Interval, bootstrap_mean, bootstrap_series

# Fewer tasks than this behind an interval: the report warns that the CI means little.
MIN_TASKS_FOR_CI = 10

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "Interval",
    "MIN_TASKS_FOR_CI",
    "TrialRecord",
    "benjamini_hochberg",
    "bootstrap_mean",
    "compute_metrics",
    "mcnemar_exact",
    "pairwise_mcnemar",
    "pass_at_k",
    "pass_hat_k",
    "tally",
    "unique_records",
]


@dataclass(frozen=True)
class TrialRecord:
    agent: str
    task_id: str
    run_index: int
    outcome: Outcome
    score: float | None = None
    domain: str = ""
    checks_passed: bool | None = None  # every programmatically checked criterion met
    ungradeable_criteria: int = 0  # criteria of this trial the judge could not decide
    reason: str = ""  # why an ungradeable / infra_error trial has no verdict


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k runs drawn without replacement from n passes."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} graded runs, got {n}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that all of k runs drawn without replacement from n pass (Pass^k)."""
    if n < k:
        raise ValueError(f"pass^{k} needs at least {k} graded runs, got {n}")
    return comb(c, k) / comb(n, k)


def unique_records(records: Iterable[TrialRecord]) -> tuple[list[TrialRecord], int]:
    """One record per (agent, task, run index) — the last one given — and how many were dropped."""
    by_key: dict[tuple[str, str, int], TrialRecord] = {}
    total = 0
    for record in records:
        total += 1
        by_key[(record.agent, record.task_id, record.run_index)] = record
    return list(by_key.values()), total - len(by_key)


@dataclass
class TaskTally:
    graded: int = 0
    passed: int = 0
    scores: list[float] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    reasons: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    checks: list[bool] = field(default_factory=list)
    failed_with_ungradeable: int = 0
    ungradeable_criteria_in_failed: int = 0


def tally(records: Iterable[TrialRecord]) -> dict[str, dict[str, TaskTally]]:
    """agent -> task_id -> counts of graded and passed runs, scores, exclusions (one record
    per (agent, task, run) — duplicates are dropped first)."""
    tallies: dict[str, dict[str, TaskTally]] = defaultdict(lambda: defaultdict(TaskTally))
    for record in unique_records(records)[0]:
        entry = tallies[record.agent][record.task_id]
        if record.checks_passed is not None and record.outcome is not Outcome.infra_error:
            entry.checks.append(record.checks_passed)
        if record.outcome in (Outcome.passed, Outcome.failed):
            entry.graded += 1
            entry.passed += record.outcome is Outcome.passed
            entry.scores.append(
                record.score if record.score is not None else float(record.outcome is Outcome.passed)
            )
            if record.outcome is Outcome.failed and record.ungradeable_criteria:
                entry.failed_with_ungradeable += 1
                entry.ungradeable_criteria_in_failed += record.ungradeable_criteria
        else:
            entry.excluded[record.outcome.value] += 1
            entry.reasons[f"{record.outcome.value}: {record.reason or 'no reason recorded'}"] += 1
    return tallies


def _series(tasks: dict[str, TaskTally], max_k: int) -> dict[str, dict[str, float]]:
    """series name -> {task_id: value} over the tasks that belong to the series."""
    graded = {task_id: t for task_id, t in tasks.items() if t.graded > 0}
    series: dict[str, dict[str, float]] = {
        "pass_at_1": {task_id: t.passed / t.graded for task_id, t in graded.items()},
        "mean_score": {task_id: sum(t.scores) / len(t.scores) for task_id, t in graded.items()},
        # Programmatic checks only, over every finished trial that has checks (ungradeable
        # ones included): a judge-free signal, not a substitute for the full rubric.
        "checks_pass": {task_id: sum(t.checks) / len(t.checks) for task_id, t in tasks.items() if t.checks},
    }
    for k in range(1, max_k + 1):
        eligible = {task_id: t for task_id, t in graded.items() if t.graded >= k}
        series[f"pass_at_k/{k}"] = {
            task_id: pass_at_k(t.graded, t.passed, k) for task_id, t in eligible.items()
        }
        series[f"pass_hat_k/{k}"] = {
            task_id: pass_hat_k(t.graded, t.passed, k) for task_id, t in eligible.items()
        }
    return series


def _scope_intervals(
    tallies: dict[str, dict[str, TaskTally]], *, max_k: int, seed: int
) -> dict[str, dict[str, Interval]]:
    """agent -> series -> Interval, every series of the scope bootstrapped over one set of draws."""
    universe = sorted({task_id for tasks in tallies.values() for task_id in tasks})
    position = {task_id: i for i, task_id in enumerate(universe)}
    columns: list[tuple[str, str, dict[str, float]]] = [
        (agent, name, values)
        for agent, tasks in tallies.items()
        for name, values in _series(tasks, max_k).items()
    ]
    matrix = np.zeros((len(universe), len(columns)))
    members = np.zeros((len(universe), len(columns)))
    for column, (_agent, _name, values) in enumerate(columns):
        rows = [position[task_id] for task_id in values]
        matrix[rows, column] = list(values.values())
        members[rows, column] = 1.0
    intervals = bootstrap_series(matrix, members, seed=seed)
    result: dict[str, dict[str, Interval]] = defaultdict(dict)
    for (agent, name, _values), interval in zip(columns, intervals, strict=True):
        result[agent][name] = interval
    return result


def _interval_entry(interval: Interval, undefined_because: str) -> dict:
    """The interval as report JSON: a warning when few tasks back it; when no task does, its
    value and bounds are null and ``undefined`` says why (never NaN: docs/orchestrator.md)."""
    entry: dict[str, Any] = interval.as_dict()
    if interval.tasks == 0:
        entry["undefined"] = {key: undefined_because for key in ("value", "ci_low", "ci_high")}
    elif interval.tasks < MIN_TASKS_FOR_CI:
        entry["warning"] = f"only {interval.tasks} task(s) back this interval; it says little"
    return entry


def agent_metrics(tasks: dict[str, TaskTally], intervals: dict[str, Interval], *, max_k: int) -> dict:
    """Pass@1, Pass@k and Pass^k for k = 1..max_k, and mean score, each with its CI (null
    values and an ``undefined`` reason where no task backs it), and every exclusion with its
    count and reason."""
    graded = [task_id for task_id, t in tasks.items() if t.graded > 0]
    no_graded = f"no graded trial (pass or fail) on any of its {len(tasks)} task(s)"
    ungraded = {
        task_id: dict(sorted(t.reasons.items(), key=lambda kv: -kv[1]))
        for task_id, t in sorted(tasks.items())
        if t.graded == 0
    }
    result: dict = {
        "tasks_total": len(tasks),
        "tasks_graded": len(graded),
        "trials_graded": sum(t.graded for t in tasks.values()),
        "trials_passed": sum(t.passed for t in tasks.values()),
        "excluded_trials": _sum_counts(t.excluded for t in tasks.values()),
        "exclusion_reasons": _sum_counts(t.reasons for t in tasks.values()),
        # Tasks with no graded run are out of every denominator; each with why.
        "tasks_without_graded_runs": ungraded,
        "failed_trials_with_ungradeable_criteria": sum(t.failed_with_ungradeable for t in tasks.values()),
        "ungradeable_criteria_in_failed_trials": sum(
            t.ungradeable_criteria_in_failed for t in tasks.values()
        ),
        "pass_at_1": _interval_entry(intervals["pass_at_1"], no_graded),
        "mean_score": _interval_entry(intervals["mean_score"], no_graded),
        "checks_pass": _interval_entry(
            intervals["checks_pass"], "no finished trial has a criterion with a programmatic check"
        ),
        "pass_at_k": {},
        "pass_hat_k": {},
    }
    most = max((t.graded for t in tasks.values()), default=0)
    for k in range(1, max_k + 1):
        short = sorted(task_id for task_id in graded if tasks[task_id].graded < k)
        extra = {"excluded_tasks": len(short), "excluded_task_ids": short}
        why = no_graded if not graded else f"no task has {k} graded runs (the most any has: {most})"
        result["pass_at_k"][str(k)] = {**_interval_entry(intervals[f"pass_at_k/{k}"], why), **extra}
        result["pass_hat_k"][str(k)] = {**_interval_entry(intervals[f"pass_hat_k/{k}"], why), **extra}
    return result


def _sum_counts(counters: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for counter in counters:
        for reason, count in counter.items():
            total[reason] += count
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))


def mcnemar_exact(a_wins: int, b_wins: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts."""
    discordant = a_wins + b_wins
    if discordant == 0:
        return 1.0
    # The two-sided binomial test at p = 1/2 (scipy.stats.binomtest's value, which
    # tests/orchestrator/test_stats.py checks; computed here in exact integers because
    # importing scipy.stats costs ~0.7 s of CPU on every `atoll run` and report):
    # twice the smaller tail, capped at 1.
    tail = sum(comb(discordant, i) for i in range(min(a_wins, b_wins) + 1))
    return min(1.0, 2 * tail / 2**discordant)


def benjamini_hochberg(p_values: list[float], *, fdr: float = 0.05) -> tuple[list[float], list[bool]]:
    """BH-adjusted q-values and rejections at the given false discovery rate."""
    m = len(p_values)
    if m == 0:
        return [], []
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * m / rank)
        adjusted[index] = running
    return adjusted, [q <= fdr for q in adjusted]


def pairwise_mcnemar(records: list[TrialRecord], agents: list[str]) -> list[dict]:
    """McNemar exact tests on paired (task, run) graded outcomes for every agent pair,
    with Benjamini–Hochberg across all the pairs given (one family per call)."""
    # agents × (task, run) matrix: 1 passed, 0 failed, -1 no graded run (not paired).
    keys: dict[tuple[str, int], int] = {}
    graded = [r for r in unique_records(records)[0] if r.outcome in (Outcome.passed, Outcome.failed)]
    for r in graded:
        keys.setdefault((r.task_id, r.run_index), len(keys))
    row = {agent: i for i, agent in enumerate(agents)}
    outcomes: Any = np.full((len(agents), len(keys)), -1, dtype=np.int8)  # 1 pass, 0 fail, -1 none
    for r in graded:
        if r.agent in row:
            outcomes[row[r.agent], keys[(r.task_id, r.run_index)]] = r.outcome is Outcome.passed
    pairs: list[dict[str, Any]] = []
    for i, first in enumerate(agents):
        for j in range(i + 1, len(agents)):
            a, b = outcomes[i], outcomes[j]
            paired = (a >= 0) & (b >= 0)
            a_wins = int(np.count_nonzero(paired & (a == 1) & (b == 0)))
            b_wins = int(np.count_nonzero(paired & (b == 1) & (a == 0)))
            pairs.append(
                {
                    "a": first,
                    "b": agents[j],
                    "pairs": int(np.count_nonzero(paired)),
                    "a_only": a_wins,
                    "b_only": b_wins,
                    "p_value": mcnemar_exact(a_wins, b_wins),
                }
            )
    q_values, significant = benjamini_hochberg([pair["p_value"] for pair in pairs])
    for pair, q, flag in zip(pairs, q_values, significant, strict=True):
        pair["q_value"] = q
        pair["significant"] = flag
    return pairs


def _scope_metrics(records: list[TrialRecord], *, max_k: int, seed: int) -> dict[str, dict]:
    tallies = tally(records)
    intervals = _scope_intervals(tallies, max_k=max_k, seed=seed)
    return {
        agent: agent_metrics(tasks, intervals[agent], max_k=max_k) for agent, tasks in sorted(tallies.items())
    }


def compute_metrics(records: list[TrialRecord], *, max_k: int, seed: int = 0) -> dict:
    """Everything a report needs: per agent overall and per domain, pairwise tests overall
    and per domain (BH within each family), and how many duplicate records were dropped."""
    records, duplicates = unique_records(records)
    agents = sorted({r.agent for r in records})
    by_domain_records: dict[str, list[TrialRecord]] = defaultdict(list)
    for record in records:
        by_domain_records[record.domain or "(none)"].append(record)
    by_domain, pairwise_by_domain = {}, {}
    for domain in sorted(by_domain_records):
        subset = by_domain_records[domain]
        by_domain[domain] = _scope_metrics(subset, max_k=max_k, seed=seed)
        pairwise_by_domain[domain] = pairwise_mcnemar(subset, sorted({r.agent for r in subset}))
    return {
        "agents": agents,
        "overall": _scope_metrics(records, max_k=max_k, seed=seed),
        "by_domain": by_domain,
        "pairwise": pairwise_mcnemar(records, agents),
        "pairwise_by_domain": pairwise_by_domain,
        "duplicates_dropped": duplicates,
        "bootstrap": {
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": seed,
            "interval": "percentile 95%",
            "min_tasks_for_ci": MIN_TASKS_FOR_CI,
        },
    }
