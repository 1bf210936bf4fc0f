"""Tests marked ``serial`` run alone under pytest-xdist (loaded by tests/conftest.py).

Every test, setup and teardown included (so a module's server start counts), holds the run's
lock shared; a serial one (it bounds a latency) holds it exclusively. The gate, held while a
test waits for the lock, gives a serial test its turn: no new test starts while it waits.
"""

import fcntl
from pathlib import Path

import pytest


def _turn_folder(config: pytest.Config) -> Path | None:
    """The folder every pytest-xdist worker of this run shares (None: not under xdist)."""
    if not hasattr(config, "workerinput") or not config.option.basetemp:
        return None
    return Path(config.option.basetemp).parent  # xdist gives worker gwN the basetemp <run>/popen-gwN


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    folder = _turn_folder(item.config)
    if folder is None:
        yield
        return
    serial = item.get_closest_marker("serial") is not None
    with open(folder / "atoll-serial.gate", "a") as gate, open(folder / "atoll-serial.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        if not serial:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if serial:
                fcntl.flock(gate, fcntl.LOCK_UN)
