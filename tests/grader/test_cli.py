"""`atoll grade`, `atoll grade validate` and `atoll grade serve` end to end (real CLI, real HTTP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from atoll.errors import AtollError
from atoll.loader import load_benchmark
from atoll.testing.scripted_llm import ScriptedLLM
from grader import JudgeConfig
from grader.gold import build_gold_world
from grader.service import create_app
from tests.grader import factories as f
from tests.served_app import ServedApp
from tests.shared_sample import fresh_sample_benchmark

ATOLL = [sys.executable, "-m", "atoll_cli"]
MET = {"content": json.dumps({"rationale": "ok", "verdict": "met"})}


def atoll(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "JUDGE_KEY": "secret", **(env or {})}
    return subprocess.run([*ATOLL, *args], capture_output=True, text=True, env=environment, timeout=300)


def atoll_in_process(*args: str) -> subprocess.CompletedProcess:
    """The same command in this process (no second litellm import): Typer's test runner."""
    from typer.testing import CliRunner

    from atoll_cli.cli import app

    result = CliRunner().invoke(app, list(args), env={"JUDGE_KEY": "secret"})
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return fresh_sample_benchmark(tmp_path_factory.mktemp("sample"))


@pytest.mark.slow
def test_grade_command_on_a_gold_world(sample, tmp_path):
    benchmark = load_benchmark(sample)
    task = benchmark.task("keystone-07-headcount-email")
    gold = build_gold_world(benchmark, task, tmp_path / "gold")
    trajectory = tmp_path / "trajectory.json"
    trajectory.write_text(gold.trajectory.model_dump_json())
    with ScriptedLLM([MET, MET, MET]) as llm:
        result = atoll(
            "grade",
            "--benchmark",
            str(sample),
            "--task-id",
            task.task_id,
            "--before",
            str(gold.before),
            "--after",
            str(gold.after),
            "--trajectory",
            str(trajectory),
            "--judge-model",
            "openai/judge",
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--output",
            str(tmp_path / "grade.json"),
        )
        assert result.returncode == 0, result.stderr
        assert llm.request_headers[0].get("authorization") == "Bearer secret"
    grade = json.loads((tmp_path / "grade.json").read_text())
    assert grade["passed"] is True and grade["score"] == 1.0 and grade["task_id"] == task.task_id
    assert grade["changes"]["mails_sent"][0]["to"] == ["margaret.okonkwo@halvorsenfoods.example"]
    assert "PASS" in result.stderr


@pytest.mark.slow
def test_grade_command_accepts_archipelago_shapes(tmp_path):
    before = f.write_zip(tmp_path / "original.zip", {"Reports/a.txt": "draft"})
    after = f.write_zip(tmp_path / "final.zip", {"Reports/a.txt": "final figures: 42"})
    verifiers = tmp_path / "verifiers.json"
    verifiers.write_text(
        json.dumps(
            [
                {
                    "verifier_id": "ver_001",
                    "verifier_version": 1,
                    "world_id": None,
                    "task_id": "my_task",
                    "eval_config_id": "ec_output_llm",
                    "verifier_index": 0,
                    "verifier_values": {"criteria": "The report states 42", "is_primary_objective": True},
                },
            ]
        )
    )
    trajectory = tmp_path / "trajectory.json"
    trajectory.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "Do it"},
                    {"role": "assistant", "content": "Updated the report: 42."},
                ],
                "output": {},
                "status": "completed",
                "time_elapsed": 12.5,
            }
        )
    )
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"llm_judge_model": "openai/judge", "llm_judge_extra_args": {"max_tokens": 300}})
    )
    with ScriptedLLM([MET]) as llm:
        result = atoll_in_process(
            "grade",
            "--rubric",
            str(verifiers),
            "--prompt",
            "Update the report",
            "--before",
            str(before),
            "--after",
            str(after),
            "--trajectory",
            str(trajectory),
            "--judge-config",
            str(settings),
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--output",
            str(tmp_path / "grade.json"),
        )
        assert result.returncode == 0, result.stderr
        request = llm.requests[0]
    assert request["max_tokens"] == 300
    assert "final figures: 42" in request["messages"][-1]["content"]
    assert "Updated the report: 42." in request["messages"][-1]["content"]
    grade = json.loads((tmp_path / "grade.json").read_text())
    assert grade["criteria"][0]["verifier_id"] == "ver_001" and grade["criteria"][0]["verdict"] == "met"
    assert grade["changes"]["files"][0]["path"] == "filesystem/Reports/a.txt"


