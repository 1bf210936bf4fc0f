"""What an experiment submitted over the API may choose, and what stays the operator's.

A submitter is not an operator (DESIGN §8): through ``POST /runs`` it chooses what to run
(benchmark, tasks, agents, judge, limits), never where the service writes. The trial store,
the artifact store and the output folder are the operator's settings (``ATOLL_STORE``,
``ATOLL_ARTIFACTS``, ``ATOLL_OUTPUT_DIR``); an experiment that names another value for one
of them is refused naming the field. A local benchmark path must resolve (symlinks
followed) beneath one of the operator's benchmark roots (``ATOLL_BENCHMARK_ROOTS``), and a
path that does not exist gets the same answer as one outside the roots, so the API tells
nothing about the host's folders. ``hf://`` benchmarks are always accepted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.loader import HF_PREFIX

#: The fields an experiment may not choose on the API path, with the operator's variable.
OPERATOR_FIELDS = {"store": "ATOLL_STORE", "artifacts": "ATOLL_ARTIFACTS", "output_dir": "ATOLL_OUTPUT_DIR"}


def impose_operator_settings(spec: ExperimentSpec, imposed: Mapping[str, str]) -> ExperimentSpec:
    """``spec`` with the operator's ``imposed`` values of :data:`OPERATOR_FIELDS`.

    Raises AtollError(``operator_setting``) naming the first field the experiment sets to
    another value (the same value is accepted: it changes nothing).
    """
    for field, variable in OPERATOR_FIELDS.items():
        if field in spec.model_fields_set and getattr(spec, field) != imposed[field]:
            raise AtollError(
                "operator_setting",
                f"field {field}: set by the service's operator ({variable}), not by a submitted "
                "experiment; remove it from the experiment",
            )
    return spec.model_copy(update=dict(imposed))


def benchmark_roots(text: str | None) -> list[Path]:
    """The roots of ``ATOLL_BENCHMARK_ROOTS`` (comma-separated folders), symlinks resolved."""
    return [Path(part.strip()).resolve() for part in (text or "").split(",") if part.strip()]


def resolve_submitted_benchmark(benchmark: str, roots: Iterable[Path]) -> str:
    """The benchmark a submitted experiment names, as the path the service will load.

    ``hf://…`` is returned as is. Anything else must be an existing directory whose real
    path (symlinks and ``..`` resolved) is one of ``roots`` or beneath one; relative paths
    are taken from the service's working directory and ``~`` is not expanded. The real path
    is returned, so what is loaded is what was checked. Raises AtollError
    (``benchmark_not_allowed``) with one message whether the path is missing, not a folder or
    outside the roots.
    """
    if benchmark.startswith(HF_PREFIX):
        return benchmark
    refusal = AtollError(
        "benchmark_not_allowed",
        f"benchmark {benchmark!r} is not a benchmark folder under the service's benchmark roots "
        "(ATOLL_BENCHMARK_ROOTS); use one of those or an hf:// dataset",
    )
    roots = list(roots)
    if not roots or "\0" in benchmark:
        raise refusal
    real = Path(os.path.realpath(benchmark))
    if not any(real == root or real.is_relative_to(root) for root in roots) or not real.is_dir():
        raise refusal
    return str(real)


def submitted_experiment(
    spec: ExperimentSpec, imposed: Mapping[str, str], roots: Iterable[Path]
) -> ExperimentSpec:
    """``spec`` as the service runs it: the operator's locations imposed and the benchmark
    resolved under its roots (see :func:`impose_operator_settings` and
    :func:`resolve_submitted_benchmark`)."""
    spec = impose_operator_settings(spec, imposed)
    benchmark = resolve_submitted_benchmark(spec.benchmark, roots)
    updates: dict[str, Any] = {"benchmark": benchmark}
    return spec.model_copy(update=updates)
