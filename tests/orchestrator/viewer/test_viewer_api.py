"""`atoll view`'s JSON API, through real HTTP on loopback, over a finished run."""

import gzip
import io
import socket
import subprocess
import sys
import zipfile

import httpx
import pytest

from atoll.errors import AtollError
from atoll_cli.commands.view import resolve_store
from orchestrator.store import TrialStore
from orchestrator.viewer import create_app

pytestmark = pytest.mark.slow
PASSING, FAILING = "keystone-01-packaging-baseline", "keystone-02-update-targets"
HOSTILE_ANSWER = 'Done <script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
SHEET = "filesystem/Data/Raw/Halvorsen spend cube FY2023 (final_v3).xlsx"


def _trial_id(viewer_url, task_id):
    rows = httpx.get(f"{viewer_url}/api/runs/viewdemo/trials").json()["trials"]
    return next(row["trial_id"] for row in rows if row["task_id"] == task_id)


def test_runs_list_names_status_counts_and_times(viewer_url):
    body = httpx.get(f"{viewer_url}/api/runs").json()
    assert [run["name"] for run in body["runs"]] == ["viewfixed", "viewdemo"]  # oldest first
    run = body["runs"][1]
    assert run["status"] == "finished"
    assert run["counts"]["done"] == run["counts"]["total"] == 2
    assert run["outcomes"] == {"pass": 1, "fail": 1} and run["cost_usd"] == 0.0
    assert run["created_at"] <= run["started_at"] <= run["ended_at"] and run["fingerprint"]
    assert run["spec"]["agents"] == [{"name": "oracle", "agent": "replay", "model": "replay"}]


def test_run_has_leaderboard_matrix_and_grouped_failures(viewer_url):
    run = httpx.get(f"{viewer_url}/api/runs/viewdemo").json()
    assert [row["agent"] for row in run["leaderboard"]] == ["oracle"]
    assert run["leaderboard"][0]["pass_at_1"]["value"] == 0.5
    cells = run["matrix"]["cells"]["oracle"]
    assert cells[PASSING]["passes"] == 1 and cells[FAILING]["passes"] == 0 and cells[FAILING]["graded"] == 1
    assert [(g["reason"], g["count"]) for g in run["failures"]] == [("fail: criteria not met", 1)]
    assert run["failures"][0]["trials"][0]["task_id"] == FAILING
    [criterion] = run["failure_analysis"]["criterion"]  # the one criterion the failed trial missed
    assert criterion["key"].startswith(f"{FAILING}-c2: ") and criterion["trials"] == [
        run["failures"][0]["trials"][0]["trial_id"]
    ]
    # That criterion is graded on one named file: its target kind, as `atoll run` stored it.
    assert run["failure_analysis"]["target_kind"] == [
        {"key": "file", "count": 1, "trials": criterion["trials"]}
    ]


def test_trial_table_rows_carry_what_the_table_shows(viewer_url):
    rows = httpx.get(f"{viewer_url}/api/runs/viewdemo/trials").json()["trials"]
    assert sorted(row["task_id"] for row in rows) == [PASSING, FAILING]
    failed = next(row for row in rows if row["task_id"] == FAILING)
    assert failed["outcome"] == "fail" and failed["end_reason"] == "completed" and failed["domain"]
    assert failed["steps"] >= 2 and failed["tool_calls"] == 2 and failed["duration_s"] > 0
    assert 0 < failed["score"] < 1


