"""atoll: run and grade AI agents on long-horizon professional tasks in sandboxed worlds.

This package holds the shared contracts (pydantic models) every service imports.
"""

from typing import TYPE_CHECKING

from atoll._lazy import lazy_attributes

if TYPE_CHECKING:
    from atoll.benchmark import (
        Benchmark,
        Check,
        Criterion,
        GoldFile,
        GoldOutput,
        GradingTarget,
        OutputType,
        ReferenceSolution,
        ReferenceStep,
        Task,
        World,
    )
    from atoll.errors import AtollError
    from atoll.experiment import ExperimentSpec
    from atoll.experiment_file import load_experiment
    from atoll.grade import Changes, CriterionVerdict, FileChange, Grade, Verdict
    from atoll.trajectory import (
        AgentReportedStatus,
        ErrorKind,
        ModelCall,
        RunStatus,
        ToolCall,
        Trajectory,
        TrajectoryError,
        Usage,
    )
    from atoll.trial import Outcome, TrialResult, TrialSpec, TrialState, trial_id

#: public name -> the module defining it; imported on first access (PEP 562), so that a service
#: importing ``atoll`` for ``__version__`` or ``atoll.errors`` does not load every contract model
#: (pydantic classes and YAML: ~0.15 s of CPU).
_EXPORTS = {
    "AgentReportedStatus": "atoll.trajectory",
    "AtollError": "atoll.errors",
    "Benchmark": "atoll.benchmark",
    "Changes": "atoll.grade",
    "Check": "atoll.benchmark",
    "Criterion": "atoll.benchmark",
    "CriterionVerdict": "atoll.grade",
    "ErrorKind": "atoll.trajectory",
    "ExperimentSpec": "atoll.experiment",
    "FileChange": "atoll.grade",
    "GoldFile": "atoll.benchmark",
    "GoldOutput": "atoll.benchmark",
    "Grade": "atoll.grade",
    "GradingTarget": "atoll.benchmark",
    "ModelCall": "atoll.trajectory",
    "Outcome": "atoll.trial",
    "OutputType": "atoll.benchmark",
    "ReferenceSolution": "atoll.benchmark",
    "ReferenceStep": "atoll.benchmark",
    "RunStatus": "atoll.trajectory",
    "Task": "atoll.benchmark",
    "ToolCall": "atoll.trajectory",
    "Trajectory": "atoll.trajectory",
    "TrajectoryError": "atoll.trajectory",
    "TrialResult": "atoll.trial",
    "TrialSpec": "atoll.trial",
    "TrialState": "atoll.trial",
    "Usage": "atoll.trajectory",
    "Verdict": "atoll.grade",
    "World": "atoll.benchmark",
    "load_experiment": "atoll.experiment_file",
    "trial_id": "atoll.trial",
}


__getattr__, __dir__ = lazy_attributes("atoll", _EXPORTS, globals())

__version__ = "0.1.0"

__all__ = [
    "AgentReportedStatus",
    "AtollError",
    "Benchmark",
    "Changes",
    "Check",
    "Criterion",
    "CriterionVerdict",
    "ErrorKind",
    "ExperimentSpec",
    "FileChange",
    "GoldFile",
    "GoldOutput",
    "Grade",
    "GradingTarget",
    "ModelCall",
    "Outcome",
    "OutputType",
    "ReferenceSolution",
    "ReferenceStep",
    "RunStatus",
    "Task",
    "ToolCall",
    "Trajectory",
    "TrajectoryError",
    "TrialResult",
    "TrialSpec",
    "TrialState",
    "Usage",
    "Verdict",
    "World",
    "load_experiment",
    "trial_id",
]
