"""JSON Schemas of the shared contracts, generated from the pydantic models.

Regenerate with ``python -m atoll_cli.commands.openapi docs/schemas``, which also writes the
services' OpenAPI documents to ``docs/schemas/openapi/`` (it builds their apps, so it lives in
the CLI, the one part that imports services); a test fails when the committed files differ from
what the models and apps produce.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from atoll.agent_checkpoint import AgentCheckpoint
from atoll.benchmark import Benchmark, Check, Criterion, GoldOutput, ReferenceSolution, Task, World
from atoll.experiment import ExperimentSpec
from atoll.grade import Changes, CriterionVerdict, Grade
from atoll.report_document import ReportDocument
from atoll.report_rows import ReportTrial
from atoll.trajectory import ToolCall, Trajectory, Usage
from atoll.trial import TrialResult, TrialSpec
from atoll.viewer_api import (
    ViewerCompare,
    ViewerRawExchanges,
    ViewerRun,
    ViewerRuns,
    ViewerRunTrials,
    ViewerTrial,
)

SCHEMA_MODELS: dict[str, Any] = {  # a model, or any type TypeAdapter takes
    "benchmark": Benchmark,
    "world": World,
    "task": Task,
    "criterion": Criterion,
    "check": Check,
    "gold_output": GoldOutput,
    "reference_solution": ReferenceSolution,
    "trajectory": Trajectory,
    "agent_checkpoint": AgentCheckpoint,
    "tool_call": ToolCall,
    "usage": Usage,
    "grade": Grade,
    "criterion_verdict": CriterionVerdict,
    "changes": Changes,
    "trial_spec": TrialSpec,
    "trial_result": TrialResult,
    "experiment": ExperimentSpec,
    "report_trial": ReportTrial,
    "report": ReportDocument,
    "viewer_runs": ViewerRuns,
    "viewer_run": ViewerRun,
    "viewer_run_trials": ViewerRunTrials,
    "viewer_trial": ViewerTrial,
    "viewer_compare": ViewerCompare,
    "viewer_raw_exchanges": ViewerRawExchanges,
}


def render_schemas() -> dict[str, str]:
    """File name -> JSON text of every contract's schema."""
    rendered = {}
    for name, model in SCHEMA_MODELS.items():
        schema = (
            model.model_json_schema()
            if isinstance(model, type) and issubclass(model, BaseModel)
            else TypeAdapter(model).json_schema()
        )
        schema.setdefault("title", name)
        rendered[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return rendered


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, text in render_schemas().items():
        path = directory / file_name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
