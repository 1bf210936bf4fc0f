"""Mail server over the world's mbox files (``<apps_data>/mail/**/*.mbox``).

Tools: list_mails, read_mail, search_mail, send_mail, reply_mail, reply_all_mail,
forward_mail. Consolidated tool: ``mail(action=list|read|search|send|reply|reply_all|forward)``.
"""

from mcp_servers.mail import reading, sending  # noqa: F401  (registers the tools)
from mcp_servers.mail.server import SERVER

__all__ = ["SERVER"]
