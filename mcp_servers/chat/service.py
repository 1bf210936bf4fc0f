"""Chat operations behind the tools: channels, history, threads, people, posting.

Writes hold the foundation's per-file lock, re-read ``messages.json`` under it, change
only the records concerned (every unknown field of every record is kept), write the file
atomically and hand the new index to the cache.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, overload

import orjson

from atoll.errors import ErrorCode
from atoll.formats.chat.messages import GroupMessages, Message, decode_json, index_messages
from atoll.formats.chat.timestamps import format_takeout_date
from mcp_servers._core.beneath import OutsideRoot
from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers._core.paths import validate_id
from mcp_servers._core.store import file_lock
from mcp_servers.chat.index import ChatIndex, GroupFolder
from mcp_servers.chat.people import current_user, everyone
from mcp_servers.chat.views import EMOJI_NAMES, emoji_of, person, post_view

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def dump_json(value: Any) -> bytes:
    """JSON as Takeout writes it (2-space indent, UTF-8), via orjson: 10x faster than json."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits, NaN from the source
        return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def new_id(length: int = 11) -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(length))


def page_of(items: list[Any], limit: int, page: int, key: str) -> dict[str, Any]:
    """``{key: items of the page, total, page, limit, has_more}`` (pages count from 0)."""
    start = page * limit
    chunk = items[start : start + limit]
    return {
        key: chunk,
        "total": len(items),
        "page": page,
        "limit": limit,
        "has_more": start + len(chunk) < len(items),
    }


