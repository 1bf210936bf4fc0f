"""Reports of a run: report.json (everything), report.md (the paper-style leaderboard) and a
self-contained report.html with plots. Denominators and exclusions are always stated."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from atoll.errors import AtollError
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.stats import TrialRecord, compute_metrics
from orchestrator.store import TrialStore


def collect(store: TrialStore, experiment: str) -> tuple[list[TrialRecord], dict[str, Any]]:
    """Trial records for the statistics, plus per-agent usage and outcome counts."""
    rows = store.results(experiment)
    if not rows:
        raise AtollError("unknown_run", f"no trials recorded for run {experiment!r} in {store.url}")
    records: list[TrialRecord] = []
    usage: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"model": "", "trials": 0, "finished": 0, "steps": 0, "tool_calls": 0, "prompt_tokens": 0,
                 "completion_tokens": 0, "agent_cost_usd": 0.0, "judge_cost_usd": 0.0, "duration_s": 0.0,
                 "outcomes": defaultdict(int), "exclusion_reasons": defaultdict(int)}
    )
    for spec, result, state, _attempts in rows:
        entry = usage[spec.agent_name]
        entry["model"] = spec.model
        entry["trials"] += 1
        if result is None or state not in ("done", "infra_error"):
            entry["outcomes"]["unfinished"] += 1
            continue
        entry["finished"] += 1
        entry["outcomes"][result.outcome.value] += 1
        if result.outcome in (Outcome.ungradeable, Outcome.infra_error):
            reason = _reason(result.error)
            entry["exclusion_reasons"][f"{result.outcome.value}: {reason}"] += 1
        for key in ("steps", "tool_calls", "prompt_tokens", "completion_tokens", "agent_cost_usd",
                    "judge_cost_usd", "duration_s"):
            entry[key] += getattr(result, key)
        records.append(_record(spec, result))
    for entry in usage.values():
        entry["outcomes"] = dict(sorted(entry["outcomes"].items()))
        entry["exclusion_reasons"] = dict(sorted(entry["exclusion_reasons"].items(), key=lambda kv: -kv[1]))
        finished = max(entry["finished"], 1)
        entry["mean_steps"] = entry["steps"] / finished
        entry["mean_tool_calls"] = entry["tool_calls"] / finished
        entry["mean_cost_usd"] = (entry["agent_cost_usd"] + entry["judge_cost_usd"]) / finished
    return records, dict(usage)


def _reason(error: str | None) -> str:
    """A trial's exclusion reason without its per-criterion prefix, short enough to group."""
    if not error:
        return "no reason recorded"
    first = error.split("; ")[0]
    return (first.split(": ", 1)[1] if ": " in first else first)[:160]


def _record(spec: TrialSpec, result: TrialResult) -> TrialRecord:
    return TrialRecord(
        agent=spec.agent_name, task_id=spec.task_id, run_index=spec.run_index, outcome=result.outcome,
        score=result.score, domain=spec.domain,
        checks_passed=(result.checks_met == result.checks_total) if result.checks_total else None,
    )


def build_report(store: TrialStore, experiment: str, *, seed: int = 0) -> dict[str, Any]:
    records, usage = collect(store, experiment)
    spec = store.experiment_spec(experiment) or {}
    runs = int(spec.get("runs", 1) or 1)
    metrics = compute_metrics(records, max_k=runs, seed=seed)
    counts = store.counts(experiment)
    return {
        "experiment": experiment,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "benchmark": spec.get("benchmark"),
        "runs_per_task": runs,
        "trials": counts,
        "agents": usage,
        "metrics": metrics,
        "excluded_tasks": dict(spec.get("excluded_tasks") or {}),
        "notes": [
            "Pass@1, Pass@k, Pass^k and mean score are means over tasks; denominators count graded "
            "trials only (outcome pass or fail).",
            "Ungradeable and infra_error trials are excluded from the denominators and counted per agent.",
            "Pass@k and Pass^k leave out tasks with fewer than k graded runs (excluded_tasks).",
            "95% intervals: task-level percentile bootstrap, "
            f"{metrics['bootstrap']['resamples']} resamples, seed {seed}.",
            "Pairwise: McNemar exact test on paired (task, run) outcomes, Benjamini-Hochberg at FDR 5%.",
            "Checks pass: share of finished trials (ungradeable ones included) in which every criterion "
            "that carries a programmatic check was met; criteria only a judge can decide are not in it.",
        ],
    }


def _pct(value: float) -> str:
    return "—" if value != value else f"{100 * value:.1f}%"  # NaN-safe


def _ci(entry: dict[str, Any]) -> str:
    if entry["tasks"] == 0:
        return "—"
    return f"{_pct(entry['value'])} [{_pct(entry['ci_low'])}, {_pct(entry['ci_high'])}]"


def leaderboard_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    overall = report["metrics"]["overall"]
    k = str(report["runs_per_task"])
    rows = []
    for agent, metrics in overall.items():
        usage = report["agents"][agent]
        rows.append({
            "agent": agent,
            "model": usage["model"],
            "pass_at_1": metrics["pass_at_1"],
            "pass_at_k": metrics["pass_at_k"][k],
            "pass_hat_k": metrics["pass_hat_k"][k],
            "mean_score": metrics["mean_score"],
            "checks_pass": metrics["checks_pass"],
            "graded": metrics["trials_graded"],
            "trials": usage["trials"],
            "excluded": metrics["excluded_trials"],
            "cost_usd": usage["agent_cost_usd"] + usage["judge_cost_usd"],
        })
    rows.sort(key=lambda row: (-(row["pass_at_1"]["value"] if row["pass_at_1"]["tasks"] else -1), row["agent"]))
    return rows


