"""The one error type every MCP server raises for a failed tool call.

A :class:`ToolError` carries a stable ``code`` (agents, tests and the gateway match on it)
and a one-line ``message`` naming the input and what is wrong with it. The tool adapter
turns it into an MCP error result (``isError: true``) whose text reads
``error [code]: message`` and whose structured content is ``{"error": {"code", "message",
"argument"}}``. Any other exception escaping a tool becomes code ``internal``; the server
itself never crashes on a tool failure.
"""

from __future__ import annotations

from typing import Any

from atoll.errors import AtollError, ErrorCode

#: The codes a tool call fails with, described for clients (each an :class:`atoll.errors.ErrorCode`;
#: a server may use another member where none of these fits).
ERROR_CODES: dict[ErrorCode, str] = {
    ErrorCode.invalid_argument: "an argument is missing, of the wrong type or out of range",
    ErrorCode.unknown_action: "the consolidated tool got an action it does not have",
    ErrorCode.not_found: "the file, message, event, channel or other item does not exist",
    ErrorCode.already_exists: "the target exists and the tool does not overwrite",
    ErrorCode.path_outside_root: "a path argument points outside the root the server serves",
    ErrorCode.not_a_file: "a path names a directory (or something else) where a file is needed",
    ErrorCode.not_a_directory: "a path names a file where a directory is needed",
    ErrorCode.too_large: "the input or the result exceeds a size limit",
    ErrorCode.unsupported: "the file type or operation is not supported",
    ErrorCode.permission_denied: "the operation is not allowed (read-only server, not the author, ...)",
    ErrorCode.conflict: "the item changed or is locked; retry",
    ErrorCode.bad_data: "stored data (a world file) is malformed",
    ErrorCode.internal: "a bug in the server; the message says what failed",
}


class ToolError(AtollError):
    """A tool call failed for a reason the caller can act on.

    ``argument`` names the offending argument when there is one (path resolvers and
    argument validation set it), so clients can point at it.
    """

    def __init__(self, code: ErrorCode, message: str, *, argument: str | None = None) -> None:
        super().__init__(code, message)
        self.argument = argument

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The structured form sent to clients."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.argument is not None:
            error["argument"] = self.argument
        return {"error": error}

    def to_text(self) -> str:
        """The readable form sent to clients (one line)."""
        return f"error [{self.code}]: {self.message}"
