"""The example experiments load, and the APEX-Agents paper's (examples/apex-agents-paper.yaml)
runs its eight agents and judge with arguments litellm maps for each provider without refusal
(docs/models.md)."""

from pathlib import Path

from atoll.agent_config import AgentConfig
from atoll.experiment_file import load_experiment
from atoll.judge import JudgeConfig
from atoll.llm.profiles import agent_arguments, judge_arguments
from orchestrator.planner import agent_config
from tests.atoll.test_model_profiles import _litellm_request

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_example_experiment_loads():
    examples = sorted(EXAMPLES.glob("*.yaml"))
    assert any(path.name == "apex-agents-paper.yaml" for path in examples)
    for path in examples:
        load_experiment(path)  # raises naming the file, the agent, the model and the parameter


def test_the_papers_experiment_runs_its_eight_agents_as_their_providers_require():
    spec = load_experiment(EXAMPLES / "apex-agents-paper.yaml")
    assert spec.runs == 8 and len(spec.agents) == 8
    assert spec.judge.model == "gemini/gemini-3-flash-preview"
    thinking_high = [agent.model for agent in spec.agents if agent.thinking == "high"]
    assert thinking_high == [
        "gemini/gemini-3-flash-preview",
        "openai/gpt-5.2",
        "anthropic/claude-opus-4-5-20251101",
        "gemini/gemini-3-pro-preview",
    ]
    for agent in spec.agents:
        # what a trial of this agent sends, as litellm would map it for the provider
        arguments = agent_arguments(agent.model, AgentConfig.model_validate(agent_config(agent, spec)))
        _litellm_request(agent.model, arguments)
    judge = JudgeConfig.for_experiment(spec)
    _litellm_request(judge.model, judge_arguments(judge))
