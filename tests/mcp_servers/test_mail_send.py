"""Mail server sending tools: the stored result is real RFC 2822 mail in the user's mbox."""

from __future__ import annotations

import email
import mailbox
import threading
from email.policy import default as default_policy

import pytest

from mcp_servers._core import ServerContext
from mcp_servers.mail.reading import list_mails
from mcp_servers.mail.sending import send_mail
from mcp_servers.mail.store import MailStore
from tests.mcp_servers.helpers import make_world, open_session, text_of
from tests.mcp_servers.mail_world import (
    MAIN_MBOX,
    OTHER_MBOX,
    USER,
    USER_NAME,
    build_mail_world,
    mbox,
    message,
)

OPTIONS = {"user_email": USER, "user_name": USER_NAME}


@pytest.fixture
def world(tmp_path):
    world = make_world(tmp_path)
    build_mail_world(world)
    world.file("Reports/q3 summary.pdf", b"%PDF-1.4 fake pdf bytes")
    world.file("Reports/notes.txt", "plain notes\n")
    return world


@pytest.fixture(params=["individual", "consolidated"])
def mail(request, world):
    with open_session("mail", world, mode=request.param, options=OPTIONS) as session:
        yield session


def stored(world, mbox_name: str = MAIN_MBOX) -> list[email.message.EmailMessage]:
    """Messages as Python's standard mailbox + email parsers read them back."""
    box = mailbox.mbox(
        world.apps_root / mbox_name,
        factory=lambda f: email.message_from_binary_file(f, policy=default_policy),
    )
    try:
        return list(box)
    finally:
        box.close()


def by_id(world, mail_id: str):
    return next(m for m in stored(world) if m["Message-ID"] == mail_id)


def test_send_mail_appends_a_standard_message(mail, world):
    before = len(stored(world))
    sent = mail.ok(
        "send_mail",
        {
            "to_email": ["Bob Chen <bob@corp.com>", "erin@corp.com"],
            "cc": "carol@corp.com; dan@fabrikam.com",
            "subject": "Q3 report",
            "body": "Hi all,\nFrom the numbers, we are on track.\n",
        },
    )
    assert sent["from"] == "Morgan Lee <me@corp.com>" and sent["subject"] == "Q3 report"
    message = by_id(world, sent["mail_id"])
    assert message["From"] == "Morgan Lee <me@corp.com>"
    assert message["To"] == "Bob Chen <bob@corp.com>, erin@corp.com"
    assert message["Cc"] == "carol@corp.com, dan@fabrikam.com"
    assert message["Date"] and message["Message-ID"].endswith("@corp.com>")
    assert message.get_content() in (
        "Hi all,\nFrom the numbers, we are on track.\n",
        "Hi all,\n>From the numbers, we are on track.\n",
    )
    # Reading it back through the server shows the text as written.
    read = mail.ok("read_mail", {"mail_id": sent["mail_id"]})
    assert read["body"] == "Hi all,\nFrom the numbers, we are on track."
    assert mail.ok("list_mails", {"limit": 1})["mails"][0]["mail_id"] == sent["mail_id"]
    assert len(stored(world)) == before + 1


def test_send_mail_attaches_real_files(mail, world):
    sent = mail.ok(
        "send_mail",
        {
            "to_email": "bob@corp.com",
            "subject": "Files",
            "body": "attached",
            "attachments": ["/Reports/q3 summary.pdf", "Reports/notes.txt"],
        },
    )
    assert sent["attachments"] == ["q3 summary.pdf", "notes.txt"]
    parts = {part.get_filename(): part for part in by_id(world, sent["mail_id"]).iter_attachments()}
    assert parts["q3 summary.pdf"].get_content() == b"%PDF-1.4 fake pdf bytes"
    assert parts["q3 summary.pdf"].get_content_type() == "application/pdf"
    assert parts["notes.txt"].get_content() == "plain notes\n"
    assert (
        mail.ok("read_mail", {"mail_id": sent["mail_id"]})["attachments"][0]["filename"] == "q3 summary.pdf"
    )


@pytest.mark.parametrize(
    ("attachment", "code"),
    [
        ("/Reports/missing.pdf", "not_found"),
        ("../outside.txt", "path_outside_root"),
        ("/Reports", "not_a_file"),
    ],
)
def test_send_mail_refuses_bad_attachments_and_sends_nothing(mail, world, attachment, code):
    before = len(stored(world))
    error = mail.error(
        "send_mail", {"to_email": "bob@corp.com", "subject": "x", "body": "y", "attachments": [attachment]}
    )
    assert error["code"] == code and error["argument"] == "attachments"
    assert len(stored(world)) == before


