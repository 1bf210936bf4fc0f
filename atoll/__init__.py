"""atoll: run and grade AI agents on long-horizon professional tasks in sandboxed worlds.

This package holds the shared contracts (pydantic models) every service imports.
"""

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
from atoll.experiment import ExperimentSpec, load_experiment
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
