"""Chat data handling: Takeout dates, broken groups, caching, concurrent writes, links out."""

from __future__ import annotations

import json
import logging
import os
import threading
from datetime import UTC, datetime, timedelta

import pytest

from atoll.formats.chat.timestamps import format_takeout_date, parse_takeout_date
from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers.chat.service import ChatService
from tests.mcp_servers.helpers import open_session
from tests.mcp_servers.test_chat_tools import DM, GENERAL, USER, chat_world, messages_path, records


def service(world) -> ChatService:
    return ChatService(ServerContext.create(world.fs_root, world.apps_root, USER))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Monday, January 8, 2024 at 10:15:32 AM UTC", datetime(2024, 1, 8, 10, 15, 32, tzinfo=UTC)),
        ("Monday, January 8, 2024 at 12:15:32\u202fAM UTC", datetime(2024, 1, 8, 0, 15, 32, tzinfo=UTC)),
        ("Monday, January 8, 2024 at 12:05:00 PM UTC", datetime(2024, 1, 8, 12, 5, tzinfo=UTC)),
        ("Monday, January 8, 2024 at 10:15:32 AM PST", datetime(2024, 1, 8, 18, 15, 32, tzinfo=UTC)),
        ("Tuesday, March 5, 2024 at 9:00:00 AM GMT+05:30", datetime(2024, 3, 5, 3, 30, tzinfo=UTC)),
        ("Monday, July 8, 2024 at 10:00:00 AM Europe/Paris", datetime(2024, 7, 8, 8, 0, tzinfo=UTC)),
        ("January 8, 2024 at 1:05 PM", datetime(2024, 1, 8, 13, 5, tzinfo=UTC)),
        ("2024-01-08T10:15:32+02:00", datetime(2024, 1, 8, 8, 15, 32, tzinfo=UTC)),
    ],
)
def test_takeout_dates_honour_the_zone_label(text, expected):
    assert parse_takeout_date(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "Monday, Smarch 8, 2024 at 10:15:32 AM UTC",
        "Monday, January 8, 2024 at 10:15:32 AM Mars/Base",
    ],
)
def test_unreadable_takeout_dates_raise(text):
    with pytest.raises(ValueError):
        parse_takeout_date(text)


def test_takeout_dates_are_written_in_utc_and_read_back():
    moment = datetime(2024, 2, 29, 23, 59, 1, tzinfo=UTC)
    assert format_takeout_date(moment) == "Thursday, February 29, 2024 at 11:59:01 PM UTC"
    assert parse_takeout_date(format_takeout_date(moment)) == moment


_SORT_KEY_TEXTS = [
    "Monday, January 8, 2024 at 10:15:32 AM UTC",
    "Monday, January 8, 2024 at 12:15:32\u202fAM UTC",
    "Monday, January 8, 2024 at 12:05:00 PM UTC",
    "Wednesday, December 31, 1969 at 11:59:59 PM UTC",  # before 1970: a negative key
    "Monday, January 8, 2024 at 10:15:32 AM PST",  # other zones: the general reader
    "Monday, January 8, 2024 at 0:15:32 AM UTC",  # hour 0 with AM: unreadable
    "Monday, January 8, 2024 at 13:15:32 PM UTC",
    "Monday, January 8, 2024 at 10:60:32 AM UTC",
    "Friday, February 30, 2024 at 10:15:32 AM UTC",
    "Monday, Smarch 8, 2024 at 10:15:32 AM UTC",
    "Monday, January 8, 2024\n at 10:15:32 AM UTC",
    "Monday, January 8, 2024 at 10:15:32 AM UTC\n",
    "Monday, at 8, 2024 at 10:15:32 AM UTC",
    "2024-01-08T10:15:32+02:00",
    "",
    None,
    17,
]


