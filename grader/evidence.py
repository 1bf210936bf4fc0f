"""Evidence routing per grading target, and fitting evidence into the judge's context budget.

Routing decides which artifacts a criterion is judged on; when a required target has
nothing to show, the criterion is not met without a judge call.  Fitting keeps the prompt
under ``JudgeConfig.context_budget_chars``: each kind of change gets its fair share of the
budget; changes to what existed before are always shown, and within the other kinds a
selector (deterministic ranking, or the judge model itself) picks artifacts; what is left
out is counted per kind in the note the judge reads.  If the judge model fails to select,
the ranking selects instead; if even that shows nothing, every artifact is shown truncated
(never "no files").
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from atoll.benchmark import Criterion, GradingTarget
from atoll.judge import GRADER_VERSION
from grader.budget import counted, criterion_words, fair_shares, named_within, printable, size, truncate
from grader.diff import Artifact, ChangeLog, WorldDiff, file_artifact_for_unchanged
from grader.extract import ExtractOptions
from grader.judge import Block, JudgeConfig, select
from grader.snapshot import member_path

if TYPE_CHECKING:
    from atoll.llm import Completion

APP_KINDS = ("mail", "event", "chat", "coworker")


@dataclass
class Routed:
    """The evidence a criterion's grading target selects."""

    target: GradingTarget
    include_answer: bool
    artifacts: list[Artifact] = field(default_factory=list)
    not_met_reason: str | None = None
    ungradeable_reason: str | None = None


def route(
    criterion: Criterion,
    answer: str,
    world: WorldDiff,
    options: ExtractOptions,
    target: GradingTarget | None = None,
) -> Routed:
    """Select evidence for ``criterion`` on ``target`` (default: the criterion's own, else
    ``all``); see GradingTarget for the kinds."""
    target = target or criterion.grading_target or GradingTarget()
    files = [a for a in world.artifacts if a.kind == "file"]
    if target.kind == "final_answer":
        routed = Routed(target, include_answer=True)
        if not answer.strip():
            routed.not_met_reason = "the criterion is judged on the final answer and the agent gave none"
        return routed
    if target.kind == "file_type":
        wanted = target.wanted_types()
        chosen = [a for a in files if a.file_type in wanted and a.change in ("created", "modified")]
        routed = Routed(target, include_answer=target.with_answer, artifacts=chosen)
        # With the answer in scope (a target derived from expected_output) the answer alone
        # may still meet the criterion; only when neither exists is it failed unseen.
        if not chosen and not (target.with_answer and answer.strip()):
            names = " or ".join(f".{t}" for t in wanted) or "matching"
            routed.not_met_reason = f"no {names} file was created or modified" + (
                " and the agent gave no final answer" if target.with_answer else ""
            )
        return _mark_failures(routed, all_must_fail=False)
    if target.kind == "file":
        return _route_file(target, world, options)
    if target.kind == "app_data":
        chosen = [a for a in world.artifacts if a.kind in APP_KINDS]
        routed = Routed(target, include_answer=False, artifacts=chosen)
        if not chosen:
            routed.not_met_reason = "no mail was sent and no calendar or chat change was made"
        return routed
    # "all": the answer and every change; a file that cannot be extracted is shown as such.
    return Routed(target, include_answer=True, artifacts=list(world.artifacts))


def _route_file(target: GradingTarget, world: WorldDiff, options: ExtractOptions) -> Routed:
    wanted = "/" + (target.path or "").lstrip("/")
    routed = Routed(target, include_answer=False)
    for artifact in world.artifacts:
        if artifact.kind == "file" and artifact.path is not None and artifact.path.lower() == wanted.lower():
            if artifact.change == "deleted":
                routed.not_met_reason = f"the file {wanted} was deleted"
                return routed
            routed.artifacts = [artifact]
            return _mark_failures(routed, all_must_fail=False)
    # Not changed: judge the file as it stands, if it exists at all.
    candidates = [p for p in world.after.entries if p.lower() == member_path(wanted).lower()]
    if not candidates:
        routed.not_met_reason = f"the file {wanted} does not exist in the final world"
        return routed
    data = world.after.read(candidates[0])
    routed.artifacts = [file_artifact_for_unchanged(candidates[0], data, options)]
    return _mark_failures(routed, all_must_fail=False)


def _mark_failures(routed: Routed, *, all_must_fail: bool) -> Routed:
    failed = [a for a in routed.artifacts if a.error]
    if failed and (not all_must_fail or len(failed) == len(routed.artifacts)):
        routed.ungradeable_reason = "could not extract " + "; ".join(f"{a.path}: {a.error}" for a in failed)
    return routed


# --- digest --------------------------------------------------------------------------------