class ChatService:
    """The Google Chat export of one world (thread-safe)."""

    def __init__(self, context: ServerContext) -> None:
        self.context = context
        self.root = context.app_dir("chat")
        self.index = ChatIndex(self.root, context.apps_data_root)

    def warm(self) -> None:
        """Parse every space's messages now (run in the background after a populate)."""
        for group in self.index.groups():
            self.index.group_messages(group)

    # ---- lookups ---------------------------------------------------------------------

    def group(self, channel_id: str) -> GroupFolder:
        """The group named by ``channel_id``: folder name, its code, or its display name."""
        validate_id(channel_id, argument="channel_id")
        wanted = channel_id.strip()
        groups = self.index.groups()
        for group in groups:
            if group.group_id == wanted:
                return group
        matches = [g for g in groups if g.code == wanted]
        if not matches:
            matches = [g for g in groups if self._name(g).lower() == wanted.lower()]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(g.group_id for g in groups[:10]) or "none"
        raise ToolError(
            ErrorCode.not_found,
            f"channel_id: no channel {wanted[:80]!r} (channels: {known})",
            argument="channel_id",
        )

    def parsed(self, group: GroupFolder) -> GroupMessages:
        parsed = self.index.group_messages(group)
        if parsed.error:
            raise ToolError(ErrorCode.bad_data, parsed.error, argument="channel_id")
        return parsed

    def find_post(self, group: GroupFolder, parsed: GroupMessages, post_id: str) -> Message:
        """A message by full id ``<code>/<topic>/<unique>``, ``<topic>/<unique>`` or ``<unique>``."""
        if not isinstance(post_id, str) or not post_id.strip() or any(ord(c) < 32 for c in post_id):
            raise ToolError(ErrorCode.invalid_argument, "post_id: expected a message id", argument="post_id")
        wanted = post_id.strip()
        index = parsed.by_id.get(wanted)
        if index is None:
            tail = wanted.split("/")[-2:] if "/" in wanted else None
            for position, message in enumerate(parsed.messages):
                parts = message.message_id.split("/")
                if (tail and parts[-2:] == tail) or (not tail and parts[-1] == wanted):
                    index = position
                    break
        if index is None:
            raise ToolError(
                ErrorCode.not_found,
                f"post_id: no post {wanted[:100]!r} in channel {group.group_id!r}",
                argument="post_id",
            )
        return parsed.messages[index]

    def _name(self, group: GroupFolder) -> str:
        info = self.index.json_object(group.info_path)
        if info.get("name"):
            return str(info["name"])
        me = (self.me(required=False) or {}).get("email", "").lower()
        others = [p["name"] or p["email"] for p in self._members(info) if p["email"].lower() != me]
        return ", ".join(others) or group.group_id

    @staticmethod
    def _members(info: dict[str, Any]) -> list[dict[str, str]]:
        return [p for p in (person(m) for m in info.get("members") or []) if p]

    @overload
    def me(self, *, required: Literal[True] = True) -> dict[str, str]: ...
    @overload
    def me(self, *, required: bool) -> dict[str, str] | None: ...
    def me(self, *, required: bool = True) -> dict[str, str] | None:
        """The current user (see :func:`mcp_servers.chat.people.current_user`); with
        ``required``, ToolError ``permission_denied`` when there is none."""
        return current_user(self.context, self.index, required=required)

    # ---- reading ---------------------------------------------------------------------

    def list_channels(self, limit: int, page: int) -> dict[str, Any]:
        channels, problems = [], []
        for group in self.index.groups():
            info = self.index.json_object(group.info_path)
            parsed = self.index.group_messages(group)
            kind = "dm" if group.group_id.startswith("DM ") else "space"
            view: dict[str, Any] = {
                "channel_id": group.group_id,
                "name": self._name(group),
                "type": kind,
                "member_count": len(self._members(info)),
                "message_count": len(parsed.messages),
                "last_activity": None,
            }
            if parsed.roots_newest_first or parsed.messages:
                view["last_activity"] = parsed.latest.isoformat() if parsed.latest else None
            if parsed.error:
                view["problem"] = parsed.error
                problems.append(parsed.error)
            channels.append(view)
        channels.sort(key=lambda c: (c["type"] != "space", c["name"].lower(), c["channel_id"]))
        result = page_of(channels, limit, page, "channels")
        if problems:
            result["problems"] = problems
        return result

    def history(self, channel_id: str, limit: int, page: int) -> dict[str, Any]:
        group = self.group(channel_id)
        parsed = self.parsed(group)
        start = page * limit
        positions = parsed.roots_newest_first[start : start + limit]
        posts = [
            post_view(
                group.group_id,
                parsed.messages[i],
                reply_count=len(parsed.replies.get(parsed.messages[i].topic_id, [])),
            )
            for i in positions
        ]
        total = len(parsed.roots_newest_first)
        return {
            "channel_id": group.group_id,
            "name": self._name(group),
            "posts": posts,
            "total": total,
            "page": page,
            "limit": limit,
            "has_more": start + len(posts) < total,
        }

    def replies(self, channel_id: str, post_id: str) -> dict[str, Any]:
        group = self.group(channel_id)
        parsed = self.parsed(group)
        message = self.find_post(group, parsed, post_id)
        positions = parsed.replies.get(message.topic_id, [])
        root = next((m for m in parsed.messages if m.topic_id == message.topic_id and m.is_root), None)
        return {
            "channel_id": group.group_id,
            "root": post_view(group.group_id, root, reply_count=len(positions)) if root else None,
            "replies": [post_view(group.group_id, parsed.messages[i]) for i in positions],
            "total": len(positions),
        }

    def people(self) -> dict[str, dict[str, Any]]:
        return everyone(self.index)

    def users(self, limit: int, page: int) -> dict[str, Any]:
        people = sorted(self.people().values(), key=lambda p: (p["name"].lower(), p["email"].lower()))
        listed = [{k: p[k] for k in ("user_id", "name", "email", "user_type")} for p in people]
        return page_of(listed, limit, page, "users")

    def profile(self, user_id: str) -> dict[str, Any]:
        validate_id(user_id, argument="user_id")
        wanted = user_id.strip()
        wanted = wanted[5:] if wanted.startswith("User ") else wanted
        for entry in self.people().values():
            if wanted in (entry["user_id"], entry["email"]) or wanted.lower() == entry["email"].lower():
                profile = dict(entry)
                for uid, folder in self.index.user_folders():
                    if uid == entry["user_id"]:
                        info = self.index.json_object(folder / "user_info.json")
                        profile["memberships"] = info.get("membership_info") or []
                return profile
        raise ToolError(ErrorCode.not_found, f"user_id: no user {wanted[:80]!r}", argument="user_id")

    def search(
        self,
        *,
        query: str | None,
        channel_id: str | None,
        author: str | None,
        after: datetime | None,
        before: datetime | None,
        limit: int,
        page: int,
    ) -> dict[str, Any]:
        groups = [self.group(channel_id)] if channel_id else self.index.groups()
        needle = (query or "").strip().lower()
        who = (author or "").strip().lower()
        hits: list[tuple[int, int, str, Message]] = []
        for group in groups:
            parsed = self.parsed(group) if channel_id else self.index.group_messages(group)
            for message in parsed.messages:
                if message.deleted or (needle and needle not in message.text.lower()):
                    continue
                if who and who not in message.author_name.lower() and who not in message.author_email.lower():
                    continue
                if (after and (not message.created or message.created < after)) or (
                    before and (not message.created or message.created >= before)
                ):
                    continue
                hits.append((message.sort_key, message.position, group.group_id, message))
        hits.sort(key=lambda h: (h[0], h[2], h[1]), reverse=True)  # newest first (sort_key: its time)
        result = page_of(hits, limit, page, "posts")
        result["posts"] = [post_view(g, m) for _, _, g, m in result["posts"]]  # the page's only
        return result

    # ---- writing ---------------------------------------------------------------------

    def _mutate(
        self, group: GroupFolder, change: Callable[[list[Any], GroupMessages], dict[str, Any]]
    ) -> dict[str, Any]:
        try:
            return self._mutate_file(group, change)
        except OutsideRoot:
            raise ToolError(
                ErrorCode.bad_data, f"{group.label} links outside the app data; not changing it"
            ) from None

    def _mutate_file(
        self, group: GroupFolder, change: Callable[[list[Any], GroupMessages], dict[str, Any]]
    ) -> dict[str, Any]:
        path = group.messages_path
        data = self.index.data
        if not data.contains(path):
            raise OutsideRoot(str(path))
        with file_lock(path):
            before = data.stamp(path)
            if before is not None:
                try:
                    raw = decode_json(data.read_bytes(path))
                except ValueError as exc:
                    raise ToolError(
                        ErrorCode.bad_data, f"{group.label} is not valid JSON ({exc}); not changing it"
                    ) from None
            else:
                raw = {"messages": []}
            if not isinstance(raw, dict) or not isinstance(raw.setdefault("messages", []), list):
                raise ToolError(
                    ErrorCode.bad_data, f"{group.label}: expected an object with a 'messages' list"
                )
            cached = self.index.messages.peek(path)
            if cached is not None and cached[0] == before == data.stamp(path):  # index of these very bytes
                current = cached[1]
            else:
                current = index_messages(raw, label=group.label)
            result = change(raw["messages"], current)
            data.write_atomic(path, dump_json(raw))
            self.index.messages.put(path, index_messages(raw, label=group.label))
        return result

    def _record(
        self, group: GroupFolder, parsed: GroupMessages, topic: str | None, text: str
    ) -> dict[str, Any]:
        me = self.me()
        code = parsed.code or group.code
        unique = new_id()
        return {
            "creator": me,
            "created_date": format_takeout_date(datetime.now(UTC)),
            "text": text,
            "topic_id": topic or unique,
            "message_id": f"{code}/{topic or unique}/{unique}",
            "reactions": [],
            "annotations": [],
        }

    def post(self, channel_id: str, text: str) -> dict[str, Any]:
        group = self.group(channel_id)
        self.me()

        def change(records: list[Any], parsed: GroupMessages) -> dict[str, Any]:
            record = self._record(group, parsed, None, text)
            records.append(record)
            return record

        record = self._mutate(group, change)
        return self._posted(group, record["message_id"])

    def reply(self, channel_id: str, post_id: str, text: str) -> dict[str, Any]:
        group = self.group(channel_id)
        self.me()

        def change(records: list[Any], parsed: GroupMessages) -> dict[str, Any]:
            target = self.find_post(group, parsed, post_id)
            record = self._record(group, parsed, target.topic_id or target.message_id.split("/")[-1], text)
            records.append(record)
            return record

        record = self._mutate(group, change)
        return self._posted(group, record["message_id"])

    def _posted(self, group: GroupFolder, message_id: str) -> dict[str, Any]:
        parsed = self.parsed(group)
        return post_view(group.group_id, parsed.messages[parsed.by_id[message_id]])

    def react(self, channel_id: str, post_id: str, emoji_name: str) -> dict[str, Any]:
        group = self.group(channel_id)
        emoji = emoji_of(emoji_name)
        if emoji is None:
            names = ", ".join(sorted(EMOJI_NAMES)[:20])
            raise ToolError(
                ErrorCode.invalid_argument,
                f"emoji_name: unknown emoji {emoji_name[:40]!r} (give the emoji itself or a name like {names}, ...)",
                argument="emoji_name",
            )
        email = self.me()["email"]

        def change(records: list[Any], parsed: GroupMessages) -> dict[str, Any]:
            target = self.find_post(group, parsed, post_id)
            if target.deleted:
                raise ToolError(
                    ErrorCode.invalid_argument,
                    f"post_id: post {target.message_id!r} is deleted",
                    argument="post_id",
                )
            record = records[target.position]
            reactions = record.setdefault("reactions", [])
            for reaction in reactions:
                if isinstance(reaction, dict) and (reaction.get("emoji") or {}).get("unicode") == emoji:
                    users = reaction.setdefault("reactor_emails", [])
                    if any(str(u).lower() == email.lower() for u in users):
                        return {
                            "added": False,
                            "already_reacted": True,
                            "post_id": target.message_id,
                            "emoji": emoji,
                        }
                    users.append(email)
                    break
            else:
                reactions.append({"emoji": {"unicode": emoji}, "reactor_emails": [email]})
            return {"added": True, "post_id": target.message_id, "emoji": emoji}

        return self._mutate(group, change)

    def delete(self, channel_id: str, post_id: str) -> dict[str, Any]:
        group = self.group(channel_id)
        email = self.me()["email"]

        def change(records: list[Any], parsed: GroupMessages) -> dict[str, Any]:
            target = self.find_post(group, parsed, post_id)
            if target.author_email.lower() != email.lower():
                raise ToolError(
                    ErrorCode.permission_denied,
                    f"post_id: post {target.message_id!r} was written by {target.author_email or 'someone else'}; "
                    "only your own posts can be deleted",
                    argument="post_id",
                )
            record = records[target.position]
            already = str(record.get("message_state", "")).upper() == "DELETED"
            record["message_state"] = "DELETED"
            record["text"] = ""
            for key in ("annotations", "attached_files"):
                if key in record:
                    record[key] = []
            return {"deleted": True, "already_deleted": already, "post_id": target.message_id}

        return self._mutate(group, change)
