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


#: The HTTP status a service answers an error of each code with; every other code is 400 (the
#: request was refused). The one table: every service's error handler (``atoll.http.add_error_handler``)
#: and every route that turns an error into a reply read it (docs/architecture.md, "Where each
#: shared mechanism lives").
HTTP_STATUS: dict[str, int] = {
    # 400, listed for the viewer's HTML pages, which answer a code not listed here with 404
    "bad_compare": 400,
    # 401 / 403: who asks, and what they may reach
    "unauthorized": 401,
    "url_not_allowed": 403,  # a URL outside ATOLL_URL_ALLOW
    "webhook_not_allowed": 403,  # a webhook outside ATOLL_WEBHOOK_ALLOW
    # 404: what the path names does not exist
    "unknown_run": 404,
    "unknown_trial": 404,
    "unknown_file": 404,
    # 409: the state of what the path names refuses the request
    "run_running": 409,
    "run_not_active": 409,
    "no_checkpoint_pending": 409,
    "idempotency_conflict": 409,
    "idempotency_in_progress": 409,
    "fingerprint_changed": 409,
    "world_changed": 409,
    "world_not_manifestable": 409,
    # 413 / 429: too large, too many
    "archive_too_large": 413,
    "snapshot_too_large": 413,
    "too_many_runs": 429,
    # 500: our bug (a NaN about to be written), not the request's
    "non_finite_number": 500,
    # 502 / 503: what the service depends on failed, or is not there yet
    "artifact_unreadable": 502,
    "model_endpoint": 502,
    "source_unavailable": 502,
    "upload_failed": 502,  # the snapshot destination's store failed or refused
    "mcp_unavailable": 503,
    "gateway_not_ready": 503,  # an app server failed to start or list its tools
    "snapshot_timeout": 503,
}


def http_status(code: str, default: int = 400) -> int:
    """The HTTP status of an error ``code`` (:data:`HTTP_STATUS`; ``default`` for any other)."""
    return HTTP_STATUS.get(code, default)


def describe_validation(errors: Any) -> str:
    """A pydantic ValidationError as one line: ``field.path: message; …``."""
    return "; ".join(
        # A refused_field error's message names its field itself (``agents[0].extra_args.x: …``).
        error["msg"]
        if error["type"] == "refused_field"
        else f"{'.'.join(str(part) for part in error['loc']) or '(top)'}: {error['msg']}"
        for error in errors.errors()
    )