def render_markdown(report: dict[str, Any]) -> str:
    k = report["runs_per_task"]
    trials = report["trials"]
    lines = [
        f"# {report['experiment']}",
        "",
        f"Benchmark: `{report['benchmark']}` · runs per task: {k} · trials: {trials['total']} "
        f"(done {trials['done']}, infra_error {trials['infra_error']}, pending {trials['pending']}, "
        f"leased {trials['leased']}) · generated {report['generated_at']}",
        "",
        "## Leaderboard",
        "",
    ]
    # With one run per task, Pass@k and Pass^k equal Pass@1: no columns for them then.
    at_k = f" Pass@{k} | Pass^{k} |" if k > 1 else ""
    lines += [
        f"| # | Agent | Model | Pass@1 [95% CI] |{at_k} Mean score | Checks pass | Graded / trials | Excluded | Cost |",
        "|---|---|---|---|" + ("---|---|" if k > 1 else "") + "---|---|---|---|---|",
    ]
    for rank, row in enumerate(leaderboard_rows(report), 1):
        excluded = ", ".join(f"{n} {why}" for why, n in row["excluded"].items()) or "none"
        lines.append(
            f"| {rank} | {row['agent']} | `{row['model']}` | {_ci(row['pass_at_1'])} | "
            + (f"{_ci(row['pass_at_k'])} | {_ci(row['pass_hat_k'])} | " if k > 1 else "")
            + f"{_ci(row['mean_score'])} | {_ci(row['checks_pass'])} | "
            f"{row['graded']} / {row['trials']} | "
            f"{excluded} | ${row['cost_usd']:.4f} |"
        )
    if report.get("excluded_tasks"):
        lines += ["", f"Tasks not run ({len(report['excluded_tasks'])}, skip_unavailable_apps):", ""]
        lines += [f"- `{task_id}`: {why}" for task_id, why in sorted(report["excluded_tasks"].items())]
    lines += ["", "## Pass@k and Pass^k", "", "| Agent | k | Pass@k | Pass^k | tasks (excluded) |", "|---|---|---|---|---|"]
    for agent, metrics in report["metrics"]["overall"].items():
        for key, at_k in metrics["pass_at_k"].items():
            hat_k = metrics["pass_hat_k"][key]
            lines.append(f"| {agent} | {key} | {_ci(at_k)} | {_ci(hat_k)} | {at_k['tasks']} ({at_k['excluded_tasks']}) |")
    lines += ["", "## Per domain", "", "| Domain | Agent | Pass@1 [95% CI] | Mean score | Tasks |", "|---|---|---|---|---|"]
    for domain, agents in report["metrics"]["by_domain"].items():
        for agent, metrics in agents.items():
            lines.append(
                f"| {domain} | {agent} | {_ci(metrics['pass_at_1'])} | {_ci(metrics['mean_score'])} | "
                f"{metrics['tasks_graded']} |"
            )
    pairwise = report["metrics"]["pairwise"]
    if pairwise:
        lines += ["", "## Pairwise comparisons (McNemar exact, Benjamini–Hochberg)", "",
                  "| A | B | paired runs | A only | B only | p | q | significant |", "|---|---|---|---|---|---|---|---|"]
        for pair in pairwise:
            lines.append(
                f"| {pair['a']} | {pair['b']} | {pair['pairs']} | {pair['a_only']} | {pair['b_only']} | "
                f"{pair['p_value']:.4g} | {pair['q_value']:.4g} | {'yes' if pair['significant'] else 'no'} |"
            )
    lines += ["", "## Usage and cost", "",
              "| Agent | Finished | Outcomes | Mean steps | Mean tool calls | Prompt tokens | Completion tokens | Agent $ | Judge $ |",
              "|---|---|---|---|---|---|---|---|---|"]
    for agent, usage in report["agents"].items():
        outcomes = ", ".join(f"{n} {why}" for why, n in usage["outcomes"].items())
        lines.append(
            f"| {agent} | {usage['finished']} / {usage['trials']} | {outcomes} | {usage['mean_steps']:.1f} | "
            f"{usage['mean_tool_calls']:.1f} | {usage['prompt_tokens']} | {usage['completion_tokens']} | "
            f"{usage['agent_cost_usd']:.4f} | {usage['judge_cost_usd']:.4f} |"
        )
    reasons = [(agent, why, n) for agent, usage in report["agents"].items()
               for why, n in usage["exclusion_reasons"].items()]
    if reasons:
        lines += ["", "## Excluded trials", "", "| Agent | Trials | Reason |", "|---|---|---|"]
        lines += [f"| {agent} | {n} | {why} |" for agent, why, n in reasons]
    lines += ["", "## How to read this", ""] + [f"- {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def write_report(store: TrialStore, experiment: str, output_dir: str | Path, *, seed: int = 0) -> dict[str, Path]:
    """Write report.json, report.md and report.html into ``output_dir``; returns their paths."""
    from orchestrator.report_html import render_html

    report = build_report(store, experiment, seed=seed)
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    paths = {"json": output / "report.json", "md": output / "report.md", "html": output / "report.html"}
    paths["json"].write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(report), encoding="utf-8")
    paths["html"].write_text(render_html(report, render_markdown(report)), encoding="utf-8")
    return paths


__all__ = ["build_report", "collect", "leaderboard_rows", "render_markdown", "write_report", "Outcome"]
