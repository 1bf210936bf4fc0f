"""A store that was never reached is reported in seconds; one that was reached and drops is
waited for as long as any outage."""

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from atoll.errors import AtollError
from orchestrator.store import TrialStore
from orchestrator.store_retry import StoreRetry
from tests.orchestrator.db_proxy import DatabaseProxy


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        return listener.getsockname()[1]


def test_a_worker_pointed_at_an_unreachable_store_says_so_in_seconds(tmp_path):
    port = _closed_port()
    url = f"postgresql://postgres:hunter2@127.0.0.1:{port}/atoll"
    started = time.monotonic()
    worker = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "worker", "--store", url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ATOLL_SPOOL_DIR": str(tmp_path / "spool"), "ATOLL_STORE_CONNECT_S": "2"},
    )
    elapsed = time.monotonic() - started
    assert worker.returncode != 0
    # The first-connection window is what it waited, not the 120 s an outage gets: the bound
    # leaves room for a loaded machine's interpreter start-up, far below the old 123 s.
    assert elapsed < 40, f"took {elapsed:.1f} s"
    last_line = worker.stderr.strip().splitlines()[-1]
    assert "(tried for 2 s)" in last_line
    assert f"trial store postgresql://postgres:***@127.0.0.1:{port}/atoll: cannot connect" in last_line
    assert "refused" in last_line
    assert "hunter2" not in worker.stderr + worker.stdout


def test_the_first_connection_gets_10_s_by_default_an_outage_120(monkeypatch):
    for name in ("ATOLL_STORE_CONNECT_S", "ATOLL_STORE_RETRY_S"):
        monkeypatch.delenv(name, raising=False)
    policy = StoreRetry.from_env()
    assert (policy.connect_s, policy.total_s) == (10.0, 120.0)


def test_a_store_that_answered_keeps_the_long_window_when_it_drops(postgres_url):
    proxy = DatabaseProxy()
    retry = StoreRetry(total_s=30, max_backoff_s=0.5, connect_s=0.5)
    store = TrialStore(proxy.url(postgres_url.rsplit("/", 1)[1]), retry=retry, wait=True)
    try:
        proxy.cut()
        threading.Timer(2.0, proxy.restore).start()
        started = time.monotonic()
        assert store.experiments() == []  # waited through the outage, past the connect window
        assert time.monotonic() - started >= 1.5
    finally:
        store.dispose()
        proxy.close()


def test_the_first_connection_window_is_the_connect_setting(monkeypatch):
    monkeypatch.setenv("ATOLL_STORE_CONNECT_S", "1")
    started = time.monotonic()
    with pytest.raises(AtollError, match=r"cannot connect \(tried for 1 s\)"):
        TrialStore(f"postgresql://postgres@127.0.0.1:{_closed_port()}/atoll", wait=True)
    assert time.monotonic() - started < 10