@pytest.mark.parametrize("text", _SORT_KEY_TEXTS)
def test_the_sort_key_is_the_parsed_moment_wherever_it_is_given(text):
    """The index sorts by takeout_sort_key and reads other forms with parse_takeout_date:
    where the key is given it must be that moment, and the reader must agree on the rest."""
    from atoll.formats.chat.timestamps import takeout_sort_key

    for _ in range(2):  # the second time from the caches
        key = takeout_sort_key(text)
        try:
            moment = parse_takeout_date(text)  # type: ignore[arg-type]
        except ValueError:
            assert key is None
            continue
        if key is not None:
            assert key == (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    assert takeout_sort_key(format_takeout_date(datetime(2024, 2, 29, 23, 59, 1, tzinfo=UTC))) is not None


def test_the_index_orders_as_sorting_every_parsed_date_would(tmp_path):
    """Roots newest first (ties: later in the file first), replies oldest first (ties: file
    order), dates in any form, unreadable ones as oldest; the latest readable date."""
    from atoll.formats.chat.messages import index_messages

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    dates = [
        "Monday, January 8, 2024 at 10:15:32 AM UTC",
        "Monday, January 8, 2024 at 2:15:32 AM PST",  # the same moment as the first
        "2024-01-08T10:15:33+00:00",
        "sometime",
        "Monday, January 8, 2024 at 10:15:32 AM UTC",
        "Tuesday, January 9, 2024 at 9:00:00 AM UTC",
    ]
    records = []
    for number, date in enumerate(dates * 3):
        topic = f"t{number % 6}" if number < 6 else f"t{number % 3}"
        unique = topic if number < 6 else f"r{number}"
        records.append({"message_id": f"AAAA/{topic}/{unique}", "topic_id": topic, "created_date": date})
    parsed = index_messages({"messages": records}, label="x")

    def moment(index: int) -> datetime:
        try:
            return parse_takeout_date(records[index]["created_date"])
        except ValueError:
            return epoch

    roots = [i for i, r in enumerate(records) if r["message_id"].rsplit("/", 1)[-1] == r["topic_id"]]
    assert parsed.roots_newest_first == sorted(roots, key=lambda i: (moment(i), i), reverse=True)
    for topic, positions in parsed.replies.items():
        replies = [i for i in range(len(records)) if records[i]["topic_id"] == topic and i not in roots]
        assert positions == sorted(replies, key=lambda i: (moment(i), i))
    assert [m.created for m in parsed.messages] == [
        None if moment(i) == epoch else moment(i) for i in range(18)
    ]
    assert parsed.latest == datetime(2024, 1, 9, 9, tzinfo=UTC)
    assert parsed.problems == ["x: 3 message(s) have unreadable created_date; sorted as oldest"]


def test_what_orjson_refuses_is_read_as_json_reads_it():
    from atoll.formats.chat.messages import decode_json

    assert (
        decode_json(b'{"messages": [{"n": NaN, "big": 123456789012345678901234567890}]}')["messages"][0][
            "big"
        ]
        == 123456789012345678901234567890
    )
    with pytest.raises(json.JSONDecodeError, match="line 1 column"):
        decode_json(b'{"messages": [}')


def test_broken_group_is_reported_once_and_the_rest_served(tmp_path, caplog):
    world = chat_world(tmp_path)
    messages_path(world, DM).write_text('{"messages": [')  # truncated JSON
    caplog.set_level(logging.WARNING, logger="mcp_servers.chat")
    with open_session("chat", world, options=USER) as session:
        for _ in range(3):
            listed = session.ok("list_channels")
        assert session.ok("get_channel_history", {"channel_id": GENERAL})["total"] == 4
        assert session.ok("search_messages", {"query": "budget"})["total"] == 1
        error = session.error("get_channel_history", {"channel_id": DM})
        assert error["code"] == "bad_data" and "messages.json is not valid JSON" in error["message"]
        assert session.error("post_message", {"channel_id": DM, "message": "x"})["code"] == "bad_data"
    assert [c["channel_id"] for c in listed["channels"] if "problem" in c] == [DM]
    assert len(listed["problems"]) == 1
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_servers.chat"]
    assert len(warnings) == 1 and DM in warnings[0]
    assert messages_path(world, DM).read_text() == '{"messages": ['


def test_bad_records_and_dates_do_not_break_the_group(tmp_path):
    world = chat_world(tmp_path)
    path = messages_path(world)
    raw = json.loads(path.read_text())
    raw["messages"].append("not an object")
    raw["messages"][0]["created_date"] = "sometime"
    path.write_text(json.dumps(raw))
    history = service(world).history(GENERAL, 30, 0)
    assert history["total"] == 4 and history["posts"][-1]["created_at"] is None


def test_warm_reads_do_not_reparse_and_external_changes_are_seen(tmp_path):
    world = chat_world(tmp_path)
    chat = service(world)
    chat.history(GENERAL, 30, 0)
    misses = chat.index.messages.misses
    for _ in range(5):
        chat.history(GENERAL, 30, 0)
        chat.list_channels(50, 0)
    chat.history(GENERAL, 30, 0)
    assert chat.index.messages.misses - misses == 2  # the other two groups, parsed once by list_channels
    raw = json.loads(messages_path(world).read_text())
    raw["messages"][0]["text"] = "Kickoff moved to Tuesday"
    messages_path(world).write_text(json.dumps(raw))
    assert chat.history(GENERAL, 30, 0)["posts"][-1]["text"] == "Kickoff moved to Tuesday"
    misses = chat.index.messages.misses
    chat.post(GENERAL, "own write")  # our write hands the new index to the cache
    assert chat.history(GENERAL, 30, 0)["posts"][0]["text"] == "own write"
    assert chat.index.messages.misses == misses


def test_concurrent_posts_from_separate_servers_lose_nothing(tmp_path):
    world = chat_world(tmp_path)
    servers = [service(world) for _ in range(3)]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            servers[index % 3].post(GENERAL, f"message {index}")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(15)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    texts = [r["text"] for r in records(world)]
    assert sorted(t for t in texts if t.startswith("message ")) == sorted(f"message {i}" for i in range(15))


def test_group_folders_linked_out_of_the_app_data_are_skipped(tmp_path):
    world = chat_world(tmp_path)
    outside = tmp_path / "outside_group"
    outside.mkdir()
    (outside / "messages.json").write_text(
        json.dumps({"messages": [{"text": "SECRET", "message_id": "a/b/b", "topic_id": "b"}]})
    )
    groups = world.apps_root / "chat" / "Google Chat" / "Groups"
    os.symlink(outside, groups / "Space LINKED")
    os.symlink(outside / "messages.json", groups / "Space AAAAgen01" / "linked.json")
    chat = service(world)
    assert "Space LINKED" not in [c["channel_id"] for c in chat.list_channels(50, 0)["channels"]]
    with pytest.raises(ToolError) as error:
        chat.history("Space LINKED", 30, 0)
    assert error.value.code == "not_found"
    # A messages.json that is itself a link out is refused too.
    target = messages_path(world, DM)
    target.unlink()
    os.symlink(outside / "messages.json", target)
    with pytest.raises(ToolError):
        chat.history(DM, 30, 0)
    assert "SECRET" not in json.dumps(
        chat.search(query="SECRET", channel_id=None, author=None, after=None, before=None, limit=30, page=0)
    )


def test_writes_never_follow_a_messages_file_linked_out(tmp_path):
    world = chat_world(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"messages": [{"text": "SECRET", "message_id": "a/b/b", "topic_id": "b"}]}))
    target = messages_path(world, DM)
    target.unlink()
    os.symlink(outside, target)
    with pytest.raises(ToolError) as error:
        service(world).post(DM, "hello")
    assert error.value.code == "bad_data"
    assert os.path.islink(target) and "hello" not in outside.read_text()


