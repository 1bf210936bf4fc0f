"""Metrics of DESIGN §6: Pass@1, Pass@k, Pass^k, mean score, bootstrap CIs, McNemar + BH.

Inputs are per-trial records ``TrialRecord(agent, task_id, run_index, outcome, score, domain)``.
Only graded trials (``pass`` / ``fail``) enter the denominators; ``ungradeable`` and
``infra_error`` trials are excluded and counted, so a report can always state them.

Decision (n < k): Pass@k and Pass^k of a task with fewer graded runs n than k are
undefined (C(n, k) = 0); such tasks are left out of that k's mean and counted in
``excluded_tasks`` for that k.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from math import comb

import numpy as np
from scipy.stats import binomtest

from atoll.trial import Outcome

BOOTSTRAP_RESAMPLES = 10_000


@dataclass(frozen=True)
class TrialRecord:
    agent: str
    task_id: str
    run_index: int
    outcome: Outcome
    score: float | None = None
    domain: str = ""
    checks_passed: bool | None = None  # every programmatically checked criterion met


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


@dataclass
class Interval:
    value: float
    low: float
    high: float
    tasks: int  # tasks in the denominator

    def as_dict(self) -> dict[str, float | int]:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high, "tasks": self.tasks}


@lru_cache(maxsize=32)
def _resample_weights(tasks: int, seed: int, resamples: int) -> np.ndarray:
    """How often each task is drawn in each resample (resamples × tasks); shared by every
    metric over the same number of tasks, so a report draws its resamples once."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, tasks, size=(resamples, tasks))
    weights = np.zeros((resamples, tasks), dtype=np.float64)
    np.add.at(weights, (np.arange(resamples)[:, None], picks), 1.0)
    weights.setflags(write=False)
    return weights


def bootstrap_mean(values: Iterable[float], *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> Interval:
    """Mean of per-task values with a task-level percentile bootstrap 95% interval."""
    array = np.asarray(list(values), dtype=float)
    if array.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    means = _resample_weights(array.size, seed, resamples) @ array / array.size
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(array.mean()), float(low), float(high), int(array.size))


def bootstrap_means(columns: dict[str, list[float]], *, seed: int,
                    resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Interval]:
    """``bootstrap_mean`` of several per-task series over the same tasks, with the same
    resamples, in one matrix product (a report has dozens of such series)."""
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"series over different numbers of tasks: {sorted(lengths)}")
    tasks = lengths.pop() if lengths else 0
    if tasks == 0:
        return {name: Interval(float("nan"), float("nan"), float("nan"), 0) for name in columns}
    matrix = np.asarray(list(columns.values()), dtype=float).T  # tasks × series
    means = _resample_weights(tasks, seed, resamples) @ matrix / tasks  # resamples × series
    lows, highs = np.percentile(means, [2.5, 97.5], axis=0)
    return {
        name: Interval(float(matrix[:, i].mean()), float(lows[i]), float(highs[i]), tasks)
        for i, name in enumerate(columns)
    }


@dataclass
class TaskTally:
    graded: int = 0
    passed: int = 0
    scores: list[float] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    checks: list[bool] = field(default_factory=list)


def tally(records: Iterable[TrialRecord]) -> dict[str, dict[str, TaskTally]]:
    """agent -> task_id -> counts of graded and passed runs, scores, exclusions."""
    tallies: dict[str, dict[str, TaskTally]] = defaultdict(lambda: defaultdict(TaskTally))
    for record in records:
        entry = tallies[record.agent][record.task_id]
        if record.checks_passed is not None and record.outcome is not Outcome.infra_error:
            entry.checks.append(record.checks_passed)
        if record.outcome in (Outcome.passed, Outcome.failed):
            entry.graded += 1
            entry.passed += record.outcome is Outcome.passed
            entry.scores.append(record.score if record.score is not None else float(record.outcome is Outcome.passed))
        else:
            entry.excluded[record.outcome.value] += 1
    return tallies