def test_bcc_is_not_visible_to_recipients(mail, world):
    sent = mail.ok(
        "send_mail", {"to_email": "bob@corp.com", "bcc": ["boss@corp.com"], "subject": "Quiet", "body": "b"}
    )
    message = by_id(world, sent["mail_id"])
    assert message["Bcc"] is None and "boss@corp.com" not in (message["To"] + str(message["Cc"]))
    assert message["X-Atoll-Bcc"] == "boss@corp.com"  # the sender's private copy
    assert mail.ok("read_mail", {"mail_id": sent["mail_id"]})["bcc"] == [
        "boss@corp.com"
    ]  # we sent it: we see it
    reply_all = mail.ok("reply_all_mail", {"original_mail_id": sent["mail_id"], "body": "follow-up"})
    assert "boss@corp.com" not in str(reply_all["to"] + reply_all["cc"])


def test_bcc_of_someone_elses_message_is_hidden(tmp_path):
    from tests.mcp_servers.mail_world import mbox, message

    world = make_world(tmp_path)
    world.app_file(MAIN_MBOX, mbox(message("x@corp.com", extra=["X-Atoll-Bcc: hidden@corp.com"])))
    with open_session("mail", world, options=OPTIONS) as session:
        assert "bcc" not in session.ok("read_mail", {"mail_id": "x@corp.com"})


def test_send_mail_validates_recipients_and_identity(mail, world):
    error = mail.error("send_mail", {"to_email": "bob at corp", "subject": "s", "body": "b"})
    assert error["code"] == "invalid_argument" and error["argument"] == "to_email"
    assert (
        mail.error("send_mail", {"to_email": [], "subject": "s", "body": "b"})["code"] == "invalid_argument"
    )
    explicit = mail.ok(
        "send_mail", {"from_email": "me@corp.com", "to_email": "bob@corp.com", "subject": "s", "body": "b"}
    )
    assert explicit["from"] == "Morgan Lee <me@corp.com>"


def test_send_mail_without_identity_needs_from_email(world):
    with open_session("mail", world) as session:
        assert (
            session.error("send_mail", {"to_email": "bob@corp.com", "subject": "s", "body": "b"})["argument"]
            == "from_email"
        )
        assert session.ok(
            "send_mail", {"from_email": "x@corp.com", "to_email": "bob@corp.com", "subject": "s", "body": "b"}
        )


def test_html_body_has_a_plain_alternative(mail, world):
    sent = mail.ok(
        "send_mail",
        {
            "to_email": "bob@corp.com",
            "subject": "H",
            "body": "<p>Hello <b>Bob</b></p>",
            "body_format": "html",
        },
    )
    message = by_id(world, sent["mail_id"])
    assert message.get_body(("html",)).get_content().strip() == "<p>Hello <b>Bob</b></p>"
    assert message.get_body(("plain",)).get_content().strip() == "Hello Bob"


def test_reply_mail_threads_and_prefixes(mail, world):
    reply = mail.ok("reply_mail", {"original_mail_id": "<reply1@corp.com>", "body": "Thanks Carol"})
    assert reply["subject"] == "Re: Budget kickoff"  # no "Re: Re:"
    assert reply["to"] == ["Carol Diaz <carol@corp.com>"] and reply["cc"] == []
    assert reply["thread_id"] == "first@corp.com"
    message = by_id(world, reply["mail_id"])
    assert message["In-Reply-To"] == "<reply1@corp.com>"
    assert message["References"] == "<first@corp.com> <reply1@corp.com>"
    thread = mail.ok("search_mail", {"thread_id": "first@corp.com"})
    assert [m["mail_id"] for m in thread["mails"]][0] == reply["mail_id"]


def test_reply_all_includes_visible_recipients_minus_me(mail):
    reply = mail.ok(
        "reply_all_mail", {"original_mail_id": "q3@corp.com", "body": "ok", "cc": "dan@fabrikam.com"}
    )
    assert reply["to"] == ["Bob Chen <bob@corp.com>"]
    assert reply["cc"] == ["carol@corp.com", "dan@fabrikam.com"]
    assert reply["subject"] == "Re: Q3 numbers"
    archived = mail.ok("reply_all_mail", {"original_mail_id": "archived@corp.com", "body": "ok"})
    assert archived["to"] == ["Dan Okafor <dan@fabrikam.com>", "erin@corp.com"]


