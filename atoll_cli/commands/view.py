"""`atoll view`: the web viewer over a trial store and its artifacts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from atoll.defaults import OUTPUT_DIR
from atoll.errors import AtollError, ErrorCode
from atoll.logs import JSON_LOGS_HELP
from atoll.settings import environ as process_environ

STORE_NAME = "atoll.db"
# Where `atoll run` (examples, defaults) and `atoll demo` put their stores, in that order.
DEFAULT_STORES = (Path(OUTPUT_DIR) / STORE_NAME, Path(OUTPUT_DIR) / "demo" / STORE_NAME)


def register(app: typer.Typer) -> None:
    """Add `atoll view` to the root app."""
    app.command(name="view")(view)


def resolve_store(run_dir: Path | None, store: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The store URL to show: ``--store``, else the SQLite store of RUN_DIR (an output folder
    such as ``atoll-out/demo``, a run's report folder inside it, or the .db file itself), else
    ``$ATOLL_STORE``, else the first of ``atoll-out/atoll.db`` and ``atoll-out/demo/atoll.db``.
    Raises ``AtollError("no_store")`` naming what was looked for."""
    environ = process_environ() if environ is None else environ
    if store:
        return store
    if run_dir is not None:
        candidates = [run_dir] if run_dir.is_file() else [run_dir / STORE_NAME, run_dir.parent / STORE_NAME]
        for candidate in candidates:
            if candidate.is_file():
                return str(candidate.resolve())
        raise AtollError(
            ErrorCode.no_store,
            f"{run_dir}: no trial store found (looked for "
            f"{', '.join(str(c) for c in candidates)}); pass --store URL for PostgreSQL",
        )
    if environ.get("ATOLL_STORE"):
        return environ["ATOLL_STORE"]
    for candidate in DEFAULT_STORES:
        if candidate.is_file():
            return str(candidate.resolve())
    raise AtollError(
        ErrorCode.no_store,
        "no trial store here (looked for "
        f"{', '.join(str(c) for c in DEFAULT_STORES)} and $ATOLL_STORE); run `atoll demo` first, "
        "or pass RUN_DIR or --store URL",
    )


def open_store(run_dir: Path | None, store: str | None) -> tuple[Any, Any]:
    """(the trial store to show, the temporary folder holding it or None): the store
    :func:`resolve_store` finds, else, for a Harbor job folder (or a folder of jobs) without
    one, a SQLite store made in a temporary folder that records its jobs
    (:mod:`orchestrator.harbor_jobs`); the caller disposes of the store, then cleans the folder
    up. Raises resolve_store's AtollError when RUN_DIR is neither."""
    import tempfile

    from orchestrator.store import TrialStore

    try:
        return TrialStore(resolve_store(run_dir, store)), None
    except AtollError:
        from orchestrator.harbor_jobs import find_harbor_jobs, harbor_store

        if store or run_dir is None or not find_harbor_jobs(run_dir):
            raise
    scratch = tempfile.TemporaryDirectory(prefix="atoll-harbor-")
    try:
        return harbor_store(run_dir, Path(scratch.name)), scratch
    except BaseException:
        scratch.cleanup()
        raise


def view(
    run_dir: Path = typer.Argument(
        None,
        help="output folder holding atoll.db (e.g. atoll-out/demo), a .db file, or a Harbor job folder "
        "(jobs/JOB, or jobs/ for every job in it: docs/interop.md)",
    ),
    store: str = typer.Option(None, "--store", help="trial store URL (sqlite path or postgresql://…)"),
    host: str = typer.Option("127.0.0.1", "--host", help="bind address"),
    port: int = typer.Option(8090, "--port", help="TCP port"),
    token: str = typer.Option(
        None,
        "--token",
        envvar="ATOLL_VIEW_TOKEN",
        help="required beyond loopback; browsers open /?token=… once",
    ),
    json_logs: bool = typer.Option(False, "--json-logs", help=JSON_LOGS_HELP),
) -> None:
    """Browse runs, trials, transcripts, verdicts and world diffs in a web browser."""
    import signal
    import sys

    from atoll.http_guard import check_bind, guarded_protocol
    from atoll.serving import serve_app
    from orchestrator.viewer import create_app
    from orchestrator.viewer.data import shown_url

    check_bind(host, token, "ATOLL_VIEW_TOKEN")
    trial_store, scratch = open_store(run_dir, store)
    if scratch is not None:
        # uvicorn re-raises the SIGTERM that stopped it once it has shut down: as an exit
        # (not the default handler's instant death), so the job's store is removed below.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        # One line once it accepts connections: "atoll view (store …) listening on http://…".
        serve_app(
            create_app(trial_store, bind_host=host, token=token),
            service=f"atoll view (store {shown_url(trial_store)})",
            host=host,
            port=port,
            token=token,
            token_variable="ATOLL_VIEW_TOKEN",
            log_level="warning",
            http=guarded_protocol(10.0),
            lifespan="on",
            json_logs=json_logs or None,
        )
    finally:
        trial_store.dispose()
        if scratch is not None:
            scratch.cleanup()
