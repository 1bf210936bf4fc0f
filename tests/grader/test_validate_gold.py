"""`atoll grade validate --benchmark` grades every gold output of a v1 benchmark — text
answers and gold files — per task and per criterion, and refuses to report on nothing."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.testing.scripted_llm import ScriptedLLM
from atoll_cli.cli import app
from tests.atoll import apex_replica as replica
from tests.atoll.factories import make_task, write_benchmark

MET = {"content": json.dumps({"rationale": "the gold shows it", "verdict": "met"})}


def _validate(benchmark: Path, llm: ScriptedLLM, output: Path, *extra: str):
    return CliRunner().invoke(
        app,
        [
            "grade",
            "validate",
            "--benchmark",
            str(benchmark),
            "--judge-model",
            "openai/judge",
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--output",
            str(output),
            *extra,
        ],
        env={"JUDGE_KEY": "x"},
    )


def test_every_v1_gold_output_is_graded_per_task_and_criterion(tmp_path):
    benchmark = replica.write_directory(tmp_path / "apex")
    prompts: list[str] = []

    def judge(request: dict) -> dict:
        prompts.append(
            "\n".join(m["content"] for m in request["messages"] if isinstance(m.get("content"), str))
        )
        return MET

    with ScriptedLLM(judge) as llm:
        result = _validate(benchmark, llm, tmp_path / "report.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    results = {r["task_id"]: r for r in report["gold_results"]}
    assert set(results) == {t["task_id"] for t in replica.tasks()}
    assert report["gold_tasks"] == 4 and report["gold"]["total"] == 5 and report["gold"]["recall"] == 1.0
    text = results[replica.TEXT_TASK]
    assert text["answer"] and text["passed"]
    assert [c["verifier_id"] for c in text["criteria"]] == [
        c["verifier_id"] for c in replica.tasks()[0]["rubric"]
    ]
    assert results[replica.FILE_TASK]["files"] == 1
    # The text gold reached the judge as the answer, the gold workbook as the changed file.
    assert any("The liability cap is $2,500,000" in p for p in prompts)
    assert any("tariffs.xlsx" in p and "25%" in p for p in prompts)
    assert "gold outputs per task" in result.output and "4 of 4 tasks fully met" in result.output


def test_a_benchmark_without_gold_outputs_is_refused(tmp_path):
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task()])
    with ScriptedLLM([MET]) as llm:
        result = _validate(benchmark, llm, tmp_path / "report.json")
        assert llm.requests == []
    assert isinstance(result.exception, AtollError)
    assert "none of the 1 selected tasks has a gold output" in str(result.exception)
    assert not (tmp_path / "report.json").exists()


def test_an_unknown_task_id_is_named(tmp_path):
    benchmark = replica.write_directory(tmp_path / "apex")
    with ScriptedLLM([MET]) as llm:
        result = _validate(benchmark, llm, tmp_path / "report.json", "--task-id", "task_nope")
    assert isinstance(result.exception, AtollError) and "--task-id 'task_nope'" in str(result.exception)