def agent_metrics(tasks: dict[str, TaskTally], *, max_k: int, seed: int) -> dict:
    """Pass@1, Pass@k and Pass^k for k = 1..max_k, and mean score, each with its CI."""
    graded = [t for t in tasks.values() if t.graded > 0]
    # Series over the same tasks share one bootstrap; Pass@k/Pass^k use the tasks with >= k runs.
    groups: dict[int, dict[str, list[float]]] = defaultdict(dict)
    groups[1]["pass_at_1"] = [t.passed / t.graded for t in graded]
    groups[1]["mean_score"] = [sum(t.scores) / len(t.scores) for t in graded]
    for k in range(1, max_k + 1):
        eligible = [t for t in graded if t.graded >= k]
        groups[k][f"pass_at_k/{k}"] = [pass_at_k(t.graded, t.passed, k) for t in eligible]
        groups[k][f"pass_hat_k/{k}"] = [pass_hat_k(t.graded, t.passed, k) for t in eligible]
    intervals: dict[str, Interval] = {}
    for series in groups.values():
        intervals.update(bootstrap_means(series, seed=seed))
    checks = [sum(t.checks) / len(t.checks) for t in tasks.values() if t.checks]
    result: dict = {
        "tasks_total": len(tasks),
        "tasks_graded": len(graded),
        "trials_graded": sum(t.graded for t in tasks.values()),
        "trials_passed": sum(t.passed for t in tasks.values()),
        "excluded_trials": _sum_exclusions(tasks.values()),
        "pass_at_1": intervals["pass_at_1"].as_dict(),
        "mean_score": intervals["mean_score"].as_dict(),
        "pass_at_k": {},
        "pass_hat_k": {},
        # Programmatic checks only, over every finished trial that has checks (ungradeable
        # ones included): a judge-free signal, not a substitute for the full rubric.
        "checks_pass": bootstrap_mean(checks, seed=seed).as_dict(),
    }
    for k in range(1, max_k + 1):
        excluded = len(graded) - intervals[f"pass_at_k/{k}"].tasks
        result["pass_at_k"][str(k)] = {**intervals[f"pass_at_k/{k}"].as_dict(), "excluded_tasks": excluded}
        result["pass_hat_k"][str(k)] = {**intervals[f"pass_hat_k/{k}"].as_dict(), "excluded_tasks": excluded}
    return result


def _sum_exclusions(tallies: Iterable[TaskTally]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for entry in tallies:
        for reason, count in entry.excluded.items():
            total[reason] += count
    return dict(sorted(total.items()))


def mcnemar_exact(a_wins: int, b_wins: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts."""
    discordant = a_wins + b_wins
    if discordant == 0:
        return 1.0
    return float(binomtest(min(a_wins, b_wins), discordant, 0.5).pvalue)


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
    with Benjamini–Hochberg across all pairs at FDR 5%."""
    outcome: dict[tuple[str, str, int], bool] = {
        (r.agent, r.task_id, r.run_index): r.outcome is Outcome.passed
        for r in records
        if r.outcome in (Outcome.passed, Outcome.failed)
    }
    pairs = []
    for i, first in enumerate(agents):
        for second in agents[i + 1 :]:
            keys = {(t, run) for (a, t, run) in outcome if a == first} & {
                (t, run) for (a, t, run) in outcome if a == second
            }
            a_wins = sum(outcome[(first, *key)] and not outcome[(second, *key)] for key in keys)
            b_wins = sum(outcome[(second, *key)] and not outcome[(first, *key)] for key in keys)
            pairs.append(
                {
                    "a": first,
                    "b": second,
                    "pairs": len(keys),
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


def compute_metrics(records: list[TrialRecord], *, max_k: int, seed: int = 0) -> dict:
    """Everything a report needs: per agent overall and per domain, plus pairwise tests."""
    agents = sorted({r.agent for r in records})
    overall = {agent: agent_metrics(tasks, max_k=max_k, seed=seed) for agent, tasks in tally(records).items()}
    by_domain: dict[str, dict] = {}
    for domain in sorted({r.domain for r in records}):
        subset = [r for r in records if r.domain == domain]
        by_domain[domain or "(none)"] = {
            agent: agent_metrics(tasks, max_k=max_k, seed=seed) for agent, tasks in tally(subset).items()
        }
    return {
        "agents": agents,
        "overall": overall,
        "by_domain": by_domain,
        "pairwise": pairwise_mcnemar(records, agents),
        "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "seed": seed, "interval": "percentile 95%"},
    }
