# ruff: noqa: F811  (a test takes the imported browser fixture `page` as an argument)
"""ATIF with real trials (docs/interop.md): every trial keeps its trajectory as ATIF beside it,
Harbor's own models accept the exports (in Harbor's own interpreter), grading an export gives the
verdicts of the original, and the viewer shows a Harbor job folder's trials."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from typer.testing import CliRunner

from agents_runner import run_agent
from atoll.atif import atif_json, from_atif, to_atif
from atoll.benchmark import Criterion
from atoll.errors import AtollError
from atoll.loader import load_task
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus, Trajectory
from atoll_cli.cli import app
from atoll_cli.commands.view import open_store
from grader import grade_trial
from grader.inputs import load_trajectory
from grader.judge import JudgeConfig
from orchestrator.store import TrialStore
from tests.agents_runner.conftest import TOKEN, FakeWorld, _BearerAuth, build_server, call
from tests.served_app import ServedApp

from .conftest import serve
from .test_viewer_browser import page  # noqa: F401  (the browser fixture)

ROOT = Path(__file__).resolve().parents[3]
FENCE = re.compile(r"\b[0-9a-f]{24}\b")
HARBOR_PYTHON_VARIABLE = "ATOLL_HARBOR_PYTHON"


def _path(uri: str) -> Path:
    return Path(urlparse(uri).path)


@pytest.fixture(scope="module")
def trials(finished_run) -> list[tuple[str, Path, Path, Path]]:
    """(task id, trajectory.json, before manifest, after delta) of each trial of the run whose
    failing task replays a wrong solution."""
    store = TrialStore(finished_run.store_url)
    try:
        found = [
            (
                spec.task_id,
                _path(result.trajectory_uri),
                _path(result.snapshot_before_uri),
                _path(result.snapshot_after_uri),
            )
            for spec, result, _state, _attempts in store.results(finished_run.name)
        ]
    finally:
        store.dispose()
    assert sorted(task for task, *_ in found) == sorted([finished_run.passing, finished_run.failing])
    return found


def test_each_trial_keeps_its_trajectory_as_atif_beside_it(trials):
    for _task, trajectory_path, _before, _after in trials:
        trajectory = Trajectory.model_validate_json(trajectory_path.read_text())
        written = json.loads((trajectory_path.parent / "atif.json").read_text())
        assert written == json.loads(atif_json(trajectory))
        assert written["agent"]["name"] == "replay" and written["session_id"] == trajectory.trial_id
        tool_steps = [step for step in written["steps"] if step.get("tool_calls")]
        assert len(tool_steps) == len(trajectory.tool_calls) > 0
        assert from_atif(written) == trajectory


# --- Harbor's own models ----------------------------------------------------------------------

VALIDATE = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator
report = {}
for path in sys.argv[1:]:
    validator = TrajectoryValidator()
    report[path] = [] if validator.validate(path) else validator.get_errors()
print(json.dumps(report))
"""


def harbor_python() -> str:
    """The interpreter with Harbor's models: $ATOLL_HARBOR_PYTHON, else the .venv-harbor that
    scripts/setup.sh --dev makes beside the virtualenv running the tests (or this checkout's)."""
    named = os.environ.get(HARBOR_PYTHON_VARIABLE)
    candidates = (
        [Path(named)]
        if named
        else [base / ".venv-harbor" / "bin" / "python" for base in (Path(sys.prefix).parent, ROOT)]
    )
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    pytest.fail(
        f"no Python with Harbor's ATIF models at {', '.join(map(str, candidates))}: run "
        f"scripts/setup.sh --dev (it makes .venv-harbor beside .venv; Python >= 3.12 needed), or set "
        f"{HARBOR_PYTHON_VARIABLE}"
    )


