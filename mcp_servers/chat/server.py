"""The chat tools (reference names and arguments), declared once for both modes."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated

from pydantic import Field

from atoll.errors import ErrorCode
from mcp_servers._core.definition import ServerDefinition
from mcp_servers._core.errors import ToolError
from mcp_servers.chat.results import (
    ChannelHistory,
    ChannelPage,
    Post,
    PostDeleted,
    PostPage,
    ReactionAdded,
    ThreadReplies,
    UserPage,
    UserProfile,
)
from mcp_servers.chat.service import ChatService

SERVER = ServerDefinition(
    "chat",
    consolidated_name="chat",
    description=(
        "Google Chat (the world's export): channels (spaces and DMs), posts and threads, "
        "people; post, reply, react, delete your own posts, search messages."
    ),
    state=ChatService,
)

Page = Annotated[int, Field(ge=0, le=100_000, description="page number, from 0")]
ChannelId = Annotated[
    str,
    Field(
        min_length=1, max_length=300, description='channel id, e.g. "Space AAAAl3kD9xY" or "DM 8hB2jAAAAE"'
    ),
]
PostId = Annotated[str, Field(min_length=1, max_length=300, description="post id (message_id) as listed")]
Text = Annotated[str, Field(min_length=1, max_length=32_000)]


@SERVER.tool(action="list_channels", read_only=True)
def list_channels(
    chat: ChatService, limit: Annotated[int, Field(ge=1, le=100)] = 50, page: Page = 0
) -> ChannelPage:
    """List channels (spaces first, then DMs, by name) with member and message counts.

    Args:
        limit: channels per page (1-100).
        page: page number, from 0.
    """
    return ChannelPage.from_fields(chat.list_channels(limit, page))


@SERVER.tool(action="get_history", read_only=True)
def get_channel_history(
    chat: ChatService, channel_id: ChannelId, limit: Annotated[int, Field(ge=1, le=100)] = 30, page: Page = 0
) -> ChannelHistory:
    """Root posts of a channel, newest first, each with its reply count.

    Args:
        channel_id: the channel (its id, its code or its name).
        limit: posts per page (1-100).
        page: page number, from 0.
    """
    return ChannelHistory.from_fields(chat.history(channel_id, limit, page))


@SERVER.tool(action="get_replies", read_only=True)
def get_thread_replies(chat: ChatService, channel_id: ChannelId, post_id: PostId) -> ThreadReplies:
    """A thread: its root post and the replies in time order (oldest first).

    Args:
        channel_id: the channel.
        post_id: the root post (or any post of the thread).
    """
    return ThreadReplies.from_fields(chat.replies(channel_id, post_id))


@SERVER.tool(action="get_profile", read_only=True)
def get_user_profile(
    chat: ChatService, user_id: Annotated[str, Field(min_length=1, max_length=300)]
) -> UserProfile:
    """A person's profile: name, email, channels shared with them.

    Args:
        user_id: the user id from get_users, or an email address.
    """
    return UserProfile.from_fields(chat.profile(user_id))


@SERVER.tool(action="list_users", read_only=True)
def get_users(chat: ChatService, limit: Annotated[int, Field(ge=1, le=100)] = 50, page: Page = 0) -> UserPage:
    """Everyone in the chat export, by name.

    Args:
        limit: users per page (1-100).
        page: page number, from 0.
    """
    return UserPage.from_fields(chat.users(limit, page))


@SERVER.tool(action="post")
def post_message(chat: ChatService, channel_id: ChannelId, message: Text) -> Post:
    """Post a new message (a new thread) to a channel as the current user.

    Args:
        channel_id: the channel.
        message: the text to post.
    """
    return Post.from_fields(chat.post(channel_id, message))


@SERVER.tool(action="reply")
def reply_to_thread(chat: ChatService, channel_id: ChannelId, post_id: PostId, message: Text) -> Post:
    """Reply in the thread of a post as the current user.

    Args:
        channel_id: the channel.
        post_id: the post to reply to (its thread gets the reply).
        message: the reply text.
    """
    return Post.from_fields(chat.reply(channel_id, post_id, message))


@SERVER.tool(action="react")
def add_reaction(
    chat: ChatService,
    channel_id: ChannelId,
    post_id: PostId,
    emoji_name: Annotated[str, Field(min_length=1, max_length=64)],
) -> ReactionAdded:
    """Add the current user's emoji reaction to a post (no-op if already there).

    Args:
        channel_id: the channel.
        post_id: the post.
        emoji_name: the emoji itself ("👍") or a name ("thumbsup", ":tada:").
    """
    return ReactionAdded.from_fields(chat.react(channel_id, post_id, emoji_name))


@SERVER.tool(action="delete", destructive=True)
def delete_post(chat: ChatService, channel_id: ChannelId, post_id: PostId) -> PostDeleted:
    """Delete one of the current user's own posts (kept in the export as deleted, text cleared).

    Args:
        channel_id: the channel.
        post_id: the post to delete.
    """
    return PostDeleted.from_fields(chat.delete(channel_id, post_id))


def _bound(value: str | None, argument: str) -> datetime | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: {text[:40]!r} is not YYYY-MM-DD or an ISO date-time",
            argument=argument,
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


@SERVER.tool(action="search", read_only=True)
def search_messages(
    chat: ChatService,
    query: str | None = None,
    channel_id: Annotated[str | None, Field(max_length=300)] = None,
    author: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 30,
    page: Page = 0,
) -> PostPage:
    """Find posts and replies, newest first, by text, channel, author and date (deleted posts excluded).

    Args:
        query: case-insensitive text the message contains.
        channel_id: only this channel.
        author: part of the author's name or email.
        after: only messages at or after this date/time (YYYY-MM-DD or ISO; UTC unless an offset is given).
        before: only messages before this date/time.
        limit: results per page (1-100).
        page: page number, from 0.
    """
    low, high = _bound(after, "after"), _bound(before, "before")
    if not any(value for value in (query, channel_id, author, low, high)):
        raise ToolError(
            ErrorCode.invalid_argument,
            "search_messages: give query, channel_id, author, after or before",
            argument="query",
        )
    return PostPage.from_fields(
        chat.search(
            query=query, channel_id=channel_id, author=author, after=low, before=high, limit=limit, page=page
        )
    )
