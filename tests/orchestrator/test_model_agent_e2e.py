"""A model-driven agent and an LLM judge through the whole local pipeline, both served by the
scripted OpenAI-compatible server through litellm (no mocks)."""

import asyncio
import json

import pytest

from atoll.experiment import ExperimentSpec
from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.shared_sample import fresh_sample_benchmark

MET = {
    "content": json.dumps({"rationale": "the answer states the figures", "verdict": "met"}),
    "usage": {"prompt_tokens": 900, "completion_tokens": 20},
}


@pytest.mark.slow
def test_react_agent_and_judge_via_litellm_pass_console_tasks(tmp_path):
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = {t["task_id"]: t for t in json.loads((benchmark / "tasks_and_rubrics.json").read_text())}
    chosen = ["keystone-01-packaging-baseline", "atlas-01-comps-implied-ev"]

    def agent_model(request):
        prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
        task = next(tasks[t] for t in chosen if tasks[t]["prompt"][:200] in str(prompt))
        answer = task["gold_response"]
        return {
            "tool_calls": [{"name": "final_answer", "arguments": {"answer": answer, "status": "completed"}}],
            "usage": {
                "prompt_tokens": 1500,
                "completion_tokens": 60,
                "prompt_tokens_details": {"cached_tokens": 1024},
                "completion_tokens_details": {"reasoning_tokens": 40},
            },
        }

    with ScriptedLLM(agent_model) as model, ScriptedLLM(lambda request: MET) as judge:
        spec = ExperimentSpec.model_validate(
            {
                "name": "model-e2e",
                "benchmark": str(benchmark),
                "tasks": {"ids": chosen},
                "agents": [
                    {
                        "name": "react",
                        "agent": "react_toolbelt",
                        "model": "openai/scripted",
                        "api_base": model.api_base,
                        "config": {"max_steps": 5},
                    }
                ],
                "judge": {"model": "openai/judge", "api_base": judge.api_base},
                "store": str(tmp_path / "store.db"),
                "artifacts": (tmp_path / "artifacts").as_uri(),
                "output_dir": str(tmp_path / "out"),
            }
        )
        outcome = asyncio.run(run_experiment(spec, quiet=True))
        assert len(model.requests) == 2 and judge.requests
    results = {s.task_id: r for s, r, _state, _a in TrialStore(spec.store).results("model-e2e")}
    assert {task: r.outcome.value for task, r in results.items()} == dict.fromkeys(chosen, "pass")
    assert all(
        r.run_status == "completed" and r.prompt_tokens == 1500 and r.steps == 1 for r in results.values()
    )
    # the reasoning and cached tokens the provider billed reach the trial results and the report
    assert all((r.reasoning_tokens, r.cached_tokens) == (40, 1024) for r in results.values())
    report = json.loads(outcome.report_paths["json"].read_text())
    assert report["agents"]["react"]["prompt_tokens"] == 3000
    assert (report["agents"]["react"]["reasoning_tokens"], report["agents"]["react"]["cached_tokens"]) == (
        80,
        2048,
    )
    assert report["metrics"]["overall"]["react"]["pass_at_1"]["value"] == 1.0
