"""``atoll demo``: the main job on embedded defaults, offline.

Generates the sample benchmark, runs the replay (oracle) agent on every task — and the
ReAct agent too when a model is configured — grades with the programmatic checks (and the
LLM judge when a judge model is configured), prints the leaderboard and the report path.

Model configuration (environment variables):
  ATOLL_MODEL        litellm model string for the ReAct agent (e.g. openai/gpt-4o-mini)
  ATOLL_API_BASE     OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama …), optional
  ATOLL_JUDGE_MODEL  judge model (defaults to ATOLL_MODEL when that is set)
Without ATOLL_MODEL, a provider key picks a default: OPENAI_API_KEY → openai/gpt-4o-mini,
ANTHROPIC_API_KEY → anthropic/claude-3-5-haiku-latest.
"""

from __future__ import annotations

import os
from pathlib import Path

from atoll.experiment import ExperimentSpec

_DEFAULT_MODELS = (
    ("OPENAI_API_KEY", "openai/gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-3-5-haiku-latest"),
)


def configured_model(environ: dict[str, str] | None = None) -> str | None:
    environ = dict(os.environ if environ is None else environ)
    if environ.get("ATOLL_MODEL"):
        return environ["ATOLL_MODEL"]
    for key, model in _DEFAULT_MODELS:
        if environ.get(key):
            return model
    return None


def demo_experiment(
    output_dir: Path, *, runs: int = 1, environ: dict[str, str] | None = None
) -> ExperimentSpec:
    """The demo's experiment spec: oracle always, ReAct when a model is configured."""
    environ = dict(os.environ if environ is None else environ)
    model = configured_model(environ)
    api_base = environ.get("ATOLL_API_BASE") or None
    agents = [{"name": "oracle", "agent": "replay", "model": "replay"}]
    if model:
        agents.append(
            {
                "name": "react",
                "agent": "react_toolbelt",
                "model": model,
                "api_base": api_base,
                "config": {"max_steps": 60},
            }
        )
    judge_model = environ.get("ATOLL_JUDGE_MODEL") or model
    output_dir = output_dir.resolve()
    return ExperimentSpec.model_validate(
        {
            "name": "demo",
            "benchmark": str(output_dir / "sample-benchmark"),
            "agents": agents,
            "runs": runs,
            "judge": {"model": judge_model, "api_base": api_base if judge_model == model else None},
            "limits": {"max_steps": 60, "timeout_s": 900},
            "concurrency": {"trials": 2},
            "executor": "local",
            "store": f"sqlite:///{output_dir / 'atoll.db'}",
            "artifacts": (output_dir / "artifacts").as_uri(),
            "output_dir": str(output_dir),
        }
    )