def test_grade_command_exits_4_naming_an_ungradeable_grade(tmp_path):
    """A grade that leaves its outcome undecided (no judge for a criterion only a judge can
    decide) is written, and the exit status tells a pipeline it is not a verdict."""
    before = f.write_zip(tmp_path / "before.zip", {"Reports/a.txt": "draft"})
    after = f.write_zip(tmp_path / "after.zip", {"Reports/a.txt": "final figures: 42"})
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps([{"verifier_id": "v1", "criteria": "The report states 42"}]))
    common = ("grade", "--rubric", str(rubric), "--before", str(before), "--after", str(after))
    result = atoll_in_process(*common, "--answer", "done", "--output", str(tmp_path / "grade.json"))
    assert result.returncode == 4, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("grade task: incomplete: 1 trial is ungradeable")
    assert json.loads((tmp_path / "grade.json").read_text())["criteria"][0]["verdict"] == "ungradeable"
    relaxed = atoll_in_process(
        *common, "--answer", "done", "--output", str(tmp_path / "again.json"), "--allow-incomplete"
    )
    assert relaxed.returncode == 0 and "--allow-incomplete: exit status 0" in relaxed.stderr


def test_grade_command_user_errors_are_one_line(tmp_path):
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps(
            {
                "task_id": "t",
                "world_id": "w",
                "prompt": "p",
                "rubric": [{"verifier_id": "v", "criteria": "c"}],
            }
        )
    )
    result = atoll(
        "grade",
        "--task",
        str(task),
        "--before",
        str(tmp_path / "nope.tar.gz"),
        "--after",
        str(tmp_path / "nope.tar.gz"),
        "--output",
        str(tmp_path / "g.json"),
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip().splitlines()[-1] == f"error: snapshot {tmp_path / 'nope.tar.gz'}: no such file"
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"task_id": "t", "world_id": "w", "prompt": "p", "rubric": []}')
    result = atoll("grade", "--task", str(bad), "--before", "x", "--after", "x", "--output", "y")
    assert result.returncode == 2 and "rubric is empty" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_validate_command_reports_metrics(sample, tmp_path):
    labelled = tmp_path / "labels.jsonl"
    labelled.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"output": "Total is 63", "criterion": "States 63 GOOD", "label": "met"},
                {"output": "Total is 60", "criterion": "States 63 BAD", "label": "not_met"},
                {
                    "output": "Total is 63",
                    "criterion": "States 63 BAD-but-true",
                    "label": True,
                },  # judge wrong: FN
                {
                    "output": "No idea",
                    "criterion": "States 63 GOOD-but-false",
                    "label": False,
                },  # judge wrong: FP
            ]
        )
    )

    def script(request: dict) -> dict:
        text = request["messages"][-1]["content"]
        return (
            MET
            if "GOOD" in text or "Fresno" in text or "63" in text and "BAD" not in text
            else {"content": json.dumps({"rationale": "no", "verdict": "not_met"})}
        )

    with ScriptedLLM(script) as llm:
        result = atoll_in_process(
            "grade",
            "validate",
            "--benchmark",
            str(sample),
            "--task-id",
            "keystone-07-headcount-email",
            "--labelled",
            str(labelled),
            "--judge-model",
            "openai/judge",
            "--api-base",
            llm.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--output",
            str(tmp_path / "report.json"),
        )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["gold"]["total"] == 3 and report["gold"]["recall"] == 1.0
    labelled_metrics = report["labelled"]
    assert labelled_metrics["accuracy"] == 0.5 and labelled_metrics["precision"] == 0.5
    assert labelled_metrics["false_positive_rate"] == 0.5 and labelled_metrics["false_negative_rate"] == 0.5
    assert "accuracy" in result.stdout


# --- serve -------------------------------------------------------------------------------------


@pytest.fixture
def grader_server():
    """The grading service on a free loopback port; yields (base url, scripted judge)."""
    llm = ScriptedLLM([MET]).start()
    app = create_app(JudgeConfig(model="openai/judge", api_base=llm.api_base, api_key="x"))
    with ServedApp(app) as served:
        yield served.url, llm
    llm.stop()


