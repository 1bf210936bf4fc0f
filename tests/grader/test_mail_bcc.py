"""The grader sees the Bcc recipients of mail the agent sent through the mail server."""

import mailbox

from grader.appdata import diff_mail
from tests.mcp_servers.helpers import make_world, open_session


def test_bcc_of_sent_mail_reaches_the_grader(tmp_path):
    world = make_world(tmp_path)
    world.app_file("mail/Sent.mbox", "")
    with open_session("mail", world, options={"user_email": "ana@example.com"}) as mail:
        mail.ok(
            "send_mail",
            {
                "from_email": "ana@example.com",
                "to_email": "bo@example.com",
                "bcc": ["counsel@example.com"],
                "subject": "Offer",
                "body": "See attached.",
            },
        )
    sent_mbox = world.apps_root / "mail" / "Sent.mbox"
    (message,) = list(mailbox.mbox(str(sent_mbox)))
    assert message.get("Bcc") is None  # not visible to the other recipients
    (sent,), errors = diff_mail({}, {".apps_data/mail/Sent.mbox": sent_mbox.read_bytes()})
    assert sent.bcc == ["counsel@example.com"] and sent.to == ["bo@example.com"] and not errors


def test_a_bcc_header_written_by_another_mail_client_is_read_too():
    raw = (
        b"From ana@example.com Mon Mar  3 10:00:00 2025\n"
        b"From: ana@example.com\nTo: bo@example.com\nBcc: Counsel <counsel@example.com>\n"
        b"Subject: Offer\nMessage-ID: <1@example.com>\n\nHello\n\n"
    )
    (sent,), _ = diff_mail({}, {".apps_data/mail/Sent.mbox": raw})
    assert sent.bcc == ["counsel@example.com"] and sent.message_id == "<1@example.com>"
