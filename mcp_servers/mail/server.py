"""The mail server's definition (tools register themselves on import)."""

from pydantic import Field

from mcp_servers._core import ServerDefinition
from mcp_servers._core.options import ServerOptions
from mcp_servers.mail.store import MailStore


class MailOptions(ServerOptions):
    """Options of the mail server."""

    sent_mbox: str | None = Field(
        None, description="mbox file (under .apps_data/mail/) that sent mail goes to"
    )


SERVER = ServerDefinition(
    "mail",
    consolidated_name="mail",
    description=(
        "The world user's email (all mailboxes). Mail ids are Message-IDs such as '<abc@example.com>'. "
        "Attachments are files of the world, given as paths like '/Reports/q3.pdf'."
    ),
    state=MailStore,
    options=MailOptions,
)
