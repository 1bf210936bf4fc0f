"""Reports of a run: report.json (everything), report.md (the paper-style leaderboard) and a
self-contained report.html with plots. Denominators and exclusions are always stated."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from atoll.costs import tokens_text
from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import dumps_strict
from atoll.trial import Outcome, TrialResult, TrialSpec, short_reason
from orchestrator.judging import judge_markdown, judge_summary, judged_elsewhere
from orchestrator.report_trials import (
    DISAGREEMENTS_LISTED,
    GROUP_LISTED,
    agent_headlines,
    banner,
    check_disagreements,
    cost_summary,
    cost_words,
    costs_known,
    failure_analysis,
    failure_groups,
    matrix,
    outcome_line,
    relative_links,
    trial_rows,
)
from orchestrator.stats import MIN_TASKS_FOR_CI, TrialRecord, compute_metrics
from orchestrator.store import TrialRow, TrialStore
from orchestrator.store_runs import is_finished, one_per_key

# The outcome count of finished trials graded by another judge than the run's (left out).
OTHER_JUDGE = "graded by another judge"


def collect(store: TrialStore, experiment: str) -> tuple[list[TrialRecord], dict[str, Any], dict[str, Any]]:
    """Trial records for the statistics, per-agent usage and outcome counts, and what was
    left out before any metric: trials recorded twice for one (agent, task, run) (stores
    written before runs had fingerprints), unfinished trials, trials graded by another judge
    than the run's (``orchestrator.judging``), and archived configurations."""
    chosen, duplicates, archives = _chosen_rows(store, experiment)
    return _collect(chosen, duplicates, archives, judged_elsewhere(store.run_record(experiment), experiment))


def _chosen_rows(store: TrialStore, experiment: str) -> tuple[list[TrialRow], int, list[dict[str, Any]]]:
    """One row per (agent, task, run): a finished one before an unfinished one, then the
    latest; how many repeats were left out; the run's archives."""
    rows = store.trial_rows(experiment)
    archives = store.archives(experiment)
    if not rows and not archives:
        raise AtollError(
            ErrorCode.unknown_run, f"no trials recorded for run {experiment!r} in {store.display_url}"
        )
    chosen, duplicates = one_per_key(rows)
    return chosen, duplicates, archives


def _collect(
    chosen: list[TrialRow],
    duplicates: int,
    archives: list[dict[str, Any]],
    judged_elsewhere: Callable[[TrialResult], str | None] = lambda _result: None,
) -> tuple[list[TrialRecord], dict[str, Any], dict[str, Any]]:
    records: list[TrialRecord] = []
    usage: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "model": "",
            "trials": 0,
            "finished": 0,
            "steps": 0,
            "tool_calls": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "reasoning_tokens": 0,
            "cached_tokens": 0,
            "cache_write_tokens": 0,
            "agent_cost_usd": 0.0,
            "judge_cost_usd": 0.0,
            "coworker_cost_usd": 0.0,
            "judge_prompt_tokens": 0,
            "judge_completion_tokens": 0,
            "judge_reasoning_tokens": 0,
            "judge_cached_tokens": 0,
            "duration_s": 0.0,
            "unpriced_trials": 0,
            "coworker_unpriced_trials": 0,
            "judge_unpriced_trials": 0,
            "priced_trials": 0,
            "priced_cost_usd": 0.0,
            "outcomes": defaultdict(int),
            "exclusion_reasons": defaultdict(int),
            "check_disagreements": None,
        }
    )
    for row in chosen:
        spec, result = row.spec, row.result
        entry = usage[spec.agent_name]
        entry["model"] = spec.model
        entry["trials"] += 1
        if result is None or not is_finished(row):
            entry["outcomes"]["unfinished"] += 1
            entry["exclusion_reasons"][f"unfinished: {row.state}"] += 1
            continue
        if (elsewhere := judged_elsewhere(result)) is not None:
            # Another judge's verdicts are never counted as the run's judge's.
            entry["outcomes"][OTHER_JUDGE] += 1
            entry["exclusion_reasons"][elsewhere] += 1
            continue
        entry["finished"] += 1
        entry["outcomes"][result.outcome.value] += 1
        if result.outcome in (Outcome.ungradeable, Outcome.infra_error):
            entry["exclusion_reasons"][f"{result.outcome.value}: {_reason(result.error)}"] += 1
        for key in (
            "steps",
            "tool_calls",
            "prompt_tokens",
            "completion_tokens",
            "reasoning_tokens",
            "cached_tokens",
            "cache_write_tokens",
            "agent_cost_usd",
            "judge_cost_usd",
            "coworker_cost_usd",
            "judge_prompt_tokens",
            "judge_completion_tokens",
            "judge_reasoning_tokens",
            "judge_cached_tokens",
            "duration_s",
        ):
            entry[key] += getattr(result, key)
        if result.check_disagreements is not None:  # None: no check, or recorded before atoll counted them
            entry["check_disagreements"] = (entry["check_disagreements"] or 0) + result.check_disagreements
        agent_priced, personas_priced, judge_priced = costs_known(result)
        entry["unpriced_trials"] += not agent_priced
        entry["coworker_unpriced_trials"] += not personas_priced
        entry["judge_unpriced_trials"] += not judge_priced
        if agent_priced and personas_priced and judge_priced:
            entry["priced_trials"] += 1
            entry["priced_cost_usd"] += result.cost_usd
        records.append(_record(spec, result))
    for entry in usage.values():
        entry["outcomes"] = dict(sorted(entry["outcomes"].items()))
        entry["exclusion_reasons"] = dict(sorted(entry["exclusion_reasons"].items(), key=lambda kv: -kv[1]))
        finished = max(entry["finished"], 1)
        entry["mean_steps"] = entry["steps"] / finished
        entry["mean_tool_calls"] = entry["tool_calls"] / finished
        # Tokens without a price (a model litellm cannot price): the report says "unknown", not $0;
        # the mean is over the priced trials only (None when none was priced).
        # The same for the personas' and the judge's tokens; the mean is over trials whose costs
        # are all known.
        entry["agent_cost_known"] = entry["unpriced_trials"] == 0
        entry["judge_cost_known"] = entry["judge_unpriced_trials"] == 0
        priced = entry.pop("priced_trials")
        entry["mean_cost_usd"] = entry.pop("priced_cost_usd") / priced if priced else None
        entry["cost_unpriced_trials"] = entry["finished"] - priced
    left_out = {
        "duplicate_trials": duplicates,
        "archives": archives,
        "archived_trials": sum(archive["trials"] for archive in archives),
    }
    return records, dict(usage), left_out


