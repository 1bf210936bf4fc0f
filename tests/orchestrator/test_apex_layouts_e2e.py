"""`atoll run` end to end on the published APEX-Agents layouts — v1 (tasks_and_rubrics.json,
world zips, task files, gold files) and v1.1 (Harbor task folders, per-subsystem world seeds) —
through the real CLI, local executor, environment, app servers and grader; the agent's model and
the judge are the scripted OpenAI-compatible server behind litellm.  And `atoll grade validate`
grading the v1.1 replica's gold outputs, its gold workbook included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from atoll.llm.preflight import AGENT_MESSAGES
from atoll.testing.scripted_llm import ScriptedLLM
from atoll_cli.cli import app
from orchestrator.store import TrialStore
from tests.atoll import apex_replica as replica

TASKS = {t["task_id"]: t for t in replica.tasks()}
LAW_TASKS = [replica.TEXT_TASK, replica.FILE_TASK]
UNAVAILABLE = [replica.IB_TASK, replica.NULL_OUTPUT_TASK]  # their world lists Edgar SEC and FMP


# `atoll run` first tries each endpoint with the run's own kind of call (atoll.llm.preflight):
# a tool-calling turn for the agent, a verdict on a fixed criterion for the judge.
AGENT_PREFLIGHT = AGENT_MESSAGES[-1]["content"]
JUDGE_PREFLIGHT = "The final answer states that 2 + 2 is 4."


def _user_prompt(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in request["messages"] if m["role"] == "user")


def _agent(request: dict[str, Any]) -> dict[str, Any]:
    """The text task is answered at once; the file task edits the tracker through the
    spreadsheets server first (the loop agent shows the gateway's tools; the model picks one).
    A reply without tool calls is the final answer."""
    prompt = _user_prompt(request)
    if prompt == AGENT_PREFLIGHT:
        return {"content": "ok"}
    usage = {"prompt_tokens": 1000, "completion_tokens": 40}
    if TASKS[replica.TEXT_TASK]["prompt"] in prompt:
        return {"content": TASKS[replica.TEXT_TASK]["gold_response"], "usage": usage}
    assert TASKS[replica.FILE_TASK]["prompt"] in prompt, prompt
    if not any(m["role"] == "tool" for m in request["messages"]):
        tool = next(
            t["function"]["name"]
            for t in request["tools"]
            if t["function"]["name"].endswith("add_content_text")
        )
        return {
            "tool_calls": [
                {
                    "name": tool,
                    "arguments": {
                        "file_path": "/Trackers/tariffs.xlsx",
                        "tab_index": "Rates",
                        "cell": "B2",
                        "value": "25%",
                    },
                }
            ],
            "usage": usage,
        }
    return {"content": "Updated the tariff tracker.", "usage": usage}


def _judge_text(request: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in request["messages"] if isinstance(m.get("content"), str))


def _judge(request: dict[str, Any]) -> dict[str, Any]:
    """Met only when the evidence shows it: the figure in the answer, or the new rate in the
    changed workbook (the criterion's own wording is taken out before looking)."""
    text = _judge_text(request)
    if JUDGE_PREFLIGHT in text:
        return {"content": json.dumps({"rationale": "2 + 2 is 4", "verdict": "met"})}
    evidence = {
        "States the cap is $2,500,000": "$2,500,000",
        "Cites Section 9.2": "9.2",
        "Canada's rate reads 25%": "25%",
    }
    criterion = next(c for c in evidence if c in text)
    met = evidence[criterion] in text.replace(criterion, "")
    return {
        "content": json.dumps({"rationale": f"checked {criterion}", "verdict": "met" if met else "not_met"}),
        "usage": {"prompt_tokens": 800, "completion_tokens": 20},
    }


def _write_layout(layout: str, root: Path) -> Path:
    return replica.write_directory(root) if layout == "v1" else replica.write_v11_directory(root)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["v1", "v1.1"])
def test_atoll_run_on_the_published_layout(layout, tmp_path):
    benchmark = _write_layout(layout, tmp_path / f"apex-{layout}")
    with ScriptedLLM(_agent) as model, ScriptedLLM(_judge) as judge:
        spec = {
            "name": "apex-e2e",
            "benchmark": str(benchmark),
            "skip_unavailable_apps": True,
            "agents": [
                {
                    "name": "loop",
                    "agent": "loop",
                    "model": "openai/scripted",
                    "api_base": model.api_base,
                    "config": {"max_steps": 6},
                }
            ],
            "judge": {"model": "openai/judge", "api_base": judge.api_base},
            "store": str(tmp_path / "store.db"),
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
            "executor": "local",
        }
        path = tmp_path / "exp.yaml"
        path.write_text(yaml.safe_dump(spec))
        result = subprocess.run(
            [sys.executable, "-m", "atoll_cli", "run", str(path), "--quiet"],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "OPENAI_API_KEY": "x"},
        )
        assert result.returncode == 0, result.stderr
        judged = [_judge_text(r) for r in judge.requests]
    results = {s.task_id: r for s, r, _state, _a in TrialStore(spec["store"]).results("apex-e2e")}
    assert sorted(results) == sorted(LAW_TASKS)  # the Edgar SEC/FMP world's tasks were not run
    assert {task: r.outcome.value for task, r in results.items()} == dict.fromkeys(LAW_TASKS, "pass")
    assert results[replica.FILE_TASK].steps >= 2  # the edit, then the answer
    # The judge saw the agent's changed workbook (the world's own tracker, from the task files).
    assert any(
        "tariffs.xlsx" in text and "25%" in text.replace("Canada's rate reads 25%", "") for text in judged
    )

    report = json.loads((tmp_path / "out" / "apex-e2e" / "report.json").read_text())
    assert set(report["excluded_tasks"]) == set(UNAVAILABLE)
    assert all("Edgar SEC" in reason or "edgar_sec" in reason for reason in report["excluded_tasks"].values())
    assert report["metrics"]["overall"]["loop"]["pass_at_1"]["value"] == 1.0


def test_grade_validate_grades_the_v11_gold_outputs_and_gold_files(tmp_path):
    benchmark = replica.write_v11_directory(tmp_path / "apex-v1.1")
    with ScriptedLLM(_judge) as judge:
        result = CliRunner().invoke(
            app,
            [
                "grade",
                "validate",
                "--benchmark",
                str(benchmark),
                "--judge-model",
                "openai/judge",
                "--api-base",
                judge.api_base,
                "--api-key-env",
                "JUDGE_KEY",
                "--output",
                str(tmp_path / "r.json"),
            ],
            env={"JUDGE_KEY": "x"},
        )
        judged = [_judge_text(r) for r in judge.requests]
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    results = {r["task_id"]: r for r in report["gold_results"]}
    assert set(results) == set(TASKS)
    assert report["gold_tasks"] == 4 and report["gold"]["recall"] == 1.0
    assert results[replica.FILE_TASK]["files"] == 1 and results[replica.FILE_TASK]["passed"]
    # The gold workbook from gold_files/ reached the judge as the changed file, 25% in it.
    assert any(
        "tariffs.xlsx" in text and "25%" in text.replace("Canada's rate reads 25%", "") for text in judged
    )
