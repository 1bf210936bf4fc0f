"""`atoll orchestrator serve` (the orchestrator's HTTP API) and `atoll trial run` (one trial
inside a Kubernetes trial pod)."""

from __future__ import annotations

import asyncio

import typer

from atoll.errors import AtollError, ErrorCode, first_problem
from atoll.logs import JSON_LOGS_HELP

orchestrator_app = typer.Typer(help="The orchestrator's HTTP API.", no_args_is_help=True)
trial_app = typer.Typer(help="One trial, as a Kubernetes trial pod runs it.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the `orchestrator` and `trial` command groups to the root app."""
    app.add_typer(orchestrator_app, name="orchestrator")
    app.add_typer(trial_app, name="trial")


@orchestrator_app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="bind address (0.0.0.0 in a container)"),
    port: int = typer.Option(8000, "--port", help="TCP port"),
    store: str = typer.Option(None, "--store", help="trial store URL (default $ATOLL_STORE)"),
    json_logs: bool = typer.Option(False, "--json-logs", help=JSON_LOGS_HELP),
) -> None:
    """Serve /health and /runs (POST an experiment to enqueue it; workers execute it)."""
    from pydantic import ValidationError

    from atoll.http_guard import guarded_protocol
    from atoll.serving import serve_app
    from orchestrator.api import ApiSettings, create_app

    if not 0 < port < 65536:
        raise AtollError(ErrorCode.bad_port, f"--port {port} must be between 1 and 65535")
    try:
        settings = ApiSettings(**({"store": store} if store else {}))
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_settings, str(first_problem(exc))) from None
    serve_app(
        create_app(settings),
        service="orchestrator",
        host=host,
        port=port,
        token=settings.token(),
        token_variable="ATOLL_API_TOKEN",
        http=guarded_protocol(10.0),  # a client gets 10 s for its headers (atoll.http_guard)
        log_level="warning",
        json_logs=json_logs or None,
    )


@trial_app.command("run")
def run(
    input_uri: str = typer.Option(
        ...,
        "--input",
        help="trial input written by the executor (an fsspec URL, or the presigned https URL of an S3 store)",
    ),
    environment_url: str = typer.Option(
        "http://127.0.0.1:8080",
        "--environment-url",
        envvar="ATOLL_ENVIRONMENT_URL",
        help="the pod's environment",
    ),
    grader_url: str = typer.Option(
        None,
        "--grader-url",
        envvar="ATOLL_GRADER_URL",
        help="grading service (default: grade in this process)",
    ),
    env_token: str = typer.Option(
        None, "--env-token", envvar="ATOLL_ENV_TOKEN", help="environment control token"
    ),
    mcp_token: str = typer.Option(
        None, "--mcp-token", envvar="ATOLL_MCP_TOKEN", help="environment /mcp token"
    ),
    grader_token: str = typer.Option(
        None, "--grader-token", envvar="ATOLL_GRADER_TOKEN", help="grading service token"
    ),
) -> None:
    """Run one trial against the environment and write outcome.json beside the input."""
    from orchestrator.executors.kubernetes_trial import run_pod_trial

    outcome = asyncio.run(
        run_pod_trial(
            input_uri,
            environment_url=environment_url,
            grader_url=grader_url,
            env_token=env_token,
            mcp_token=mcp_token,
            grader_token=grader_token,
        )
    )
    if outcome.result is not None:
        typer.echo(f"trial {outcome.result.trial_id[:12]}: {outcome.result.outcome.value}")
    else:
        typer.echo(f"trial infrastructure error: {outcome.infra_error}", err=True)