def test_forward_mail_carries_text_and_attachments(mail, world):
    forwarded = mail.ok(
        "forward_mail",
        {
            "original_mail_id": "q3@corp.com",
            "to_email": "erin@corp.com",
            "body": "FYI",
            "attachments": ["/Reports/notes.txt"],
        },
    )
    assert forwarded["subject"] == "Fwd: Q3 numbers" and forwarded["attachments"] == ["q3.csv", "notes.txt"]
    message = by_id(world, forwarded["mail_id"])
    body = message.get_body(("plain",)).get_content()
    assert (
        body.startswith("FYI")
        and "---------- Forwarded message ---------" in body
        and "Numbers attached." in body
    )
    assert {p.get_filename(): p.get_content() for p in message.iter_attachments()}["q3.csv"] == "a,b\n1,2\n"
    without = mail.ok(
        "forward_mail",
        {"original_mail_id": "q3@corp.com", "to_email": "erin@corp.com", "include_attachments": False},
    )
    assert without["attachments"] == []


def test_send_with_thread_id_continues_the_thread(mail, world):
    sent = mail.ok(
        "send_mail",
        {
            "to_email": "carol@corp.com",
            "subject": "Re: Budget kickoff",
            "body": "x",
            "thread_id": "first@corp.com",
        },
    )
    assert sent["thread_id"] == "first@corp.com"
    assert by_id(world, sent["mail_id"])["In-Reply-To"] == "<reply1@corp.com>"  # latest in the thread
    assert (
        mail.error("send_mail", {"to_email": "c@x.com", "subject": "s", "body": "b", "thread_id": "nope"})[
            "code"
        ]
        == "not_found"
    )


def test_sent_mail_goes_to_the_users_mbox_or_a_new_one(tmp_path):
    world = make_world(tmp_path)
    with open_session("mail", world, options=OPTIONS) as session:
        sent = session.ok("send_mail", {"to_email": "bob@corp.com", "subject": "First ever", "body": "b"})
        assert sent["mailbox"] == "Sent.mbox"
        assert session.ok("list_mails", {})["total"] == 1
    configured = make_world(tmp_path / "configured")
    build_mail_world(configured)
    with open_session("mail", configured, options={**OPTIONS, "sent_mbox": "Archive/old.mbox"}) as session:
        session.ok("send_mail", {"to_email": "bob@corp.com", "subject": "Archived", "body": "b"})
    assert [m["Subject"] for m in stored(configured, OTHER_MBOX)] == ["Old contract", "Archived"]


def test_own_writes_update_the_index_without_reparsing(world):
    store = MailStore(ServerContext.create(world.fs_root, world.apps_root, OPTIONS))
    assert list_mails(store).data.total == 9
    misses = store._cache.misses
    for number in range(3):
        send_mail(store, to_email="bob@corp.com", subject=f"n{number}", body="b")
    listed = list_mails(store, limit=3).data
    assert [m.subject for m in listed.mails] == ["n2", "n1", "n0"]
    assert store._cache.misses == misses  # no re-parse after our own appends


def test_concurrent_senders_lose_nothing(world):
    """Two server instances (as two processes would) and several threads send at once."""
    stores = [MailStore(ServerContext.create(world.fs_root, world.apps_root, OPTIONS)) for _ in range(2)]
    errors = []

    def worker(store: MailStore, name: str) -> None:
        try:
            for number in range(10):
                send_mail(store, to_email="bob@corp.com", subject=f"{name}-{number}", body="x" * 500)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(stores[i % 2], f"w{i}")) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    subjects = [m["Subject"] for m in stored(world)]
    assert sorted(s for s in subjects if s and s.startswith("w")) == sorted(
        f"w{i}-{n}" for i in range(4) for n in range(10)
    )
    for store in stores:
        assert list_mails(store, limit=1).data.total == 9 + 40


def test_send_result_text_is_readable(mail):
    result = mail.call(
        "send_mail", {"to_email": "bob@corp.com", "subject": "Hello", "body": "b", "bcc": "x@corp.com"}
    )
    assert text_of(result).startswith("Sent <") and "bob@corp.com" in text_of(result)