def _post_from_process(fs_root: str, apps_root: str, prefix: str, count: int) -> None:
    chat = ChatService(ServerContext.create(fs_root, apps_root, USER))
    for index in range(count):
        chat.post(GENERAL, f"{prefix} {index}")


def test_concurrent_posts_from_separate_processes_lose_nothing(tmp_path):
    import multiprocessing

    world = chat_world(tmp_path)
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(
            target=_post_from_process, args=(str(world.fs_root), str(world.apps_root), f"proc{n}", 6)
        )
        for n in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    texts = [r["text"] for r in records(world)]
    assert sorted(t for t in texts if t.startswith("proc")) == sorted(
        f"proc{n} {i}" for n in range(3) for i in range(6)
    )


def test_prefixed_export_wins_when_both_layouts_hold_a_group(tmp_path):
    world = chat_world(tmp_path)
    bare = world.apps_root / "chat" / "Groups" / GENERAL
    bare.mkdir(parents=True)
    (bare / "messages.json").write_text(json.dumps({"messages": []}))
    (world.apps_root / "chat" / "Groups" / "Space ZZZZonly9").mkdir()
    channels = {c["channel_id"]: c for c in service(world).list_channels(50, 0)["channels"]}
    assert channels[GENERAL]["message_count"] == 6 and "Space ZZZZonly9" in channels


