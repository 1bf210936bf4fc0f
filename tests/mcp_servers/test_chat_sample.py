"""Chat server against the sample worlds' Google Chat exports."""

from __future__ import annotations

import json

import pytest

from tests.mcp_servers.helpers import open_session
from tests.mcp_servers.test_calendar_sample import WORLDS, options_of, sample_benchmark, sample_world

__all__ = ["sample_benchmark"]  # the session fixture, shared with the calendar sample tests


@pytest.mark.parametrize("world_id", WORLDS)
def test_sample_channels_history_and_threads(sample_benchmark, tmp_path, world_id):
    world, description = sample_world(sample_benchmark, world_id, tmp_path)
    files = sorted((world.apps_root / "chat").rglob("messages.json"))
    records = {p.parent.name: json.loads(p.read_text())["messages"] for p in files}
    with open_session("chat", world, options=options_of(description)) as session:
        channels = session.ok("list_channels", {"limit": 100})
        assert "problems" not in channels
        assert {c["channel_id"]: c["message_count"] for c in channels["channels"]} == {
            k: len(v) for k, v in records.items()
        }
        deleted = 0
        for channel in channels["channels"]:
            history = session.ok("get_channel_history", {"channel_id": channel["channel_id"], "limit": 100})
            times = [p["created_at"] for p in history["posts"]]
            assert times == sorted(times, reverse=True) and None not in times
            deleted += sum(p["deleted"] for p in history["posts"])
            for post in history["posts"]:
                if post["reply_count"]:
                    replies = session.ok(
                        "get_thread_replies",
                        {"channel_id": channel["channel_id"], "post_id": post["post_id"]},
                    )
                    reply_times = [r["created_at"] for r in replies["replies"]]
                    assert reply_times == sorted(reply_times) and len(reply_times) == post["reply_count"]
        all_deleted = sum(r.get("message_state") == "DELETED" for v in records.values() for r in v)
        assert all_deleted >= 1
        me = session.ok("get_user_profile", {"user_id": description["user_email"]})
        assert me["name"] == description["user_name"] and len(me["channels"]) == len(records)


def test_sample_post_reply_react_delete_round_trip(sample_benchmark, tmp_path):
    world, description = sample_world(sample_benchmark, "world_keystone_consulting", tmp_path)
    with open_session("chat", world, mode="consolidated", options=options_of(description)) as session:
        channel = session.ok("chat", {"action": "list_channels"})["channels"][0]["channel_id"]
        root = session.ok("chat", {"action": "get_history", "channel_id": channel})["posts"][0]
        reply = session.ok(
            "chat",
            {"action": "reply", "channel_id": channel, "post_id": root["post_id"], "message": "On it."},
        )
        session.ok(
            "chat", {"action": "react", "channel_id": channel, "post_id": root["post_id"], "emoji_name": "👀"}
        )
        session.ok("chat", {"action": "delete", "channel_id": channel, "post_id": reply["post_id"]})
        thread = session.ok(
            "chat", {"action": "get_replies", "channel_id": channel, "post_id": root["post_id"]}
        )
    assert thread["replies"][-1]["post_id"] == reply["post_id"] and thread["replies"][-1]["deleted"] is True
    assert any(
        r["emoji"] == "👀" and description["user_email"] in r["users"] for r in thread["root"]["reactions"]
    )
