"""The experiment's ``checkpoint`` setting: on by default, ``off`` in YAML, and never part of
a run's identity (changing it resumes the run instead of refusing it as another one)."""

from __future__ import annotations

import asyncio

import pytest

from atoll.errors import AtollError
from atoll.experiment import Checkpoints, ExperimentSpec
from atoll.experiment_file import parse_experiment
from atoll.loader import load_benchmark
from orchestrator.fingerprint import fingerprint, identity_document
from orchestrator.planner import plan_trials
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark


def _spec(tmp_path, benchmark_dir, **overrides) -> ExperimentSpec:
    fields = {
        "name": "exp",
        "benchmark": str(benchmark_dir),
        "agents": [{"name": "alpha", "agent": "replay", "model": "replay"}],
        "executor": "instant",
        "store": str(tmp_path / "store.db"),
        "output_dir": str(tmp_path / "out"),
    }
    return ExperimentSpec.model_validate(fields | overrides)


def _yaml(checkpoint: str) -> str:
    return f"name: e\nbenchmark: b\nagents: [{{name: a}}]\ncheckpoint: {checkpoint}\n"


def test_checkpoints_are_on_by_default_and_off_turns_them_off():
    default = ExperimentSpec.model_validate({"name": "e", "benchmark": "b", "agents": [{"name": "a"}]})
    assert default.checkpoints() == Checkpoints(every_steps=10, every_s=300.0)
    assert parse_experiment(_yaml("off"), source="e.yaml").checkpoints() is None  # YAML's false
    assert parse_experiment(_yaml('"off"'), source="e.yaml").checkpoints() is None
    only_time = parse_experiment(_yaml("{every_steps: null, every_s: 60}"), source="e.yaml")
    assert only_time.checkpoints() == Checkpoints(every_steps=None, every_s=60.0)
    neither = parse_experiment(_yaml("{every_steps: null, every_s: null}"), source="e.yaml")
    assert neither.checkpoints() is None
    # The saved spec (JSON) reads back the same.
    off = parse_experiment(_yaml("off"), source="e.yaml")
    assert ExperimentSpec.model_validate_json(off.model_dump_json()).checkpoints() is None
    for bad in ("{every_steps: 0}", "{every_s: -1}", "on", "{every_step: 3}"):
        with pytest.raises(AtollError) as refused:
            parse_experiment(_yaml(bad), source="e.yaml")
        assert "checkpoint" in refused.value.message


def test_the_checkpoint_setting_is_not_part_of_the_runs_identity(tmp_path):
    benchmark_dir = write_benchmark(tmp_path / "bench", tasks=[make_task("t0"), make_task("t1")])
    on = _spec(tmp_path, benchmark_dir)
    benchmark = load_benchmark(on.benchmark)
    documents = [
        identity_document(spec, plan_trials(benchmark, spec))
        for spec in (
            on,
            _spec(tmp_path, benchmark_dir, checkpoint="off"),
            _spec(tmp_path, benchmark_dir, checkpoint={"every_steps": 1, "every_s": None}),
        )
    ]
    assert len({fingerprint(document) for document in documents}) == 1
    ids = {
        tuple(t.trial_id for t in plan_trials(benchmark, spec))
        for spec in (on, _spec(tmp_path, benchmark_dir, checkpoint="off"))
    }
    assert len(ids) == 1
    # Run under one setting, then again under another: a resume (nothing refused, nothing rerun).
    asyncio.run(run_experiment(on, quiet=True))
    recorded = len(TrialStore(on.store).results("exp"))
    again = asyncio.run(run_experiment(_spec(tmp_path, benchmark_dir, checkpoint="off"), quiet=True))
    assert len(TrialStore(on.store).results("exp")) == recorded == 2
    assert again is not None
    # The control: a change that is part of the identity is refused.
    with pytest.raises(AtollError) as refused:
        asyncio.run(run_experiment(_spec(tmp_path, benchmark_dir, limits={"max_steps": 3}), quiet=True))
    assert refused.value.code == "fingerprint_changed"