@pytest.mark.slow
def test_serve_grades_uploaded_snapshots(grader_server, tmp_path):
    url, llm = grader_server
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
    after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/a.txt": "b"})
    task = {
        "task_id": "t",
        "world_id": "w",
        "prompt": "Change a.txt",
        "rubric": [
            {"verifier_id": "v1", "criteria": "a.txt says b"},
            {
                "verifier_id": "v2",
                "criteria": "answer",
                "check": {"kind": "answer_regex", "pattern": "done"},
                "check_only": True,
            },
        ],
    }
    trajectory = f.trajectory("done").model_dump_json()
    assert httpx.get(f"{url}/health").json() == {"status": "ok"}
    with before.open("rb") as b, after.open("rb") as a:
        response = httpx.post(
            f"{url}/grade",
            data={"task": json.dumps(task), "trajectory": trajectory},
            files={"before": b, "after": a},
            timeout=60,
        )
    assert response.status_code == 200, response.text
    grade = response.json()
    assert grade["passed"] is True and [c["decided_by"] for c in grade["criteria"]] == ["judge", "check"]
    assert len(llm.requests) == 1


def test_serve_rejects_bad_input_with_a_clear_error(grader_server, tmp_path):
    url, _ = grader_server
    junk = tmp_path / "junk"
    junk.write_text("not an archive")
    task = {"task_id": "t", "world_id": "w", "prompt": "p", "rubric": [{"verifier_id": "v", "criteria": "c"}]}
    with junk.open("rb") as b, junk.open("rb") as a:
        response = httpx.post(
            f"{url}/grade", data={"task": json.dumps(task)}, files={"before": b, "after": a}
        )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "snapshot_unreadable"
    response = httpx.post(f"{url}/grade", data={"task": "{"}, files={"before": b"x", "after": b"x"})
    assert response.status_code == 400 and "field task" in response.json()["error"]["message"]


def test_labelled_metrics_arithmetic():
    from atoll.grade import Verdict
    from grader.validate import compute_metrics

    metrics = compute_metrics(
        [(Verdict.met, True)] * 8
        + [(Verdict.met, False)] * 2
        + [(Verdict.not_met, True)]
        + [(Verdict.not_met, False)] * 9
        + [(Verdict.ungradeable, True)]
    )
    assert (metrics.total, metrics.graded, metrics.ungradeable) == (21, 20, 1)
    assert metrics.accuracy == pytest.approx(17 / 20) and metrics.precision == pytest.approx(8 / 10)
    assert metrics.recall == pytest.approx(8 / 9) and metrics.f1 == pytest.approx(
        2 * 0.8 * (8 / 9) / (0.8 + 8 / 9)
    )
    assert metrics.false_positive_rate == pytest.approx(
        2 / 11
    ) and metrics.false_negative_rate == pytest.approx(1 / 9)
    assert metrics.undefined == {}


def test_undefined_labelled_metrics_are_null_with_their_reasons():
    """Strict JSON (docs/orchestrator.md): what cannot be computed is null and says why."""
    from atoll.grade import Verdict
    from atoll.jsonio import loads_strict, model_json
    from grader.validate import compute_metrics

    metrics = compute_metrics([(Verdict.not_met, False)] * 3)
    written = loads_strict(model_json(metrics))
    assert written["precision"] is None and written["false_negative_rate"] is None
    assert written["accuracy"] == 1.0 and written["false_positive_rate"] == 0.0
    assert written["undefined"]["precision"] == "the judge said met on no row (tp + fp = 0)"
    assert written["undefined"]["false_negative_rate"] == "no decided row's reference is met (fn + tp = 0)"
    assert {name for name, value in written.items() if value is None} == set(written["undefined"])
    nothing = loads_strict(model_json(compute_metrics([(Verdict.ungradeable, True)])))
    assert nothing["accuracy"] is None and nothing["undefined"]["accuracy"] == "no decided rows"


async def test_client_grades_through_the_service(grader_server, tmp_path):
    from atoll.errors import AtollError
    from grader.client import grade_remote

    url, _ = grader_server
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
    after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/a.txt": "b"})
    task = f.task([{"verifier_id": "v1", "criteria": "a.txt changed"}])
    grade = await grade_remote(url, task, before, after, f.trajectory("done"))
    assert grade.passed and grade.changes.files[0].path == "filesystem/a.txt"
    junk = tmp_path / "junk"
    junk.write_text("x")
    with pytest.raises(AtollError, match="neither a tar.gz nor a zip") as error:
        await grade_remote(url, task, junk, junk)
    assert error.value.code == "grader_rejected"


