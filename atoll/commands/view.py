"""`atoll view`: the web viewer over a trial store and its artifacts."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from atoll.errors import AtollError
from atoll.logs import JSON_LOGS_HELP

STORE_NAME = "atoll.db"
# Where `atoll run` (examples, defaults) and `atoll demo` put their stores, in that order.
DEFAULT_STORES = (Path("atoll-out") / STORE_NAME, Path("atoll-out") / "demo" / STORE_NAME)


def register(app: typer.Typer) -> None:
    """Add `atoll view` to the root app."""
    app.command(name="view")(view)


def resolve_store(run_dir: Path | None, store: str | None, environ: dict[str, str] | None = None) -> str:
    """The store URL to show: ``--store``, else the SQLite store of RUN_DIR (an output folder
    such as ``atoll-out/demo``, a run's report folder inside it, or the .db file itself), else
    ``$ATOLL_STORE``, else the first of ``atoll-out/atoll.db`` and ``atoll-out/demo/atoll.db``.
    Raises ``AtollError("no_store")`` naming what was looked for."""
    environ = dict(os.environ if environ is None else environ)
    if store:
        return store
    if run_dir is not None:
        candidates = [run_dir] if run_dir.is_file() else [run_dir / STORE_NAME, run_dir.parent / STORE_NAME]
        for candidate in candidates:
            if candidate.is_file():
                return str(candidate.resolve())
        raise AtollError(
            "no_store",
            f"{run_dir}: no trial store found (looked for "
            f"{', '.join(str(c) for c in candidates)}); pass --store URL for PostgreSQL",
        )
    if environ.get("ATOLL_STORE"):
        return environ["ATOLL_STORE"]
    for candidate in DEFAULT_STORES:
        if candidate.is_file():
            return str(candidate.resolve())
    raise AtollError(
        "no_store",
        "no trial store here (looked for "
        f"{', '.join(str(c) for c in DEFAULT_STORES)} and $ATOLL_STORE); run `atoll demo` first, "
        "or pass RUN_DIR or --store URL",
    )


def view(
    run_dir: Path = typer.Argument(
        None, help="output folder holding atoll.db (e.g. atoll-out/demo), or a .db file"
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
    from atoll.http_guard import check_bind, guarded_protocol
    from atoll.serving import serve_app
    from orchestrator.store import TrialStore
    from orchestrator.viewer import create_app
    from orchestrator.viewer.data import shown_url

    check_bind(host, token, "ATOLL_VIEW_TOKEN")
    url = resolve_store(run_dir, store)
    trial_store = TrialStore(url)
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