def react_run() -> Trajectory:
    """A real react_toolbelt run through litellm against the scripted server: reasoning on each
    turn, a toolbelt change, a tool result, a tool error and a final answer."""
    world = FakeWorld(files={"/Reports/q3.txt": "Q3 revenue: 1,204,330"})
    script = [
        {
            "reasoning_content": "I need the file tool first.",
            "tool_calls": [call("toolbelt_add_tool", tool_name="filesystem_read_text_file")],
            "usage": {"prompt_tokens": 900, "completion_tokens": 40},
        },
        {
            "reasoning_content": "Read the report, and a file that is not there.",
            "tool_calls": [
                call("filesystem_read_text_file", file_path="/Reports/q3.txt"),
                call("filesystem_read_text_file", file_path="/Reports/q4.txt"),
            ],
            "usage": {"prompt_tokens": 1100, "completion_tokens": 60},
        },
        {
            "reasoning_content": "Q3 is known; Q4 is missing.",
            "tool_calls": [call("final_answer", answer="Q3 revenue was 1,204,330.")],
            "usage": {"prompt_tokens": 1300, "completion_tokens": 30},
        },
    ]
    app_ = build_server(world).http_app(path="/mcp")
    with ServedApp(_BearerAuth(app_, TOKEN)) as served, ScriptedLLM(script) as llm:
        trajectory = asyncio.run(
            run_agent(
                model="openai/kimi-k2-thinking",
                api_base=llm.api_base,
                api_key="x",
                gateway_url=f"http://127.0.0.1:{served.port}/mcp",
                gateway_token=TOKEN,
                prompt="What was Q3 revenue?",
                trial_id="react-trial",
            )
        )
    assert trajectory.status is RunStatus.completed, trajectory.error
    assert any(call.is_error for call in trajectory.tool_calls)
    return trajectory