def test_trial_shows_transcript_verdicts_and_the_sheet_cells_changed(viewer_url):
    trial = httpx.get(f"{viewer_url}/api/trials/{_trial_id(viewer_url, FAILING)}").json()
    assert trial["problems"] == []
    assert trial["transcript"]["prompt"].startswith("Dmitri emailed revised category savings targets")
    calls = [call for step in trial["transcript"]["steps"] for call in step["tool_calls"]]
    assert [c["name"] for c in calls] == ["mail_search_mail", "spreadsheets_edit_spreadsheet"]
    assert calls[1]["arguments"]["operations"][2] == {
        "type": "set_cell",
        "sheet": "Assumptions",
        "cell": "B6",
        "value": 0.07,
    }
    assert calls[0]["result"] and calls[0]["duration_s"] is not None
    # The answer is data in the JSON, exactly as the agent wrote it; the page must escape it.
    assert trial["final_answer"] == HOSTILE_ANSWER
    verdicts = {c["verifier_id"].rsplit("-", 1)[1]: c for c in trial["criteria"]}
    assert verdicts["c2"]["verdict"] == "not_met" and verdicts["c2"]["decided_by"] == "check"
    assert "expected 0.08" in verdicts["c2"]["rationale"]
    assert verdicts["c3"]["verdict"] == "ungradeable"
    [sheet] = [f for f in trial["world_diff"]["files"] if f["path"] == SHEET]
    assert sheet["change"] == "modified"
    changes = {(c["sheet"], c["cell"]): (c["before"], c["after"]) for c in sheet["cell_changes"]}
    assert changes[("sheet 'Assumptions'", "B6")] == ("0.1", "0.07")
    assert changes[("sheet 'Assumptions'", "C6")][1] == "CPO email 27 Feb"
    # Only the four edited cells are changes; the 21 formulas of the summary sheet kept their
    # formula (the writer filled in their computed values): counted, and listed apart.
    assert sorted(changes) == [("sheet 'Assumptions'", c) for c in ("B5", "B6", "C5", "C6")]
    assert sheet["formulas_unchanged"] == 21 == len(sheet["formula_cells"])
    assert {c["sheet"] for c in sheet["formula_cells"]} == {"sheet 'Summary'"}
    assert [a["outcome"] for a in trial["attempts"]] == ["fail"]


def test_downloads_are_the_recorded_artifacts_and_snapshot_files_are_opaque(viewer_url):
    trial_id = _trial_id(viewer_url, FAILING)
    after = httpx.get(f"{viewer_url}/api/trials/{trial_id}/download/after")
    assert after.status_code == 200 and gzip.decompress(after.content)
    assert (
        httpx.get(f"{viewer_url}/api/trials/{trial_id}/download/trajectory").json()["final_answer"]
        == HOSTILE_ANSWER
    )
    sheet = httpx.get(f"{viewer_url}/api/trials/{trial_id}/file/after", params={"path": SHEET})
    assert sheet.status_code == 200 and zipfile.is_zipfile(io.BytesIO(sheet.content))
    # Whatever the agent wrote is a download, never a page of this site.
    assert sheet.headers["content-type"] == "application/octet-stream"
    assert sheet.headers["content-disposition"].startswith("attachment;")
    for bad in ("filesystem/../../etc/passwd", "/etc/passwd", "filesystem/nope.txt"):
        refused = httpx.get(f"{viewer_url}/api/trials/{trial_id}/file/after", params={"path": bad})
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "unknown_file"
    assert httpx.get(f"{viewer_url}/api/trials/{trial_id}/download/secrets").status_code == 404