def _reason(error: str | None) -> str:
    """A trial's exclusion reason without its per-criterion prefix, short enough to group."""
    return short_reason(error)


def _record(spec: TrialSpec, result: TrialResult) -> TrialRecord:
    excluded = result.outcome in (Outcome.ungradeable, Outcome.infra_error)
    return TrialRecord(
        agent=spec.agent_name,
        task_id=spec.task_id,
        run_index=spec.run_index,
        outcome=result.outcome,
        score=result.score,
        domain=spec.domain,
        checks_passed=(result.checks_met == result.checks_total) if result.checks_total else None,
        ungradeable_criteria=result.criteria_ungradeable or 0,
        reason=_reason(result.error) if excluded else "",
    )


def _warnings(metrics: dict[str, Any], left_out: dict[str, Any], usage: dict[str, Any]) -> list[str]:
    warnings = []
    for agent, entry in metrics["overall"].items():
        tasks = entry["pass_at_1"]["tasks"]
        if tasks < MIN_TASKS_FOR_CI:
            warnings.append(
                f"{agent}: only {tasks} task(s) back its intervals (fewer than {MIN_TASKS_FOR_CI}); "
                "the CIs say little"
            )
        if entry["tasks_without_graded_runs"]:
            warnings.append(
                f"{agent}: {len(entry['tasks_without_graded_runs'])} of {entry['tasks_total']} tasks "
                "have no graded run and are in no denominator (see Exclusions)"
            )
    for agent, entry in usage.items():
        unfinished = entry["outcomes"].get("unfinished", 0)
        if unfinished:
            warnings.append(f"{agent}: {unfinished} of {entry['trials']} trials are not finished yet")
        if elsewhere := entry["outcomes"].get(OTHER_JUDGE, 0):
            warnings.append(
                f"{agent}: {elsewhere} of {entry['trials']} trials were graded by another judge than the "
                "run's and are left out (see Judge)"
            )
    if left_out["duplicate_trials"]:
        warnings.append(
            f"{left_out['duplicate_trials']} trial(s) repeat an (agent, task, run) already counted "
            "(recorded under an earlier configuration) and are left out"
        )
    if left_out["archived_trials"]:
        warnings.append(
            f"{left_out['archived_trials']} trial(s) of earlier configurations are archived under this "
            "run and left out (see Left out of this report)"
        )
    return warnings


