"""Grade one trial: diff the snapshots, then decide every criterion independently.

A criterion is decided by (in order) its programmatic check, a rule when its grading target
has nothing to show, the verdict cache, or the judge.  Any failure while deciding one
criterion makes that criterion ungradeable; it never aborts the others.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atoll.benchmark import Criterion, Task
from atoll.errors import AtollError, ErrorCode
from atoll.grade import CriterionVerdict, Grade, UngradeableCode, Verdict
from atoll.judge import PROMPT_VERSION, judge_identity
from atoll.llm import RetryBudget
from atoll.llm.profiles import checked_judge
from atoll.trajectory import Trajectory
from grader.cache import VerdictCache, cache_key
from grader.checks import run_check
from grader.diff import WorldDiff, diff_snapshots
from grader.evidence import build_blocks, evidence_digest, fit, route, truncate
from grader.extract import ExtractOptions
from grader.judge import JudgeConfig, context_shrink_factor, judge, verdict_settings
from grader.snapshot import AnySnapshot, ManifestSnapshot, Snapshot, open_snapshot


def final_answer(trajectory: Trajectory | None) -> str:
    """The agent's final answer, or the last assistant text when none was recorded."""
    if trajectory is None:
        return ""
    if trajectory.final_answer:
        return trajectory.final_answer
    for message in reversed(trajectory.messages):
        if (
            message.get("role") == "assistant"
            and isinstance(message.get("content"), str)
            and message["content"].strip()
        ):
            return message["content"]
    return ""


@dataclass
class _Context:
    task: Task
    answer: str
    world: WorldDiff
    judge: JudgeConfig | None
    cache: VerdictCache | None
    options: ExtractOptions
    change_log: str
    retry_budget: RetryBudget | None = None
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    configuration_error: str | None = None
    #: verifier_id → the check's own verdict, once known: a failure after it (in routing or
    #: the judge) must not lose it, or "Checks pass" would move with the judge path.
    checked: dict[str, Verdict] = field(default_factory=dict)


def _verdict(
    criterion: Criterion,
    verdict: Verdict,
    decided_by: str,
    rationale: str,
    *,
    check_verdict: Verdict | None = None,
    **fields,
) -> CriterionVerdict:
    # Agreement is recorded only where both spoke: a judge asked after a passing check that
    # returned a verdict (an ungradeable judge said nothing to agree or disagree with).
    both_spoke = decided_by == "judge" and check_verdict is not None and verdict is not Verdict.ungradeable
    return CriterionVerdict(
        verifier_id=criterion.verifier_id,
        criterion=criterion.criteria,
        verdict=verdict,
        decided_by=decided_by,
        rationale=rationale,
        check_verdict=check_verdict,
        check_agrees=verdict is check_verdict if both_spoke else None,
        **fields,
    )