def evidence_digest(
    task_prompt: str, answer: str | None, change_log: str, routed: Routed, config: JudgeConfig | None
) -> str:
    """sha256 of everything the judge could be shown for this criterion (before selection)."""
    payload = {
        "task_prompt": task_prompt,
        "answer": answer if routed.include_answer else None,
        "change_log": change_log,
        "artifacts": [[a.id, a.text] for a in routed.artifacts],
        "budget": config.budget_chars() if config else None,
        "selector": config.selector if config else None,
        # How selection works is part of what the judge is shown: a new grader misses the
        # verdicts an old one cached for the same evidence.
        "grader_version": GRADER_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# --- fitting -------------------------------------------------------------------------------


def rank(criterion: str, artifacts: list[Artifact]) -> list[Artifact]:
    """Deterministic relevance order: criterion words in the title weigh most, then in the text;
    new work before app data of no mention, failed extractions last."""
    words = criterion_words(criterion)

    def score(item: tuple[int, Artifact]) -> tuple[float, int]:
        index, artifact = item
        title = artifact.title.lower()
        text = artifact.text.lower()
        value = sum(3.0 for w in words if w in title)
        value += sum(math.log1p(text.count(w)) for w in words)
        if artifact.change in ("created", "modified", "sent", "posted", "replied"):
            value += 1.0
        if artifact.error:
            value -= 2.0
        return (-value, index)

    return [a for _, a in sorted(enumerate(artifacts), key=score)]


@dataclass
class Fitted:
    """The artifacts shown (texts possibly truncated) and how they were chosen."""

    shown: list[tuple[Artifact, str]]
    note: str
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0


def _cost(artifact: Artifact, text: str | None = None) -> int:
    """Characters an artifact takes in the prompt: its text plus its block's fence and header."""
    return 80 + len(artifact.id) + len(artifact.title) + len(artifact.text if text is None else text)


def _fill(ordered: list[Artifact], budget: int) -> list[tuple[Artifact, str]]:
    shown: list[tuple[Artifact, str]] = []
    left = budget
    for artifact in ordered:
        overhead = _cost(artifact, "")
        if left < overhead + min(len(artifact.text), 200):
            break
        text = truncate(artifact.text, left - overhead)
        shown.append((artifact, text))
        left -= overhead + len(text)
    return shown


def _fitted(shown: list[tuple[Artifact, str]], note: str, call: Completion | None) -> Fitted:
    """A Fitted carrying the selector call's cost and tokens (none without a call)."""
    if call is None:
        return Fitted(shown, note)
    return Fitted(
        shown,
        note,
        call.cost_usd,
        call.prompt_tokens,
        call.completion_tokens,
        call.reasoning_tokens,
        call.cached_tokens,
    )


def _show_every(
    kind: str, artifacts: list[Artifact], budget: int, criterion: str
) -> list[tuple[Artifact, str]]:
    """Every one of ``artifacts`` (changes to what existed) within ``budget`` where possible:
    whole, else each cut to a fair share, else one listing that names them all, content cut,
    else one that names as many as fit (the criterion's first) and counts the rest per folder."""
    if sum(_cost(a) for a in artifacts) <= budget:
        return [(a, a.text) for a in artifacts]
    overheads = sum(_cost(a, "") for a in artifacts)
    floors = [min(len(a.text), 200) for a in artifacts]
    if overheads + sum(floors) <= budget:
        shares = fair_shares([len(a.text) for a in artifacts], budget - overheads)
        return [
            (a, truncate(a.text, max(share, floor)))
            for a, share, floor in zip(artifacts, shares, floors, strict=True)
        ]
    head = f"{counted(len(artifacts), kind)}, listed without their content (too many for the context budget):"
    lines = [printable(a.title) for a in artifacts]
    if size([head, *lines]) > budget:
        lines = named_within(
            [(kind, a.path, line) for a, line in zip(artifacts, lines, strict=True)],
            budget - len(head) - 1,
            criterion_words(criterion),
        )
    listing = Artifact(
        id=f"listing:{kind}", kind="listing", title=f"{kind} listing", text="\n".join([head, *lines])
    )
    return [(listing, listing.text)]


def _short(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _by_kind(artifacts: list[Artifact]) -> dict[str, list[Artifact]]:
    """Artifacts per kind of change: kinds that alter what existed first, then in order."""
    kinds: dict[str, list[Artifact]] = {}
    for artifact in sorted(artifacts, key=lambda a: not a.alters_existing):
        kinds.setdefault(artifact.change_kind, []).append(artifact)
    return kinds


def _per_kind(
    artifacts: list[Artifact], ordered: list[Artifact], budget: int, criterion: str
) -> tuple[list[tuple[Artifact, str]], list[str]]:
    """Fit ``artifacts`` into ``budget``, each kind of change within its fair share: changes to
    what existed are all shown, the others in ``ordered`` order while their share lasts.
    Returns what is shown and, per kind, what was left out (``312 created files (…)``)."""
    kinds = _by_kind(artifacts)
    shares = fair_shares([sum(_cost(a) for a in group) for group in kinds.values()], budget)
    shown: list[tuple[Artifact, str]] = []
    omitted: list[str] = []
    for (kind, group), share in zip(kinds.items(), shares, strict=True):
        always = [a for a in group if a.alters_existing]
        if always:
            shown.extend(_show_every(kind, always, share, criterion))
            continue
        members = {id(a) for a in group}
        chosen = _fill([a for a in ordered if id(a) in members], share)
        shown.extend(chosen)
        picked = {id(a) for a, _ in chosen}
        left_out = [a for a in group if id(a) not in picked]
        if left_out:
            examples = ", ".join(_short(printable(a.path or a.title)) for a in left_out[:3])
            more = f", … {len(left_out) - 3} more" if len(left_out) > 3 else ""
            omitted.append(f"{counted(len(left_out), kind)} not shown ({examples}{more})")
    return shown, omitted


async def fit(criterion: str, artifacts: list[Artifact], budget: int, config: JudgeConfig) -> Fitted:
    """Choose and truncate artifacts to ``budget`` characters; never returns an empty selection
    when there are artifacts.

    Each kind of change (deleted, modified, created files; sent, deleted, edited mails;
    created, updated, deleted events; chat messages by change) gets a fair share of the budget, so one kind
    cannot crowd out the others.  Changes to what existed before are always shown (cut, or
    listed without content, when their share is too small); the other kinds are chosen by the
    selector within their share.  The note says how, and counts what was left out per kind."""
    total = sum(_cost(a) for a in artifacts)
    if total <= budget:
        return Fitted([(a, a.text) for a in artifacts], "all")
    choosable = [a for a in artifacts if not a.alters_existing]
    call = None
    try:
        if config.selector == "llm" and choosable:
            catalogue = [(a.id, f"{a.title}: {a.text[:300]!r}") for a in choosable]
            ids, call = await select(config, criterion, catalogue)
            by_id = {a.id: a for a in choosable}
            ordered = [by_id[i] for i in ids]
            method = "llm-selected"
        else:
            ordered = rank(criterion, choosable)
            method = "ranked"
        shown, omitted = _per_kind(artifacts, ordered, budget, criterion)
        if not shown:
            raise ValueError("selection left nothing to show")
    except Exception as exc:  # noqa: BLE001 - a failed selection falls back, never to "no files"
        failure = f"selection failed ({type(exc).__name__}: {str(exc)[:200]})"
        # The deterministic ranking, still within each kind's share: showing every one of a
        # flood of artifacts cut short would blow the context window many times over.
        shown, omitted = _per_kind(artifacts, rank(criterion, choosable), budget, criterion)
        method = f"{failure}; ranked instead"
        if not shown:
            shares = fair_shares([len(a.text) for a in artifacts], max(budget - 200 * len(artifacts), 1000))
            shown = [
                (a, truncate(a.text, max(share, 200))) for a, share in zip(artifacts, shares, strict=True)
            ]
            return _fitted(shown, f"{failure}; all truncated", call)
    existing = [a for a in artifacts if a.alters_existing]
    shown_ids = {a.id for a, _ in shown}
    note = f"{method}, each kind of change within its share of the budget: "
    note += f"{sum(a.id in shown_ids for a in artifacts)} of {len(artifacts)} shown"
    if existing:
        listed = [a for a, _ in shown if a.kind == "listing"]
        note += f"; every change to what existed before is shown ({len(existing)}"
        note += f", {len(listed)} kind(s) listed without content)" if listed else ")"
    if omitted:
        note += "; " + "; ".join(omitted)
    return _fitted(shown, note, call)


def build_blocks(
    task_prompt: str, answer: str | None, change_log: str, fitted: Fitted, criterion: Criterion, budget: int
) -> list[Block]:
    """The fenced sections of a judge prompt, in reading order (criterion last)."""
    blocks = [Block("TASK", truncate(task_prompt, budget // 8))]
    if change_log:
        limit = budget // 8
        # A ChangeLog fits itself: changes to what existed are kept, additions counted.
        if isinstance(change_log, ChangeLog):
            text = change_log.within(limit, criterion.criteria)
        else:
            text = truncate(change_log, limit)
        blocks.append(Block("CHANGES", text))
    if answer is not None:
        blocks.append(
            Block("FINAL_ANSWER", truncate(answer, budget // 4) if answer.strip() else "(no final answer)")
        )
    for index, (artifact, text) in enumerate(fitted.shown, start=1):
        blocks.append(Block(f"ARTIFACT_{index}", f"artifact id: {artifact.id}\n{text}"))
    if fitted.note != "all":
        blocks.append(Block("EVIDENCE_NOTE", f"Evidence selection: {fitted.note}"))
    blocks.append(Block("CRITERION", criterion.criteria))
    return blocks
