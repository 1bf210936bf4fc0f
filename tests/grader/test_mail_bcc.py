"""The grader sees the Bcc recipients of mail the agent sent through the mail server."""

import mailbox

from grader.appdata import mail_from_message
from tests.mcp_servers.helpers import make_world, open_session


def test_bcc_of_sent_mail_reaches_the_grader(tmp_path):
    world = make_world(tmp_path)
    world.app_file("mail/Sent.mbox", "")
    with open_session("mail", world, options={"user_email": "ana@example.com"}) as mail:
        mail.ok("send_mail", {"from_email": "ana@example.com", "to_email": "bo@example.com",
                              "bcc": ["counsel@example.com"], "subject": "Offer", "body": "See attached."})
    (message,) = list(mailbox.mbox(str(world.apps_root / "mail" / "Sent.mbox")))
    assert message.get("Bcc") is None  # not visible to the other recipients
    sent = mail_from_message(message)
    assert sent.bcc == ["counsel@example.com"] and sent.to == ["bo@example.com"]
