"""Grade contracts (DESIGN §5): typed snapshot changes and per-criterion verdicts."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from atoll.coworkers import CoworkerExchange
from atoll.judge import JudgeIdentity


class Verdict(StrEnum):
    met = "met"
    not_met = "not_met"
    ungradeable = "ungradeable"


class UngradeableCode(StrEnum):
    """Why a criterion could not be decided. A grade's ``ungradeable_reasons`` lead each reason
    with it (``criterion-id: code: reason``), so an ungradeable trial's error kind is one of
    these (:func:`atoll.trial.error_kind`)."""

    check_error = "check_error"  # the criterion's programmatic check could not run
    evidence_unreadable = "evidence_unreadable"  # a changed file the judge needs could not be extracted
    no_judge = "no_judge"  # no judge configured and no check to decide it
    judge_unavailable = "judge_unavailable"  # the judge's calls failed (after retries)
    judge_malformed = "judge_malformed"  # the judge answered, but never in the verdict format
    judge_no_verdict = "judge_no_verdict"  # too few of the judge's samples gave a verdict
    grader_error = "grader_error"  # the grader itself failed on this criterion (a bug)


class FileChange(BaseModel):
    """A file created, modified or deleted between two snapshots."""

    path: str = Field(description="Snapshot member path, e.g. filesystem/Reports/memo.docx")
    change: Literal["created", "modified", "deleted"]
    size_before: int | None = None
    size_after: int | None = None
    sha256_before: str | None = None
    sha256_after: str | None = None
    sub_items: list[str] = Field(
        default_factory=list, description="Which sheets/slides/pages changed, where known"
    )


class MailSent(BaseModel):
    message_id: str | None = None
    from_: str = Field(default="", alias="from")
    to: list[str] = Field(default_factory=list)
    cc: list[str] = Field(default_factory=list)
    bcc: list[str] = Field(default_factory=list)
    subject: str = ""
    body: str = ""
    attachments: list[str] = Field(default_factory=list)
    in_reply_to: str | None = None

    model_config = ConfigDict(populate_by_name=True)


class EventChange(BaseModel):
    change: Literal["created", "updated", "deleted"]
    uid: str
    summary: str = ""
    start: str | None = None
    end: str | None = None
    attendees: list[str] = Field(default_factory=list)
    location: str | None = None
    changed_fields: dict[str, Any] = Field(
        default_factory=dict, description="field -> {before, after} for updates"
    )


class ChatChange(BaseModel):
    change: Literal["posted", "replied", "reacted", "deleted", "edited"]
    channel_id: str
    channel_name: str = ""
    message_id: str
    text: str = ""
    previous_text: str | None = Field(default=None, description="for an edit: the text before it")
    emoji: str | None = None
    author: str | None = None


class Changes(BaseModel):
    """The typed diff of two world snapshots."""

    files: list[FileChange] = Field(default_factory=list)
    mails_sent: list[MailSent] = Field(default_factory=list)
    mails_deleted: list[MailSent] = Field(
        default_factory=list, description="Messages there before and in no mbox after (as they were)"
    )
    mails_edited: list[MailSent] = Field(
        default_factory=list, description="Messages there before whose content changed (as they are now)"
    )
    mails_edited_before: list[MailSent] = Field(
        default_factory=list,
        description="The messages of mails_edited as they were before, in the same order",
    )
    events: list[EventChange] = Field(default_factory=list)
    chat: list[ChatChange] = Field(default_factory=list)
    coworkers: list[CoworkerExchange] = Field(
        default_factory=list,
        description="the agent's messages to the world's personas and their replies (docs/coworkers.md)",
    )


class CriterionVerdict(BaseModel):
    verifier_id: str
    criterion: str
    verdict: Verdict
    rationale: str = ""
    evidence: list[str] = Field(default_factory=list, description="ids of the artifacts shown")
    judge_model: str | None = Field(default=None, description="None when a program decided")
    prompt_version: str | None = None
    decided_by: Literal["check", "judge", "rule"] = "judge"
    check_verdict: Verdict | None = Field(
        default=None,
        description="the programmatic check's own verdict where the criterion has one (ungradeable: "
        "it could not run), whoever decided `verdict`; None: no check",
    )
    check_agrees: bool | None = Field(
        default=None,
        description="where both a check and the judge spoke: whether the judge's verdict is the check's",
    )
    samples: list[Verdict] = Field(default_factory=list, description="votes when N-sample majority")
    ungradeable_reason: str | None = None
    ungradeable_code: UngradeableCode | None = Field(
        default=None, description="why it is ungradeable, as a code (None in grades recorded before)"
    )
    cached: bool = False
    evidence_digest: str | None = Field(
        default=None, description="sha256 of the evidence routed to this criterion (cache key part)"
    )
    evidence_note: str | None = Field(
        default=None, description="How evidence was chosen when it exceeded the judge's context"
    )

    def known_check_verdict(self) -> Verdict | None:
        """The programmatic check's own verdict: ``check_verdict``; in a grade recorded before
        atoll recorded it, the verdict where the check decided (``decided_by`` "check"), else
        None (no check, or not known)."""
        if self.check_verdict is not None:
            return self.check_verdict
        return self.verdict if self.decided_by == "check" else None


class Grade(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: Literal[1] = 1
    task_id: str
    trial_id: str | None = None
    criteria: list[CriterionVerdict]
    passed: bool
    score: float = Field(ge=0.0, le=1.0, description="share of criteria met")
    ungradeable: int = Field(default=0, description="number of ungradeable criteria")
    ungradeable_reasons: list[str] = Field(default_factory=list)
    judge: JudgeIdentity | None = Field(
        default=None,
        description="the identity of the grading that decided these verdicts (model None: checks "
        "only); None in grades recorded before atoll recorded it",
    )
    changes: Changes = Field(default_factory=Changes)
    judge_cost_usd: float = Field(
        default=0.0,
        description="USD of the judge's calls from litellm's price map; 0 with judge tokens = unknown "
        "(an unpriced model, see atoll.costs)",
    )
    judge_prompt_tokens: int = Field(default=0, description="prompt tokens of the judge's calls")
    judge_completion_tokens: int = Field(default=0, description="completion tokens of the judge's calls")
    judge_reasoning_tokens: int = Field(default=0, description="of judge_completion_tokens, the reasoning")
    judge_cached_tokens: int = Field(
        default=0, description="of judge_prompt_tokens, those read from the provider's prompt cache"
    )

    @classmethod
    def from_verdicts(cls, task_id: str, verdicts: list[CriterionVerdict], **fields: Any) -> Grade:
        """Task pass = every criterion met; score = share met; ungradeable counted."""
        met = sum(v.verdict is Verdict.met for v in verdicts)
        unknown = [v for v in verdicts if v.verdict is Verdict.ungradeable]
        return cls(
            task_id=task_id,
            criteria=verdicts,
            passed=bool(verdicts) and met == len(verdicts),
            score=met / len(verdicts) if verdicts else 0.0,
            ungradeable=len(unknown),
            ungradeable_reasons=[_reason_line(v) for v in unknown],
            **fields,
        )


def _reason_line(verdict: CriterionVerdict) -> str:
    """``criterion-id: code: reason`` (``criterion-id: reason`` where no code was recorded)."""
    code = f"{verdict.ungradeable_code}: " if verdict.ungradeable_code else ""
    return f"{verdict.verifier_id}: {code}{verdict.ungradeable_reason}"
