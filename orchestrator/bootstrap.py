"""Task-level percentile bootstrap (DESIGN §6) for many series at once.

A report has hundreds of series (agents × scopes × metrics × k) over nearly the same tasks.
Each scope (all tasks, or one domain) draws its resamples once, over every task of the
scope; a series that is defined on only some of those tasks (an agent's graded tasks, the
tasks with at least k graded runs) averages over the drawn tasks that belong to it. So one
matrix of draws and two matrix products serve every series of a scope, whatever their
exclusions — instead of one draw matrix per distinct task count, which is what made reports
with exclusions slow (every count its own 10,000 × n matrix).

When a series covers every task of the scope, this is exactly the classic bootstrap of the
mean over those tasks.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 10_000


@dataclass
class Interval:
    value: float | None  # None: no task in the denominator (the mean is undefined)
    low: float | None
    high: float | None
    tasks: int  # tasks in the denominator

    def as_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high, "tasks": self.tasks}


# A mean over no task is undefined: None, never NaN (which is not JSON; docs/orchestrator.md).
UNDEFINED_INTERVAL = Interval(None, None, None, 0)


# Resamples are drawn and multiplied in blocks of this many rows: the draws of a 480-task
# scope would take ~150 MB at once; a block takes a few.
_BLOCK = 500


def _weight_blocks(tasks: int, seed: int, resamples: int) -> Iterator[np.ndarray]:
    """How often each of ``tasks`` tasks is drawn in each resample, ``_BLOCK`` resamples at
    a time (rows: resamples, columns: tasks); the same seed gives the same draws."""
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, _BLOCK):
        rows = min(_BLOCK, resamples - start)
        picks = rng.integers(0, tasks, size=(rows, tasks))
        # One bincount over offset indices counts ~20x faster than np.add.at.
        picks += (np.arange(rows, dtype=picks.dtype) * tasks)[:, None]
        yield np.bincount(picks.ravel(), minlength=rows * tasks).reshape(rows, tasks).astype(np.float64)


def bootstrap_series(
    values: np.ndarray, members: np.ndarray, *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> list[Interval]:
    """Intervals of several series over one scope of tasks.

    ``values`` and ``members`` are tasks × series: a series' value on a task, and whether the
    task belongs to that series (1) or not (0; its value is then ignored). Returns one
    Interval per series: the mean over its member tasks and the 2.5–97.5 percentiles of the
    resampled means (resamples that drew none of its tasks are left out of the percentiles);
    a series with no member task gets :data:`UNDEFINED_INTERVAL`.
    """
    tasks, series = values.shape
    if tasks == 0 or series == 0:
        return [UNDEFINED_INTERVAL] * series
    members = members.astype(np.float64)
    weighted = np.where(members > 0, values, 0.0)
    blocks = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for weights in _weight_blocks(tasks, seed, resamples):
            blocks.append((weights @ weighted) / (weights @ members))
    means = np.concatenate(blocks)  # resamples × series
    counts = members.sum(axis=0)
    # One percentile call for every series; resamples that drew none of a series' tasks are
    # NaN for it (nanpercentile is slower, so only when there are such).
    percentile = np.nanpercentile if np.isnan(means).any() else np.percentile
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: its count is 0
        lows, highs = percentile(means, [2.5, 97.5], axis=0)
    intervals = []
    for index in range(series):
        if counts[index] == 0:
            intervals.append(UNDEFINED_INTERVAL)
            continue
        value = float(weighted[:, index].sum() / counts[index])
        low, high = float(lows[index]), float(highs[index])
        if not (math.isfinite(low) and math.isfinite(high)):  # no resample drew any of its tasks
            low = high = value
        # Sums of equal values can land an ulp away from the value; an interval always
        # brackets its own point value.
        intervals.append(Interval(value, min(low, value), max(high, value), int(counts[index])))
    return intervals


def bootstrap_mean(values: Iterable[float], *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> Interval:
    """Mean of per-task values with a task-level percentile bootstrap 95% interval."""
    array = np.asarray(list(values), dtype=float)
    if array.size == 0:
        return UNDEFINED_INTERVAL
    (interval,) = bootstrap_series(array[:, None], np.ones((array.size, 1)), seed=seed, resamples=resamples)
    return interval
