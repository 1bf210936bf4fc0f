"""A small handcrafted mail world with the edge cases the mail server must handle."""

from __future__ import annotations

from tests.mcp_servers.helpers import World

USER = "me@corp.com"
USER_NAME = "Morgan Lee"
MAIN_MBOX = "mail/All mail Including Spam and Trash.mbox"
OTHER_MBOX = "mail/Archive/old.mbox"


def message(
    msg_id: str,
    *,
    sender: str = "Alice Martin <alice@corp.com>",
    to: str = USER,
    cc: str | None = None,
    subject: str = "Hello",
    date: str = "Mon, 04 Mar 2024 10:00:00 +0000",
    body: str = "Hello there.",
    extra: list[str] | None = None,
    content_type: str = "text/plain; charset=utf-8",
) -> bytes:
    headers = [f"From: {sender}", f"To: {to}"]
    if cc:
        headers.append(f"Cc: {cc}")
    headers += [f"Subject: {subject}", f"Date: {date}", f"Message-ID: <{msg_id}>", "MIME-Version: 1.0"]
    headers += [f"Content-Type: {content_type}"]
    headers += extra or []
    return ("\n".join(headers) + "\n\n" + body + "\n").encode("utf-8")


def mbox(*messages: bytes) -> bytes:
    out = b""
    for raw in messages:
        out += b"From sender@example.com Mon Mar  4 10:00:00 2024\n" + raw + b"\n"
    return out


ATTACHED = (
    b"From: Bob Chen <bob@corp.com>\nTo: me@corp.com\nCc: carol@corp.com\nSubject: Q3 numbers\n"
    b"Date: Tue, 05 Mar 2024 09:30:00 -0500\nMessage-ID: <q3@corp.com>\nMIME-Version: 1.0\n"
    b'Content-Type: multipart/mixed; boundary="XX"\n\n'
    b"--XX\nContent-Type: text/plain; charset=utf-8\n\nNumbers attached.\n"
    b'--XX\nContent-Type: text/csv\nContent-Disposition: attachment; filename="q3.csv"\n'
    b"Content-Transfer-Encoding: base64\n\nYSxiCjEsMgo=\n--XX--\n"
)

MALFORMED = b"\x00\x01 garbage without any header at all\n\nmore garbage\n"


def build_mail_world(world: World) -> None:
    """Two mbox files: the main one (Takeout name) and an archive in a sub-folder."""
    main = mbox(
        message(
            "first@corp.com",
            subject="Budget kickoff",
            date="Fri, 01 Mar 2024 08:00:00 +0000",
            body="Let's plan the budget.\nFrom now on we meet weekly.",
        ),
        message(
            "reply1@corp.com",
            sender="Carol Diaz <carol@corp.com>",
            subject="Re: Budget kickoff",
            date="Sat, 02 Mar 2024 12:00:00 +0100",
            body="Agreed.",
            extra=["In-Reply-To: <first@corp.com>", "References: <first@corp.com>"],
        ),
        ATTACHED,
        MALFORMED,
        message(
            "naive@corp.com", subject="Naive date", date="Wed, 06 Mar 2024 23:30:00 -0000", body="no zone"
        ),
        message(
            "html@corp.com",
            subject="Newsletter",
            date="Thu, 07 Mar 2024 10:00:00 +0000",
            body="<html><body><h1>News</h1><p>Caf&eacute; opens <b>Monday</b></p></body></html>",
            content_type="text/html; charset=utf-8",
        ),
        message(
            "encoded@corp.com",
            subject="=?utf-8?q?R=C3=A9sum=C3=A9_review?=",
            date="Fri, 08 Mar 2024 10:00:00 +0000",
            body="see resume",
        ),
        message("baddate@corp.com", subject="Broken date", date="not a date at all", body="date is junk"),
    )
    # A header in raw Windows-1252 (not UTF-8, not RFC 2047), as old mailers wrote.
    latin = message(
        "latin@corp.com", subject="PLACEHOLDER", date="Sat, 09 Mar 2024 10:00:00 +0000", body="latin body"
    )
    latin = latin.replace(b"PLACEHOLDER", "Caf\u00e9 r\u00e9union".encode("cp1252"))
    main += mbox(latin)
    world.app_file(MAIN_MBOX, main)
    world.app_file(
        OTHER_MBOX,
        mbox(
            message(
                "archived@corp.com",
                sender="Dan Okafor <dan@fabrikam.com>",
                subject="Old contract",
                date="Mon, 01 Jan 2024 10:00:00 +0000",
                to="me@corp.com, erin@corp.com",
                body="Archived message body.",
            )
        ),
    )
