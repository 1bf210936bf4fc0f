"""What a command says when the run it was given is not in the store: the runs the store
does know, and where `atoll demo` keeps its own store (beside its output, not the default).

    require_known_run(trial_store, run_name)   # before reading the run (report, regrade, view)
"""

from __future__ import annotations

from pathlib import Path

from atoll.errors import AtollError, ErrorCode
from atoll.experiment import check_run_name

# `atoll demo`'s default --output; its store is atoll.db inside it.
DEMO_STORE = Path("atoll-out/demo/atoll.db")


def require_known_run(store, run_name: str, *, demo_store: Path = DEMO_STORE) -> None:
    """AtollError(``unknown_run``) naming the store's runs (and the demo's store when a demo
    ran here) unless ``store`` (a TrialStore) has a run ``run_name``; AtollError
    (``bad_run_name``) when ``run_name`` cannot name a run (a separator, ``..``, a leading dot)."""
    check_run_name(run_name)  # before it reaches the store or a folder name
    known = store.experiments()
    if run_name in known:
        return
    listed = f"runs there: {', '.join(known)}" if known else "it has no runs"
    message = f"no run {run_name!r} in {store.display_url}; {listed}"
    demo_url = f"sqlite:///{demo_store}"
    if demo_store.is_file() and not _is_sqlite_file(store.url, demo_store):
        message += f"; `atoll demo` keeps its runs in {demo_store}: add --store {demo_url}"
    raise AtollError(ErrorCode.unknown_run, message)


def _is_sqlite_file(url: str, path: Path) -> bool:
    return url.startswith("sqlite:///") and Path(url.removeprefix("sqlite:///")).resolve() == path.resolve()