def task_names(spec: dict[str, Any]) -> dict[str, str]:
    """Task id -> task name: as `atoll run` stored them with the run; for runs stored before
    that, from the benchmark when it is a local folder that can be read now (a report never
    downloads a benchmark); else {}."""
    if spec.get("task_names"):
        return dict(spec["task_names"])
    benchmark = spec.get("benchmark")
    if not benchmark or str(benchmark).startswith("hf://"):
        return {}
    from atoll.loader import load_benchmark

    try:
        return {task.task_id: task.task_name for task in load_benchmark(benchmark).tasks if task.task_name}
    except (AtollError, OSError, ValueError):
        return {}


def target_kinds(spec: dict[str, Any]) -> dict[str, str]:
    """Verifier id -> the kind of its criterion's grading target (``final_answer``,
    ``file_type``, ``file``, ``app_data``, ``all``; ``atoll.targets``): as `atoll run` stored
    them with the run; for runs stored before that, from the benchmark when it is a local
    folder that can be read now (read once per process); else {}."""
    if spec.get("target_kinds"):
        return dict(spec["target_kinds"])
    benchmark = spec.get("benchmark")
    if not benchmark or str(benchmark).startswith("hf://"):
        return {}
    return dict(_local_target_kinds(str(benchmark)))


@lru_cache(maxsize=8)
def _local_target_kinds(benchmark: str) -> tuple[tuple[str, str], ...]:
    from atoll.loader import load_benchmark

    try:
        tasks = load_benchmark(benchmark).tasks
    except (AtollError, OSError, ValueError):
        return ()
    return tuple(
        (criterion.verifier_id, task.grading_target_for(criterion).kind)
        for task in tasks
        for criterion in task.rubric
    )


def build_report(
    store: TrialStore,
    experiment: str,
    *,
    seed: int = 0,
    viewer_url: str | None = None,
    names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Everything a report shows, as JSON. ``viewer_url`` (an `atoll view` address) makes each
    trial link to its viewer page; ``names`` maps task ids to task names for the trial rows."""
    chosen, duplicates, archives = _chosen_rows(store, experiment)
    record = store.run_record(experiment)
    elsewhere = judged_elsewhere(record, experiment)
    records, usage, left_out = _collect(chosen, duplicates, archives, elsewhere)
    spec = record.spec if record else {}
    runs = int(spec.get("runs", 1) or 1)
    metrics = compute_metrics(records, max_k=runs, seed=seed)
    counts = store.counts(experiment)
    failed_with = sum(m["failed_trials_with_ungradeable_criteria"] for m in metrics["overall"].values())
    criteria_in = sum(m["ungradeable_criteria_in_failed_trials"] for m in metrics["overall"].values())
    rows = trial_rows(chosen, task_names=names or {}, viewer_url=viewer_url, judged_elsewhere=elsewhere)
    report = {
        "experiment": experiment,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "benchmark": spec.get("benchmark"),
        "fingerprint": record.fingerprint if record else None,
        "judge": judge_summary(store, record, (row.result for row in chosen if is_finished(row)), experiment),
        "runs_per_task": runs,
        "trials": counts,
        "outcome": "",
        "banner": banner(record.stop if record else None, counts),
        "cost": cost_summary(rows),
        "headline": agent_headlines(rows),
        "viewer_url": viewer_url,
        "failures": failure_groups(rows),
        "failure_analysis": failure_analysis(rows, target_kinds=target_kinds(spec)),
        "check_disagreements": check_disagreements(rows),
        "matrix": matrix(rows),
        "trial_rows": [row.model_dump(mode="json") for row in rows],
        "agents": usage,
        "metrics": metrics,
        "excluded_tasks": dict(spec.get("excluded_tasks") or {}),
        "left_out": left_out,
        "warnings": _warnings(metrics, left_out, usage),
        "notes": [
            "Pass@1, Pass@k, Pass^k and mean score are means over tasks; denominators count graded "
            "trials only (outcome pass or fail), one per (agent, task, run).",
            "Ungradeable, infra_error and unfinished trials are excluded from the denominators and counted per "
            "agent with their reasons; a task with no graded run is in no denominator and is listed.",
            "Pass@k and Pass^k leave out tasks with fewer than k graded runs (listed per k).",
            "Mean score: a graded trial's score is the share of all its criteria that were met, so an ungradeable "
            "criterion inside a failed trial counts as not met "
            f"(here {criteria_in} criteria in {failed_with} failed trials); a trial whose only shortfall is "
            "ungradeable criteria is ungradeable, not failed, and excluded.",
            "95% intervals: task-level percentile bootstrap, "
            f"{metrics['bootstrap']['resamples']} resamples, seed {seed}; a metric over part of the tasks "
            "(an agent's graded tasks, tasks with at least k graded runs) averages the drawn tasks of that part. "
            f"Intervals over fewer than {MIN_TASKS_FOR_CI} tasks carry a warning.",
            "Pairwise: McNemar exact test on paired (task, run) outcomes, Benjamini-Hochberg at FDR 5% across "
            "the pairs overall, and separately across the pairs within each domain.",
            "Judge: the verdicts counted are those of the run's judge (model, parameters, samples and quorum, "
            "prompt and grader versions; see Judge); a trial graded by another judge (a regrade not finished) "
            "is left out and counted under its reason, and results recorded before atoll recorded judges "
            "count as before, as 'judge not recorded'.",
            "Checks pass: share of finished trials (ungradeable ones included) in which every criterion "
            "that carries a programmatic check passed it, by the checks' own verdicts alone: a judge that "
            "also decided such a criterion never changes it; criteria only a judge can decide are not in it.",
            "Disagreements: criteria whose check passed and the judge, asked next, said otherwise (the "
            "judge's verdict counts in pass rates and scores); counted per agent and listed under "
            "Check/judge disagreements.",
            'Cost: "unknown" where a model spent tokens without a price (litellm has none for it and none was '
            'configured); sums over priced trials say "+ unknown" when some were not priced.',
        ],
    }
    report["outcome"] = outcome_line(report)
    return report


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _total_cost(usage: dict[str, Any]) -> float:
    """An agent's trials' cost in model calls: the agent's, the personas' and the judge's."""
    return usage["agent_cost_usd"] + usage.get("coworker_cost_usd", 0.0) + usage["judge_cost_usd"]


def _cost(usd: float, unpriced: int, finished: int) -> str:
    return cost_words(usd, unpriced, finished)


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "¦").replace("\n", " ")