@pytest.mark.parametrize(
    "checks_only", [{"model": None}, {"none": True}], ids=["wire-form", "older-wire-form"]
)
def test_serve_grades_by_checks_alone_when_the_judge_request_has_no_model(
    grader_server, tmp_path, checks_only
):
    url, llm = grader_server
    snapshot = f.write_snapshot(tmp_path / "s.tar.gz", {"filesystem/a.txt": "a"})
    task = f.task(
        [
            {"verifier_id": "v1", "criteria": "judged"},
            {"verifier_id": "v2", "criteria": "c", "check": {"kind": "answer_regex", "pattern": "done"}},
        ]
    )
    data = {
        "task": task.model_dump_json(),
        "trajectory": f.trajectory("done").model_dump_json(),
        "judge": json.dumps(checks_only),
    }
    with snapshot.open("rb") as b, snapshot.open("rb") as a:
        response = httpx.post(f"{url}/grade", data=data, files={"before": b, "after": a}, timeout=60)
    assert response.status_code == 200, response.text
    verdicts = {c["verifier_id"]: (c["verdict"], c["decided_by"]) for c in response.json()["criteria"]}
    assert verdicts["v2"] == ("met", "check") and verdicts["v1"][0] == "ungradeable"
    assert llm.requests == []


def test_serve_rejects_a_mistyped_judge_field_naming_it(grader_server, tmp_path):
    url, llm = grader_server
    task = f.task([{"verifier_id": "v1", "criteria": "c"}])
    response = httpx.post(
        f"{url}/grade",
        data={"task": task.model_dump_json(), "judge": json.dumps({"samples": "many"})},
        files={"before": b"x", "after": b"x"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_input"
    assert "field judge: samples" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "judge_request",
    [
        lambda elsewhere: {"api_base": elsewhere},
        lambda elsewhere: {"extra_args": {"api_base": elsewhere}},
        lambda elsewhere: {"extra_args": {"base_url": elsewhere}},
        lambda elsewhere: {"extra_args": {"fallbacks": [{"model": "openai/x", "api_base": elsewhere}]}},
        lambda elsewhere: {"extra_args": {"context_window_fallbacks": [{"api_base": elsewhere}]}},
        lambda elsewhere: {"extra_args": {"model_list": [{"litellm_params": {"api_base": elsewhere}}]}},
        lambda elsewhere: {"extra_args": {"extra_headers": {"X-Forward-To": elsewhere}}},
        lambda elsewhere: {"extra_args": {"http_proxy": elsewhere}},
        lambda elsewhere: {"api_base": elsewhere, "api_key_secret": "NOT_PROVISIONED"},
        lambda elsewhere: {"api_base": elsewhere, "api_key": "sk-caller"},
        lambda elsewhere: {"api_base": elsewhere, "model": "azure/gpt-4o"},
        lambda elsewhere: {"api_base": elsewhere.replace("http://", "http://127.0.0.1@")},
    ],
    ids=[
        "api_base",
        "extra_args.api_base",
        "extra_args.base_url",
        "fallbacks",
        "context_window_fallbacks",
        "model_list",
        "extra_headers",
        "http_proxy",
        "unknown secret",
        "inline key",
        "other provider",
        "userinfo",
    ],
)
def test_serve_refuses_to_send_its_judge_key_to_an_endpoint_the_caller_picks(
    grader_server, tmp_path, judge_request
):
    url, llm = grader_server
    elsewhere = ScriptedLLM([MET]).start()  # the caller's endpoint, which would receive the key
    try:
        task = f.task([{"verifier_id": "v1", "criteria": "c"}])
        before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
        after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/a.txt": "b"})
        with before.open("rb") as b, after.open("rb") as a:
            response = httpx.post(
                f"{url}/grade",
                data={"task": task.model_dump_json(), "judge": json.dumps(judge_request(elsewhere.api_base))},
                files={"before": b, "after": a},
                timeout=60,
            )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "bad_input"
        assert "field judge." in response.json()["error"]["message"]
        assert elsewhere.requests == [] and llm.requests == []
    finally:
        elsewhere.stop()


def test_an_operator_allows_further_judge_endpoints():
    from atoll.llm.admission import judge_from_request

    default = JudgeConfig(model="openai/judge", api_base="http://proxy:4000/v1", api_key="k")
    allowed = {"http://vllm:8000/v1"}
    chosen = judge_from_request({"api_base": "http://vllm:8000/v1"}, default, allowed_api_bases=allowed)
    assert chosen.api_base == "http://vllm:8000/v1"
    same = judge_from_request({"api_base": "http://proxy:4000/v1"}, default, allowed_api_bases=allowed)
    assert same.api_base == "http://proxy:4000/v1"
    with pytest.raises(AtollError, match="ATOLL_GRADER_ALLOWED_API_BASES"):
        judge_from_request({"api_base": "http://evil:1/v1"}, default, allowed_api_bases=allowed)
