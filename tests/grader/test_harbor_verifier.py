"""`atoll grade verifier`: atoll's grader under the APEX-Agents v1.1 verifier contract.

A replica v1.1 task is graded twice, by atoll's own `atoll grade` and through the verifier
contract (the task's tests/, /logs/agent/trajectory.json, /logs/world/*_snapshot.tar.gz in,
/logs/verifier/* out): the per-criterion scores agree, and the files validate against the
shapes of the public v1.1 verifier (docs/interop.md), declared here independently of atoll's
writer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict
from typer.testing import CliRunner

from atoll.atif import atif_json, is_atif
from atoll.loader import load_benchmark
from atoll.testing.scripted_llm import ScriptedLLM, refused_api_base
from atoll_cli.cli import app
from grader.gold import build_gold_world
from tests.atoll import apex_replica as replica

NOT_MET_CRITERION = "Cites Section 9.2"


# --- the v1.1 verifier's output shapes (Archipelago's grading-run output, grade.py's files) ---
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifierResult(_Strict):
    verifier_id: str
    verifier_version: int
    score: float
    verifier_result_values: dict[str, Any]
    status: Literal["ok", "error"]
    message: str


class ScoringResult(_Strict):
    final_score: float
    scoring_method_result_values: dict[str, Any]


class GradeDetails(_Strict):
    grading_run_id: str
    grading_run_status: Literal["completed"]
    verifier_results: list[VerifierResult]
    scoring_results: ScoringResult


class GradingErrorFile(_Strict):
    grading_error: Literal[True]
    detail: str


def _judge(request: dict) -> dict:
    """met for every criterion but one, so agreement is checked on both verdicts."""
    verdict = "not_met" if NOT_MET_CRITERION in json.dumps(request) else "met"
    return {"content": json.dumps({"rationale": f"judged {verdict}", "verdict": verdict})}


def _invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env={"JUDGE_KEY": "secret", **(env or {})})


@pytest.fixture(scope="module")
def v11(tmp_path_factory) -> Path:
    return replica.write_v11_directory(tmp_path_factory.mktemp("v11") / "apex-agents-v1.1")


def _task_dir(root: Path, task_id: str) -> Path:
    task = next(t for t in replica.tasks() if t["task_id"] == task_id)
    return root / "tasks" / replica.task_dir_name(task)


def _logs(v11: Path, task_id: str, tmp_path: Path) -> tuple[Path, Path]:
    """A trial's /logs as Harbor leaves it for the verifier (the gold run's world and answer)."""
    benchmark = load_benchmark(v11)
    gold = build_gold_world(benchmark, benchmark.task(task_id), tmp_path / "gold")
    logs = tmp_path / "logs"
    (logs / "agent").mkdir(parents=True)
    (logs / "world").mkdir()
    # The verifier reads the agent's trajectory in ATIF; atoll's own path reads atoll's shape.
    (logs / "agent" / "trajectory.json").write_text(atif_json(gold.trajectory))
    (tmp_path / "atoll-trajectory.json").write_text(gold.trajectory.model_dump_json())
    shutil.copy(gold.before, logs / "world" / "initial_snapshot.tar.gz")
    shutil.copy(gold.after, logs / "world" / "final_snapshot.tar.gz")
    return logs, gold.after


def _verifier_args(v11: Path, task_id: str, logs: Path, *extra: str) -> list[str]:
    return [
        "grade",
        "verifier",
        str(_task_dir(v11, task_id) / "tests"),
        "--trajectory",
        str(logs / "agent" / "trajectory.json"),
        "--snapshots",
        str(logs / "world"),
        "--output-dir",
        str(logs / "verifier"),
        *extra,
    ]


@pytest.mark.parametrize("task_id", [replica.TEXT_TASK, replica.FILE_TASK])
def test_both_paths_agree_criterion_by_criterion(v11, task_id, tmp_path):
    logs, _ = _logs(v11, task_id, tmp_path)
    assert is_atif(json.loads((logs / "agent" / "trajectory.json").read_text()))
    world = logs / "world"
    with ScriptedLLM(_judge) as llm:
        own = _invoke(
            "grade",
            "--benchmark",
            str(v11),
            "--task-id",
            task_id,
            "--before",
            str(world / "initial_snapshot.tar.gz"),
            "--after",
            str(world / "final_snapshot.tar.gz"),
            "--trajectory",
            str(tmp_path / "atoll-trajectory.json"),
            "--judge-model",
            "openai/judge",
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--output",
            str(tmp_path / "grade.json"),
        )
        # The verifier reads its judge as the v1.1 verifier does: the model from GRADING_MODEL,
        # the endpoint and key from the LiteLLM proxy variables.
        contract = _invoke(
            *_verifier_args(v11, task_id, logs),
            env={
                "GRADING_MODEL": "openai/judge",
                "LITELLM_PROXY_API_BASE": llm.api_base,
                "LITELLM_PROXY_API_KEY": "proxy-secret",
            },
        )
        assert llm.request_headers[-1].get("authorization") == "Bearer proxy-secret"
    assert own.exit_code in (0, 4), own.output
    assert contract.exit_code == 0, contract.output
    grade = json.loads((tmp_path / "grade.json").read_text())
    out = logs / "verifier"
    assert sorted(p.name for p in out.iterdir()) == ["grade_details.json", "reward.json", "reward.txt"]
    reward = json.loads((out / "reward.json").read_text())
    details = GradeDetails.model_validate_json((out / "grade_details.json").read_text())
    own_scores = {c["verifier_id"]: 1.0 if c["verdict"] == "met" else 0.0 for c in grade["criteria"]}
    criteria = [
        c["verifier_id"] for c in next(t for t in replica.tasks() if t["task_id"] == task_id)["rubric"]
    ]
    # reward.json: the overall reward, then exactly one float per criterion, equal to atoll's own.
    assert list(reward) == ["reward", *criteria]
    assert all(type(value) is float for value in reward.values())
    assert {k: v for k, v in reward.items() if k != "reward"} == own_scores
    assert reward["reward"] == grade["score"] == details.scoring_results.final_score
    assert (out / "reward.txt").read_text() == str(float(grade["score"]))
    assert {r.verifier_id: r.score for r in details.verifier_results} == own_scores
    assert {r.verifier_id: r.verifier_result_values["verdict"] for r in details.verifier_results} == {
        c["verifier_id"]: c["verdict"] for c in grade["criteria"]
    }
    assert details.grading_run_id == f"gr_{task_id}"
    if task_id == replica.TEXT_TASK:  # one criterion met, one not: a partial reward
        assert sorted(own_scores.values()) == [0.0, 1.0] and reward["reward"] == 0.5


def test_a_missing_trajectory_is_a_grading_error_and_a_planted_reward_never_survives(v11, tmp_path):
    logs, _ = _logs(v11, replica.TEXT_TASK, tmp_path)
    (logs / "agent" / "trajectory.json").unlink()
    out = logs / "verifier"
    out.mkdir()
    (out / "reward.json").write_text('{"reward": 1.0}')
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (out / "reward.txt").symlink_to(victim)  # a link planted where the reward goes
    result = _invoke(*_verifier_args(v11, replica.TEXT_TASK, logs, "--judge-model", "openai/judge"))
    assert result.exit_code == 1, result.output
    assert sorted(p.name for p in out.iterdir()) == ["grading_error.json"]
    error = GradingErrorFile.model_validate_json((out / "grading_error.json").read_text())
    assert "no agent trajectory" in error.detail
    assert victim.read_text() == "untouched"


def test_a_tests_folder_without_its_grading_config_is_a_grading_error(v11, tmp_path):
    """The verifier's own inputs broken (no grading_config.json under /tests): still
    grading_error.json and exit 1, never a missing reward with a usage error."""
    logs, _ = _logs(v11, replica.TEXT_TASK, tmp_path)
    empty = tmp_path / "tests"
    empty.mkdir()
    args = _verifier_args(v11, replica.TEXT_TASK, logs, "--judge-model", "openai/judge")
    args[2] = str(empty)
    result = _invoke(*args)
    assert result.exit_code == 1, result.output
    error = GradingErrorFile.model_validate_json((logs / "verifier" / "grading_error.json").read_text())
    assert "no grading_config.json" in error.detail
    assert not (logs / "verifier" / "reward.txt").exists()


def test_a_file_graded_task_without_its_final_snapshot_is_a_grading_error(v11, tmp_path):
    assert (_task_dir(v11, replica.FILE_TASK) / "tests" / "needs_snapshot").exists()
    logs, _ = _logs(v11, replica.FILE_TASK, tmp_path)
    (logs / "world" / "final_snapshot.tar.gz").write_bytes(b"")  # the collect step broke
    result = _invoke(*_verifier_args(v11, replica.FILE_TASK, logs, "--judge-model", "openai/judge"))
    assert result.exit_code == 1
    error = json.loads((logs / "verifier" / "grading_error.json").read_text())
    assert "final snapshot missing or empty" in error["detail"]
    assert not (logs / "verifier" / "reward.txt").exists()


def test_an_unreachable_judge_is_a_grading_error_not_a_zero(v11, tmp_path):
    logs, _ = _logs(v11, replica.TEXT_TASK, tmp_path)
    result = _invoke(
        *_verifier_args(v11, replica.TEXT_TASK, logs),
        env={"GRADING_MODEL": "openai/judge", "LITELLM_PROXY_API_BASE": refused_api_base()},
    )
    assert result.exit_code == 1, result.output
    assert sorted(p.name for p in (logs / "verifier").iterdir()) == ["grading_error.json"]


def test_an_output_folder_an_input_writer_shares_is_refused(v11, tmp_path):
    logs, _ = _logs(v11, replica.TEXT_TASK, tmp_path)
    args = _verifier_args(v11, replica.TEXT_TASK, logs, "--judge-model", "openai/judge")
    args[args.index("--output-dir") + 1] = str(logs / "agent" / "verifier")
    result = _invoke(*args)
    assert result.exit_code != 0
    assert "overlaps the trajectory folder" in str(result.exception)
    assert not (logs / "agent" / "verifier").exists()


def test_an_oversized_trajectory_is_refused_before_it_is_read(v11, tmp_path, monkeypatch):
    import grader.harbor_verifier as verifier

    logs, _ = _logs(v11, replica.TEXT_TASK, tmp_path)
    monkeypatch.setattr(verifier, "MAX_TRAJECTORY_BYTES", 64)
    result = _invoke(*_verifier_args(v11, replica.TEXT_TASK, logs, "--judge-model", "openai/judge"))
    assert result.exit_code == 1
    assert "larger than 64 bytes" in (logs / "verifier" / "grading_error.json").read_text()


def test_the_judge_endpoint_and_key_never_come_from_the_task_files(monkeypatch):
    from grader.harbor_verifier import judge_from_settings

    monkeypatch.delenv("GRADING_MODEL", raising=False)
    monkeypatch.delenv("LITELLM_PROXY_API_BASE", raising=False)
    monkeypatch.delenv("LITELLM_PROXY_API_KEY", raising=False)
    settings = {
        "llm_judge_model": "openai/gpt-5.2",
        "llm_judge_extra_args": {"api_base": "https://collector.example", "api_key": "k", "top_p": 0.5},
    }
    assert judge_from_settings({"grading_settings": settings}) == {
        "model": "openai/gpt-5.2",
        "extra_args": {"top_p": 0.5},
    }
    monkeypatch.setenv("GRADING_MODEL", "openai/other")
    monkeypatch.setenv("LITELLM_PROXY_API_BASE", "http://proxy:4000")
    monkeypatch.setenv("LITELLM_PROXY_API_KEY", "secret")
    assert judge_from_settings({"grading_settings": settings}) == {
        "model": "openai/other",
        "api_base": "http://proxy:4000",
        "api_key_env": "LITELLM_PROXY_API_KEY",
        "extra_args": {"top_p": 0.5},
    }
