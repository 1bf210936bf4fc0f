"""orchestrator: experiments, the durable trial queue, executors, metrics and reports.

The public Python API (what ``atoll run``/``atoll worker``/``atoll report`` call), loaded on
first use so that importing the package costs nothing::

    import asyncio, orchestrator

    spec = orchestrator.load_experiment("exp.yaml")
    outcome = asyncio.run(orchestrator.run_experiment(spec))   # plan, run or resume, report
    report = orchestrator.build_report(orchestrator.TrialStore(spec.store), spec.name)

See docs/orchestrator.md ("Python API").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from atoll._lazy import lazy_attributes

if TYPE_CHECKING:
    from atoll.experiment import ExperimentSpec
    from atoll.experiment_file import load_experiment
    from orchestrator.executors import executor, get_executor
    from orchestrator.planner import plan_trials
    from orchestrator.regrade import regrade_run
    from orchestrator.report import build_report, write_report
    from orchestrator.runner import RunOutcome, run_experiment, run_worker
    from orchestrator.stats import compute_metrics
    from orchestrator.store import TrialStore

# name -> module that defines it
_API: dict[str, str] = {
    "ExperimentSpec": "atoll.experiment",
    "load_experiment": "atoll.experiment_file",
    "run_experiment": "orchestrator.runner",
    "run_worker": "orchestrator.runner",
    "RunOutcome": "orchestrator.runner",
    "plan_trials": "orchestrator.planner",
    "TrialStore": "orchestrator.store",
    "build_report": "orchestrator.report",
    "write_report": "orchestrator.report",
    "compute_metrics": "orchestrator.stats",
    "regrade_run": "orchestrator.regrade",
    "executor": "orchestrator.executors",
    "get_executor": "orchestrator.executors",
}


__getattr__, __dir__ = lazy_attributes("orchestrator", _API, globals())

__all__ = [
    "ExperimentSpec",
    "RunOutcome",
    "TrialStore",
    "build_report",
    "compute_metrics",
    "executor",
    "get_executor",
    "load_experiment",
    "plan_trials",
    "regrade_run",
    "run_experiment",
    "run_worker",
    "write_report",
]
