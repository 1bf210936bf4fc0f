"""The executor registry: adding an executor is its module; each name resolves to its class,
and an unknown name is refused, naming the known ones, before a run stores anything."""

from __future__ import annotations

import asyncio

import pytest

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from orchestrator.executors import executor, get_executor, known_executors
from orchestrator.runner import run_experiment
from tests.atoll.factories import make_task, write_benchmark

BUILT_IN = ("instant", "kubernetes", "local")


def test_the_built_in_executors_are_known_and_each_resolves_from_its_own_module():
    assert set(BUILT_IN) <= set(known_executors())
    for name in known_executors():
        factory = get_executor(name)
        assert factory.__module__ == f"orchestrator.executors.{name}"
        assert callable(getattr(factory, "run", None)) and callable(getattr(factory, "aclose", None))


def test_the_schemas_examples_are_known_executors():
    examples = ExperimentSpec.model_json_schema()["properties"]["executor"]["examples"]
    assert set(examples) <= set(known_executors())


def test_an_unknown_executor_names_the_known_ones():
    with pytest.raises(AtollError) as info:
        get_executor("slurm")
    assert info.value.code == "bad_experiment"
    assert "'slurm'" in info.value.message and "instant, kubernetes, local" in info.value.message


def test_an_unknown_executor_is_refused_before_the_store_is_created(tmp_path):
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task("t1")])
    spec = ExperimentSpec(
        name="e", benchmark=str(benchmark), executor="slurm", store=f"sqlite:///{tmp_path}/s.db",
        agents=[{"name": "a", "agent": "react_toolbelt", "model": "openai/m"}],
        artifacts=(tmp_path / "artifacts").as_uri(), output_dir=str(tmp_path / "out"),
    )  # fmt: skip
    for enqueue_only in (False, True):  # `atoll run` and the API's POST /runs
        with pytest.raises(AtollError, match="unknown executor 'slurm'"):
            asyncio.run(run_experiment(spec, quiet=True, enqueue_only=enqueue_only))
    assert not (tmp_path / "s.db").exists()


def test_a_malformed_executor_name_is_refused_where_the_experiment_is_read():
    with pytest.raises(ValueError, match="executor"):
        ExperimentSpec(
            name="e", benchmark="b", executor="../evil", agents=[{"name": "a", "agent": "x", "model": "m"}]
        )


def test_a_name_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="instant"):
        executor("instant")(type("Other", (), {}))
