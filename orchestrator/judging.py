"""The judge of a run: whose verdicts a run counts, and how reports and the viewer name it.

A run records its judge (the :class:`~atoll.judge.JudgeIdentity` of its experiment's judge) in
its identity document (:mod:`orchestrator.fingerprint`, key ``judge``), and every trial result
the id of the grading it counts (``TrialResult.judge_id``). Reports count a trial only when the
run's judge graded it: a trial graded by another judge (a regrade under way) is left out and
said so, never counted as if one judge had decided both. The stored spec keeps every judge the
run was recorded with under ``judges`` (id → identity), so a report can name a judge that no
longer is the run's.

Runs recorded before runs had a judge (an identity document without ``judge``) and results
recorded before results had one (``judge_id`` None) are counted as before, labelled "judge not
recorded".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from atoll.judge import JudgeIdentity, judge_identity
from atoll.llm.profiles import experiment_judge
from atoll.trial import TrialResult

if TYPE_CHECKING:
    from atoll.experiment import ExperimentSpec
    from orchestrator.store import TrialStore
    from orchestrator.store_runs import RunRecord

#: The stored spec's key of every judge the run was recorded with (id → identity).
JUDGES_KEY = "judges"
NOT_RECORDED = "judge not recorded"


def spec_judge(
    spec: ExperimentSpec, *, model: str | None = None, api_base: str | None = None
) -> JudgeIdentity:
    """The identity of ``spec``'s judge (``model``/``api_base`` override its own, as a regrade
    does). Raises AtollError(bad_input) as :func:`atoll.llm.profiles.experiment_judge` does."""
    return judge_identity(experiment_judge(spec, model=model, api_base=api_base))


def recorded_judge(record: RunRecord | None) -> JudgeIdentity | None:
    """The judge the run's record names; None for a run recorded before runs had one."""
    document = record.identity if record is not None else None
    if not document or document.get("judge") is None:
        return None
    return JudgeIdentity.model_validate(document["judge"])


def known_judges(record: RunRecord | None, *more: JudgeIdentity | None) -> dict[str, dict[str, Any]]:
    """Every judge the run was recorded with, and ``more``: id → identity (JSON)."""
    known: dict[str, dict[str, Any]] = dict((record.spec.get(JUDGES_KEY) or {}) if record else {})
    for identity in (recorded_judge(record), *more):
        if identity is not None:
            known[identity.id] = identity.model_dump(mode="json")
    return known


