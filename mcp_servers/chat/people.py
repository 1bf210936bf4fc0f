"""People in a chat export: who the current user is, and everyone who appears."""

from __future__ import annotations

from typing import Any

from atoll.errors import ErrorCode
from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers.chat.index import ChatIndex
from mcp_servers.chat.views import person


def current_user(context: ServerContext, index: ChatIndex, *, required: bool = True) -> dict[str, str] | None:
    """The current user: options user_email/user_name, else the export owner (Users/)."""
    email, name = context.user_email, context.user_name
    if not email:
        found = [
            index.json_object(folder / "user_info.json").get("user") for _, folder in index.user_folders()
        ]
        owners = [p for p in (person(o) for o in found) if p and p["email"]]
        if len(owners) == 1:
            email, name = owners[0]["email"], name or owners[0]["name"]
    if not email:
        if required:
            raise ToolError(
                ErrorCode.permission_denied,
                "no current chat user: the server needs option user_email to post",
            )
        return None
    return {"name": name or email.split("@")[0], "email": email, "user_type": "Human"}


def everyone(index: ChatIndex) -> dict[str, dict[str, Any]]:
    """Everyone in the export by lower-case email: user_info files, members, authors."""
    found: dict[str, dict[str, Any]] = {}

    def add(raw: Any, user_id: str | None = None, group_id: str | None = None) -> None:
        entry = person(raw)
        if not entry:
            return
        key = (entry["email"] or entry["name"]).lower()
        current = found.setdefault(
            key, {**entry, "user_id": user_id or entry["email"] or entry["name"], "channels": []}
        )
        if user_id:
            current["user_id"] = user_id
        if entry["name"] and not current["name"]:
            current["name"] = entry["name"]
        if group_id and group_id not in current["channels"]:
            current["channels"].append(group_id)

    for user_id, folder in index.user_folders():
        add(index.json_object(folder / "user_info.json").get("user"), user_id)
    for group in index.groups():
        for member in index.json_object(group.info_path).get("members") or []:
            add(member, group_id=group.group_id)
        for message in index.group_messages(group).messages:
            add(message.record.get("creator"), group_id=group.group_id)
    return found
