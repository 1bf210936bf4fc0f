"""Per-server options: each server declares the options it takes as a pydantic model.

Options are validated where they enter (``create_server``, and ``POST /apps`` before anything
starts): an unknown or mistyped option is an error naming it, never silently ignored. A
server's model subclasses :class:`ServerOptions` (the world's user, which every server takes)
and is given to its ``ServerDefinition(options=…)``. Fields default to None: the server's
code keeps its own defaults (``ctx.option(name, default)``) and sees only what was given —
or the model holds the defaults and resolves itself, as the code server's ``CodeOptions``
(options over ``ATOLL_CODE_*`` variables over defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from atoll.errors import AtollError, ErrorCode, first_problem


class ServerOptions(BaseModel):
    """Options every server takes: the world's user (to send mail, post, create events)."""

    model_config = ConfigDict(extra="forbid")

    user_email: str | None = None
    user_name: str | None = None


class InvalidOption(AtollError):
    """An option a server does not take, or a value of the wrong type; ``option`` names it."""

    def __init__(self, server: str, option: str, problem: str) -> None:
        super().__init__(ErrorCode.invalid_option, f"server {server}: option {option}: {problem}")
        self.server = server
        self.option = option


def validate_options(
    server: str, model: type[ServerOptions], options: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``options`` checked against ``model``: the given values, converted to their types.

    Raises :class:`InvalidOption` naming the first unknown or invalid option."""
    try:
        validated = model.model_validate(dict(options or {}))
    except ValidationError as exc:
        option, message, kind = first_problem(exc, top="(all)")
        problem = "unknown option" if kind == "extra_forbidden" else message
        known = ", ".join(sorted(model.model_fields))
        raise InvalidOption(server, option, f"{problem} (options of {server}: {known})") from None
    return validated.model_dump(exclude_unset=True)


__all__ = ["InvalidOption", "ServerOptions", "validate_options"]