def test_unknown_run_and_trial_are_404_in_the_error_shape_and_name_the_runs_known(viewer_url):
    missing = httpx.get(f"{viewer_url}/api/runs/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_run"
    assert "runs known: viewfixed, viewdemo" in missing.json()["error"]["message"]
    assert httpx.get(f"{viewer_url}/api/runs/nope/trials").status_code == 404
    trial = httpx.get(f"{viewer_url}/api/trials/{'0' * 64}")
    assert trial.status_code == 404 and trial.json()["error"]["code"] == "unknown_trial"


def test_pages_are_served_with_a_policy_that_forbids_inline_script(viewer_url):
    for path in ("/", "/runs/viewdemo", f"/trials/{_trial_id(viewer_url, PASSING)}"):
        page = httpx.get(viewer_url + path)
        assert page.status_code == 200 and "/static/app.js" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(f"{viewer_url}/static/app.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(f"{viewer_url}/static/..%2fapp.py").status_code == 404
    # DNS rebinding: a page on another name that resolves to loopback gets nothing.
    assert httpx.get(f"{viewer_url}/api/runs", headers={"Host": "evil.example"}).status_code == 421


def test_a_token_guards_every_route_and_a_browser_keeps_it_in_a_cookie(finished_run):
    from fastapi.testclient import TestClient

    store = TrialStore(finished_run.store_url)
    client = TestClient(create_app(store, token="s3cret"), base_url="http://127.0.0.1")
    assert client.get("/api/runs").status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/?token=s3cret").status_code == 200
    assert client.get("/api/runs").status_code == 200  # the cookie set above
    store.dispose()


def test_view_finds_the_demo_store_from_its_output_folder(tmp_path, monkeypatch):
    demo = tmp_path / "atoll-out" / "demo"
    (demo / "demo").mkdir(parents=True)
    (demo / "atoll.db").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    found = str((demo / "atoll.db").resolve())
    assert resolve_store(None, None, environ={}) == found  # `atoll view` right after `atoll demo`
    assert resolve_store(demo, None, environ={}) == found  # `atoll view atoll-out/demo`
    assert resolve_store(demo / "demo", None, environ={}) == found  # the run's report folder
    assert resolve_store(None, "postgresql://db/x", environ={}) == "postgresql://db/x"
    with pytest.raises(AtollError, match="no trial store found"):
        resolve_store(tmp_path / "elsewhere", None, environ={})


def test_view_prints_one_listening_line_and_a_port_in_use_is_one_line_and_exit_2(finished_run):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    refused = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "view", str(finished_run.root), "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    busy.close()
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"error: port {port} on 127.0.0.1 is already in use; stop that process or pick --port"
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", "view", str(finished_run.root), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stderr.readline()
        assert line.startswith("atoll view (store ") and line.rstrip().endswith(
            f" listening on http://127.0.0.1:{port}"
        )
        assert (
            httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=30).json()["runs"][1]["name"] == "viewdemo"
        )
    finally:
        server.terminate()
        _out, rest = server.communicate(timeout=30)
    assert "listening on" not in rest  # the line came once
    beyond = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "view", str(finished_run.root), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_without_token(),
    )
    assert beyond.returncode == 2 and "ATOLL_VIEW_TOKEN" in beyond.stderr


def _without_token():
    import os

    return {k: v for k, v in os.environ.items() if k != "ATOLL_VIEW_TOKEN"}


def test_a_store_password_never_reaches_a_page_or_a_message(postgres_url):
    from fastapi.testclient import TestClient

    with_password = postgres_url.replace("postgres@", "postgres:hunter2@")  # trust auth: any password works
    store = TrialStore(with_password)
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    listing = client.get("/api/runs")
    assert listing.status_code == 200 and "***" in listing.json()["store"]
    missing = client.get("/api/runs/nope")
    assert missing.status_code == 404 and "***" in missing.json()["error"]["message"]
    assert "hunter2" not in listing.text + missing.text + client.get("/api/trials/abc").text
    store.dispose()


