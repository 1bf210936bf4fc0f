"""What an agent checkpoint costs the agent: the pause at a step boundary with a no-op callback.

A ``react_toolbelt`` run of N steps against the scripted model and a one-tool MCP server, each
tool result ``--result-kb`` KiB and each reply carrying a signed thinking block's worth of
provider fields, so the context grows as a long trial's does. Measured: every checkpoint taken
(``every_steps=1``, the worst case) with a no-op callback, timed around :func:`capture` (the
copy of the run's state the agent waits for), its size, the JSON serialisation a caller would do
off the agent's path, and the whole run's wall time with and without checkpoints.

    .venv/bin/python benchmarks/agent_checkpoint.py [--steps 100] [--result-kb 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import litellm  # noqa: E402
from fastmcp import FastMCP  # noqa: E402

import agents_runner.checkpoint as checkpoints  # noqa: E402
from agents_runner import AgentCheckpoint, CheckpointPolicy, run_agent  # noqa: E402
from atoll.testing.scripted_llm import ScriptedLLM  # noqa: E402
from tests.served_app import ServedApp  # noqa: E402

litellm.suppress_debug_info = True


def _gateway(result_kb: int) -> ServedApp:
    """A one-tool MCP server whose tool returns ``result_kb`` KB, served on a free port."""
    mcp = FastMCP("bench")
    body = ("lorem ipsum dolor sit amet " * 40 * result_kb)[: result_kb * 1024]

    @mcp.tool(name="filesystem_read_text_file")
    def read_text_file(file_path: str) -> str:
        """Read a file."""
        return body

    return ServedApp(mcp.http_app(path="/mcp"))


def _script(steps: int):
    state = {"n": 0}
    reasoning = "I should read the file again and compare. " * 40  # ~1.7 KB of reasoning text

    def answer(body):
        state["n"] += 1
        if state["n"] == 1:
            return {
                "tool_calls": [
                    {"name": "toolbelt_add_tool", "arguments": {"tool_name": "filesystem_read_text_file"}}
                ]
            }
        if state["n"] <= steps:
            return {
                "reasoning_content": reasoning,
                "tool_calls": [
                    {"name": "filesystem_read_text_file", "arguments": {"file_path": f"/{state['n']}.txt"}}
                ],
            }
        return {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "done"}}]}

    return answer


async def _run(
    url: str, steps: int, *, checkpoint: bool
) -> tuple[float, list[float], AgentCheckpoint | None]:
    pauses: list[float] = []
    last: list[AgentCheckpoint] = []
    capture = checkpoints.capture

    def timed_capture(run):
        started = time.perf_counter()
        taken = capture(run)
        pauses.append(time.perf_counter() - started)
        return taken

    def keep(taken: AgentCheckpoint) -> None:  # the no-op callback, keeping the last one
        last[:] = [taken]

    checkpoints.capture = timed_capture
    try:
        with ScriptedLLM(_script(steps)) as llm:
            started = time.perf_counter()
            trajectory = await run_agent(
                model="openai/x", api_base=llm.api_base, gateway_url=url, prompt="read them", api_key="x",
                config={"max_steps": steps + 5, "tool_result_max_chars": 1_000_000, "context_window": 10_000_000},
                checkpoint=CheckpointPolicy(every_steps=1) if checkpoint else None,
                on_checkpoint=keep if checkpoint else None,
            )  # fmt: skip
            elapsed = time.perf_counter() - started
    finally:
        checkpoints.capture = capture
    assert trajectory.status == "completed", trajectory.error
    return elapsed, pauses, (last[0] if last else None)


async def main(steps: int, result_kb: int) -> None:
    with _gateway(result_kb) as served:
        url = f"{served.url}/mcp"
        await _run(url, 5, checkpoint=True)  # warm-up
        plain = [(await _run(url, steps, checkpoint=False))[0] for _ in range(3)]
        with_checkpoints = [await _run(url, steps, checkpoint=True) for _ in range(3)]
    pauses = with_checkpoints[-1][1]
    last = with_checkpoints[-1][2]
    assert last is not None
    started = time.perf_counter()
    text = last.model_dump_json()
    dump_ms = (time.perf_counter() - started) * 1000
    plain_s = statistics.median(plain)
    checkpointed_s = statistics.median(run[0] for run in with_checkpoints)
    print(f"{steps} steps, {result_kb} KiB tool results, a checkpoint after every step ({len(pauses)} taken)")
    print(f"pause per checkpoint (capture): median {statistics.median(pauses) * 1000:.2f} ms, "
          f"at the last step {pauses[-1] * 1000:.2f} ms, max {max(pauses) * 1000:.2f} ms")  # fmt: skip
    print(
        f"last checkpoint: {len(text) / 1024:.0f} KiB of JSON; model_dump_json {dump_ms:.1f} ms (the caller's, off path)"
    )
    checkpointed = with_checkpoints[-1][0]
    print(f"all pauses together: {sum(pauses) * 1000:.0f} ms of the run's {checkpointed:.2f} s "
          f"({sum(pauses) / checkpointed * 100:.2f} %; a real model call takes seconds, not the scripted ms)")  # fmt: skip
    print(f"run wall time (noisy on a shared machine): {plain_s:.2f} s without checkpoints, "
          f"{checkpointed_s:.2f} s with one every step")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--result-kb", type=int, default=4)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.steps, arguments.result_kb))
