"""grader.calibration: the agreement statistics against hand-computed confusion matrices,
their undefined cases (null with a reason, never NaN) and the bootstrap intervals."""

from __future__ import annotations

import json
import math

import pytest

from atoll.grade import Verdict
from grader.calibration import Confusion, agreement, agreement_by_domain, statistics, summary
from grader.validate import compute_metrics

MET, NOT_MET, UNGRADEABLE = Verdict.met, Verdict.not_met, Verdict.ungradeable


def pairs(tp: int = 0, fp: int = 0, tn: int = 0, fn: int = 0, ungradeable: int = 0):
    return (
        [(MET, True)] * tp
        + [(MET, False)] * fp
        + [(NOT_MET, False)] * tn
        + [(NOT_MET, True)] * fn
        + [(UNGRADEABLE, True)] * ungradeable
    )


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # pe = (10·9 + 10·11)/400 = 0.5; kappa = (0.85 − 0.5)/0.5
        (
            (8, 2, 9, 1),
            {"accuracy": 0.85, "precision": 0.8, "recall": 8 / 9, "f1": 16 / 19, "cohen_kappa": 0.7},
        ),
        # pe = (30·30 + 70·70)/10000 = 0.58; kappa = 0.22/0.42
        (
            (20, 10, 60, 10),
            {"accuracy": 0.8, "precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "cohen_kappa": 0.22 / 0.42},
        ),
        # no true positive: p = r = 0, f1 = 0; pe = (3·2 + 2·3)/25 = 0.48
        (
            (0, 3, 0, 2),
            {"accuracy": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0, "cohen_kappa": -0.48 / 0.52},
        ),
        # the judge always says met: pe = po = 0.6, kappa 0
        ((3, 2, 0, 0), {"accuracy": 0.6, "precision": 0.6, "recall": 1.0, "f1": 0.75, "cohen_kappa": 0.0}),
        # every label met: precision 1, pe = po = 0.6, kappa 0
        ((3, 0, 0, 2), {"accuracy": 0.6, "precision": 1.0, "recall": 0.6, "f1": 0.75, "cohen_kappa": 0.0}),
        # perfect and balanced
        ((5, 0, 5, 0), {"accuracy": 1.0, "precision": 1.0, "recall": 1.0, "f1": 1.0, "cohen_kappa": 1.0}),
    ],
)
def test_statistics_match_hand_computed_confusion_matrices(counts, expected):
    tp, fp, tn, fn = counts
    result = agreement(pairs(tp, fp, tn, fn, ungradeable=2), resamples=200)
    assert result.confusion == Confusion(tp=tp, fp=fp, tn=tn, fn=fn)
    assert (result.rows, result.n, result.ungradeable) == (tp + fp + tn + fn + 2, tp + fp + tn + fn, 2)
    for name, value in expected.items():
        assert getattr(result, name) == pytest.approx(value, abs=1e-9), name
    assert result.undefined == {}


def test_a_single_class_everywhere_leaves_kappa_precision_recall_and_f1_undefined():
    # Every row not met, the judge agrees: pe = 1, no positive anywhere.
    result = agreement(pairs(tn=7), resamples=200)
    assert result.accuracy == 1.0
    assert result.precision is result.recall is result.f1 is result.cohen_kappa is None
    assert set(result.undefined) == {"precision", "recall", "f1", "cohen_kappa"}
    assert "pe = 1" in result.undefined["cohen_kappa"]
    assert result.ci95["cohen_kappa"] is None and result.ci95["accuracy"] == [1.0, 1.0]
    # Every row met, the judge agrees: p = r = f1 = 1, kappa still undefined (pe = 1).
    result = agreement(pairs(tp=4), resamples=200)
    assert (result.precision, result.recall, result.f1, result.cohen_kappa) == (1.0, 1.0, 1.0, None)
    assert list(result.undefined) == ["cohen_kappa"]


def test_the_judge_never_saying_met_leaves_precision_undefined_and_f1_zero():
    values, reasons = statistics(Confusion(tn=3, fn=2))
    assert values["precision"] is None and values["f1"] == 0.0 and values["recall"] == 0.0
    assert values["accuracy"] == pytest.approx(0.6)
    assert values["cohen_kappa"] == pytest.approx(0.0)  # pe = (0 + 5·3)/25 = 0.6 = po
    assert set(reasons) == {"precision"} and "tp + fp = 0" in reasons["precision"]


