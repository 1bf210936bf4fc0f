"""An experiment whose one trial only the judge can grade, for tests of what a judge's failure does
to a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from atoll.experiment import ExperimentSpec
from tests.shared_sample import fresh_sample_benchmark


def judge_only_experiment(
    tmp_path: Path, name: str, judge: dict[str, Any], **settings: Any
) -> ExperimentSpec:
    """Experiment ``name``: the replay oracle on one sample task with a criterion no check grades,
    judged by ``judge``; benchmark, store, artifacts and output under ``tmp_path``; ``settings``
    are merged over that."""
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    judge_only = next(t["task_id"] for t in tasks if any(c.get("check") is None for c in t["rubric"]))
    return ExperimentSpec.model_validate(
        {
            "name": name,
            "benchmark": str(benchmark),
            "tasks": {"ids": [judge_only]},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
            "judge": judge,
            "store": str(tmp_path / "store.db"),
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
            **settings,
        }
    )