def test_reply_goes_to_reply_to_when_set(tmp_path):
    from tests.mcp_servers.mail_world import mbox, message

    world = make_world(tmp_path)
    world.app_file(
        MAIN_MBOX,
        mbox(message("list@corp.com", sender="News <noreply@corp.com>", extra=["Reply-To: desk@corp.com"])),
    )
    with open_session("mail", world, options=OPTIONS) as session:
        assert session.ok("reply_mail", {"original_mail_id": "list@corp.com", "body": "hi"})["to"] == [
            "desk@corp.com"
        ]


def test_names_with_commas_and_accents_round_trip(tmp_path):
    from tests.mcp_servers.mail_world import mbox, message

    world = make_world(tmp_path)
    raw = message(
        "c@corp.com", sender='"Doe, John" <john@corp.com>', to="Zoë Faure <zoe@corp.com>, me@corp.com"
    )
    world.app_file(MAIN_MBOX, mbox(raw))
    with open_session("mail", world, options=OPTIONS) as session:
        assert session.ok("read_mail", {"mail_id": "c@corp.com"})["from"] == '"Doe, John" <john@corp.com>'
        reply = session.ok("reply_all_mail", {"original_mail_id": "c@corp.com", "body": "ok"})
        assert reply["to"] == ['"Doe, John" <john@corp.com>', "Zoë Faure <zoe@corp.com>"]
        stored_reply = by_id(world, reply["mail_id"])
        assert [a.addr_spec for a in stored_reply["To"].addresses] == ["john@corp.com", "zoe@corp.com"]
        assert stored_reply["To"].addresses[1].display_name == "Zoë Faure"


def test_sent_mail_is_labelled_sent(mail):
    sent = mail.ok("send_mail", {"to_email": "bob@corp.com", "subject": "Labelled", "body": "b"})
    assert sent["labels"] == ["Sent"]
    assert [m["mail_id"] for m in mail.ok("search_mail", {"label": "sent"})["mails"]] == [sent["mail_id"]]


def test_two_worlds_with_the_same_mailbox_index_it_once_and_each_sees_only_its_own_mail(
    tmp_path, monkeypatch
):
    # Every trial's world is a new copy of its seed: a mailbox content already indexed in the
    # process is not parsed again, and what one world sends or finds is never seen by another.
    import uuid

    from atoll.formats.mail import index as index_module
    from mcp_servers.mail.reading import search_mail

    marker = uuid.uuid4().hex  # a content no other test indexed in this process
    seed = mbox(message(f"{marker}@corp.com", subject="Shared seed", body="the seed's body"))
    worlds = [make_world(tmp_path / name) for name in ("a", "b", "c")]
    for world in worlds[:2]:
        world.app_file(MAIN_MBOX, seed)
    worlds[2].app_file(MAIN_MBOX, mbox(message(f"other-{marker}@corp.com", subject="Another seed")))
    parses = []
    split = index_module.split_spans
    monkeypatch.setattr(index_module, "split_spans", lambda data: parses.append(1) or split(data))
    first, second, third = (MailStore(ServerContext.create(w.fs_root, w.apps_root, OPTIONS)) for w in worlds)

    def subjects(store: MailStore, **search) -> list[str]:
        page = search_mail(store, **search) if search else list_mails(store)
        return [m.subject for m in page.data.mails]

    assert subjects(first) == subjects(second) == ["Shared seed"]
    assert len(parses) == 1
    assert subjects(third) == ["Another seed"] and len(parses) == 2
    for store, world in zip((first, second), worlds, strict=False):
        assert [entry.file for entry in store.view().entries] == [world.apps_root / MAIN_MBOX]
        assert subjects(store, body="seed's") == ["Shared seed"]  # bodies found stay in the world's index

    # Both send at the same offset of their copy of the mailbox: each finds only its own.
    send_mail(first, to_email="bob@corp.com", subject="from a", body="alpha secret")
    send_mail(second, to_email="bob@corp.com", subject="from b", body="bravo secret")
    assert subjects(first, body="secret") == ["from a"] and subjects(second, body="secret") == ["from b"]
    assert subjects(second, body="alpha") == [] and subjects(first, body="bravo") == []
    assert subjects(third) == ["Another seed"]
    assert [m["Subject"] for m in stored(worlds[1])] == ["Shared seed", "from b"]