def test_no_decided_row_is_all_null_with_reasons_never_nan():
    result = agreement(pairs(ungradeable=3))
    assert (result.n, result.ungradeable) == (0, 3)
    dumped = result.model_dump(mode="json")
    text = json.dumps(dumped, allow_nan=False)  # raises on a NaN
    assert "NaN" not in text
    for name in ("accuracy", "precision", "recall", "f1", "cohen_kappa"):
        assert dumped[name] is None and dumped["ci95"][name] is None and name in dumped["undefined"]


def test_bootstrap_intervals_are_seeded_hold_the_value_and_look_right():
    rows = pairs(tp=40, fp=10, tn=40, fn=10)
    first = agreement(rows, seed=7)
    assert first.ci95 == agreement(rows, seed=7).ci95
    assert first.ci95 != agreement(rows, seed=8).ci95
    for name, (low, high) in first.ci95.items():
        assert low <= getattr(first, name) <= high, name
    # accuracy 0.8 on 100 rows: the normal approximation's interval is 0.8 ± 1.96·0.04.
    low, high = first.ci95["accuracy"]
    assert math.isclose(low, 0.8 - 0.0784, abs_tol=0.02) and math.isclose(high, 0.8 + 0.0784, abs_tol=0.02)
    assert 0 < first.ci95["cohen_kappa"][0] < 0.6 < first.ci95["cohen_kappa"][1] < 1


def test_per_domain_rows_are_each_domains_own_statistics():
    rows = pairs(tp=2, tn=2) + pairs(fp=1, fn=1)
    domains = ["legal"] * 4 + ["finance"] * 2
    by_domain = agreement_by_domain(rows, domains, resamples=100)
    assert list(by_domain) == ["finance", "legal"]
    assert by_domain["legal"].accuracy == 1.0 and by_domain["finance"].accuracy == 0.0
    assert by_domain["finance"].confusion == Confusion(fp=1, fn=1)
    everything = summary(rows, domains, resamples=100)
    assert everything["n"] == 6 and everything["accuracy"] == pytest.approx(4 / 6)
    assert everything["per_domain"]["legal"]["n"] == 4
    assert everything["bootstrap"]["resamples"] == 100


def test_grade_validate_metrics_are_the_same_numbers():
    metrics = compute_metrics(pairs(tp=8, fp=2, tn=9, fn=1, ungradeable=1))
    assert (metrics.total, metrics.graded, metrics.ungradeable) == (21, 20, 1)
    assert metrics.cohen_kappa == pytest.approx(0.7) and metrics.f1 == pytest.approx(16 / 19)


def test_the_bootstrap_is_the_plain_row_resampling_it_is_documented_to_be():
    import numpy as np

    from grader.calibration import bootstrap_intervals

    rows = pairs(tp=5, fp=2, tn=6, fn=3, ungradeable=2)
    decided = [pair for pair in rows if pair[0] is not UNGRADEABLE]
    rng = np.random.default_rng(11)
    draws = rng.integers(0, len(decided), size=(300, len(decided)))  # one block: 300 resamples
    accuracies, kappas = [], []
    for draw in draws:
        sample = [decided[i] for i in draw]
        tp = sum(v is MET and label for v, label in sample)
        fp = sum(v is MET and not label for v, label in sample)
        tn = sum(v is NOT_MET and not label for v, label in sample)
        fn = sum(v is NOT_MET and label for v, label in sample)
        n = len(sample)
        accuracies.append((tp + tn) / n)
        pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n**2
        if pe < 1:
            kappas.append(((tp + tn) / n - pe) / (1 - pe))
    intervals = bootstrap_intervals(rows, seed=11, resamples=300)
    assert intervals["accuracy"] == pytest.approx(list(np.percentile(accuracies, [2.5, 97.5])), abs=1e-12)
    assert intervals["cohen_kappa"] == pytest.approx(list(np.percentile(kappas, [2.5, 97.5])), abs=1e-12)
