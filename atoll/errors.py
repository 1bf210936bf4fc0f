"""One error type for user-facing failures, with a stable machine-readable code.

Every code lives in :class:`ErrorCode`: raise sites name a member (``AtollError(ErrorCode.bad_input,
…)``), never a string, so a near-synonym cannot appear unnoticed (tests/atoll/test_error_codes.py
holds the tree to it). Members are strings equal to their values, so every JSON reply, report and
log reads exactly as the code's name.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple


class ErrorCode(StrEnum):
    """Every code an :class:`AtollError` (or an HTTP reply built by ``atoll.http``) carries.

    Clients, tests and logs match on these strings: renaming one is a breaking change. A comment
    says what a code means where its name does not."""

    # --- shared: the HTTP layer's refusals (REFUSAL_STATUS) and MCP tool calls alike
    bad_request = "bad_request"
    unauthorized = "unauthorized"
    forbidden = "forbidden"
    not_found = "not_found"  # the file, message, event, channel or other item does not exist
    method_not_allowed = "method_not_allowed"
    conflict = "conflict"  # the item changed or is locked; retry
    too_large = "too_large"  # the input or the result exceeds a size limit
    unsupported_media_type = "unsupported_media_type"
    invalid_request = "invalid_request"  # a body that fails validation (FastAPI's 422)
    unavailable = "unavailable"
    unsupported = "unsupported"  # the file type or operation is not supported
    internal = "internal"  # a bug (an MCP server's, tesseract's); the message says what failed
    error = "error"  # a CodedError subclass that did not set its own code

    # --- atoll: contracts, formats, files, serving
    artifact_unreadable = "artifact_unreadable"  # a stored artifact or world blob cannot be read
    bad_artifact_store = "bad_artifact_store"  # ATOLL_ARTIFACTS / a store URL that cannot work
    bad_benchmark = "bad_benchmark"
    bad_checkpoint = "bad_checkpoint"  # an agent checkpoint that cannot be resumed from
    bad_experiment = "bad_experiment"
    bad_host = "bad_host"
    bad_input = "bad_input"  # a request's or a file's content is invalid (the catch-all refusal)
    bad_personas = "bad_personas"  # a world's coworker personas file
    bad_port = "bad_port"
    bad_run_name = "bad_run_name"
    bad_world_manifest = "bad_world_manifest"
    bad_world_reference = "bad_world_reference"  # a world key or reference that names no world
    bad_yaml = "bad_yaml"  # invalid, self-referencing or too large YAML (atoll.bounded_yaml)
    blob_corrupt = "blob_corrupt"  # a stored blob's bytes do not hash to its name
    blob_missing = "blob_missing"
    body_timeout = "body_timeout"  # the client stalled sending its body (atoll.http_guard)
    cross_site = "cross_site"  # an unsafe method from another site (atoll.http_guard)
    host_not_allowed = "host_not_allowed"  # a Host outside ATOLL_ALLOWED_HOSTS
    ics_syntax = "ics_syntax"
    insecure_bind = "insecure_bind"  # serving beyond loopback without a token
    invalid_option = "invalid_option"  # an option a server or command does not take, or a bad value
    key_refused = "key_refused"  # an API key would go to a URL it may not reach
    missing_extra = "missing_extra"  # an optional dependency group is not installed
    non_finite_number = "non_finite_number"  # a NaN or Infinity about to be written (our bug)
    port_denied = "port_denied"
    port_in_use = "port_in_use"
    recalc_failed = "recalc_failed"  # LibreOffice could not recalculate a workbook
    stale_mail_span = "stale_mail_span"  # an mbox changed under a message's recorded span
    unsafe_archive = "unsafe_archive"  # an archive member escapes, links out or is not a file
    world_base_mismatch = "world_base_mismatch"  # a stored delta's base has another digest
    world_key_taken = "world_key_taken"

    # --- models (atoll.llm; ModelError's are model_<ModelErrorKind>)
    model_configuration = "model_configuration"
    model_content = "model_content"
    model_context_window = "model_context_window"
    model_cost_ceiling = "model_cost_ceiling"
    model_rate_limited = "model_rate_limited"
    model_transient = "model_transient"
    model_endpoint = "model_endpoint"  # the preflight call to a model endpoint failed
    model_parameters = "model_parameters"  # a model profile or its parameters are invalid
    model_provider = "model_provider"  # the agent's model call failed (agents_runner)

    # --- MCP servers (ToolError; mcp_servers._core.errors.ERROR_CODES describes them to clients)
    already_exists = "already_exists"
    bad_data = "bad_data"  # stored data (a world file) is malformed
    invalid_argument = "invalid_argument"
    invalid_mode = "invalid_mode"  # an MCP server's mode is not one of mcp_servers.MODES
    not_a_directory = "not_a_directory"
    not_a_file = "not_a_file"
    path_outside_root = "path_outside_root"
    permission_denied = "permission_denied"
    sandbox_identity = "sandbox_identity"  # the code server's sandbox user cannot be set up
    sandbox_unavailable = "sandbox_unavailable"
    server_unavailable = "server_unavailable"
    tree_too_deep = "tree_too_deep"
    unknown_action = "unknown_action"  # a consolidated tool got an action it does not have
    unknown_server = "unknown_server"

    # --- environment
    archive_too_large = "archive_too_large"
    bad_archive = "bad_archive"
    bad_local_url = "bad_local_url"
    bad_mode = "bad_mode"  # a populate mode other than merge or replace
    bad_source_url = "bad_source_url"
    bad_subsystem = "bad_subsystem"  # a populate subsystem other than the world's roots
    base_mismatch = "base_mismatch"  # a delta request's base_digest is not the base's
    gateway_not_ready = "gateway_not_ready"  # an app server failed to start or list its tools
    hooks_unsupported = "hooks_unsupported"
    link_escape = "link_escape"  # a symlink in a world points outside it
    mcp_unavailable = "mcp_unavailable"
    missing_archive = "missing_archive"
    mixed_snapshot_request = "mixed_snapshot_request"  # a snapshot request whose fields contradict
    no_snapshot_destination = "no_snapshot_destination"
    snapshot_failed = "snapshot_failed"  # the world could not be read for a snapshot, manifest or delta
    snapshot_timeout = "snapshot_timeout"
    snapshot_too_large = "snapshot_too_large"
    source_not_found = "source_not_found"  # a populate source path that does not exist
    source_unavailable = "source_unavailable"  # a populate source URL that cannot be fetched
    source_unreadable = "source_unreadable"
    tool_name_collision = "tool_name_collision"  # two app servers expose the same tool name
    upload_failed = "upload_failed"  # the snapshot destination's store failed or refused
    url_not_allowed = "url_not_allowed"  # a URL outside ATOLL_URL_ALLOW
    world_boot = "world_boot"  # a Harbor task's world container did not start
    world_changed = "world_changed"  # the world changed while it was being read
    world_not_manifestable = "world_not_manifestable"  # a member a manifest cannot name

    # --- agents runner
    agent_unavailable = "agent_unavailable"
    bad_config = "bad_config"  # an agent's configuration cannot work with this gateway
    budget_exhausted = "budget_exhausted"
    context_window_exceeded = "context_window_exceeded"
    gateway_not_allowed = "gateway_not_allowed"
    gateway_unavailable = "gateway_unavailable"
    no_checkpoint_pending = "no_checkpoint_pending"
    no_prompt = "no_prompt"
    no_reference_solution = "no_reference_solution"  # the replay agent's task has no solution
    run_running = "run_running"  # the run is still running (also RunEnded's code for that status)
    # RunEnded: an agent ends its run with a status (run_<atoll.trajectory.RunStatus>)
    run_completed = "run_completed"
    run_failed = "run_failed"
    run_max_steps = "run_max_steps"
    run_timeout = "run_timeout"
    run_budget_exhausted = "run_budget_exhausted"
    run_error = "run_error"
    run_cancelled = "run_cancelled"
    too_many_runs = "too_many_runs"
    unknown_agent = "unknown_agent"
    unknown_run = "unknown_run"

    # --- grader
    check_kind_unavailable = "check_kind_unavailable"
    gold_missing = "gold_missing"
    gold_replay = "gold_replay"  # replaying a gold solution failed
    grader_rejected = "grader_rejected"
    grader_unavailable = "grader_unavailable"
    grading_error = "grading_error"  # a Harbor verifier could not grade
    malformed_verdict = "malformed_verdict"
    snapshot_unreadable = "snapshot_unreadable"
    unknown_check_kind = "unknown_check_kind"

    # --- orchestrator
    artifact_folder_taken = "artifact_folder_taken"
    artifact_folder_unreadable = "artifact_folder_unreadable"
    bad_compare = "bad_compare"
    bad_idempotency_key = "bad_idempotency_key"
    bad_job_template = "bad_job_template"
    bad_last_event_id = "bad_last_event_id"
    bad_stored_spec = "bad_stored_spec"  # a run's stored experiment no longer loads
    bad_trial_input = "bad_trial_input"
    benchmark_not_allowed = "benchmark_not_allowed"
    environment_refused = "environment_refused"  # the environment refused without a code
    executor_unavailable = "executor_unavailable"
    fingerprint_changed = "fingerprint_changed"  # a run resumed with other inputs than it began with
    idempotency_conflict = "idempotency_conflict"  # a key reused with another request
    idempotency_in_progress = "idempotency_in_progress"
    infra_abort = "infra_abort"  # a run stopped for its infrastructure error rate
    infra_error = "infra_error"
    no_cluster = "no_cluster"
    no_presigned_urls = "no_presigned_urls"
    operator_setting = "operator_setting"  # a submission sets what only the operator may
    outcome_not_written = "outcome_not_written"
    run_not_active = "run_not_active"
    store_unavailable = "store_unavailable"  # the trial store dropped and did not come back in time
    store_unreachable = "store_unreachable"  # the trial store could not be opened at all
    too_many_streams = "too_many_streams"
    too_many_trials = "too_many_trials"
    too_many_webhooks = "too_many_webhooks"
    unknown_file = "unknown_file"
    unknown_trial = "unknown_trial"
    webhook_not_allowed = "webhook_not_allowed"  # a webhook outside ATOLL_WEBHOOK_ALLOW
    webhook_retry = "webhook_retry"

    # --- command line
    bad_output = "bad_output"
    bad_root = "bad_root"
    bad_settings = "bad_settings"  # ATOLL_* settings that fail validation
    invalid_transport = "invalid_transport"
    no_store = "no_store"
    not_confirmed = "not_confirmed"  # a destructive command refused without --yes


class AtollError(Exception):
    """A failure caused by input or environment, reported to people as one line.

    ``code`` is stable (tests, API clients and logs match on it); ``message`` names the
    input and what is wrong with it.
    """

    code: ErrorCode

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class CodedError(AtollError):
    """An AtollError whose code is fixed by its class (``code`` below): raised with a message
    only, ``raise InfraError("the environment did not start")``."""

    code = ErrorCode.error

    def __init__(self, message: str) -> None:
        super().__init__(type(self).code, message)


#: The HTTP status a service answers an error of each code with; every other code is 400 (the
#: request was refused). The one table: every service's error handler (``atoll.http.add_error_handler``),
#: every route that turns an error into a reply (``atoll.http.refusal``) and the guards that answer
#: below FastAPI read it (docs/architecture.md, "Where each shared mechanism lives"). Keyed by
#: :class:`ErrorCode` members, looked up by any code string (one relayed from another service too).
HTTP_STATUS: dict[str, int] = {
    # 400, listed for the viewer's HTML pages, which answer a code not listed here with 404
    ErrorCode.bad_compare: 400,
    # 401 / 403: who asks, and what they may reach
    ErrorCode.unauthorized: 401,
    ErrorCode.url_not_allowed: 403,  # a URL outside ATOLL_URL_ALLOW
    ErrorCode.webhook_not_allowed: 403,  # a webhook outside ATOLL_WEBHOOK_ALLOW
    ErrorCode.cross_site: 403,  # an unsafe method from another site (atoll.http_guard)
    # 404: what the path names does not exist
    ErrorCode.unknown_run: 404,
    ErrorCode.unknown_trial: 404,
    ErrorCode.unknown_file: 404,
    # 408 / 421: the connection (atoll.http_guard)
    ErrorCode.body_timeout: 408,  # the client stalled sending its body
    ErrorCode.host_not_allowed: 421,  # a Host outside ATOLL_ALLOWED_HOSTS
    # 409: the state of what the path names refuses the request
    ErrorCode.base_mismatch: 409,  # a delta's base_digest is not the base's
    ErrorCode.too_many_webhooks: 409,
    ErrorCode.run_running: 409,
    ErrorCode.run_not_active: 409,
    ErrorCode.no_checkpoint_pending: 409,
    ErrorCode.idempotency_conflict: 409,
    ErrorCode.idempotency_in_progress: 409,
    ErrorCode.fingerprint_changed: 409,
    ErrorCode.world_changed: 409,
    ErrorCode.world_not_manifestable: 409,
    # 413 / 429: too large, too many
    ErrorCode.archive_too_large: 413,
    ErrorCode.snapshot_too_large: 413,
    ErrorCode.too_many_runs: 429,
    ErrorCode.too_many_streams: 429,
    # 422: a request whose fields contradict each other (Archipelago's status for a bad body)
    ErrorCode.mixed_snapshot_request: 422,
    # 500: our bug (a NaN about to be written), not the request's
    ErrorCode.non_finite_number: 500,
    ErrorCode.snapshot_failed: 500,  # the world could not be read for a snapshot, manifest or delta
    # 502 / 503: what the service depends on failed, or is not there yet
    ErrorCode.artifact_unreadable: 502,
    ErrorCode.model_endpoint: 502,
    ErrorCode.source_unavailable: 502,
    ErrorCode.upload_failed: 502,  # the snapshot destination's store failed or refused
    ErrorCode.mcp_unavailable: 503,
    ErrorCode.gateway_not_ready: 503,  # an app server failed to start or list its tools
    ErrorCode.snapshot_timeout: 503,
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
    ErrorCode.bad_request: 400,
    ErrorCode.unauthorized: 401,
    ErrorCode.forbidden: 403,
    ErrorCode.not_found: 404,
    ErrorCode.method_not_allowed: 405,
    ErrorCode.conflict: 409,
    ErrorCode.too_large: 413,
    ErrorCode.unsupported_media_type: 415,
    ErrorCode.invalid_request: 422,
    ErrorCode.unavailable: 503,
}

_CODE_OF_STATUS = {status: code for code, status in REFUSAL_STATUS.items()}


def http_status(code: str, default: int = 400, *, refusal: bool = False) -> int:
    """The HTTP status of an error ``code`` (:data:`HTTP_STATUS`; ``default`` for any other).
    With ``refusal`` (the HTTP layer refusing a request for its form), a code of
    :data:`REFUSAL_STATUS` answers its status there first."""
    if refusal and code in REFUSAL_STATUS:
        return REFUSAL_STATUS[code]
    return HTTP_STATUS.get(code, default)


def code_of_status(status: int) -> ErrorCode:
    """The code of an HTTP error raised with ``status`` only (Starlette's own 404 and 405, a
    refused bearer token): :data:`REFUSAL_STATUS`'s code for it; for any other status (a
    library's 418, say) ``bad_request`` below 500 and ``internal`` from 500, so that every
    error body carries a declared code and the status says the rest."""
    if status in _CODE_OF_STATUS:
        return ErrorCode(_CODE_OF_STATUS[status])
    return ErrorCode.bad_request if status < 500 else ErrorCode.internal


class ValidationProblem(NamedTuple):
    """The first error of a pydantic validation: where (its location, dotted), what it says,
    and its pydantic type (``extra_forbidden``, ``missing``, …)."""

    where: str
    message: str
    kind: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


def first_problem(errors: Any, *, top: str = "(top level)") -> ValidationProblem:
    """The first error of the pydantic ValidationError ``errors``, which is how a refusal of
    one bad input names the problem (``where: message``); ``top`` is its location when the
    error is about the input as a whole."""
    first = errors.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or top
    return ValidationProblem(where, first["msg"], first["type"])


def describe_validation(errors: Any) -> str:
    """A pydantic ValidationError as one line: ``field.path: message; …``."""
    return "; ".join(
        # A refused_field error's message names its field itself (``agents[0].extra_args.x: …``).
        error["msg"]
        if error["type"] == "refused_field"
        else f"{'.'.join(str(part) for part in error['loc']) or '(top)'}: {error['msg']}"
        for error in errors.errors()
    )
