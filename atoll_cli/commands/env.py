"""`atoll env …`: serve the environment (world on disk + MCP gateway + populate/snapshot)."""

from __future__ import annotations

from pathlib import Path

import typer

from atoll.errors import AtollError, ErrorCode
from atoll.logs import JSON_LOGS_HELP

app = typer.Typer(
    help="The environment service: a world, its MCP gateway, populate and snapshot.", no_args_is_help=True
)


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="bind address (0.0.0.0 in a container)"),
    port: int = typer.Option(8080, "--port", help="TCP port"),
    fs_root: Path | None = typer.Option(
        None, "--fs-root", help="world documents (default $ATOLL_FS_ROOT or /filesystem)"
    ),
    apps_data_root: Path | None = typer.Option(
        None, "--apps-data-root", help="app data (default $ATOLL_APPS_DATA_ROOT or /.apps_data)"
    ),
    json_logs: bool = typer.Option(False, "--json-logs", help=JSON_LOGS_HELP),
) -> None:
    """Serve /health, /apps, /mcp, /data/* and /metrics until interrupted.

    Beyond loopback (--host 0.0.0.0) ATOLL_ENV_TOKEN is required.
    """
    from atoll.runtime import defer_full_collections, resume_full_collections

    # Until the served app freezes its start-up heap (it is made with freeze_heap): what the
    # imports below and the app's build make lives as long as the process.
    defer_full_collections()
    try:
        _serve(host, port, fs_root, apps_data_root, json_logs)
    finally:  # the app froze its heap (and ended the deferral) unless it failed to start
        resume_full_collections()


def _serve(host: str, port: int, fs_root: Path | None, apps_data_root: Path | None, json_logs: bool) -> None:
    from pydantic import ValidationError

    from environment import EnvironmentSettings
    from environment import serve as serve_environment

    overrides = {
        key: value
        for key, value in (
            ("fs_root", fs_root),
            ("apps_data_root", apps_data_root),
            ("json_logs", json_logs or None),
        )
        if value is not None
    }
    try:
        settings = EnvironmentSettings(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise AtollError(
            ErrorCode.bad_settings, str(error.get("ctx", {}).get("error") or error["msg"])
        ) from None
    for label, root in (("--fs-root", settings.fs_root), ("--apps-data-root", settings.apps_data_root)):
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AtollError(
                ErrorCode.bad_root, f"{label} {str(root)!r} cannot be created: {exc.strerror}"
            ) from exc
    if not 0 < port < 65536:
        raise AtollError(ErrorCode.bad_port, f"--port {port} must be between 1 and 65535")
    serve_environment(settings, host=host, port=port)


@app.command("sandbox-check")
def sandbox_check() -> None:
    """Exit 0 when code_exec can run here (bubblewrap, or a trusted outer sandbox), else exit 3
    with the reason: the first init container of a trial pod, so a node that cannot host the
    sandbox fails the pod at once, saying why, instead of every code_exec failing closed."""
    from mcp_servers.code.sandbox import sandbox_status

    status = sandbox_status()
    if status.available:
        typer.echo(f"code_exec sandbox: {status.mode} (as {status.user})")
        return
    typer.echo(f"code_exec sandbox unavailable: {status.reason}", err=True)
    raise typer.Exit(3)


@app.command("world")
def world(
    host: str = typer.Option("0.0.0.0", "--host", help="bind address of the environment server"),  # noqa: S104
) -> None:
    """Serve as an APEX-Agents v1.1 Harbor task's `world` (the world image's entrypoint).

    Reads the v1.1 compose variables: PORT (8000; MCP at /mcp), WORLD_DATA_DIR (/world: the
    world's filesystem.tar.gz, apps_data.tar.gz and mcp_config.json), TASK_FILES_DIR
    (/task_files), WORLD_LOGS_DIR (/logs/world) and WORLD_CAPTURE_INITIAL_SNAPSHOT=1. Seeds the
    world, mounts its servers, writes initial_snapshot.tar.gz and .initial_snapshot_done, then
    lives as long as the server; exit 1 when any step fails (docs/interop.md).
    """
    import sys

    from environment.harbor_world import WorldSettings, run_world

    settings = WorldSettings.from_environ()
    command = [
        sys.executable,
        "-m",
        "atoll_cli",
        "env",
        "serve",
        "--host",
        host,
        "--port",
        str(settings.port),
    ]
    raise typer.Exit(run_world(settings, command))


@app.command("collect-snapshot")
def collect_snapshot() -> None:
    """The `[[verifier.collect]]` step of a v1.1 task whose world is `atoll env world`: the
    world's final snapshot into $WORLD_LOGS_DIR/final_snapshot.tar.gz (written whole, then renamed)."""
    from environment.harbor_world import WorldSettings, collect

    path = collect(WorldSettings.from_environ())
    typer.echo(str(path))
