"""Agreement statistics of a judge against reference verdicts (human labels, or another
judge): the one home of these numbers for ``atoll judge`` and ``atoll grade validate``.

Every function here is pure. A *pair* is ``(judge verdict, reference is met)``; "met" is the
positive class. Ungradeable judge verdicts are counted apart and left out of the confusion
matrix and every statistic, so ``n`` is the number of decided rows.

With tp, fp, tn, fn the confusion counts and n = tp + fp + tn + fn (docs/grader.md):

- accuracy = (tp + tn) / n
- precision = tp / (tp + fp)
- recall = tp / (tp + fn)
- f1 = 2tp / (2tp + fp + fn) (= 2·p·r / (p + r) where both are defined; 0 when there is no
  true positive); undefined only when 2tp + fp + fn = 0 (every decided row a true negative)
- cohen_kappa = (po − pe) / (1 − pe), po = accuracy,
  pe = ((tp + fp)(tp + fn) + (fn + tn)(fp + tn)) / n²; undefined when pe = 1 (judge and
  reference both put every row in the same single class: agreement by chance is certain)

An undefined value is None (never NaN) and ``undefined`` names why. ``ci95`` is a 95%
percentile bootstrap interval: the rows are resampled with replacement ``resamples`` times
(default 10,000, seeded), the statistic is computed on each resample, resamples where it is
undefined are left out, and the 2.5th and 97.5th percentiles (numpy's linear interpolation)
are the bounds, widened if needed to hold the point value; None when the statistic is
undefined on the rows themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from atoll.grade import Verdict

#: Resamples of the bootstrap (DESIGN §6 uses the same number for tasks).
RESAMPLES = 10_000
#: The seed when none is given: the same rows always give the same intervals.
DEFAULT_SEED = 0
STATISTICS = ("accuracy", "precision", "recall", "f1", "cohen_kappa")
# Resamples are drawn in blocks of this many: 10,000 × 747 draws at once would take ~60 MB.
_BLOCK = 500


class Confusion(BaseModel):
    """Counts of decided rows; "met" is the positive class."""

    tp: int = Field(default=0, description="judge met, reference met")
    fp: int = Field(default=0, description="judge met, reference not met")
    tn: int = Field(default=0, description="judge not met, reference not met")
    fn: int = Field(default=0, description="judge not met, reference met")

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn


class Agreement(BaseModel):
    """The statistics of one set of rows (all of them, or one domain's)."""

    rows: int = Field(description="rows given, ungradeable ones included")
    n: int = Field(description="rows the judge decided (met or not met): the denominator")
    ungradeable: int = Field(description="rows the judge could not decide; left out of everything else")
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    cohen_kappa: float | None = None
    undefined: dict[str, str] = Field(
        default_factory=dict, description="statistic -> why it is undefined (its value is null)"
    )
    ci95: dict[str, list[float] | None] = Field(
        default_factory=dict, description="statistic -> [low, high], the 95% percentile bootstrap interval"
    )
    confusion: Confusion = Field(default_factory=Confusion)


def confusion(pairs: Iterable[tuple[Verdict, bool]]) -> tuple[Confusion, int]:
    """The confusion matrix of ``(judge verdict, reference is met)`` pairs, and how many
    verdicts were ungradeable (left out of the matrix)."""
    counts = Confusion()
    ungradeable = 0
    for verdict, reference in pairs:
        if verdict is Verdict.ungradeable:
            ungradeable += 1
        elif verdict is Verdict.met:
            if reference:
                counts.tp += 1
            else:
                counts.fp += 1
        elif reference:
            counts.fn += 1
        else:
            counts.tn += 1
    return counts, ungradeable


def statistics(counts: Confusion) -> tuple[dict[str, float | None], dict[str, str]]:
    """Every statistic of ``counts`` (None where undefined) and why each undefined one is."""
    values = _vectorised(np.array([[counts.tp, counts.fp, counts.tn, counts.fn]], dtype=np.float64))
    result = {name: None if np.isnan(column[0]) else float(column[0]) for name, column in values.items()}
    reasons: dict[str, str] = {}
    n = counts.n
    if n == 0:
        reasons = {name: "no decided rows" for name in STATISTICS}
        return result, reasons
    if counts.tp + counts.fp == 0:
        reasons["precision"] = "the judge said met on no row (tp + fp = 0)"
    if counts.tp + counts.fn == 0:
        reasons["recall"] = "no row's reference is met (tp + fn = 0)"
    if result["f1"] is None:
        reasons["f1"] = "no row is met by the judge or the reference (2tp + fp + fn = 0)"
    if result["cohen_kappa"] is None:
        reasons["cohen_kappa"] = (
            "chance agreement pe = 1: the judge and the reference put every row in the same one class"
        )
    return result, reasons


def _vectorised(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of many confusion matrices at once (rows of tp, fp, tn, fn); NaN = undefined."""
    tp, fp, tn, fn = (counts[:, i] for i in range(4))
    n = tp + fp + tn + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(n > 0, (tp + tn) / n, np.nan)
        precision = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        recall = np.where(tp + fn > 0, tp / (tp + fn), np.nan)
        # 2tp/(2tp + fp + fn): the harmonic mean of p and r where both are defined, exact in the
        # counts, and 0 where either is undefined but a positive exists (no true positive), as
        # scikit-learn's f1_score gives; undefined only with no positive anywhere.
        positives = 2 * tp + fp + fn
        f1 = np.where(positives > 0, 2 * tp / positives, np.nan)
        # Integers first (exact), one division last: pe == 1 is decided exactly.
        chance = (tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)
        squared = n * n
        kappa = np.where(
            (n > 0) & (chance < squared),
            ((tp + tn) * n - chance) / (squared - chance),
            np.nan,
        )
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1, "cohen_kappa": kappa}


def _codes(pairs: Sequence[tuple[Verdict, bool]]) -> np.ndarray:
    """Each decided row's confusion cell: 0 tp, 1 fp, 2 tn, 3 fn."""
    cells = []
    for verdict, reference in pairs:
        if verdict is Verdict.ungradeable:
            continue
        met = verdict is Verdict.met
        cells.append((0 if reference else 1) if met else (3 if reference else 2))
    return np.array(cells, dtype=np.int64)


def bootstrap_intervals(
    pairs: Sequence[tuple[Verdict, bool]], *, seed: int = DEFAULT_SEED, resamples: int = RESAMPLES
) -> dict[str, list[float] | None]:
    """The 95% percentile bootstrap interval of each statistic over the decided rows of
    ``pairs`` (rows resampled with replacement); None where no resample defines it."""
    cells = _codes(pairs)
    rows = cells.size
    if rows == 0:
        return {name: None for name in STATISTICS}
    rng = np.random.default_rng(seed)
    blocks: list[np.ndarray] = []
    for start in range(0, resamples, _BLOCK):
        size = min(_BLOCK, resamples - start)
        drawn = cells[rng.integers(0, rows, size=(size, rows))]
        # Per resample, how many drawn rows fall in each cell: one bincount over offset codes.
        offsets = drawn + (np.arange(size, dtype=np.int64) * 4)[:, None]
        blocks.append(np.bincount(offsets.ravel(), minlength=size * 4).reshape(size, 4).astype(np.float64))
    values = _vectorised(np.concatenate(blocks))
    return {name: _percentile_interval(column) for name, column in values.items()}


def _percentile_interval(column: np.ndarray) -> list[float] | None:
    defined = column[~np.isnan(column)]
    if defined.size == 0:
        return None
    low, high = np.percentile(defined, [2.5, 97.5])
    return [float(low), float(high)]


def agreement(
    pairs: Sequence[tuple[Verdict, bool]], *, seed: int = DEFAULT_SEED, resamples: int = RESAMPLES
) -> Agreement:
    """The statistics of ``pairs`` with their intervals (see the module's formulas)."""
    counts, ungradeable = confusion(pairs)
    values, reasons = statistics(counts)
    intervals = bootstrap_intervals(pairs, seed=seed, resamples=resamples)
    ci95: dict[str, list[float] | None] = {}
    for name in STATISTICS:
        value, interval = values[name], intervals[name]
        if value is None or interval is None:
            ci95[name] = None
        else:  # an interval always holds its own point value (float sums can land an ulp off)
            ci95[name] = [min(interval[0], value), max(interval[1], value)]
    return Agreement(
        rows=len(pairs),
        n=counts.n,
        ungradeable=ungradeable,
        **values,
        undefined=reasons,
        ci95=ci95,
        confusion=counts,
    )


def agreement_by_domain(
    pairs: Sequence[tuple[Verdict, bool]],
    domains: Sequence[str],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = RESAMPLES,
) -> dict[str, Agreement]:
    """:func:`agreement` of each domain's rows (rows resampled within their domain); a row
    without a domain counts under ``""``."""
    grouped: dict[str, list[tuple[Verdict, bool]]] = {}
    for pair, domain in zip(pairs, domains, strict=True):
        grouped.setdefault(domain or "", []).append(pair)
    return {
        domain: agreement(rows, seed=seed, resamples=resamples) for domain, rows in sorted(grouped.items())
    }


def summary(
    pairs: Sequence[tuple[Verdict, bool]],
    domains: Sequence[str],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = RESAMPLES,
) -> dict[str, Any]:
    """The statistics of every row and ``per_domain``, as one JSON-ready dict."""
    overall = agreement(pairs, seed=seed, resamples=resamples).model_dump(mode="json")
    overall["per_domain"] = {
        domain: stats.model_dump(mode="json")
        for domain, stats in agreement_by_domain(pairs, domains, seed=seed, resamples=resamples).items()
    }
    overall["bootstrap"] = {"resamples": resamples, "seed": seed, "interval": "percentile 2.5-97.5"}
    return overall


__all__ = [
    "DEFAULT_SEED",
    "RESAMPLES",
    "STATISTICS",
    "Agreement",
    "Confusion",
    "agreement",
    "agreement_by_domain",
    "bootstrap_intervals",
    "confusion",
    "statistics",
    "summary",
]
