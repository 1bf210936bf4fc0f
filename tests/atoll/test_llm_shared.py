"""The agent runner and the judge call models through the same client: one concurrency
window per provider and one cost ledger for both."""

from __future__ import annotations

import asyncio
import json

from agents_runner.config import AgentConfig
from agents_runner.model import ModelClient
from atoll.llm import configure_limits, shared_ledger
from atoll.testing.scripted_llm import ScriptedLLM
from grader.judge import Block, JudgeConfig, judge

VERDICT = json.dumps({"rationale": "shown", "verdict": "met"})


async def test_agent_and_judge_calls_share_the_providers_window_and_the_ledger():
    def slow(request: dict) -> dict:
        is_judge = (
            request["messages"][0]["role"] == "system" and "grader" in request["messages"][0]["content"]
        )
        return {"content": VERDICT if is_judge else "working", "delay_s": 0.3}

    configure_limits({"openai": 1})
    spent_before = shared_ledger().spent_by_role()
    try:
        with ScriptedLLM(slow) as llm:
            agent = ModelClient("openai/agent", AgentConfig(input_cost_per_token=1e-6), api_base=llm.api_base)
            config = JudgeConfig(model="openai/judge", api_base=llm.api_base, samples=2, api_key="k")
            await asyncio.gather(
                agent.complete([{"role": "user", "content": "task"}], None, step=1),
                agent.complete([{"role": "user", "content": "task"}], None, step=2),
                judge(config, [Block("CRITERION", "the answer is right")]),
            )
            assert len(llm.requests) == 4
            assert llm.max_in_flight == 1  # one window for both: never two calls at once
    finally:
        configure_limits()
    spent = shared_ledger().spent_by_role()
    assert spent.get("agent", 0.0) > spent_before.get("agent", 0.0)
    assert shared_ledger().calls >= 4