def _href(url: str) -> str:
    return quote(url, safe=":/?&=#%@+,;~")


def _link(text: str, url: str | None) -> str:
    label = _cell(text).replace("[", "(").replace("]", ")")
    return f"[{label}]({_href(url)})" if url else label


def _ci(entry: dict[str, Any]) -> str:
    if entry["tasks"] == 0:  # undefined: a dash and why (report.json has null and the reason)
        return f"— ({_cell(entry.get('undefined', {}).get('value', 'no task'))})"
    flag = " ⚠" if entry.get("warning") else ""  # fewer tasks than MIN_TASKS_FOR_CI behind it
    return f"{_pct(entry['value'])} [{_pct(entry['ci_low'])}, {_pct(entry['ci_high'])}]{flag}"


TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens", "cache_write_tokens")
"""The agent's token counts a report adds up per agent (reasoning and cached ones are among the
prompt and completion tokens, as providers bill them)."""


def leaderboard_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    overall = report["metrics"]["overall"]
    k = str(report["runs_per_task"])
    rows = []
    for agent, metrics in overall.items():
        usage = report["agents"][agent]
        rows.append(
            {
                "agent": agent,
                "model": usage["model"],
                "pass_at_1": metrics["pass_at_1"],
                "pass_at_k": metrics["pass_at_k"][k],
                "pass_hat_k": metrics["pass_hat_k"][k],
                "mean_score": metrics["mean_score"],
                "checks_pass": metrics["checks_pass"],
                "check_disagreements": usage["check_disagreements"],
                "graded": metrics["trials_graded"],
                "tasks_graded": metrics["tasks_graded"],
                "tasks_total": metrics["tasks_total"],
                "trials": usage["trials"],
                "excluded": metrics["excluded_trials"],
                "tokens": {key: usage.get(key, 0) for key in TOKEN_KEYS},
                "cost_usd": _total_cost(usage),
                "cost_known": usage.get("cost_unpriced_trials", 0) == 0,
                "unpriced_trials": usage.get("cost_unpriced_trials", 0),
                "finished": usage["finished"],
                "cost": cost_words(
                    _total_cost(usage),
                    usage.get("cost_unpriced_trials", 0),
                    usage["finished"],
                ),
            }
        )
    rows.sort(
        key=lambda row: (-(row["pass_at_1"]["value"] if row["pass_at_1"]["tasks"] else -1), row["agent"])
    )
    return rows


