"""Office files read through the environment's gateway: a bomb is one ``too_large`` tool error,
and /health keeps answering in < 100 ms while a large (bounded) document is read."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from fastmcp import Client

from atoll.testing import bombs
from environment import EnvironmentServer


@pytest.fixture
def documents_env(settings):
    settings.fs_root.mkdir(parents=True)
    (settings.fs_root / "bomb.docx").write_bytes(bombs.docx_paragraph_bomb(1_000_000))
    (settings.fs_root / "long.docx").write_bytes(bombs.docx_paragraph_bomb(30_000))
    with EnvironmentServer(settings) as env:
        config = {"mcpServers": {"documents": {"transport": "inprocess", "server": "documents"}}}
        reply = httpx.post(f"{env.url}/apps", json=config, timeout=60)
        assert reply.status_code == 200, reply.text
        yield env


def _call(env: EnvironmentServer, file_path: str) -> tuple[bool, str]:
    async def call() -> tuple[bool, str]:
        async with Client(env.mcp_url, timeout=120) as mcp:
            result = await mcp.call_tool(
                "documents_read_document_content", {"file_path": file_path}, raise_on_error=False
            )
            return result.is_error, result.content[0].text

    return asyncio.run(call())


@pytest.mark.slow
@pytest.mark.serial  # bounds /health's latency: a neighbour test's burst of CPU is not the tool's doing
def test_health_answers_while_documents_are_read_and_a_bomb_is_refused(documents_env):
    is_error, text = _call(documents_env, "/bomb.docx")
    assert is_error and text.startswith("error [too_large]: file_path: /bomb.docx: its XML holds more than")

    outcome: dict[str, tuple[bool, str]] = {}
    reader = threading.Thread(target=lambda: outcome.setdefault("long", _call(documents_env, "/long.docx")))
    latencies = []
    with httpx.Client(base_url=documents_env.url, timeout=5) as http:
        http.get("/health")
        reader.start()
        while reader.is_alive():
            began = time.perf_counter()
            assert http.get("/health").status_code == 200
            latencies.append(time.perf_counter() - began)
            time.sleep(0.02)
    reader.join()
    assert outcome["long"][0] is False and "body.p.0" in outcome["long"][1]
    assert len(latencies) >= 5 and max(latencies) < 0.1, latencies
