"""One error type for user-facing failures, with a stable machine-readable code."""

from __future__ import annotations

from typing import Any


class AtollError(Exception):
    """A failure caused by input or environment, reported to people as one line.

    ``code`` is stable (tests, API clients and logs match on it); ``message`` names the
    input and what is wrong with it.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class CodedError(AtollError):
    """An AtollError whose code is fixed by its class (``code`` below): raised with a message
    only, ``raise InfraError("the environment did not start")``."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(type(self).code, message)


def describe_validation(errors: Any) -> str:
    """A pydantic ValidationError as one line: ``field.path: message; …``."""
    return "; ".join(
        # A refused_field error's message names its field itself (``agents[0].extra_args.x: …``).
        error["msg"]
        if error["type"] == "refused_field"
        else f"{'.'.join(str(part) for part in error['loc']) or '(top)'}: {error['msg']}"
        for error in errors.errors()
    )
