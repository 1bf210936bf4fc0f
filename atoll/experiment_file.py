"""Reading an experiment: YAML (or JSON) text through the bounded loader into the
:class:`~atoll.experiment.ExperimentSpec` contract (which validates data, and reads no file),
then each model checked to accept the parameters it is asked for (:mod:`atoll.llm.profiles`).
Files (``atoll run``) and the API's submissions both come through :func:`experiment_from_data`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from atoll.bounded_yaml import load_bounded_yaml
from atoll.errors import AtollError, ErrorCode
from atoll.experiment import ExperimentSpec, spec_from_data


def load_experiment(path: str | Path) -> ExperimentSpec:
    """Read and validate an experiment YAML file.

    Raises AtollError(code="bad_experiment") naming the file and each invalid field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AtollError(ErrorCode.bad_experiment, f"{path}: no such file") from None
    return parse_experiment(text, source=str(path))


def parse_experiment(text: str, *, source: str = "request body") -> ExperimentSpec:
    """An experiment from YAML (or JSON) text; AtollError(code="bad_experiment") naming
    ``source`` and each invalid field, or saying the YAML is invalid or expands too far
    (:func:`atoll.bounded_yaml.load_bounded_yaml`). CPU-bound: servers call it in a thread."""
    return experiment_from_data(
        load_bounded_yaml(text, source=source, code=ErrorCode.bad_experiment), source=source
    )


def experiment_from_data(raw: Any, *, source: str = "request body") -> ExperimentSpec:
    """An experiment from loaded YAML/JSON data; AtollError(code="bad_experiment") naming
    ``source`` and each invalid field, or the first agent, judge or coworker that asks its model
    for a parameter it refuses (loading an ordinary experiment never imports litellm)."""
    from atoll.llm.profiles import ProfileError, check_experiment

    spec = spec_from_data(raw, source=source)
    try:
        check_experiment(spec)
    except ProfileError as exc:
        raise AtollError(ErrorCode.bad_experiment, f"{source}: {exc.message}") from None
    return spec


__all__ = ["experiment_from_data", "load_experiment", "parse_experiment"]
