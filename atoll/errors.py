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
#: request was refused). The one table: every service's error handler (``atoll.http.add_error_handler``),
#: every route that turns an error into a reply (``atoll.http.refusal``) and the guards that answer
#: below FastAPI read it (docs/architecture.md, "Where each shared mechanism lives").
HTTP_STATUS: dict[str, int] = {
    # 400, listed for the viewer's HTML pages, which answer a code not listed here with 404
    "bad_compare": 400,
    # 401 / 403: who asks, and what they may reach
    "unauthorized": 401,
    "url_not_allowed": 403,  # a URL outside ATOLL_URL_ALLOW
    "webhook_not_allowed": 403,  # a webhook outside ATOLL_WEBHOOK_ALLOW
    "cross_site": 403,  # an unsafe method from another site (atoll.http_guard)
    # 404: what the path names does not exist
    "unknown_run": 404,
    "unknown_trial": 404,
    "unknown_file": 404,
    # 408 / 421: the connection (atoll.http_guard)
    "body_timeout": 408,  # the client stalled sending its body
    "host_not_allowed": 421,  # a Host outside ATOLL_ALLOWED_HOSTS
    # 409: the state of what the path names refuses the request
    "base_mismatch": 409,  # a delta's base_digest is not the base's
    "too_many_webhooks": 409,
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
    "too_many_streams": 429,
    # 422: a request whose fields contradict each other (Archipelago's status for a bad body)
    "mixed_snapshot_request": 422,
    # 500: our bug (a NaN about to be written), not the request's
    "non_finite_number": 500,
    "snapshot_failed": 500,  # the world could not be read for a snapshot, manifest or delta
    # 502 / 503: what the service depends on failed, or is not there yet
    "artifact_unreadable": 502,
    "model_endpoint": 502,
    "source_unavailable": 502,
    "upload_failed": 502,  # the snapshot destination's store failed or refused
    "mcp_unavailable": 503,
    "gateway_not_ready": 503,  # an app server failed to start or list its tools
    "snapshot_timeout": 503,
}


#: The HTTP layer's own refusals, one code per status: a request refused for its form before any
#: domain code ran (no such route, a wrong method, a body too large or not the media type, a body
#: that fails validation), and the code given to an HTTP error raised with a status only
#: (:func:`code_of_status`). Apart from :data:`HTTP_STATUS` on purpose: domain errors carry some
#: of the same codes with another meaning (a file format's ``too_large``, an MCP tool's
#: ``not_found`` or ``conflict`` are refusals of an input, 400 when they reach a service's
#: handler), so a code here answers its status only where the HTTP layer refuses with it
#: (``http_status(code, refusal=True)``). ``invalid_request`` is FastAPI's 422 in every service,
#: which Archipelago's clients expect of the environment's hand-checked bodies too.
REFUSAL_STATUS: dict[str, int] = {
    "bad_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "too_large": 413,
    "unsupported_media_type": 415,
    "invalid_request": 422,
    "unavailable": 503,
}

_CODE_OF_STATUS = {status: code for code, status in REFUSAL_STATUS.items()}


def http_status(code: str, default: int = 400, *, refusal: bool = False) -> int:
    """The HTTP status of an error ``code`` (:data:`HTTP_STATUS`; ``default`` for any other).
    With ``refusal`` (the HTTP layer refusing a request for its form), a code of
    :data:`REFUSAL_STATUS` answers its status there first."""
    if refusal and code in REFUSAL_STATUS:
        return REFUSAL_STATUS[code]
    return HTTP_STATUS.get(code, default)


def code_of_status(status: int) -> str:
    """The code of an HTTP error raised with ``status`` only (Starlette's own 404 and 405, a
    refused bearer token): :data:`REFUSAL_STATUS`'s code for it, else ``http_<status>``."""
    return _CODE_OF_STATUS.get(status) or f"http_{status}"


def describe_validation(errors: Any) -> str:
    """A pydantic ValidationError as one line: ``field.path: message; …``."""
    return "; ".join(
        # A refused_field error's message names its field itself (``agents[0].extra_args.x: …``).
        error["msg"]
        if error["type"] == "refused_field"
        else f"{'.'.join(str(part) for part in error['loc']) or '(top)'}: {error['msg']}"
        for error in errors.errors()
    )
