"""What the mail tools return (their output schemas)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from mcp_servers._core.outputs import ResultModel


class MailSummary(ResultModel):
    """One message in a listing (and the head of every other mail result)."""

    model_config = ConfigDict(populate_by_name=True)

    mail_id: str
    thread_id: str
    sender: str = Field(alias="from")
    to: list[str]
    cc: list[str]
    subject: str
    date: str | None = Field(None, description="ISO 8601, None when the message has no usable Date")
    has_attachments: bool
    labels: list[str]
    mailbox: str
    bcc: list[str] | None = Field(None, description="shown only for messages the world's user sent")


class MailPage(ResultModel):
    mails: list[MailSummary]
    total: int
    offset: int
    limit: int
    has_more: bool
    notices: list[str] | None = None


class Attachment(ResultModel):
    filename: str
    content_type: str
    size: int
    saved_to: str | None = None


class MailMessage(MailSummary):
    in_reply_to: str | None = None
    references: list[str]
    body: str
    body_format: str
    body_truncated: bool
    attachments: list[Attachment]


class SentMail(MailSummary):
    """The message as appended to the mailbox; ``attachments`` are the attached file names."""

    attachments: list[str]