def test_the_collector_is_paused_for_the_build_only_and_left_as_found():
    import gc

    from atoll.runtime import cyclic_gc_paused

    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()  # someone else's choice stays
    finally:
        gc.enable()


def test_overlapping_pauses_on_two_threads_end_with_the_last_one():
    # A ends its build while B's is still running, then B ends: the collector must be on
    # again after both (a per-build check-then-disable left it off for good).
    import gc
    import threading

    from atoll.runtime import cyclic_gc_paused

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen_during_b: list[bool] = []

    def build_a() -> None:
        with cyclic_gc_paused():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def build_b() -> None:
        a_in.wait(5)
        with cyclic_gc_paused():
            b_in.set()
            a_out.wait(5)
            seen_during_b.append(gc.isenabled())  # A is done, B still builds

    threads = [threading.Thread(target=build_a), threading.Thread(target=build_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert a_out.is_set() and seen_during_b == [False]  # still paused for B
    assert gc.isenabled()


def test_messages_are_made_when_first_looked_at_and_then_kept():
    from atoll.formats.chat.messages import index_messages

    records = [
        {
            "message_id": "AAAA/t1/t1",
            "topic_id": "t1",
            "text": "hello",
            "created_date": "2024-01-08T10:00:00Z",
        },
        "not an object",
        {"message_id": "AAAA/t1/r2", "topic_id": "t1", "text": 7, "message_state": "deleted"},
    ]
    parsed = index_messages({"messages": records}, label="x")
    assert parsed.messages._made == [None, None]  # the index alone made none
    assert len(parsed.messages) == 2
    last = parsed.messages[-1]
    assert (last.position, last.message_id, last.text, last.deleted, last.created) == (
        2,
        "AAAA/t1/r2",
        "7",
        True,
        None,
    )
    assert parsed.messages[1] is last and parsed.messages._made[0] is None
    first = parsed.messages[0]
    assert (
        first.created == datetime(2024, 1, 8, 10, tzinfo=UTC) and first.text == "hello" and not first.deleted
    )
    assert list(parsed.messages) == [first, last] == parsed.messages[:]
    assert parsed.by_id == {"AAAA/t1/t1": 0, "AAAA/t1/r2": 1} and parsed.replies == {"t1": [1]}


def test_a_copy_of_a_world_is_not_parsed_again_and_each_copy_keeps_its_own_posts(tmp_path):
    """Every trial's world is a fresh copy of its seed: a space's bytes already parsed in this
    process are not parsed again, and a post in one copy is seen in no other."""
    from mcp_servers.chat import index as chat_index

    first_world = chat_world(tmp_path / "a")
    second_world = chat_world(tmp_path / "b")
    assert messages_path(first_world).read_bytes() == messages_path(second_world).read_bytes()
    first, second = service(first_world), service(second_world)
    first.list_channels(50, 0)
    misses = chat_index._PARSED.misses
    assert second.list_channels(50, 0) == first.list_channels(50, 0)
    assert chat_index._PARSED.misses == misses  # every space of the copy: already parsed
    assert second.index.messages.misses > 0  # (each copy still checks its own files)

    first.post(GENERAL, "only in the first copy")
    assert first.history(GENERAL, 30, 0)["posts"][0]["text"] == "only in the first copy"
    assert "only in the first copy" not in json.dumps(second.history(GENERAL, 30, 0))
    third = service(chat_world(tmp_path / "c"))
    assert third.history(GENERAL, 30, 0) == second.history(GENERAL, 30, 0)
    assert "only in the first copy" not in json.dumps(third.list_channels(50, 0))