def judge_change(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """``judge: OLD → NEW`` (each described) when both identity documents name a judge and they
    differ; None otherwise (a document without one was recorded before runs had a judge)."""
    before, after = old.get("judge"), new.get("judge")
    if before is None or after is None or before == after:
        return None
    return (
        f"judge: {JudgeIdentity.model_validate(before).describe()} → "
        f"{JudgeIdentity.model_validate(after).describe()}"
    )


def describe_judge(judge_id: str | None, known: dict[str, dict[str, Any]]) -> str:
    """A judge for people: its description when the run recorded it, else its id."""
    if judge_id is None:
        return NOT_RECORDED
    identity = known.get(judge_id)
    return JudgeIdentity.model_validate(identity).describe() if identity else f"judge {judge_id}"


def other_judge(
    judge_id: str | None, run_judge: JudgeIdentity | None, known: dict[str, dict[str, Any]], run: str
) -> str | None:
    """Why a trial graded by ``judge_id`` is left out of the run's report: its judge is not the
    run's (``graded by judge X, not the run's judge Y; `atoll regrade RUN` finishes the
    regrade``); None when it counts (the run's judge graded it, no judge was recorded for it,
    it was never graded, or the run records no judge)."""
    if judge_id is None or run_judge is None or judge_id == run_judge.id:
        return None
    return (
        f"graded by judge {describe_judge(judge_id, known)}, not the run's judge "
        f"{run_judge.describe()}; `atoll regrade {run}` finishes the regrade"
    )


def judged_elsewhere(record: RunRecord | None, run: str) -> Callable[[TrialResult], str | None]:
    """For the run's record: why a result is left out for its judge (:func:`other_judge`), or None."""
    judge, known = recorded_judge(record), known_judges(record)
    return lambda result: other_judge(result.judge_id, judge, known, run)


def calibration_line(store: TrialStore | None, judge_id: str | None) -> str:
    """``judge calibrated: accuracy X on N labels (date)`` from the newest calibration record of
    the judge ``judge_id`` in ``store`` (:mod:`orchestrator.calibrations`, kept by ``atoll judge
    calibrate``), else ``uncalibrated`` (no store, no recorded judge, or no record)."""
    from orchestrator.calibrations import calibration_line as line
    from orchestrator.calibrations import latest_calibration

    if store is None or judge_id is None:
        return line(None)
    return line(latest_calibration(store, judge_id))


def judge_summary(
    store: TrialStore | None,
    record: RunRecord | None,
    results: Iterable[TrialResult | None],
    run: str,
) -> dict[str, Any]:
    """Whose verdicts a run's report shows: the run's judge (``id``, ``model``, ``describe``,
    ``identity``; all None when the run records none), ``label`` (one line naming it and what
    is left out), ``calibration``, and per judge the trials it graded (``gradings``: ``counted``
    ones by the run's judge, ``other_judges`` left out with their reason, ``not_recorded``:
    graded before atoll recorded judges, counted)."""
    judge = recorded_judge(record)
    known = known_judges(record)
    graded = [r for r in results if r is not None and (r.judge_id is not None or r.grade_uri)]
    by_judge = Counter(r.judge_id for r in graded)
    not_recorded = by_judge.pop(None, 0)
    others: list[dict[str, Any]] = [
        {"id": judge_id, "describe": describe_judge(judge_id, known), "trials": count}
        for judge_id, count in sorted(by_judge.items(), key=lambda item: (-item[1], str(item[0])))
        if judge is None or judge_id != judge.id
    ]
    left_out = [other | {"reason": other_judge(other["id"], judge, known, run)} for other in others]
    counted = by_judge.get(judge.id, 0) if judge is not None else sum(by_judge.values())
    label = judge.describe() if judge is not None else NOT_RECORDED
    if judge is not None and left_out:
        waiting = sum(other["trials"] for other in left_out)
        label += (
            f" · {waiting} trial(s) graded by another judge left out until `atoll regrade {run}` finishes"
        )
    return {
        "id": judge.id if judge else None,
        "model": judge.model if judge else None,
        "describe": judge.describe() if judge else NOT_RECORDED,
        "identity": judge.model_dump(mode="json") if judge else None,
        "label": label,
        "calibration": calibration_line(store, judge.id if judge else None),
        "gradings": {
            "counted": counted,
            "not_recorded": not_recorded,
            "other_judges": left_out if judge is not None else [],
            # A run that records no judge counts every grading; these name who made them.
            "judges_seen": others if judge is None else [],
        },
    }


def judge_markdown(summary: dict[str, Any] | None) -> list[str]:
    """report.md's lines of :func:`judge_summary`: whose verdicts the report shows (description
    and id), its calibration, gradings whose judge was not recorded, and the trials left out
    because another judge graded them, with count and reason."""
    if not summary:
        return []
    gradings = summary["gradings"]
    name = f"`{_cell(summary['describe'])}`" + (f" (id `{summary['id']}`)" if summary["id"] else "")
    lines = [f"**Judge:** {name} · {summary['calibration']}", ""]
    if gradings["not_recorded"]:
        lines.append(
            f"- {gradings['not_recorded']} graded trial(s): {NOT_RECORDED} (graded before atoll recorded "
            "judges; counted)"
        )
    lines += [
        f"- Left out: {other['trials']} trial(s) {_cell(other['reason'])}"
        for other in gradings["other_judges"]
    ]
    lines += [
        f"- {seen['trials']} trial(s) graded by `{_cell(seen['describe'])}`"
        for seen in gradings["judges_seen"]
    ]
    return lines + ([""] if len(lines) > 2 else [])


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell or list item."""
    return str(text).replace("|", "¦").replace("\n", " ")


__all__ = [
    "JUDGES_KEY",
    "NOT_RECORDED",
    "calibration_line",
    "describe_judge",
    "judge_change",
    "judge_markdown",
    "judge_summary",
    "judged_elsewhere",
    "known_judges",
    "other_judge",
    "recorded_judge",
    "spec_judge",
]