def test_compare_gives_per_task_changes_metric_deltas_and_the_paired_test(viewer_url):
    body = httpx.get(f"{viewer_url}/api/compare", params={"a": "viewdemo", "b": "viewfixed"}).json()
    assert body["a"]["name"] == "viewdemo" and body["b"]["name"] == "viewfixed" and body["notes"] == []
    [pair] = body["pairs"]
    assert pair["agent_a"] == pair["agent_b"] == "oracle"
    changes = {task["task_id"]: task["change"] for task in pair["tasks"]}
    # The right solution meets every check, but one criterion needs a judge (none here): the
    # trial is ungradeable, so it cannot be paired with the failed one.
    assert changes == {FAILING: "not comparable", PASSING: "same"}
    failing = next(task for task in pair["tasks"] if task["task_id"] == FAILING)
    counted = ("passes", "graded", "runs", "outcomes", "unfinished")
    assert {k: failing["a"][k] for k in counted} == {
        "passes": 0,
        "graded": 1,
        "runs": 1,
        "outcomes": ["fail"],
        "unfinished": 0,
    }
    assert {k: failing["b"][k] for k in counted} == {
        "passes": 0,
        "graded": 0,
        "runs": 1,
        "outcomes": ["ungradeable"],
        "unfinished": 0,
    }
    assert [t["outcome"] for t in failing["a"]["trials"]] == ["fail"]
    assert pair["metrics"]["pass_at_1"] == {"a": 0.5, "b": 1.0, "delta": 0.5}
    assert pair["metrics"]["cost_usd"] == {
        "a": 0.0,
        "b": 0.0,
        "delta": 0.0,
        "a_text": "$0.0000",  # as each run's leaderboard writes it (no tokens: a known zero)
        "b_text": "$0.0000",
    }
    # One paired graded (task, run) outcome, concordant: McNemar has nothing to count.
    assert {k: pair["mcnemar"][k] for k in ("pairs", "a_only", "b_only")} == {
        "pairs": 1,
        "a_only": 0,
        "b_only": 0,
    }
    assert pair["mcnemar"]["p_value"] == 1.0 and pair["mcnemar"]["significant"] is False
    reverse = httpx.get(f"{viewer_url}/api/compare", params={"a": "viewfixed", "b": "viewdemo"}).json()
    assert reverse["pairs"][0]["metrics"]["pass_at_1"]["delta"] == -0.5
    missing = httpx.get(f"{viewer_url}/api/compare", params={"a": "viewdemo", "b": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_run"


def test_pages_of_an_unknown_run_or_trial_are_404_and_say_what_is_missing(viewer_url):
    for path, says in (
        ("/runs/nope", "no run named 'nope'"),
        (f"/trials/{'0' * 64}", "no trial '000"),
        (f"/trials/{_trial_id(viewer_url, PASSING)}?run=nope", "in run 'nope'"),
        ("/compare?a=viewdemo&b=nope", "no run named 'nope'"),
    ):
        page = httpx.get(viewer_url + path)
        assert page.status_code == 404, path
        assert says in page.text and "/static/app.js" in page.text, path
    hostile = httpx.get(viewer_url + "/runs/%3Cscript%3Ealert(1)")
    assert (
        hostile.status_code == 404
        and "<script>alert" not in hostile.text
        and "&lt;script&gt;alert" in hostile.text
    )
    assert httpx.get(viewer_url + "/compare").status_code == 400
    assert httpx.get(viewer_url + "/compare?a=viewdemo&b=viewfixed").status_code == 200


def test_a_stopped_run_carries_the_reports_banner(stopped_run):
    from orchestrator.report import build_report, render_markdown

    from .conftest import STOP_DETAIL, STOPPED_RUN, serve

    with serve(stopped_run) as url:
        run = httpx.get(f"{url}/api/runs/{STOPPED_RUN}").json()
    banner = run["banner"]
    assert banner["kind"] == "aborted" and banner["title"] == "ABORTED" and banner["unfinished"] == 1
    assert STOP_DETAIL in banner["message"] and "run the experiment again to resume" in banner["message"]
    # The words report.md opens with, from the same function.
    report = build_report(stopped_run, STOPPED_RUN)
    assert report["banner"] == banner
    assert f"> **ABORTED**{banner['message']}" in render_markdown(report)


def test_a_finished_run_has_no_banner(viewer_url):
    assert httpx.get(f"{viewer_url}/api/runs/viewdemo").json()["banner"] is None


def test_every_reply_is_what_its_model_and_committed_json_schema_say(viewer_url):
    """Each route's reply validates against its model in atoll.viewer_api and the JSON Schema
    committed for it in docs/schemas (generated from the model)."""
    import json
    from pathlib import Path

    import jsonschema

    from atoll import viewer_api

    schemas = Path(__file__).resolve().parents[3] / "docs" / "schemas"
    trial_id = _trial_id(viewer_url, FAILING)
    replies = {
        "viewer_runs": (viewer_api.ViewerRuns, "/api/runs"),
        "viewer_run": (viewer_api.ViewerRun, "/api/runs/viewdemo"),
        "viewer_run_trials": (viewer_api.ViewerRunTrials, "/api/runs/viewdemo/trials"),
        "viewer_trial": (viewer_api.ViewerTrial, f"/api/trials/{trial_id}"),
        "viewer_compare": (viewer_api.ViewerCompare, "/api/compare?a=viewdemo&b=viewfixed"),
    }
    for name, (model, path) in replies.items():
        reply = httpx.get(f"{viewer_url}{path}")
        assert reply.status_code == 200, path
        model.model_validate_json(reply.content)
        schema = json.loads((schemas / f"{name}.schema.json").read_text(encoding="utf-8"))
        jsonschema.validate(reply.json(), schema)
    row = viewer_api.ViewerRunTrials.model_validate_json(
        httpx.get(f"{viewer_url}/api/runs/viewdemo/trials").content
    ).trials[0]
    assert row.state == "done" and row.outcome in ("pass", "fail")  # typed: TrialState, Outcome
