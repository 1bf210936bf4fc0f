"""`atoll judge calibrate`, `gold` and `compare` end to end: the real CLI, the real grading
path and a scripted OpenAI-compatible judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.testing.scripted_llm import ScriptedLLM
from atoll_cli.cli import app
from orchestrator.calibrations import calibration_line, latest_calibration
from orchestrator.store import TrialStore
from tests.atoll import apex_replica as replica
from tests.atoll.factories import make_task, write_benchmark

MET = {"content": json.dumps({"rationale": "the answer states it", "verdict": "met"})}
NOT_MET = {"content": json.dumps({"rationale": "the answer does not state it", "verdict": "not_met"})}
# The judge's rule: an answer saying YES is met, NO is not met, anything else gets no verdict.
ROWS = (
    [("YES", "met")] * 3  # tp
    + [("YES", "not_met")]  # fp
    + [("NO", "not_met")] * 4  # tn
    + [("NO", "met")] * 2  # fn
    + [("MUMBLE", "met")]  # ungradeable
)


def script(request: dict) -> dict:
    prompt = "\n".join(m["content"] for m in request["messages"] if isinstance(m.get("content"), str))
    if "MUMBLE" in prompt:
        return {"content": "I would rather not say."}
    return MET if "YES" in prompt else NOT_MET


def benchmark(root: Path) -> Path:
    return write_benchmark(
        root,
        tasks=[
            make_task("law-1", domain="Law"),
            make_task(
                "fin-1",
                domain="Finance",
                rubric=[
                    {"verifier_id": "fin-1-v1", "criteria": "States the margin"},
                    {"verifier_id": "fin-1-v2", "criteria": "Names the quarter"},
                ],
            ),
        ],
    )


def labels_file(path: Path, rows=ROWS) -> Path:
    criteria = [("law-1", "law-1-v1"), ("fin-1", "fin-1-v1"), ("fin-1", "fin-1-v2")]
    lines = []
    for index, (answer, label) in enumerate(rows):
        task_id, verifier_id = criteria[index % 3]
        lines.append(
            json.dumps(
                {
                    "task_id": task_id,
                    "verifier_id": verifier_id,
                    "answer": f"{answer} ({index})",
                    "label": label,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"JUDGE_KEY": "x"})


def calibrate(bench: Path, labels: Path, llm: ScriptedLLM, output: Path, *extra: str, model="openai/judge"):
    return invoke(
        "judge",
        "calibrate",
        "--benchmark",
        str(bench),
        "--labels",
        str(labels),
        "--judge-model",
        model,
        "--api-base",
        llm.api_base,
        "--api-key-env",
        "JUDGE_KEY",
        "--output",
        str(output),
        *extra,
    )


def test_calibrate_reports_the_statistics_of_a_known_confusion_matrix(tmp_path):
    bench, labels = benchmark(tmp_path / "bench"), labels_file(tmp_path / "labels.jsonl")
    store = f"sqlite:///{tmp_path / 'atoll.db'}"
    with ScriptedLLM(script) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json", "--store", store)
        prompts = [json.dumps(r["messages"]) for r in llm.requests]
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["confusion"] == {"tp": 3, "fp": 1, "tn": 4, "fn": 2}
    assert (report["rows"], report["n"], report["ungradeable"]) == (11, 10, 1)
    # pe = (4·5 + 6·5)/100 = 0.5; kappa = (0.7 − 0.5)/0.5
    expected = {"accuracy": 0.7, "precision": 0.75, "recall": 0.6, "f1": 2 / 3, "cohen_kappa": 0.4}
    for name, value in expected.items():
        assert report[name] == pytest.approx(value, abs=1e-9), name
        low, high = report["ci95"][name]
        assert low <= report[name] <= high
    assert report["bootstrap"]["resamples"] == 10_000
    assert set(report["per_domain"]) == {"Law", "Finance"}
    assert report["per_domain"]["Law"]["n"] + report["per_domain"]["Finance"]["n"] == 10
    # Every disagreement is there with the judge's rationale; the ungradeable row apart.
    assert len(report["disagreements"]) == 3
    assert {(d["label"], d["verdict"]) for d in report["disagreements"]} == {
        ("not_met", "met"),
        ("met", "not_met"),
    }
    assert all(d["rationale"] and d["task_id"] and d["verifier_id"] for d in report["disagreements"])
    assert [r["line"] for r in report["ungradeable_rows"]] == [11]
    # The judge's identity, as grades carry it.
    assert report["judge"]["model"] == "openai/judge" and len(report["judge"]["id"]) == 16
    assert report["judge"]["describe"].startswith("openai/judge (")
    assert report["created_at"]
    # The label is never shown to the judge.
    assert not any('"label"' in p or "not_met (" in p for p in prompts)
    assert "accuracy" in result.stdout and "0.700" in result.stdout
    # The record in the store, keyed by the judge's identity.
    trial_store = TrialStore(store)
    record = latest_calibration(trial_store, report["judge"]["id"])
    assert record is not None and record.n == 10 and record.accuracy == pytest.approx(0.7)
    assert calibration_line(record).startswith("judge calibrated: accuracy 0.700 on 10 labels (")
    assert latest_calibration(trial_store, "0" * 16) is None and calibration_line(None) == "uncalibrated"
    trial_store.dispose()


def test_the_seed_decides_the_intervals(tmp_path):
    bench, labels = benchmark(tmp_path / "bench"), labels_file(tmp_path / "labels.jsonl")
    outputs = []
    with ScriptedLLM(script) as llm:
        for seed in ("3", "3", "4"):
            output = tmp_path / f"out-{len(outputs)}.json"
            assert calibrate(bench, labels, llm, output, "--seed", seed, "--no-record").exit_code == 0
            outputs.append(json.loads(output.read_text())["ci95"])
    assert outputs[0] == outputs[1] and outputs[0] != outputs[2]


def test_the_judge_config_is_taken_inline_or_from_a_file_and_decides_the_identity(tmp_path):
    bench, labels = benchmark(tmp_path / "bench"), labels_file(tmp_path / "labels.jsonl")
    inline = '{"model": "openai/judge", "samples": 3}'
    (tmp_path / "judge.json").write_text(inline)
    with ScriptedLLM(script) as llm:
        for source, name in ((inline, "inline"), (str(tmp_path / "judge.json"), "file")):
            output = tmp_path / f"{name}.json"
            result = invoke(
                "judge", "calibrate", "--benchmark", str(bench), "--labels", str(labels),
                "--judge-config", source, "--api-base", llm.api_base, "--api-key-env", "JUDGE_KEY",
                "--output", str(output), "--no-record",
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            assert json.loads(output.read_text())["judge"]["samples"] == 3
    broken = invoke("judge", "calibrate", "--benchmark", str(bench), "--labels", str(labels),
                    "--judge-config", "{not json", "--output", str(tmp_path / "x.json"))  # fmt: skip
    assert broken.exit_code != 0 and "inline JSON" in str(broken.exception or broken.output)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"task_id": "nope", "verifier_id": "x", "answer": "a", "label": "met"}, "task 'nope' is not in"),
        ({"task_id": "law-1", "verifier_id": "x", "answer": "a", "label": "met"}, "has no criterion 'x'"),
        (
            {"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "a", "label": "yes"},
            'label must be "met"',
        ),
        ({"task_id": "law-1", "verifier_id": "law-1-v1", "label": "met"}, "needs 'answer'"),
        ({"task_id": "law-1", "answer": "a", "label": "met"}, "needs 'verifier_id'"),
        ({"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "a"}, "needs 'label'"),
        (
            {"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "a", "label": "met", "before": "b.tgz"},
            "before",
        ),
    ],
)
def test_a_bad_row_is_one_error_naming_file_and_line_before_any_judge_call(tmp_path, row, message):
    bench = benchmark(tmp_path / "bench")
    good = {"task_id": "law-1", "verifier_id": "law-1-v1", "answer": "YES", "label": "met"}
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in (good, good, row)) + "\n")
    with ScriptedLLM(script) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json", "--no-record")
        assert llm.requests == []
    assert isinstance(result.exception, AtollError), result.output
    assert str(result.exception).startswith(f"{labels}:3: ") and message in str(result.exception)
    assert not (tmp_path / "out.json").exists()


def test_a_row_with_a_trajectory_and_snapshots_is_graded_on_the_world(tmp_path):
    from tests.grader import factories as f

    bench = write_benchmark(
        tmp_path / "bench",
        tasks=[
            make_task(
                "doc-1",
                expected_output="make_new_doc",
                rubric=[{"verifier_id": "doc-1-v1", "criteria": "memo.txt names the fee cap"}],
            )
        ],
    )
    f.write_snapshot(tmp_path / "before.tar.gz", {"filesystem/a.txt": "a"})
    f.write_snapshot(
        tmp_path / "after.tar.gz", {"filesystem/a.txt": "a", "filesystem/memo.txt": "Fee cap YES"}
    )
    rows = [
        {
            "task_id": "doc-1",
            "verifier_id": "doc-1-v1",
            "trajectory": {"messages": [{"role": "assistant", "content": "done"}]},
            "before": "before.tar.gz",
            "after": "after.tar.gz",
            "label": "met",
        },
        # No world given: the empty world, nothing made.
        {"task_id": "doc-1", "verifier_id": "doc-1-v1", "answer": "YES", "label": "not_met"},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def judge(request: dict) -> dict:  # met when the world shows the memo made
        return MET if "file created: /memo.txt" in json.dumps(request["messages"]) else NOT_MET

    with ScriptedLLM(judge) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json", "--no-record")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["confusion"] == {"tp": 1, "fp": 0, "tn": 1, "fn": 0}


def test_compare_runs_mcnemar_on_two_judges_paired_correctness(tmp_path):
    bench, labels = benchmark(tmp_path / "bench"), labels_file(tmp_path / "labels.jsonl")
    with ScriptedLLM(script) as first, ScriptedLLM(lambda request: MET) as second:
        assert calibrate(bench, labels, first, tmp_path / "a.json", "--no-record").exit_code == 0
        assert (
            calibrate(
                bench, labels, second, tmp_path / "b.json", "--no-record", model="openai/other"
            ).exit_code
            == 0
        )
    result = invoke(
        "judge",
        "compare",
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        "--output",
        str(tmp_path / "c.json"),
    )
    assert result.exit_code == 0, result.output
    comparison = json.loads((tmp_path / "c.json").read_text())
    # A (rule): right on tp 3 + tn 4; B (always met): right on the 5 met-labelled rows (the
    # ungradeable row of A is left out). Both right: the 3 tp; only A: the 4 tn; only B: the
    # 2 fn; both wrong: the fp.
    assert comparison["left_out"] == 1 and comparison["n"] == 10
    assert (comparison["only_a_right"], comparison["only_b_right"], comparison["both_right"]) == (
        4 + 1 - 1,
        2,
        3,
    )
    assert comparison["p_value"] == pytest.approx(0.6875)  # 2·P(X ≤ 2), X ~ Bin(6, ½) = 2·22/64
    assert comparison["a"]["id"] != comparison["b"]["id"]
    other = tmp_path / "other.jsonl"
    labels_file(other, ROWS[:5])
    with ScriptedLLM(script) as llm:
        assert calibrate(bench, other, llm, tmp_path / "d.json", "--no-record").exit_code == 0
    refused = invoke("judge", "compare", str(tmp_path / "a.json"), str(tmp_path / "d.json"))
    assert isinstance(refused.exception, AtollError) and "different labels" in str(refused.exception)


def test_gold_lists_each_failing_gold_output_with_criterion_and_rationale(tmp_path):
    bench = replica.write_directory(tmp_path / "apex")

    def judge(request: dict) -> dict:
        prompt = json.dumps(request["messages"])
        if "tariffs.xlsx" in prompt:
            return {
                "content": json.dumps({"rationale": "the tracker lacks the 25% rate", "verdict": "not_met"})
            }
        return MET

    with ScriptedLLM(judge) as llm:
        result = invoke(
            "judge",
            "gold",
            "--benchmark",
            str(bench),
            "--judge-model",
            "openai/judge",
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--output",
            str(tmp_path / "gold.json"),
        )
    assert result.exit_code == 1, result.output
    assert f"FAIL {replica.FILE_TASK}" in result.stdout and "the tracker lacks the 25% rate" in result.stdout
    assert "gold outputs: 3/4 pass" in result.stdout
    document = json.loads((tmp_path / "gold.json").read_text())
    assert (document["passed"], document["total"]) == (3, 4) and document["judge"]["id"]
    with ScriptedLLM(lambda request: MET) as llm:
        result = invoke(
            "judge",
            "gold",
            "--benchmark",
            str(bench),
            "--judge-model",
            "openai/judge",
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
        )
    assert result.exit_code == 0 and "gold outputs: 4/4 pass" in result.stdout


def test_rows_are_judged_one_after_another_in_file_order(tmp_path):
    bench, labels = benchmark(tmp_path / "bench"), labels_file(tmp_path / "labels.jsonl", ROWS[:4])
    with ScriptedLLM([NOT_MET, MET, MET, NOT_MET]) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json", "--no-record")
        answers = [json.dumps(r["messages"]) for r in llm.requests]
    assert result.exit_code == 0, result.output
    assert [f"({index})" in answer for index, answer in enumerate(answers)] == [True] * 4
    report = json.loads((tmp_path / "out.json").read_text())
    assert [r["verdict"] for r in report["rows_judged"]] == ["not_met", "met", "met", "not_met"]
    assert report["confusion"] == {"tp": 2, "fp": 0, "tn": 1, "fn": 1}  # labels: met ×3, then not_met


def test_calibrate_with_gold_also_grades_every_gold_output(tmp_path):
    bench = replica.write_directory(tmp_path / "apex")
    text_task = replica.tasks()[0]
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps(
            {
                "task_id": text_task["task_id"],
                "verifier_id": text_task["rubric"][0]["verifier_id"],
                "answer": "The liability cap is $2,500,000.",
                "label": "met",
            }
        )
        + "\n"
    )

    def judge(request: dict) -> dict:
        prompt = json.dumps(request["messages"])
        return NOT_MET if "tariffs.xlsx" in prompt else MET

    with ScriptedLLM(judge) as llm:
        result = calibrate(bench, labels, llm, tmp_path / "out.json", "--no-record", "--gold")
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["confusion"] == {"tp": 1, "fp": 0, "tn": 0, "fn": 0}
    assert report["gold"]["failing"] == [replica.FILE_TASK] and report["gold"]["total"] == 4
    assert f"FAIL {replica.FILE_TASK}" in result.stdout
