"""``atoll demo``: the main job on embedded defaults, offline.

Generates the sample benchmark, runs the replay (oracle) agent on every task — and the
ReAct agent too when a model is configured — grades with the programmatic checks (and the
LLM judge when a judge model is configured), prints the leaderboard and the report path.

Model configuration (environment variables):
  ATOLL_MODEL        litellm model string for the ReAct agent (e.g. openai/gpt-4o-mini)
  ATOLL_API_BASE     OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama …), optional
  ATOLL_JUDGE_MODEL  judge model (defaults to ATOLL_MODEL when that is set)
  ATOLL_JUDGE_API_BASE  the judge's OpenAI-compatible endpoint (defaults to ATOLL_API_BASE when
                     the judge is ATOLL_MODEL)
Without ATOLL_MODEL, a provider key picks a default: OPENAI_API_KEY → openai/gpt-4o-mini,
ANTHROPIC_API_KEY → anthropic/claude-3-5-haiku-latest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from atoll.experiment import ExperimentSpec
from atoll.settings import environ as process_environ
from atoll.trial import TrialState

_DEFAULT_MODELS = (
    ("OPENAI_API_KEY", "openai/gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-3-5-haiku-latest"),
)


def configured_model(environ: dict[str, str] | None = None) -> str | None:
    environ = dict(process_environ() if environ is None else environ)
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
    environ = dict(process_environ() if environ is None else environ)
    model = configured_model(environ)
    api_base = environ.get("ATOLL_API_BASE") or None
    agents: list[dict[str, Any]] = [{"name": "oracle", "agent": "replay", "model": "replay"}]
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
    judge_api_base = environ.get("ATOLL_JUDGE_API_BASE") or (api_base if judge_model == model else None)
    output_dir = output_dir.resolve()
    return ExperimentSpec.model_validate(
        {
            "name": "demo",
            "benchmark": str(output_dir / "sample-benchmark"),
            "agents": agents,
            "runs": runs,
            "judge": {"model": judge_model, "api_base": judge_api_base},
            "limits": {"max_steps": 60, "timeout_s": 900},
            "concurrency": {"trials": 2},
            "executor": "local",
            "store": f"sqlite:///{output_dir / 'atoll.db'}",
            "artifacts": (output_dir / "artifacts").as_uri(),
            "output_dir": str(output_dir),
        }
    )


async def judge_every_trial(spec: ExperimentSpec) -> int:
    """Have the demo run's judge grade every finished trial it has not graded: trials kept from an
    earlier demo with another judge (or none, checks only) would otherwise be left out of the
    report. Returns how many were regraded (:func:`orchestrator.regrade.regrade_run`; nothing is
    called when the judge graded them all)."""
    from orchestrator.judging import recorded_judge
    from orchestrator.regrade import regrade_run
    from orchestrator.store import TrialStore

    store = TrialStore(spec.store)
    try:
        judge = recorded_judge(store.run_record(spec.name))
        stale = [
            result
            for _spec, result, state, _attempts in store.results(spec.name)
            if state is TrialState.done
            and result is not None
            and judge is not None
            and result.judge_id != judge.id
        ]
        if not stale:
            return 0
        summary = await regrade_run(store, spec.name)
        return int(summary["trials_regraded"])
    finally:
        store.dispose()
