"""The executor registry: each name an experiment may give resolves to its registered class."""

from __future__ import annotations

import importlib
import pkgutil
from typing import get_args

import pytest

import orchestrator.executors as package
from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from orchestrator.executors import _EXECUTORS, executor, get_executor

DECLARED = get_args(ExperimentSpec.model_fields["executor"].annotation)


@pytest.mark.parametrize("name", DECLARED)
def test_every_declared_executor_resolves_from_its_own_module(name):
    factory = get_executor(name)
    assert factory.__module__ == f"orchestrator.executors.{name}"
    assert callable(getattr(factory, "run", None)) and callable(getattr(factory, "aclose", None))


def test_every_registered_executor_is_declared_in_the_experiment_spec():
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    assert set(_EXECUTORS) == set(DECLARED), "add the executor's name to ExperimentSpec.executor"


def test_an_unknown_executor_names_the_known_ones():
    with pytest.raises(AtollError) as info:
        get_executor("slurm")
    assert info.value.code == "bad_experiment"
    assert "'slurm'" in info.value.message and "local, kubernetes, instant" in info.value.message


def test_a_name_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="instant"):
        executor("instant")(type("Other", (), {}))