def test_harbors_own_models_accept_the_exports_and_refuse_a_broken_one(trials, tmp_path):
    python = harbor_python()
    react = react_run()
    files = [trajectory.parent / "atif.json" for _task, trajectory, _b, _a in trials]
    files.append(tmp_path / "react.json")
    files[-1].write_text(atif_json(react))
    exported = json.loads(files[-1].read_text())
    agent_steps = [step for step in exported["steps"] if step["source"] == "agent"]
    assert [step["reasoning_content"] for step in agent_steps][:1] == ["I need the file tool first."]
    assert all(step["metrics"]["prompt_tokens"] > 0 for step in agent_steps)
    assert exported["final_metrics"]["total_prompt_tokens"] == 3300
    # The control: an export whose observation names a call of another step.
    broken = json.loads(files[-1].read_text())
    results = [s for s in broken["steps"] if s.get("observation")]
    results[0]["observation"]["results"][0]["source_call_id"] = "call-of-another-step"
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    completed = subprocess.run(
        [python, "-c", VALIDATE, *map(str, files), str(tmp_path / "broken.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, (
        f"{python} could not run Harbor's validator (scripts/setup.sh --dev installs it): {completed.stderr[-2000:]}"
    )
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert {path: report[str(path)] for path in files} == {path: [] for path in files}
    assert any("call-of-another-step" in error for error in report[str(tmp_path / "broken.json")])


# --- grading an export ------------------------------------------------------------------------


def _grade_cli(finished_run, task: str, trajectory: Path, before: Path, after: Path, output: Path) -> dict:
    benchmark = finished_run.root / "bench"
    result = CliRunner().invoke(
        app,
        [
            "grade",
            "--benchmark",
            str(benchmark),
            "--task-id",
            task,
            "--before",
            str(before),
            "--after",
            str(after),
            "--trajectory",
            str(trajectory),
            "--output",
            str(output),
            "--allow-incomplete",
        ],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(output.read_text())


def _verdicts(grade: dict) -> dict[str, tuple]:
    return {
        c["verifier_id"]: (c["verdict"], c.get("decided_by"), c.get("check_verdict"))
        for c in grade["criteria"]
    }


def test_grading_the_atif_export_gives_the_verdicts_of_the_original(finished_run, trials, tmp_path):
    outcomes = set()
    for task, trajectory, before, after in trials:
        original = _grade_cli(finished_run, task, trajectory, before, after, tmp_path / f"{task}-atoll.json")
        exported = _grade_cli(
            finished_run, task, trajectory.parent / "atif.json", before, after, tmp_path / f"{task}-atif.json"
        )
        assert _verdicts(exported) == _verdicts(original)
        assert (exported["passed"], exported["score"]) == (original["passed"], original["score"])
        outcomes.add(original["passed"])
    assert outcomes == {True, False}  # one trial passes, the other fails a criterion


def test_the_judge_sees_the_same_answer_from_the_atif_export(finished_run, trials, tmp_path):
    """The judge reads the trajectory (its final answer): with checks removed it decides every
    criterion, and it is asked the same questions whichever file the trajectory came from
    (the judge here finds a criterion met when the answer it is shown is the trial's)."""
    task_id, trajectory_path, before, after = next(t for t in trials if t[0] == finished_run.failing)
    task = load_task(finished_run.root / "bench", task_id)
    on_answer = Criterion(
        verifier_id="answer", criteria="The final answer says it is done.", grading_target="final_answer"
    )
    rubric = [c.model_copy(update={"check": None}) for c in task.rubric] + [on_answer]
    task = task.model_copy(update={"rubric": rubric})

    def judge(request):
        prompt = "\n".join(str(m.get("content")) for m in request["messages"])
        verdict = "met" if "onerror" in prompt else "not_met"  # the hostile answer this trial gave
        return {"content": json.dumps({"rationale": "read the answer", "verdict": verdict})}

    graded = {}
    for name, path in (("atoll", trajectory_path), ("atif", trajectory_path.parent / "atif.json")):
        with ScriptedLLM(judge) as llm:
            config = JudgeConfig(model="openai/judge", api_base=llm.api_base, api_key="x", retry_wait_s=0.0)
            grade = asyncio.run(grade_trial(task, before, after, load_trajectory(path), config))
            # The same prompts, but for the random fence each grading draws around its evidence.
            prompts = sorted(
                FENCE.sub("FENCE", json.dumps(r["messages"], sort_keys=True)) for r in llm.requests
            )
        graded[name] = ({v.verifier_id: v.verdict.value for v in grade.criteria}, prompts)
    assert graded["atif"] == graded["atoll"]
    # The judge was shown the trial's answer (met on it), and decided the file criteria too.
    assert graded["atoll"][0].pop("answer") == "met" and set(graded["atoll"][0].values()) == {"not_met"}


# --- a Harbor job folder in the viewer --------------------------------------------------------


def _harbor_trial(
    job: Path,
    name: str,
    *,
    task: str,
    trajectory: dict | None,
    reward: str | None = None,
    reward_json: dict | None = None,
    exception: str | None = None,
) -> Path:
    folder = job / name
    (folder / "agent").mkdir(parents=True)
    (folder / "verifier").mkdir()
    result = {
        "task_name": task,
        "trial_name": name,
        "agent_info": {
            "name": "terminus-2",
            "version": "2.0",
            "model_info": {"name": "gpt-5", "provider": "openai"},
        },
        "agent_result": {"n_input_tokens": 10, "n_output_tokens": 2, "cost_usd": 0.01},
    }
    if exception:
        result["exception_info"] = {
            "exception_type": "AgentTimeoutError",
            "exception_message": exception,
            "exception_traceback": "",
            "occurred_at": "2026-11-02T10:05:00Z",
        }
    (folder / "result.json").write_text(json.dumps(result))
    if trajectory is not None:
        (folder / "agent" / "trajectory.json").write_text(json.dumps(trajectory))
    if reward is not None:
        (folder / "verifier" / "reward.txt").write_text(reward)
    if reward_json is not None:
        (folder / "verifier" / "reward.json").write_text(json.dumps(reward_json))
    return folder


def test_the_viewer_shows_a_harbor_job_folders_trials(trials, page, tmp_path):
    job = tmp_path / "jobs" / "2026-11-02__10-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    exported = json.loads((trials[0][1].parent / "atif.json").read_text())
    react = to_atif(react_like()).model_dump(mode="json", exclude_none=True)
    _harbor_trial(job, "budget-review__Ab3dE9q", task="budget-review", trajectory=react, reward="1.0")
    graded = _harbor_trial(
        job,
        "sheet-fix__Zx81PqL",
        task="sheet-fix",
        trajectory=exported,
        reward_json={"reward": 0.5, "c1": 1, "c2": 0},
    )
    # What a v1.1 verifier writes beside the rewards (grader/harbor_verifier.py): the verdicts.
    details = {
        "grading_run_status": "completed",
        "verifier_results": [
            {
                "verifier_id": "c1",
                "score": 1.0,
                "status": "ok",
                "message": "",
                "verifier_result_values": {
                    "verdict": "met",
                    "rationale": "B6 is 0.08",
                    "decided_by": "check",
                },
            },
            {"verifier_id": "c2", "score": 0.0, "status": "ok", "message": ""},
        ],
    }
    (graded / "verifier" / "grade_details.json").write_text(json.dumps(details))
    _harbor_trial(
        job, "sheet-fix__Tm0k2Rw", task="sheet-fix", trajectory=None, exception="agent timed out after 600 s"
    )
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"schema_version": "ATIF-v1.7", "note": "outside the job"}))
    linked = _harbor_trial(job, "linked__Qq9w8e7", task="linked", trajectory=None, reward="1")
    (linked / "agent" / "trajectory.json").symlink_to(secret)

    # What `atoll view jobs/` opens: no atoll.db there, so a store of the jobs in it.
    with pytest.raises(AtollError, match="no trial store found"):
        open_store(tmp_path / "nothing-here", None)
    store, scratch = open_store(tmp_path / "jobs", None)
    assert scratch is not None
    try:
        with serve(store) as url:
            runs = httpx.get(f"{url}/api/runs", timeout=30).json()
            assert [run["name"] for run in runs["runs"]] == [job.name]
            rows = httpx.get(f"{url}/api/runs/{job.name}/trials", timeout=30).json()["trials"]
            by_task: dict[str, list[dict]] = {}
            for row in rows:
                by_task.setdefault(row["task_id"], []).append(row)
            assert sorted(by_task) == ["budget-review", "linked", "sheet-fix"]
            assert [(row["outcome"], row["model"]) for row in by_task["budget-review"]] == [("pass", "gpt-5")]
            assert sorted((row["outcome"], row["score"]) for row in by_task["sheet-fix"]) == [
                ("fail", 0.5),
                ("infra_error", None),
            ]

            def detail(row: dict) -> dict:
                return httpx.get(
                    f"{url}/api/trials/{row['trial_id']}", params={"run": job.name}, timeout=30
                ).json()

            # A link is never followed: the trial is recorded with the problem, nothing read.
            linked_detail = json.dumps(detail(by_task["linked"][0]))
            assert "a link (not followed)" in linked_detail and "outside the job" not in linked_detail
            # The imported ATIF trajectory reads as a transcript: reasoning, tool calls, results.
            passed = detail(by_task["budget-review"][0])
            assert passed["problems"] == []
            steps = [s for s in passed["transcript"]["steps"] if s["kind"] == "assistant"]
            assert steps[0]["reasoning"] == "The report is in /Reports."
            assert steps[0]["tool_calls"][0]["result"] == "Q3 revenue: 1,204,330"
            assert passed["final_answer"] == "Q3 revenue was 1,204,330."
            failed = detail(next(row for row in by_task["sheet-fix"] if row["outcome"] == "fail"))
            assert [(c["verifier_id"], c["verdict"], c["decided_by"]) for c in failed["criteria"]] == [
                ("c1", "met", "check"),
                ("c2", "not_met", "judge"),
            ]
            assert failed["criteria"][0]["rationale"] == "B6 is 0.08"
            assert (failed["grade"]["passed"], failed["grade"]["score"]) == (False, 0.5)
            timed_out = next(row for row in by_task["sheet-fix"] if row["outcome"] == "infra_error")
            assert "agent timed out after 600 s" in json.dumps(detail(timed_out))
            # The trial page renders it in a real browser.
            page.goto(f"{url}/trials/{by_task['budget-review'][0]['trial_id']}?run={job.name}")
            page.wait_for_selector("#transcript .step")
            transcript = page.locator("#transcript").inner_text()
            assert "The report is in /Reports." in transcript and "filesystem_read_text_file" in transcript
            assert page.locator("#final-answer").inner_text() == "Q3 revenue was 1,204,330."
            assert page.errors == []
    finally:
        store.dispose()
        scratch.cleanup()


def react_like() -> Trajectory:
    from tests.atoll.test_atif import react_trajectory

    return react_trajectory()
