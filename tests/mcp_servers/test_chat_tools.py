"""Chat server tools in both modes against small handcrafted Takeout exports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atoll.formats.chat.timestamps import format_takeout_date, parse_takeout_date
from mcp_servers import get_definition
from tests.mcp_servers.helpers import McpSession, World, make_world, open_session

ME = {"name": "Mia Example", "email": "me@example.com"}
BOB = {"name": "Bob Builder", "email": "bob@example.com"}
CAROL = {"name": "Carol Chen", "email": "carol@example.com"}
USER = {"user_email": ME["email"], "user_name": ME["name"]}
T0 = datetime(2024, 1, 8, 10, 0, tzinfo=UTC)  # a Monday
GENERAL = "Space AAAAgen01"
DM = "DM BBBBdm002"


def chat_groups() -> list[dict[str, Any]]:
    return [
        {
            "group_id": GENERAL,
            "name": "General",
            "members": [ME, BOB, CAROL],
            "messages": [
                {"author": BOB, "at": T0, "text": "Kickoff on Monday"},  # 0: root
                {"author": CAROL, "at": T0 + timedelta(hours=5), "text": "late reply", "topic": 0},
                {"author": ME, "at": T0 + timedelta(minutes=3), "text": "early reply", "topic": 0},
                # Friday's root sorts after Monday's by weekday text, but it is 4 days later.
                {
                    "author": CAROL,
                    "at": T0 + timedelta(days=4),
                    "text": "Budget numbers are in",
                    "reactions": [("👍", [BOB])],
                },
                {"author": ME, "at": T0 + timedelta(days=1), "text": "My own note"},
                {"author": BOB, "at": T0 + timedelta(days=2), "text": "removed", "deleted": True},
            ],
        },
        {
            "group_id": DM,
            "members": [ME, BOB],
            "messages": [{"author": BOB, "at": T0, "text": "ping about budget"}],
        },
        {"group_id": "Space CCCCops03", "name": "Ops", "members": [ME, CAROL], "messages": []},
    ]


def _human(p: dict[str, str]) -> dict[str, str]:
    return {"name": p["name"], "email": p["email"], "user_type": "Human"}


def write_chat(root, groups: list[dict[str, Any]], *, user: dict[str, str], user_id: str) -> None:
    """Write a Takeout export: ``messages`` specs have author, at, text, topic (root index), reactions, deleted."""
    for group in groups:
        code = group["group_id"].split(" ", 1)[1]
        folder = root / "Groups" / group["group_id"]
        folder.mkdir(parents=True, exist_ok=True)
        info: dict[str, Any] = {"members": [_human(p) for p in group["members"]]}
        if group.get("name"):
            info["name"] = group["name"]
        (folder / "group_info.json").write_text(json.dumps(info, indent=2))
        out, topics = [], []
        for index, spec in enumerate(group["messages"]):
            topic = f"t{index:03d}{code}" if spec.get("topic") is None else topics[spec["topic"]]
            unique = topic if spec.get("topic") is None else f"r{index:03d}{code}"
            topics.append(topic)
            record = {
                "creator": _human(spec["author"]),
                "created_date": format_takeout_date(spec["at"]),
                "text": "" if spec.get("deleted") else spec["text"],
                "topic_id": topic,
                "message_id": f"{code}/{topic}/{unique}",
                "reactions": [
                    {"emoji": {"unicode": e}, "reactor_emails": [p["email"] for p in people]}
                    for e, people in spec.get("reactions", [])
                ],
                "annotations": [],
            }
            if spec.get("deleted"):
                record["message_state"] = "DELETED"
            out.append(record)
        (folder / "messages.json").write_text(json.dumps({"messages": out}, indent=2, ensure_ascii=False))
    users = root / "Users" / f"User {user_id}"
    users.mkdir(parents=True, exist_ok=True)
    memberships = [
        {"group_name": g.get("name") or "DM", "group_id": g["group_id"], "membership_state": "MEMBER"}
        for g in groups
    ]
    (users / "user_info.json").write_text(json.dumps({"user": _human(user), "membership_info": memberships}))


def chat_world(tmp_path, *, prefix: str = "Google Chat") -> World:
    world = make_world(tmp_path)
    root = world.apps_root / "chat" / prefix if prefix else world.apps_root / "chat"
    write_chat(root, chat_groups(), user=ME, user_id="111122223333")
    return world


def messages_path(world: World, group: str = GENERAL, prefix: str = "Google Chat"):
    return world.apps_root / "chat" / prefix / "Groups" / group / "messages.json"


def records(world: World, group: str = GENERAL) -> list[dict[str, Any]]:
    return json.loads(messages_path(world, group).read_text())["messages"]


class Chat:
    def __init__(self, session: McpSession, mode: str, world: World) -> None:
        self.session, self.mode, self.world = session, mode, world
        self.definition = get_definition("chat")

    def _args(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.mode == "individual":
            return tool, arguments
        return "chat", {"action": self.definition.find(tool).action, **arguments}

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.ok(*self._args(tool, arguments))

    def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.error(*self._args(tool, arguments))

    def root_id(self, text: str) -> str:
        posts = self.ok("get_channel_history", channel_id=GENERAL, limit=100)["posts"]
        return next(p["post_id"] for p in posts if p["text"] == text)


@pytest.fixture(params=["individual", "consolidated"])
def chat(request, tmp_path) -> Iterator[Chat]:
    world = chat_world(tmp_path)
    with open_session("chat", world, mode=request.param, options=USER) as session:
        yield Chat(session, request.param, world)


# ---- reading ---------------------------------------------------------------------------


def test_list_channels_sorted_and_paginated(chat):
    result = chat.ok("list_channels")
    assert [(c["channel_id"], c["name"], c["type"]) for c in result["channels"]] == [
        (GENERAL, "General", "space"),
        ("Space CCCCops03", "Ops", "space"),
        (DM, "Bob Builder", "dm"),
    ]
    assert result["channels"][0]["message_count"] == 6 and result["channels"][0]["member_count"] == 3
    second = chat.ok("list_channels", limit=2, page=1)
    assert [c["channel_id"] for c in second["channels"]] == [DM] and second["has_more"] is False


def test_history_is_root_posts_newest_first_by_real_time(chat):
    result = chat.ok("get_channel_history", channel_id=GENERAL)
    assert [p["text"] for p in result["posts"]] == [
        "Budget numbers are in",
        "",
        "My own note",
        "Kickoff on Monday",
    ]
    assert result["posts"][1]["deleted"] is True
    kickoff = result["posts"][3]
    assert kickoff["reply_count"] == 2 and kickoff["author"] == BOB
    assert kickoff["created_at"] == "2024-01-08T10:00:00+00:00"
    assert result["posts"][0]["reactions"] == [{"emoji": "👍", "count": 1, "users": [BOB["email"]]}]
    page = chat.ok("get_channel_history", channel_id=GENERAL, limit=3, page=1)
    assert [p["text"] for p in page["posts"]] == ["Kickoff on Monday"] and page["total"] == 4


def test_history_accepts_channel_code_and_name(chat):
    by_code = chat.ok("get_channel_history", channel_id="AAAAgen01")
    by_name = chat.ok("get_channel_history", channel_id="general")
    assert by_code["channel_id"] == by_name["channel_id"] == GENERAL
    assert chat.error("get_channel_history", channel_id="Space nope")["code"] == "not_found"


def test_thread_replies_ordered_by_timestamp(chat):
    root = chat.root_id("Kickoff on Monday")
    result = chat.ok("get_thread_replies", channel_id=GENERAL, post_id=root)
    assert result["root"]["post_id"] == root
    assert [r["text"] for r in result["replies"]] == ["early reply", "late reply"]
    assert all(r["is_reply"] for r in result["replies"])
    short = root.split("/", 1)[1]  # "<topic>/<unique>" works too
    assert chat.ok("get_thread_replies", channel_id=GENERAL, post_id=short)["total"] == 2
    assert chat.error("get_thread_replies", channel_id=GENERAL, post_id="x/y/z")["code"] == "not_found"


def test_users_and_profiles(chat):
    users = chat.ok("get_users")["users"]
    assert [u["name"] for u in users] == ["Bob Builder", "Carol Chen", "Mia Example"]
    me = next(u for u in users if u["email"] == ME["email"])
    assert me["user_id"] == "111122223333"
    profile = chat.ok("get_user_profile", user_id="111122223333")
    assert profile["email"] == ME["email"] and {m["group_id"] for m in profile["memberships"]} == {
        GENERAL,
        DM,
        "Space CCCCops03",
    }
    bob = chat.ok("get_user_profile", user_id="BOB@example.com")
    assert bob["name"] == "Bob Builder" and set(bob["channels"]) == {GENERAL, DM}
    assert chat.ok("get_users", limit=1, page=2)["users"][0]["name"] == "Mia Example"
    assert chat.error("get_user_profile", user_id="nobody")["code"] == "not_found"


def test_search_by_text_author_channel_and_dates(chat):
    hits = chat.ok("search_messages", query="BUDGET")["posts"]
    assert [(h["channel_id"], h["text"]) for h in hits] == [
        (GENERAL, "Budget numbers are in"),
        (DM, "ping about budget"),
    ]
    assert [h["text"] for h in chat.ok("search_messages", author="carol")["posts"]] == [
        "Budget numbers are in",
        "late reply",
    ]
    assert chat.ok("search_messages", query="budget", channel_id=DM)["total"] == 1
    dated = chat.ok("search_messages", after="2024-01-09", before="2024-01-12T00:00:00Z")["posts"]
    assert [h["text"] for h in dated] == ["My own note"]  # the deleted post is not found
    assert chat.error("search_messages")["code"] == "invalid_argument"
    assert chat.error("search_messages", after="yesterday")["code"] == "invalid_argument"


# ---- writing ---------------------------------------------------------------------------


def test_post_message_writes_a_takeout_record(chat):
    before = datetime.now(UTC).replace(microsecond=0)
    post = chat.ok("post_message", channel_id=GENERAL, message="Deck is ready")
    record = records(chat.world)[-1]
    assert record["creator"] == {"name": ME["name"], "email": ME["email"], "user_type": "Human"}
    assert record["text"] == "Deck is ready" and record["message_id"] == post["post_id"]
    code, topic, unique = record["message_id"].split("/")
    assert code == "AAAAgen01" and topic == unique == record["topic_id"]
    assert record["created_date"].endswith(" UTC") and " at " in record["created_date"]
    assert parse_takeout_date(record["created_date"]) >= before
    assert chat.ok("get_channel_history", channel_id=GENERAL)["posts"][0]["post_id"] == post["post_id"]


def test_reply_joins_the_thread_and_is_listed_last(chat):
    root = chat.root_id("Kickoff on Monday")
    reply = chat.ok("reply_to_thread", channel_id=GENERAL, post_id=root, message="Thanks!")
    assert reply["is_reply"] is True and reply["topic_id"] == root.split("/")[1]
    replies = chat.ok("get_thread_replies", channel_id=GENERAL, post_id=root)["replies"]
    assert [r["text"] for r in replies] == ["early reply", "late reply", "Thanks!"]
    # Replying to a reply lands in the same thread.
    chat.ok("reply_to_thread", channel_id=GENERAL, post_id=replies[0]["post_id"], message="+1")
    assert chat.ok("get_thread_replies", channel_id=GENERAL, post_id=root)["total"] == 4
    assert len(chat.ok("get_channel_history", channel_id=GENERAL)["posts"]) == 4


def test_add_reaction_by_name_or_emoji_once_per_user(chat):
    root = chat.root_id("Budget numbers are in")
    assert chat.ok("add_reaction", channel_id=GENERAL, post_id=root, emoji_name=":thumbsup:")["added"] is True
    assert chat.ok("add_reaction", channel_id=GENERAL, post_id=root, emoji_name="👍")["added"] is False
    chat.ok("add_reaction", channel_id=GENERAL, post_id=root, emoji_name="tada")
    record = next(r for r in records(chat.world) if r["message_id"] == root)
    assert record["reactions"] == [
        {"emoji": {"unicode": "👍"}, "reactor_emails": [BOB["email"], ME["email"]]},
        {"emoji": {"unicode": "🎉"}, "reactor_emails": [ME["email"]]},
    ]
    assert (
        chat.error("add_reaction", channel_id=GENERAL, post_id=root, emoji_name="notanemoji")["code"]
        == "invalid_argument"
    )


def test_delete_post_is_a_soft_delete_of_own_posts_only(chat):
    mine = chat.root_id("My own note")
    result = chat.ok("delete_post", channel_id=GENERAL, post_id=mine)
    assert result["deleted"] is True
    record = next(r for r in records(chat.world) if r["message_id"] == mine)
    assert record["message_state"] == "DELETED" and record["text"] == ""
    assert len(records(chat.world)) == 6  # kept in the file
    theirs = chat.root_id("Kickoff on Monday")
    error = chat.error("delete_post", channel_id=GENERAL, post_id=theirs)
    assert error["code"] == "permission_denied" and "bob@example.com" in error["message"]
    assert next(r for r in records(chat.world) if r["message_id"] == theirs)["text"] == "Kickoff on Monday"


def test_rewrites_keep_unknown_fields(chat):
    path = messages_path(chat.world)
    raw = json.loads(path.read_text())
    raw["export_version"] = 7
    raw["messages"][0]["quoted_message_metadata"] = {"message_id": "x", "text": "quoted"}
    raw["messages"][0]["vendor_field"] = [1, 2, {"deep": True}]
    path.write_text(json.dumps(raw, indent=2, ensure_ascii=False))
    chat.ok("post_message", channel_id=GENERAL, message="after")
    chat.ok("delete_post", channel_id=GENERAL, post_id=chat.root_id("My own note"))
    after = json.loads(path.read_text())
    assert after["export_version"] == 7
    assert after["messages"][0]["quoted_message_metadata"] == {"message_id": "x", "text": "quoted"}
    assert after["messages"][0]["vendor_field"] == [1, 2, {"deep": True}]
    assert after["messages"][:6] != raw["messages"][:6]  # only the deleted one changed...
    changed = [i for i in range(6) if after["messages"][i] != raw["messages"][i]]
    assert changed == [4]


# ---- layout, identity, validation ------------------------------------------------------


def test_export_without_google_chat_prefix(tmp_path):
    world = chat_world(tmp_path, prefix="")
    with open_session("chat", world, options=USER) as session:
        assert len(session.ok("list_channels")["channels"]) == 3
        session.ok("post_message", {"channel_id": DM, "message": "hello"})
    written = json.loads((world.apps_root / "chat" / "Groups" / DM / "messages.json").read_text())
    assert written["messages"][-1]["text"] == "hello"


def test_identity_falls_back_to_the_export_owner_and_is_required_to_post(tmp_path):
    world = chat_world(tmp_path)
    with open_session("chat", world) as session:  # no options: the single Users/ entry is the owner
        post = session.ok("post_message", {"channel_id": DM, "message": "hi"})
        assert post["author"]["email"] == ME["email"]
    (world.apps_root / "chat" / "Google Chat" / "Users" / "User 111122223333" / "user_info.json").unlink()
    with open_session("chat", world) as session:
        assert (
            session.error("post_message", {"channel_id": DM, "message": "hi"})["code"] == "permission_denied"
        )


@pytest.mark.parametrize("channel_id", ["../Groups", "Space ../../x", "a/b", "..", "x\x00y", " "])
def test_channel_ids_with_path_components_are_refused(chat, channel_id):
    assert chat.error("get_channel_history", channel_id=channel_id)["code"] == "invalid_argument"


def test_tool_names_in_both_modes(tmp_path):
    world = chat_world(tmp_path)
    with open_session("chat", world, options=USER) as session:
        assert session.tool_names() == [
            "add_reaction",
            "delete_post",
            "get_channel_history",
            "get_thread_replies",
            "get_user_profile",
            "get_users",
            "list_channels",
            "post_message",
            "reply_to_thread",
            "search_messages",
        ]
    with open_session("chat", world, mode="consolidated", options=USER) as session:
        assert session.tool_names() == ["chat", "chat_schema"]
        actions = {a["action"] for a in session.ok("chat", {"action": "help"})["actions"]}
        assert actions == {
            "list_channels",
            "get_history",
            "post",
            "reply",
            "react",
            "get_replies",
            "list_users",
            "get_profile",
            "delete",
            "search",
        }


def test_rewritten_file_keeps_the_takeout_formatting(chat):
    chat.ok("post_message", channel_id=GENERAL, message="Zoë says ☕ at 10")
    text = messages_path(chat.world).read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"
    assert "Zoë says ☕" in text
