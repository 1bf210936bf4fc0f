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

import multiprocessing
import os
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from atoll.bounded_yaml import load_bounded_yaml_outcome
from atoll.errors import AtollError, ErrorCode
from atoll.experiment import ExperimentSpec
from atoll.experiment_file import experiment_from_data
from atoll.loader import HF_PREFIX

#: Address space of the parsing process: a bounded document needs far less.
_PARSER_MEMORY_BYTES = 2 * 1024**3

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
                ErrorCode.operator_setting,
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
        ErrorCode.benchmark_not_allowed,
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


def _limit_parser_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (_PARSER_MEMORY_BYTES, _PARSER_MEMORY_BYTES))


class ExperimentParser:
    """Parses posted experiments in a child process of its own.

    Parsing YAML holds the interpreter for long stretches (libyaml's scanner runs without
    giving the GIL back), so even in a thread a large document would stall ``/health``; in a
    child process it cannot, and the child's memory is capped. The document is bounded
    anyway (:mod:`atoll.bounded_yaml`). Call :meth:`parse` from a thread; :meth:`close` at
    shutdown.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn: a fork of a threaded server could inherit a held lock.
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_limit_parser_memory,
                )
            return self._pool

    def parse(self, text: str, *, source: str = "request body") -> ExperimentSpec:
        """The experiment of ``text``; AtollError(``bad_experiment``) as
        :func:`atoll.experiment_file.parse_experiment` raises it (blocking: call it in a thread)."""
        pool = self._executor()
        try:
            status, value = pool.submit(
                load_bounded_yaml_outcome, text, source, ErrorCode.bad_experiment
            ).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None  # the next request gets a fresh process
            raise AtollError(
                ErrorCode.bad_experiment, f"{source}: the YAML parser ran out of resources"
            ) from None
        if status == "error":
            raise AtollError(*value)
        return experiment_from_data(value, source=source)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
