"""Agents runner overhead per step, with a zero-latency model and a trivial MCP tool.

Baseline (same process, same servers): one bare ``litellm.acompletion`` to the scripted model
plus one bare fastmcp ``call_tool`` per step, the least a harness can do per step.  Measured:
``react_toolbelt`` and ``loop`` runs of N steps (each step one model call and one tool call),
and the prompt-size measurement the runner does before each call on a large context.

    .venv/bin/python benchmarks/agents_runner.py [--steps 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import litellm  # noqa: E402
import uvicorn  # noqa: E402
from fastmcp import Client, FastMCP  # noqa: E402

from agents_runner import AgentConfig, run_agent  # noqa: E402
from agents_runner.model import ModelClient  # noqa: E402
from atoll.testing.scripted_llm import ScriptedLLM  # noqa: E402

litellm.suppress_debug_info = True


def _gateway() -> tuple[str, uvicorn.Server, threading.Thread]:
    mcp = FastMCP("bench")

    @mcp.tool(name="filesystem_read_text_file")
    def read_text_file(file_path: str) -> str:
        """Read a file."""
        return f"contents of {file_path}: " + "lorem ipsum " * 50

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(mcp.http_app(path="/mcp"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", server, thread


def _script(agent: str, steps: int):
    state = {"n": 0}
    read = {"tool_calls": [{"name": "filesystem_read_text_file", "arguments": {"file_path": "/a.txt"}}]}

    def answer(body):
        state["n"] += 1
        if state["n"] == 1 and agent == "react_toolbelt":
            return {
                "tool_calls": [
                    {"name": "toolbelt_add_tool", "arguments": {"tool_name": "filesystem_read_text_file"}}
                ]
            }
        if state["n"] <= steps:
            return read
        if agent == "loop":
            return {"content": "done"}
        return {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "done"}}]}

    return answer


async def _baseline(llm: ScriptedLLM, url: str, steps: int) -> float:
    messages = [{"role": "user", "content": "read it"}]
    async with Client(url) as client:
        started = time.perf_counter()
        for _ in range(steps):
            await litellm.acompletion(
                model="openai/x", api_base=llm.api_base, api_key="x", messages=messages, max_retries=0
            )
            await client.call_tool("filesystem_read_text_file", {"file_path": "/a.txt"})
        return (time.perf_counter() - started) / steps


async def _harness(agent: str, url: str, steps: int) -> float:
    with ScriptedLLM(_script(agent, steps)) as llm:
        started = time.perf_counter()
        trajectory = await run_agent(
            model="openai/x", api_base=llm.api_base, gateway_url=url, prompt="read it", agent=agent,
            config={"max_steps": steps + 5},
        )  # fmt: skip
        elapsed = time.perf_counter() - started
    assert trajectory.status == "completed", trajectory.error
    return elapsed / trajectory.steps


def _count_tokens_ms(chars: int) -> float:
    client = ModelClient("openai/x", AgentConfig())
    words = [f"word{n}" for n in range(chars // 8)]
    messages = [{"role": "user", "content": " ".join(words[i : i + 200])} for i in range(0, len(words), 200)]
    client.count_tokens(messages)  # warm the tokenizer
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        client.count_tokens(messages)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs) * 1000


async def main(steps: int) -> None:
    url, server, thread = _gateway()
    try:
        with ScriptedLLM(lambda body: {"content": "ok"}) as llm:
            await _baseline(llm, url, 5)  # warm up connections and imports
            baseline = statistics.median([await _baseline(llm, url, steps) for _ in range(3)])
        results = {}
        for agent in ("react_toolbelt", "loop"):
            await _harness(agent, url, 5)  # warm-up
            results[agent] = statistics.median([await _harness(agent, url, steps) for _ in range(3)])
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    print(f"baseline (bare litellm call + bare MCP call): {baseline * 1000:.1f} ms per step")
    for agent, per_step in results.items():
        print(f"{agent:>15}: {per_step * 1000:.1f} ms per step, {per_step / baseline:.2f}x baseline, "
              f"overhead {max(0.0, per_step - baseline) * 1000:.1f} ms")  # fmt: skip
    for chars in (40_000, 400_000):
        print(f"prompt measurement on a {chars:,}-character context: {_count_tokens_ms(chars):.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    asyncio.run(main(parser.parse_args().steps))
