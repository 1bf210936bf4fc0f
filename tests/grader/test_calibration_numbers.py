"""`atoll judge calibrate` checked from the user's side: labels whose confusion matrix is known
(overall and per domain), every number of OUT.json against formulas written out here (not
atoll's), the edge cases where a statistic is undefined, the label never reaching the judge,
and bad label rows as one line naming file:line with exit status 2."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.testing.scripted_llm import ScriptedLLM
from atoll_cli.cli import app
from tests.atoll.factories import make_task, write_benchmark

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-6
# The scripted judge's rule: it answers what the row's answer asks for, so the verdicts are
# known before the run; a MUMBLE answer gets no verdict (ungradeable).
SAYS = {"met": "JUDGE-SAYS-MET", "not_met": "JUDGE-SAYS-NOT", "ungradeable": "JUDGE-MUMBLE"}
CELLS = {
    "tp": ("met", "met"),
    "fp": ("met", "not_met"),
    "tn": ("not_met", "not_met"),
    "fn": ("not_met", "met"),
}


def judge(request: dict) -> dict:
    prompt = json.dumps(request["messages"])
    if SAYS["ungradeable"] in prompt:
        return {"content": "I cannot tell."}
    verdict = "met" if SAYS["met"] in prompt else "not_met"
    return {"content": json.dumps({"rationale": f"rationale for {verdict}", "verdict": verdict})}


def expected(tp: int, fp: int, tn: int, fn: int) -> dict[str, float | None]:
    """The statistics, written out from their textbook definitions in exact fractions."""
    n = tp + fp + tn + fn
    if n == 0:
        return dict.fromkeys(("accuracy", "precision", "recall", "f1", "cohen_kappa"))
    accuracy = Fraction(tp + tn, n)
    precision = Fraction(tp, tp + fp) if tp + fp else None
    recall = Fraction(tp, tp + fn) if tp + fn else None
    # F1 from the counts (2tp / (2tp + fp + fn)): the harmonic mean of precision and recall
    # where both exist, 0 without a true positive, undefined with no positive anywhere.
    f1 = Fraction(2 * tp, 2 * tp + fp + fn) if 2 * tp + fp + fn else None
    if precision is not None and recall is not None and precision + recall:
        assert f1 == 2 * precision * recall / (precision + recall)
    # Chance agreement: both say met by chance + both say not met by chance.
    judge_met, label_met = Fraction(tp + fp, n), Fraction(tp + fn, n)
    chance = judge_met * label_met + (1 - judge_met) * (1 - label_met)
    kappa = None if chance == 1 else (accuracy - chance) / (1 - chance)
    values = {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1, "cohen_kappa": kappa}
    return {name: None if value is None else float(value) for name, value in values.items()}


# domain -> (task, criterion) and the cells of its rows; "ungradeable" rows carry a label too.
PLAN = {
    "Law": ("law-1", {"tp": 3, "fp": 1, "tn": 2, "fn": 1, "ungradeable": 1}),
    "Finance": ("fin-1", {"tp": 2, "fp": 1, "tn": 2, "fn": 2}),
    "Management Consulting": ("mc-1", {"tp": 2, "tn": 1, "ungradeable": 1}),
}


def benchmark(root: Path) -> Path:
    return write_benchmark(root, tasks=[make_task(task, domain=domain) for domain, (task, _) in PLAN.items()])


def plan_rows(plan=PLAN) -> list[dict]:
    """Label rows for ``plan``, domains interleaved so that file order mixes them."""
    per_domain = []
    for task, cells in plan.values():
        rows = []
        for cell, count in cells.items():
            for _ in range(count):
                verdict, label = CELLS.get(cell, ("ungradeable", "met"))
                rows.append({"task_id": task, "verifier_id": f"{task}-v1", "says": verdict, "label": label})
        per_domain.append(rows)
    mixed = []
    while any(per_domain):
        for rows in per_domain:
            if rows:
                mixed.append(rows.pop(0))
    return mixed


def write_labels(path: Path, rows: list[dict]) -> Path:
    lines = [
        json.dumps(
            {
                "task_id": row["task_id"],
                "verifier_id": row["verifier_id"],
                "answer": f"{SAYS[row['says']]} (row {index})",
                "label": row["label"],
            }
        )
        for index, row in enumerate(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def calibrate(bench: Path, labels: Path, llm: ScriptedLLM, output: Path, *extra: str):
    return CliRunner().invoke(
        app,
        [
            "judge",
            "calibrate",
            "--benchmark",
            str(bench),
            "--labels",
            str(labels),
            "--judge-model",
            "openai/judge",
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--output",
            str(output),
            "--no-record",
            *extra,
        ],
        env={"JUDGE_KEY": "x"},
    )


def assert_statistics(stats: dict, tp: int, fp: int, tn: int, fn: int, ungradeable: int) -> None:
    assert stats["confusion"] == {"tp": tp, "fp": fp, "tn": tn, "fn": fn}
    assert (stats["n"], stats["ungradeable"], stats["rows"]) == (
        tp + fp + tn + fn,
        ungradeable,
        tp + fp + tn + fn + ungradeable,
    )
    for name, value in expected(tp, fp, tn, fn).items():
        if value is None:
            assert stats[name] is None and stats["ci95"][name] is None and stats["undefined"][name], name
            continue
        assert stats[name] == pytest.approx(value, abs=TOLERANCE), name
        assert name not in stats["undefined"]
        low, high = stats["ci95"][name]
        assert low <= stats[name] <= high, name
        assert (-1.0 if name == "cohen_kappa" else 0.0) <= low and high <= 1.0, name


def test_every_number_matches_a_known_confusion_matrix_overall_and_per_domain(tmp_path):
    bench = benchmark(tmp_path / "bench")
    rows = plan_rows()
    labels = write_labels(tmp_path / "labels.jsonl", rows)
    with ScriptedLLM(judge) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out.json").read_text())
    # 7 / 2 / 5 / 3 with 2 ungradeable rows.
    assert_statistics(report, 7, 2, 5, 3, 2)
    assert report["accuracy"] == pytest.approx(12 / 17, abs=TOLERANCE)
    assert report["cohen_kappa"] == pytest.approx(58 / 143, abs=TOLERANCE)
    assert set(report["per_domain"]) == set(PLAN)
    for domain, (_, cells) in PLAN.items():
        counts = [cells.get(cell, 0) for cell in ("tp", "fp", "tn", "fn", "ungradeable")]
        assert_statistics(report["per_domain"][domain], *counts)
    # Every disagreement (fp and fn rows), with its line, ids, label, verdict and rationale.
    wrong = [
        (line, row)
        for line, row in enumerate(rows, start=1)
        if row["says"] != "ungradeable" and row["says"] != row["label"]
    ]
    assert [(d["line"], d["label"], d["verdict"]) for d in report["disagreements"]] == [
        (line, row["label"], row["says"]) for line, row in wrong
    ]
    assert all(d["rationale"] == f"rationale for {d['verdict']}" for d in report["disagreements"])
    assert all(d["decided_by"] == "judge" for d in report["disagreements"])
    assert [r["line"] for r in report["ungradeable_rows"]] == [
        line for line, row in enumerate(rows, start=1) if row["says"] == "ungradeable"
    ]
    assert [(r["label"], r["verdict"]) for r in report["rows_judged"]] == [
        (row["label"], row["says"]) for row in rows
    ]


@pytest.mark.parametrize(
    ("cells", "undefined"),
    [
        # All labelled met and all judged met: chance agreement is 1, kappa is 0/0.
        ({"tp": 4}, {"cohen_kappa"}),
        # All labelled and judged not met: no positive anywhere.
        ({"tn": 3}, {"precision", "recall", "f1", "cohen_kappa"}),
        # The judge never says met: precision undefined, F1 0 (no true positive), kappa 0.
        ({"tn": 2, "fn": 3}, {"precision"}),
        # No label is met: recall undefined, F1 0.
        ({"fp": 2, "tn": 1}, {"recall"}),
        # Precision = recall = 0 (both defined): F1 is 0.
        ({"fp": 1, "fn": 2, "tn": 1}, set()),
        # One row: pe = 0·1 + 1·0 = 0, so kappa = po = 0.
        ({"fn": 1}, {"precision"}),
        # Every row ungradeable: nothing decided, every statistic undefined.
        ({"ungradeable": 2}, {"accuracy", "precision", "recall", "f1", "cohen_kappa"}),
    ],
)
def test_edge_cases_are_null_with_a_reason_never_nan(tmp_path, cells, undefined):
    bench = benchmark(tmp_path / "bench")
    labels = write_labels(tmp_path / "labels.jsonl", plan_rows({"Law": ("law-1", cells)}))
    with ScriptedLLM(judge) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    report = json.loads(text)
    counts = [cells.get(cell, 0) for cell in ("tp", "fp", "tn", "fn", "ungradeable")]
    assert_statistics(report, *counts)
    assert set(report["undefined"]) == undefined
    assert_statistics(report["per_domain"]["Law"], *counts)


def test_intervals_follow_the_seed_and_the_label_never_reaches_the_judge(tmp_path):
    bench = benchmark(tmp_path / "bench")
    rows = plan_rows()
    labels = write_labels(tmp_path / "labels.jsonl", rows)
    flipped = write_labels(
        tmp_path / "flipped.jsonl",
        [{**row, "label": "not_met" if row["label"] == "met" else "met"} for row in rows],
    )
    reports, requests = [], []
    with ScriptedLLM(judge) as llm:
        for name, file, seed in (
            ("a", labels, "11"),
            ("b", labels, "11"),
            ("c", labels, "12"),
            ("d", flipped, "11"),
        ):
            before = len(llm.requests)
            result = calibrate(bench, file, llm, tmp_path / f"{name}.json", "--seed", seed)
            assert result.exit_code == 0, result.output
            reports.append(json.loads((tmp_path / f"{name}.json").read_text()))
            requests.append([r["messages"] for r in llm.requests[before:]])
    same, again, other_seed, other_labels = reports
    assert same["ci95"] == again["ci95"] and same["per_domain"] == again["per_domain"]
    assert same["bootstrap"]["seed"] == 11 and other_seed["bootstrap"]["seed"] == 12
    assert same["ci95"] != other_seed["ci95"]
    assert {k: same[k] for k in ("accuracy", "cohen_kappa")} == {
        k: other_seed[k] for k in ("accuracy", "cohen_kappa")
    }

    # Flipping every label changes nothing the judge is sent, call for call (but the fence's
    # random nonce).
    def unfenced(calls: list) -> str:
        return re.sub(r"\b[0-9a-f]{24}\b", "NONCE", json.dumps(calls))

    assert unfenced(requests[0]) == unfenced(requests[3]) and len(requests[0]) >= len(rows)
    assert other_labels["confusion"] == {"tp": 2, "fp": 7, "tn": 3, "fn": 5}


BAD_ROWS = [
    ("{not json", "not JSON"),
    ('["law-1", "law-1-v1"]', "expected a JSON object"),
    ('{"verifier_id": "law-1-v1", "answer": "a", "label": "met"}', "needs 'task_id'"),
    ('{"task_id": "law-1", "answer": "a", "label": "met"}', "needs 'verifier_id'"),
    ('{"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "a"}', "needs 'label'"),
    ('{"task_id": "nope", "verifier_id": "law-1-v1", "answer": "a", "label": "met"}', "task 'nope'"),
    (
        '{"task_id": "law-1", "verifier_id": "fin-1-v1", "answer": "a", "label": "met"}',
        "no criterion 'fin-1-v1'",
    ),
    ('{"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "a", "label": "Met"}', "label must be"),
    ('{"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "a", "label": true}', "label must be"),
]


def labels_with_a_bad_fourth_line(path: Path, bad: str) -> Path:
    good = json.dumps({"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "a", "label": "met"})
    # The bad row on line 4, after a blank line: line numbers count every line of the file.
    path.write_text(f"{good}\n\n{good}\n{bad}\n{good}\n")
    return path


@pytest.mark.parametrize(("bad", "message"), BAD_ROWS)
def test_a_bad_label_row_is_one_error_naming_file_and_line(tmp_path, bad, message):
    bench = benchmark(tmp_path / "bench")
    labels = labels_with_a_bad_fourth_line(tmp_path / "labels.jsonl", bad)
    with ScriptedLLM(judge) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json")
        assert llm.requests == []  # every row is checked before the first judge call
    assert isinstance(result.exception, AtollError), result.output
    assert str(result.exception).startswith(f"{labels}:4: ") and message in str(result.exception)
    assert "\n" not in str(result.exception)
    assert not (tmp_path / "out.json").exists()


def test_the_console_says_it_in_one_line_on_stderr_with_exit_status_2(tmp_path):
    bench = benchmark(tmp_path / "bench")
    labels = labels_with_a_bad_fourth_line(tmp_path / "labels.jsonl", "{not json")
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from atoll_cli.cli import main; main()",
            "judge",
            "calibrate",
            "--benchmark",
            str(bench),
            "--labels",
            str(labels),
            "--judge-model",
            "openai/judge",
            "--api-base",
            "http://127.0.0.1:9/v1",  # never called: the rows are checked first
            "--output",
            str(tmp_path / "out.json"),
            "--no-record",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip().splitlines() == [
        completed.stderr.strip()
    ] and completed.stderr.startswith(f"error: {labels}:4: not JSON"), completed.stderr
    assert not (tmp_path / "out.json").exists()


def _mcnemar(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar: twice the smaller binomial tail at p = ½, at most 1."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize(
    ("only_a", "only_b", "both_right", "both_wrong"), [(9, 2, 4, 1), (3, 3, 2, 0), (0, 7, 1, 1), (0, 0, 5, 0)]
)
def test_compare_is_the_exact_mcnemar_test_on_the_discordant_rows(
    tmp_path, only_a, only_b, both_right, both_wrong
):
    # Rows: label met everywhere; a judge is right when it says met. Two ungradeable rows left out.
    cells = [("met", "not_met")] * only_a + [("not_met", "met")] * only_b
    cells += [("met", "met")] * both_right + [("not_met", "not_met")] * both_wrong
    cells += [("ungradeable", "met"), ("met", "ungradeable")]
    documents = []
    for side in (0, 1):
        rows = [
            {"line": line, "task_id": "t", "verifier_id": "v", "label": "met", "verdict": pair[side]}
            for line, pair in enumerate(cells, start=1)
        ]
        path = tmp_path / f"{side}.json"
        judge = {"id": f"{side}" * 16, "describe": f"judge {side}"}
        path.write_text(json.dumps({"labels_sha256": "same", "judge": judge, "rows_judged": rows}))
        documents.append(str(path))
    result = CliRunner().invoke(app, ["judge", "compare", *documents, "--output", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    comparison = json.loads((tmp_path / "c.json").read_text())
    n = only_a + only_b + both_right + both_wrong
    assert (comparison["n"], comparison["left_out"]) == (n, 2)
    assert (comparison["only_a_right"], comparison["only_b_right"]) == (only_a, only_b)
    assert (comparison["both_right"], comparison["both_wrong"]) == (both_right, both_wrong)
    assert comparison["p_value"] == pytest.approx(_mcnemar(only_a, only_b), abs=1e-12)
    assert comparison["a"]["accuracy"] == pytest.approx((only_a + both_right) / n, abs=TOLERANCE)
    assert comparison["b"]["accuracy"] == pytest.approx((only_b + both_right) / n, abs=TOLERANCE)
