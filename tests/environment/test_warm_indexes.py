"""The app-data servers build their indexes in the background, after /apps and after populate.

An agent's first mail call must not pay for indexing the mailbox: the environment builds the
index once the gateway is live (and again once a populate brought new data), and a call that
arrives while that build runs waits for it rather than starting a second one. The mail
server's index builder is wrapped to count builds (and, where the test needs a window, to
hold a build until released); everything else is the real environment over loopback HTTP.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client

import mcp_servers.mail.store as mail_store
from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import tar_gz

MAIL_APPS = {"mcpServers": {"mail": {"transport": "inprocess", "server": "mail"}}}


def _mbox(subjects: list[str]) -> bytes:
    messages = []
    for number, subject in enumerate(subjects):
        messages.append(
            f"From sender@example.com Mon Jan  6 09:0{number % 10}:00 2025\n"
            f"From: Sender <sender@example.com>\nTo: alex@example.com\nSubject: {subject}\n"
            f"Date: Mon, 6 Jan 2025 09:0{number % 10}:00 +0000\nMessage-ID: <m{number}-{subject}@example.com>\n\n"
            f"Body of {subject}.\n\n"
        )
    return "".join(messages).encode()


class CountingBuilds:
    """Wraps the mail index builder: counts builds; ``hold()`` makes the next builds wait."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.builds = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()
        real = mail_store.build_index

        def build_index(*args: Any, **kwargs: Any) -> Any:
            self.builds += 1
            self.started.set()
            assert self.release.wait(60), "build was never released"
            return real(*args, **kwargs)

        monkeypatch.setattr(mail_store, "build_index", build_index)

    def hold(self) -> None:
        self.started.clear()
        self.release.clear()

    def wait_for(self, builds: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.builds < builds:
            assert time.monotonic() < deadline, f"{self.builds} builds, expected {builds}"
            time.sleep(0.02)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[EnvironmentServer]:
    settings = EnvironmentSettings(
        fs_root=tmp_path / "world" / "filesystem",
        apps_data_root=tmp_path / "world" / ".apps_data",
        json_logs=False,
        log_level="WARNING",
        preload_servers=False,
    )
    mail = settings.apps_data_root / "mail"
    mail.mkdir(parents=True)
    (mail / "inbox.mbox").write_bytes(_mbox(["alpha", "beta", "gamma"]))
    with EnvironmentServer(settings) as server:
        yield server


def _subjects(mcp_url: str) -> list[str]:
    async def call() -> list[str]:
        async with Client(mcp_url) as mcp:
            result = await mcp.call_tool("mail_list_mails", {"limit": 50})
            return sorted(m["subject"] for m in result.structured_content["mails"])

    return asyncio.run(call())


def test_apps_builds_the_mail_index_before_any_call(env: EnvironmentServer, monkeypatch) -> None:
    builds = CountingBuilds(monkeypatch)
    assert httpx.post(f"{env.url}/apps", json=MAIL_APPS, timeout=60).status_code == 200
    builds.wait_for(1)  # no tool call was made
    assert _subjects(env.mcp_url) == ["alpha", "beta", "gamma"]
    assert builds.builds == 1  # the call used the background build


def test_a_call_during_the_background_build_waits_for_it(env: EnvironmentServer, monkeypatch) -> None:
    builds = CountingBuilds(monkeypatch)
    builds.hold()
    assert httpx.post(f"{env.url}/apps", json=MAIL_APPS, timeout=60).status_code == 200
    assert builds.started.wait(60)  # the background build is under way, and held
    answers: list[list[str]] = []
    caller = threading.Thread(target=lambda: answers.append(_subjects(env.mcp_url)))
    caller.start()
    caller.join(1.0)
    assert caller.is_alive() and answers == []  # waiting for the build, not answering from elsewhere
    builds.release.set()
    caller.join(60)
    assert answers == [["alpha", "beta", "gamma"]]
    assert builds.builds == 1  # one build, not one for the warm-up and one for the call


def test_populate_rebuilds_the_index_in_the_background(env: EnvironmentServer, monkeypatch) -> None:
    builds = CountingBuilds(monkeypatch)
    assert httpx.post(f"{env.url}/apps", json=MAIL_APPS, timeout=60).status_code == 200
    builds.wait_for(1)
    archive = tar_gz([("mail/inbox.mbox", _mbox(["delta", "epsilon"]))])
    reply = httpx.post(
        f"{env.url}/data/populate",
        params={"subsystem": ".apps_data"},
        files={"archive": ("apps.tar.gz", archive)},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    builds.wait_for(2)  # the new mailbox was indexed without a call
    assert _subjects(env.mcp_url) == ["delta", "epsilon"]
    assert builds.builds == 2
