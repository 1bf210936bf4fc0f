"""What the chat tools return (their output schemas)."""

from __future__ import annotations

from typing import Any

from mcp_servers._core.outputs import ResultModel


class Author(ResultModel):
    name: str | None = None
    email: str | None = None


class Reaction(ResultModel):
    emoji: str
    count: int
    users: list[str]


class Post(ResultModel):
    """A post; ``text`` is empty and ``deleted`` true for a deleted one."""

    post_id: str
    channel_id: str
    topic_id: str | None = None
    author: Author
    created_at: str | None = None
    created_date: str | None = None
    text: str
    is_reply: bool
    deleted: bool
    reactions: list[Reaction]
    attachments: list[str] | None = None
    reply_count: int | None = None


class Page(ResultModel):
    total: int
    page: int
    limit: int
    has_more: bool


class Channel(ResultModel):
    channel_id: str
    name: str
    type: str
    member_count: int
    message_count: int
    last_activity: str | None = None


class ChannelPage(Page):
    channels: list[Channel]
    problems: list[str] | None = None


class ChannelHistory(Page):
    channel_id: str
    name: str
    posts: list[Post]


class ThreadReplies(ResultModel):
    channel_id: str
    root: Post | None = None
    replies: list[Post]
    total: int


class UserSummary(ResultModel):
    user_id: str
    name: str
    email: str
    user_type: str


class UserPage(Page):
    users: list[UserSummary]


class UserProfile(ResultModel):
    user_id: str
    name: str
    email: str
    user_type: str
    channels: list[str] | None = None
    memberships: list[dict[str, Any]] | None = None


class ReactionAdded(ResultModel):
    added: bool
    already_reacted: bool | None = None
    post_id: str
    emoji: str


class PostDeleted(ResultModel):
    deleted: bool
    already_deleted: bool
    post_id: str


class PostPage(Page):
    posts: list[Post]