def _pairwise_table(pairs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| A | B | paired runs | A only | B only | p | q | significant |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for pair in pairs:
        lines.append(
            f"| {pair['a']} | {pair['b']} | {pair['pairs']} | {pair['a_only']} | {pair['b_only']} | "
            f"{pair['p_value']:.4g} | {pair['q_value']:.4g} | {'yes' if pair['significant'] else 'no'} |"
        )
    return lines


def _exclusion_lines(report: dict[str, Any]) -> list[str]:
    """Every exclusion, with counts and reasons: trials, whole tasks, and tasks per k."""
    lines = ["", "## Exclusions", ""]
    trial_rows = [
        (agent, why, n)
        for agent, usage in report["agents"].items()
        for why, n in usage["exclusion_reasons"].items()
    ]
    if trial_rows:
        lines += ["Trials not in any denominator:", "", "| Agent | Trials | Reason |", "|---|---|---|"]
        lines += [f"| {agent} | {n} | {why} |" for agent, why, n in trial_rows]
    else:
        lines.append("No trial was excluded: every recorded trial is finished and graded.")
    task_rows = []
    for agent, metrics in report["metrics"]["overall"].items():
        for task_id, reasons in metrics["tasks_without_graded_runs"].items():
            task_rows.append(
                f"| {agent} | {task_id} | " + ", ".join(f"{n} {why}" for why, n in reasons.items()) + " |"
            )
    lines += [""]
    if task_rows:
        lines += [
            "Tasks with no graded run (in no denominator):",
            "",
            "| Agent | Task | Its trials |",
            "|---|---|---|",
            *task_rows,
        ]
    else:
        lines.append("Every task has at least one graded run for every agent.")
    short_rows = []
    for agent, metrics in report["metrics"]["overall"].items():
        for key, entry in metrics["pass_at_k"].items():
            if entry["excluded_tasks"]:
                ids = entry["excluded_task_ids"]
                short_rows.append(
                    f"| {agent} | {key} | {entry['excluded_tasks']} | {', '.join(ids[:8])}"
                    f"{', …' if len(ids) > 8 else ''} |"
                )
    if short_rows:
        lines += [
            "",
            "Tasks with fewer than k graded runs (left out of Pass@k and Pass^k for that k):",
            "",
            "| Agent | k | Tasks | Which |",
            "|---|---|---|---|",
            *short_rows,
        ]
    return lines


def _left_out_lines(report: dict[str, Any]) -> list[str]:
    left_out = report["left_out"]
    if not left_out["archives"] and not left_out["duplicate_trials"]:
        return []
    lines = ["", "## Left out of this report", ""]
    if left_out["archives"]:
        lines += [
            "| Archive | Archived at | Configuration (fingerprint) | Trials | By outcome |",
            "|---|---|---|---|---|",
        ]
        for archive in left_out["archives"]:
            when = datetime.fromtimestamp(archive["archived_at"], UTC).isoformat(timespec="seconds")
            outcomes = ", ".join(f"{n} {why}" for why, n in sorted(archive["by_outcome"].items()))
            lines.append(
                f"| {archive['archive']} | {when} | `{(archive['fingerprint'] or 'none')[:12]}` | "
                f"{archive['trials']} | {outcomes} |"
            )
    if left_out["duplicate_trials"]:
        lines += [
            "",
            f"- {left_out['duplicate_trials']} trial(s) repeat an (agent, task, run) that is already "
            "counted once (recorded under an earlier configuration, before runs had fingerprints); "
            "only the latest finished one counts.",
        ]
    return lines


def _banner_lines(report: dict[str, Any]) -> list[str]:
    """A run that stopped early says so first, with its cause."""
    shown = report.get("banner")
    if not shown:
        return []
    return [f"> **{shown['title']}**{shown['message']}", ""]


def _trial_label(trial: dict[str, Any], report: dict[str, Any]) -> str:
    """The task, with the agent when the run has several and the run index when tasks ran more than once."""
    parts = [trial["task_id"]]
    if len(report["matrix"]["agents"]) > 1:
        parts.append(trial["agent"])
    if report["runs_per_task"] > 1:
        parts.append(f"run {trial['run_index']}")
    return " · ".join(parts)


def _disagreement_lines(report: dict[str, Any]) -> list[str]:
    """Criteria where the judge overruled a passing check, each with its trial linked; nothing
    when there are none."""
    found = report["check_disagreements"]
    if not found["count"]:
        return []
    lines = [
        "",
        "## Check/judge disagreements",
        "",
        f"{found['count']} criteria in {found['trials']} trial{'s' * (found['trials'] != 1)}: the "
        "programmatic check passed, the judge said otherwise (the judge's verdict is the criterion's).",
        "",
        "| Trial | Criterion | Check | Judge | Judge's rationale |",
        "|---|---|---|---|---|",
    ]
    for row in found["rows"][:DISAGREEMENTS_LISTED]:
        lines.append(
            f"| {_link(_trial_label(row, report), row['link'])} | {_cell(row['verifier_id'])}: "
            f"{_cell(row['criterion'])} | {row['check_verdict']} | {row['judge_verdict']} | "
            f"{_cell(row['rationale'])} |"
        )
    if len(found["rows"]) > DISAGREEMENTS_LISTED:
        lines += ["", f"… and {len(found['rows']) - DISAGREEMENTS_LISTED} more (report.json lists all)."]
    lines += [""] * bool(found["unreadable"]) + [
        f"- {item['trial_id']}: grade not readable ({_cell(item['problem'])}); its disagreements are "
        "counted, not listed"
        for item in found["unreadable"]
    ]
    return lines


def _failure_lines(report: dict[str, Any]) -> list[str]:
    """Trials that did not pass, grouped by end reason / error kind, each trial linked."""
    groups = report["failures"]
    by_id = {trial["trial_id"]: trial for trial in report["trial_rows"]}
    lines = ["", "## Failures", ""]
    if not groups:
        return lines + ["Every finished trial passed."]
    lines += [
        "| Why | Trials | Which (linked to "
        + ("the viewer" if report.get("viewer_url") else "the artifacts")
        + ") |",
        "|---|---|---|",
    ]
    for group in groups:
        members = [by_id[trial_id] for trial_id in group["trials"]]
        shown = ", ".join(_link(_trial_label(m, report), m["link"]) for m in members[:GROUP_LISTED])
        more = (
            f", … and {len(members) - GROUP_LISTED} more (see Trials)" if len(members) > GROUP_LISTED else ""
        )
        kind = (
            f" ({group['error_kind']})"
            if group["error_kind"] and group["error_kind"] not in group["reason"]
            else ""
        )
        lines.append(f"| {_cell(group['reason'])}{_cell(kind)} | {group['count']} | {shown}{more} |")
    return lines


# report.json's failure_analysis dimensions, as report.md / .html title them (the viewer's
# run page shows the same groups, from the same function).
_ANALYSIS_TITLES = (
    ("criterion", "By failed criterion"),
    ("target_kind", "By grading target kind"),
    ("end_reason", "By end reason"),
    ("error_kind", "By error kind"),
    ("outcome", "By outcome"),
)


def _failure_analysis_lines(report: dict[str, Any]) -> list[str]:
    """report.json's ``failure_analysis`` (:func:`report_trials.failure_analysis`): the trials
    that ended without passing grouped five ways, each group listing its trials, linked."""
    analysis = report.get("failure_analysis") or {}
    if not any(analysis.get(name) for name, _title in _ANALYSIS_TITLES):
        return []
    by_id = {trial["trial_id"]: trial for trial in report["trial_rows"]}
    lines = ["", "## Failure analysis", ""]
    lines.append(
        "The failures above grouped five ways (a trial is under each criterion it missed); each "
        f"group lists exactly its trials (up to {GROUP_LISTED}; report.json lists all)."
    )
    for name, title in _ANALYSIS_TITLES:
        groups = analysis.get(name) or []
        if not groups:
            continue
        lines += ["", f"### {title}", "", "| Group | Trials | Which |", "|---|---|---|"]
        for group in groups:
            members = [by_id[trial_id] for trial_id in group["trials"] if trial_id in by_id]
            shown = ", ".join(_link(_trial_label(m, report), m["link"]) for m in members[:GROUP_LISTED])
            more = f", … and {len(members) - GROUP_LISTED} more" if len(members) > GROUP_LISTED else ""
            lines.append(f"| {_cell(group['key'])} | {group['count']} | {shown}{more} |")
    return lines


def _matrix_lines(report: dict[str, Any]) -> list[str]:
    """Agents × tasks: passes of graded runs per cell, and what else the cell holds."""
    grid = report["matrix"]
    if not grid["agents"]:
        return []
    lines = [
        "",
        "## Agents × tasks",
        "",
        "Passes / graded runs per task and agent (excluded and unfinished runs named beside).",
        "",
        "| Task | Domain | " + " | ".join(_cell(a) for a in grid["agents"]) + " |",
        "|---|---|" + "---|" * len(grid["agents"]),
    ]
    for task in grid["tasks"]:
        cells = []
        for agent in grid["agents"]:
            cell = grid["cells"][agent].get(task["task_id"])
            if cell is None:
                cells.append("—")
                continue
            extra = [f"{cell[key]} {key}" for key in ("excluded", "unfinished") if cell[key]]
            cells.append(f"{cell['passes']}/{cell['graded']}" + (f" · {', '.join(extra)}" if extra else ""))
        name = f"{task['task_id']} ({task['task_name']})" if task.get("task_name") else task["task_id"]
        lines.append(f"| {_cell(name)} | {_cell(task['domain'] or '—')} | " + " | ".join(cells) + " |")
    return lines


def _tokens_text(trial: dict[str, Any]) -> str:
    """A trial's tokens, with the reasoning and cached ones among them when there are any."""
    total = (trial["prompt_tokens"] or 0) + (trial["completion_tokens"] or 0)
    return tokens_text(total, trial.get("reasoning_tokens") or 0, trial.get("cached_tokens") or 0)


def _trial_table_lines(report: dict[str, Any]) -> list[str]:
    """Every trial, one line each, linked to its viewer page or artifact folder."""
    lines = [
        "",
        "## Trials",
        "",
        "| Task | Agent | Run | Outcome | Score | End reason | Steps | Tool calls | Tokens | Cost | Duration | "
        + ("Viewer" if report.get("viewer_url") else "Artifacts")
        + " |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for trial in report["trial_rows"]:
        finished = trial["outcome"] is not None
        tokens = _tokens_text(trial)
        cost = ("unknown" if trial["cost_usd"] is None else f"${trial['cost_usd']:.4f}") if finished else "—"
        score = "—" if trial["score"] is None else f"{trial['score']:.2f}"
        duration = f"{trial['duration_s']:.1f} s" if finished else "—"
        lines.append(
            f"| {_cell(trial['task_id'])} | {_cell(trial['agent'])} | {trial['run_index']} | "
            f"{trial['outcome'] or 'unfinished: ' + trial['state']}"
            f"{' (left out: graded by another judge)' if trial.get('left_out') else ''} | "
            f"{score} | {_cell(trial['end_reason'] or '—')} | "
            f"{trial['steps'] if finished else '—'} | {trial['tool_calls'] if finished else '—'} | "
            f"{tokens if finished else '—'} | {cost} | "
            f"{duration} | {_link('open', trial['link']) if trial['link'] else '—'} |"
        )
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    k = report["runs_per_task"]
    trials = report["trials"]
    lines = [f"# {report['experiment']}", ""]
    lines += _banner_lines(report)
    lines += [
        f"**Outcome:** {report['outcome']}",
        "",
        # One headline per agent: a pass rate pooled over agents describes none of them.
        *[
            f"- **{_cell(h['agent'])}**{_cell(h['line'].removeprefix(h['agent']))}"
            for h in report["headline"]
        ],
        *([""] if report["headline"] else []),
        f"Benchmark: `{report['benchmark']}` · runs per task: {k} · trials: {trials['total']} "
        f"(done {trials['done']}, infra_error {trials['infra_error']}, pending {trials['pending']}, "
        f"leased {trials['leased']}) · configuration `{(report.get('fingerprint') or 'none')[:12]}` · "
        f"generated {report['generated_at']}",
        "",
    ]
    lines += judge_markdown(report.get("judge"))
    lines += [f"- Warning: {warning}" for warning in report["warnings"]]
    lines += ["", "## Leaderboard", ""]
    # With one run per task, Pass@k and Pass^k equal Pass@1: no columns for them then.
    at_k = f" Pass@{k} | Pass^{k} |" if k > 1 else ""
    lines += [
        f"| # | Agent | Model | Pass@1 [95% CI] |{at_k} Mean score | Checks pass | Disagreements | Tasks | "
        "Graded / trials | Excluded | Cost |",
        "|---|---|---|---|" + ("---|---|" if k > 1 else "") + "---|---|---|---|---|---|---|",
    ]
    for rank, row in enumerate(leaderboard_rows(report), 1):
        excluded = ", ".join(f"{n} {why}" for why, n in row["excluded"].items()) or "none"
        lines.append(
            f"| {rank} | {row['agent']} | `{row['model']}` | {_ci(row['pass_at_1'])} | "
            + (f"{_ci(row['pass_at_k'])} | {_ci(row['pass_hat_k'])} | " if k > 1 else "")
            + f"{_ci(row['mean_score'])} | {_ci(row['checks_pass'])} | "
            f"{'—' if row['check_disagreements'] is None else row['check_disagreements']} | "
            f"{row['tasks_graded']} of {row['tasks_total']} | {row['graded']} / {row['trials']} | "
            f"{excluded} | {_cost(row['cost_usd'], row['unpriced_trials'], row['finished'])} |"
        )
    if report.get("excluded_tasks"):
        lines += ["", f"Tasks not run ({len(report['excluded_tasks'])}, skip_unavailable_apps):", ""]
        lines += [f"- `{task_id}`: {why}" for task_id, why in sorted(report["excluded_tasks"].items())]
    lines += _failure_lines(report)
    lines += _failure_analysis_lines(report)
    lines += _matrix_lines(report)
    lines += _disagreement_lines(report)
    if k > 1:  # with one run per task, Pass@1 is all there is
        lines += [
            "",
            "## Pass@k and Pass^k",
            "",
            "| Agent | k | Pass@k | Pass^k | tasks counted of all | left out: no graded run, fewer than k |",
            "|---|---|---|---|---|---|",
        ]
        for agent, metrics in report["metrics"]["overall"].items():
            no_graded = len(metrics["tasks_without_graded_runs"])
            for key, at_k in metrics["pass_at_k"].items():
                hat_k = metrics["pass_hat_k"][key]
                lines.append(
                    f"| {agent} | {key} | {_ci(at_k)} | {_ci(hat_k)} | {at_k['tasks']} of "
                    f"{metrics['tasks_total']} | {no_graded}, {at_k['excluded_tasks']} |"
                )
    lines += [
        "",
        "## Per domain",
        "",
        "| Domain | Agent | Pass@1 [95% CI] | Mean score | Tasks graded of all |",
        "|---|---|---|---|---|",
    ]
    for domain, agents in report["metrics"]["by_domain"].items():
        for agent, metrics in agents.items():
            lines.append(
                f"| {domain} | {agent} | {_ci(metrics['pass_at_1'])} | {_ci(metrics['mean_score'])} | "
                f"{metrics['tasks_graded']} of {metrics['tasks_total']} |"
            )
    if report["metrics"]["pairwise"]:
        lines += ["", "## Pairwise comparisons (McNemar exact, Benjamini–Hochberg)", ""]
        lines += _pairwise_table(report["metrics"]["pairwise"])
        for domain, pairs in report["metrics"]["pairwise_by_domain"].items():
            if pairs:
                lines += ["", f"### {domain}", "", *_pairwise_table(pairs)]
    lines += [
        "",
        "## Usage and cost",
        "",
        "| Agent | Finished | Outcomes | Mean steps | Mean tool calls | Prompt tokens | Cached | Cache writes | "
        "Completion tokens | Reasoning | Agent $ | Personas $ | Judge $ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for agent, usage in report["agents"].items():
        outcomes = ", ".join(f"{n} {why}" for why, n in usage["outcomes"].items())
        lines.append(
            f"| {agent} | {usage['finished']} / {usage['trials']} | {outcomes} | {usage['mean_steps']:.1f} | "
            f"{usage['mean_tool_calls']:.1f} | {usage['prompt_tokens']} | {usage.get('cached_tokens', 0)} | "
            f"{usage.get('cache_write_tokens', 0)} | {usage['completion_tokens']} | {usage.get('reasoning_tokens', 0)} | "
            f"{_cost(usage['agent_cost_usd'], usage.get('unpriced_trials', 0), usage['finished'])} | "
            f"{_cost(usage.get('coworker_cost_usd', 0.0), usage.get('coworker_unpriced_trials', 0), usage['finished'])} | "
            f"{_cost(usage['judge_cost_usd'], usage.get('judge_unpriced_trials', 0), usage['finished'])} |"
        )
    lines += _trial_table_lines(report)
    lines += _exclusion_lines(report)
    lines += _left_out_lines(report)
    lines += ["", "## How to read this", ""] + [f"- {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def write_report(
    store: TrialStore,
    experiment: str,
    output_dir: str | Path,
    *,
    seed: int = 0,
    viewer_url: str | None = None,
) -> dict[str, Path]:
    """Write report.json, report.md and report.html into ``output_dir``; returns their paths.
    With ``viewer_url`` (where `atoll view` serves the store) trials link to their viewer pages."""
    from orchestrator.report_html import render_html

    record = store.run_record(experiment)
    names = task_names(record.spec if record else {})
    report = build_report(store, experiment, seed=seed, viewer_url=viewer_url, names=names)
    output = Path(output_dir)
    relative_links(report, output)  # local artifact folders as paths from the report's folder
    output.mkdir(parents=True, exist_ok=True)
    paths = {"json": output / "report.json", "md": output / "report.md", "html": output / "report.html"}
    paths["json"].write_text(dumps_strict(report, indent=2, default=str) + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(report), encoding="utf-8")
    paths["html"].write_text(render_html(report, render_markdown(report)), encoding="utf-8")
    return paths


__all__ = ["build_report", "collect", "leaderboard_rows", "render_markdown", "write_report", "Outcome"]