async def _decide(context: _Context, criterion: Criterion) -> CriterionVerdict:
    check_note = ""
    # The check's own verdict, recorded on every verdict of this criterion whoever decides it:
    # "Checks pass" counts it, never the judge's.
    checked: Verdict | None = None
    if criterion.check is not None:
        result = await asyncio.to_thread(
            run_check, criterion.check, context.answer, context.world, context.options
        )
        if result.passed is None:
            return _verdict(
                criterion,
                Verdict.ungradeable,
                "check",
                result.reason,
                check_verdict=Verdict.ungradeable,
                ungradeable_reason=result.reason,
                ungradeable_code=UngradeableCode.check_error,
            )
        if result.passed is False:
            return _verdict(
                criterion,
                Verdict.not_met,
                "check",
                f"check {criterion.check.kind} failed: {result.reason}",
                check_verdict=Verdict.not_met,
            )
        checked = context.checked[criterion.verifier_id] = Verdict.met
        if criterion.check_only or context.judge is None:
            return _verdict(
                criterion,
                Verdict.met,
                "check",
                f"check {criterion.check.kind} passed: {result.reason}",
                check_verdict=checked,
            )
        check_note = f"check {criterion.check.kind} passed ({result.reason}); "
    if context.judge is None:
        reason = "no judge configured and the criterion has no programmatic check"
        return _verdict(
            criterion,
            Verdict.ungradeable,
            "rule",
            reason,
            ungradeable_reason=reason,
            ungradeable_code=UngradeableCode.no_judge,
        )

    config = context.judge
    routed = await asyncio.to_thread(
        route,
        criterion,
        context.answer,
        context.world,
        context.options,
        context.task.grading_target_for(criterion),
    )
    if routed.not_met_reason:
        return _verdict(
            criterion, Verdict.not_met, "rule", check_note + routed.not_met_reason, check_verdict=checked
        )
    if routed.ungradeable_reason:
        return _verdict(
            criterion,
            Verdict.ungradeable,
            "rule",
            routed.ungradeable_reason,
            check_verdict=checked,
            ungradeable_reason=routed.ungradeable_reason,
            ungradeable_code=UngradeableCode.evidence_unreadable,
            evidence=[a.id for a in routed.artifacts],
        )
    answer = context.answer if routed.include_answer else None
    # A final-answer criterion is judged on the answer alone: not even the list of changed
    # files is shown (Archipelago's "Final Answer Only (No Files)").
    change_log = "" if routed.target.kind == "final_answer" else context.change_log
    digest = evidence_digest(context.task.prompt, answer, change_log, routed, config)
    key = cache_key(criterion, digest, verdict_settings(config), PROMPT_VERSION)
    common: dict[str, Any] = {
        "judge_model": config.model,
        "prompt_version": PROMPT_VERSION,
        "evidence_digest": digest,
        "check_verdict": checked,
    }
    if context.cache is not None:
        record = await asyncio.to_thread(context.cache.get, key)
        if record is not None:
            return _verdict(
                criterion,
                Verdict(record["verdict"]),
                "judge",
                record.get("rationale", ""),
                evidence=record.get("evidence", []),
                samples=[Verdict(s) for s in record.get("samples", [])],
                evidence_note=record.get("evidence_note"),
                cached=True,
                **common,
            )

    # The budget is in characters; a model with a smaller window than assumed answers
    # "context length exceeded", and the evidence is fitted again into a smaller budget.
    budget = config.budget_chars()
    for _ in range(3):
        fixed = (
            min(len(context.task.prompt), budget // 8)
            + min(len(change_log), budget // 8)
            + (min(len(answer), budget // 4) if answer else 0)
            + len(criterion.criteria)
            + 3000
        )
        artifact_budget = max(budget - fixed, budget // 4)
        fitted = await fit(criterion.criteria, routed.artifacts, artifact_budget, config)
        context.cost_usd += fitted.cost_usd
        context.prompt_tokens += fitted.prompt_tokens
        context.completion_tokens += fitted.completion_tokens
        context.reasoning_tokens += fitted.reasoning_tokens
        context.cached_tokens += fitted.cached_tokens
        blocks = build_blocks(context.task.prompt, answer, change_log, fitted, criterion, budget)
        judged = await judge(config, blocks, budget=context.retry_budget)
        context.cost_usd += judged.cost_usd
        context.prompt_tokens += judged.prompt_tokens
        context.completion_tokens += judged.completion_tokens
        context.reasoning_tokens += judged.reasoning_tokens
        context.cached_tokens += judged.cached_tokens
        if judged.configuration_error:
            context.configuration_error = judged.configuration_error
        if not judged.context_exceeded or budget <= 4000:
            break
        prompt_chars = sum(len(block.text) for block in blocks) + 2000
        budget = max(4000, int(min(budget, prompt_chars) * context_shrink_factor(judged.error)))
    shown = [artifact.id for artifact, _ in fitted.shown]
    if answer is not None:
        shown.insert(0, "final_answer")
    note = None if fitted.note == "all" else fitted.note
    if budget != config.budget_chars():
        note = f"{note or 'all'}; budget cut to {budget} characters after a context-window error"
    if judged.verdict is None:
        reason = judged.error or "the judge returned no verdict"
        return _verdict(
            criterion,
            Verdict.ungradeable,
            "judge",
            reason,
            ungradeable_reason=reason,
            ungradeable_code=judged.error_code or UngradeableCode.judge_no_verdict,
            evidence=shown,
            evidence_note=note,
            **common,
        )
    rationale = check_note + judged.rationale
    if context.cache is not None:
        await asyncio.to_thread(
            context.cache.put,
            key,
            {
                "verdict": judged.verdict.value,
                "rationale": rationale,
                "evidence": shown,
                "samples": [s.value for s in judged.samples],
                "evidence_note": note,
            },
        )
    return _verdict(
        criterion,
        judged.verdict,
        "judge",
        rationale,
        evidence=shown,
        samples=judged.samples,
        evidence_note=note,
        **common,
    )


async def _decide_safely(
    context: _Context, criterion: Criterion, limit: asyncio.Semaphore
) -> CriterionVerdict:
    async with limit:
        try:
            return await _decide(context, criterion)
        except Exception as exc:  # noqa: BLE001 - one criterion's failure never aborts the grade
            reason = f"grader error: {type(exc).__name__}: {truncate(str(exc), 300)}"
            return _verdict(
                criterion,
                Verdict.ungradeable,
                "rule",
                reason,
                check_verdict=context.checked.get(criterion.verifier_id),
                ungradeable_reason=reason,
                ungradeable_code=UngradeableCode.grader_error,
            )


def open_world(
    before: str | Path | AnySnapshot,
    after: str | Path | AnySnapshot,
    options: ExtractOptions,
    *,
    root: str | None = None,
) -> WorldDiff:
    """Open both snapshots (archives, or stored manifests and deltas read in place with their
    references kept under ``root``, inferred when None: :func:`grader.snapshot.open_snapshot`)
    and diff them; raises AtollError("snapshot_unreadable") and the stored-world errors."""
    before_snapshot = _opened(before, root)
    try:
        after_snapshot = _opened(after, root)
    except BaseException:
        if before_snapshot is not before:
            before_snapshot.close()
        raise
    return diff_snapshots(before_snapshot, after_snapshot, options)


def _opened(snapshot: str | Path | AnySnapshot, root: str | None) -> AnySnapshot:
    if isinstance(snapshot, Snapshot | ManifestSnapshot):
        return snapshot
    return open_snapshot(snapshot, root=root)


async def grade_trial(
    task: Task,
    before: str | Path | AnySnapshot,
    after: str | Path | AnySnapshot,
    trajectory: Trajectory | None = None,
    judge: JudgeConfig | None = None,
    cache: VerdictCache | None = None,
    *,
    options: ExtractOptions | None = None,
    trial_id: str | None = None,
    world: WorldDiff | None = None,
    root: str | None = None,
) -> Grade:
    """Grade ``task`` on the world change from ``before`` to ``after``: snapshots, or paths of
    a tar.gz, a world zip, a stored manifest or a delta (``root``: the artifact store root
    their references stay under; None infers it, :func:`grader.snapshot.open_snapshot`).

    ``judge`` None grades with programmatic checks only (criteria without a check are then
    ungradeable).  Raises AtollError("snapshot_unreadable") when a snapshot cannot be read,
    and AtollError("model_endpoint") naming the model, URL and provider message when the
    judge's endpoint cannot work as configured (bad key, unknown model, nothing listening):
    every criterion would fail alike, and it is the setup, not the trial, that is wrong; for
    the same reason AtollError("model_parameters") before anything is read when the judge asks
    its model for a parameter the model refuses (:func:`atoll.llm.profiles.checked_judge`).
    Every other failure is confined to the criterion it happens in.  ``world`` lets a caller
    reuse a diff it already computed.
    """
    if judge is not None:
        checked_judge(judge)
    options = options or ExtractOptions()
    if world is None:
        world = await asyncio.to_thread(open_world, before, after, options, root=root)
        try:
            return await _grade(task, world, trajectory, judge, cache, options, trial_id)
        finally:
            # What this call opened it closes (a downloaded delta is removed).
            for opened, given in ((world.before, before), (world.after, after)):
                if opened is not given:
                    opened.close()
    return await _grade(task, world, trajectory, judge, cache, options, trial_id)


async def _grade(
    task: Task,
    world: WorldDiff,
    trajectory: Trajectory | None,
    judge: JudgeConfig | None,
    cache: VerdictCache | None,
    options: ExtractOptions,
    trial_id: str | None,
) -> Grade:
    context = _Context(
        task=task,
        answer=final_answer(trajectory),
        world=world,
        judge=judge,
        cache=cache,
        options=options,
        change_log=world.change_log(),
        retry_budget=RetryBudget(judge.retry_budget) if judge else None,
    )
    limit = asyncio.Semaphore(judge.concurrency if judge else 4)
    verdicts = await asyncio.gather(*(_decide_safely(context, c, limit) for c in task.rubric))
    if context.configuration_error:
        raise AtollError(ErrorCode.model_endpoint, f"judge: {context.configuration_error}")
    grade = Grade.from_verdicts(
        task.task_id,
        list(verdicts),
        trial_id=trial_id or (trajectory.trial_id if trajectory else None),
        judge=judge_identity(judge),
        changes=world.changes,
        judge_cost_usd=round(context.cost_usd, 6),
        judge_prompt_tokens=context.prompt_tokens,
        judge_completion_tokens=context.completion_tokens,
        judge_reasoning_tokens=context.reasoning_tokens,
        judge_cached_tokens=context.cached_tokens,
        **({"diff_errors": list(world.errors)} if world.errors else {}),
    )
    return grade


def grade_trial_sync(*args, **kwargs) -> Grade:
    """``grade_trial`` for callers without an event loop."""
    return asyncio.run(grade_trial(*args, **kwargs))
