"""Strict JSON (docs/orchestrator.md, "Strict JSON"): every JSON file a run writes and every reply of
the orchestrator API and the viewer parses with a strict parser — Python's refusing NaN and
Infinity, and Node's ``JSON.parse`` — and an undefined metric is null with its reason beside it.

Two runs share one store: a demo-like run (the sample benchmark, the oracle, the local executor,
programmatic checks only, so a judge-only task is ungradeable and its domain has no graded trial)
and a dry run with ungradeable tasks and infrastructure errors over three runs per task."""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from atoll.experiment import ExperimentSpec
from atoll.jsonio import NonFiniteNumber, loads_strict
from atoll.trial import TrialResult
from orchestrator.api import ApiSettings
from orchestrator.api import create_app as create_api
from orchestrator.regrade import regrade_run
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from orchestrator.store_schema import experiments
from orchestrator.viewer.app import create_app as create_viewer
from tests.atoll.factories import make_task, write_benchmark
from tests.shared_sample import fresh_sample_benchmark

NODE = shutil.which("node") or "/usr/bin/node"
# Parses every path given on stdin (one a line) with JSON.parse; prints those that fail.
_NODE_CHECK = """
const fs = require("fs");
const paths = fs.readFileSync(0, "utf8").split("\\n").filter(Boolean);
const bad = [];
for (const path of paths) {
  try { JSON.parse(fs.readFileSync(path, "utf8")); } catch (error) { bad.push(path + ": " + error.message); }
}
console.log(JSON.stringify({ parsed: paths.length - bad.length, bad }));
"""


def _demo_like(root: Path, store: str) -> ExperimentSpec:
    """Two sample tasks in two domains: one graded by its checks, one with a criterion only a
    judge could decide — the oracle's trial of it is ungradeable without one, so every metric of
    its domain is undefined."""
    benchmark = fresh_sample_benchmark(root / "bench")
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    checked = next(t for t in tasks if all(c.get("check") for c in t["rubric"]))
    judge_only = next(
        t
        for t in tasks
        if t["domain"] != checked["domain"] and any(c.get("check") is None for c in t["rubric"])
    )
    return ExperimentSpec.model_validate(
        {
            "name": "demo-like",
            "benchmark": str(benchmark),
            "tasks": {"ids": [checked["task_id"], judge_only["task_id"]]},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
            "executor": "local",
            "store": store,
            "artifacts": (root / "artifacts").as_uri(),
            "output_dir": str(root / "out"),
        }
    )


def _faulty(root: Path, store: str) -> ExperimentSpec:
    """Three runs of four tasks (dry run): t1 always an infrastructure error, t2 ungradeable,
    failed trials with undecided criteria; a second agent with only infra errors."""
    benchmark = write_benchmark(root / "faulty-bench", tasks=[make_task(f"t{i}") for i in range(4)])
    config = {
        "instant_pass_rate": 0.5,
        "instant_infra_error_tasks": ["t1"],
        "instant_ungradeable_tasks": ["t2"],
        "instant_ungradeable_criteria": 2,
    }
    broken = {"instant_infra_error_tasks": ["t0", "t1", "t2", "t3"]}
    return ExperimentSpec.model_validate(
        {
            "name": "faulty",
            "benchmark": str(benchmark),
            "runs": 3,
            "executor": "instant",
            "agents": [
                {"name": "flaky", "agent": "replay", "model": "replay", "config": config},
                {"name": "broken", "agent": "replay", "model": "replay", "config": broken},
            ],
            "max_infra_retries": 0,
            "infra_error_abort_rate": 1.0,
            "store": store,
            "artifacts": (root / "artifacts").as_uri(),
            "output_dir": str(root / "out"),
        }
    )


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory) -> tuple[Path, str]:
    """The folder holding both runs' outputs and artifacts, and their store's URL; the demo-like
    run is also regraded (checks only), which writes a provenance file and new grades."""
    root = tmp_path_factory.mktemp("strict-json")
    store = f"sqlite:///{root / 'store.db'}"
    asyncio.run(run_experiment(_demo_like(root, store), quiet=True))
    asyncio.run(run_experiment(_faulty(root, store), quiet=True))
    opened = TrialStore(store)
    asyncio.run(regrade_run(opened, "demo-like", output_dir=root / "out" / "demo-like"))
    opened.dispose()
    return root, store


def _api_replies(root: Path, store: str) -> dict[str, bytes]:
    """Every read reply of the orchestrator API and the viewer over the two runs, by path."""
    replies: dict[str, bytes] = {}
    settings = ApiSettings(
        store=store, output_dir=str(root / "api-out"), artifacts=(root / "artifacts").as_uri()
    )
    with TestClient(create_api(settings)) as client:
        paths = ["/health", "/runs"]
        for name in ("demo-like", "faulty"):
            paths += [f"/runs/{name}", f"/runs/{name}/report", f"/runs/{name}/events?format=json"]
            paths += [f"/runs/{name}/webhooks", f"/runs/{name}/webhooks/deliveries"]
        for path in paths:
            replies[f"api {path}"] = _ok(client.get(path))
        # The event stream of a finished run ends (the regraded run's latest event is a regrade:
        # its stream stays open, so its events are read as pages above).
        stream = _ok(client.get("/runs/faulty/events")).decode()
        data = [line[len("data: ") :] for line in stream.splitlines() if line.startswith("data: ")]
        assert len(data) > 24
        for index, line in enumerate(data):
            replies[f"api /runs/faulty/events data {index}"] = line.encode()
    opened = TrialStore(store)
    try:
        with TestClient(create_viewer(opened)) as client:
            paths = ["/api/runs", "/api/compare?a=demo-like&b=faulty", "/api/compare?a=faulty&b=faulty"]
            for name in ("demo-like", "faulty"):
                paths += [f"/api/runs/{name}", f"/api/runs/{name}/trials"]
            for path in paths:
                replies[f"viewer {path}"] = _ok(client.get(path))
            for name in ("demo-like", "faulty"):
                for trial in json.loads(replies[f"viewer /api/runs/{name}/trials"])["trials"]:
                    path = f"/api/trials/{trial['trial_id']}?run={name}"
                    replies[f"viewer {path}"] = _ok(client.get(path))
                    for what in ("trajectory", "grade"):
                        answer = client.get(f"/api/trials/{trial['trial_id']}/download/{what}?run={name}")
                        if answer.status_code == 200:
                            replies[f"viewer {what} of {trial['trial_id']}"] = answer.content
    finally:
        opened.dispose()
    return replies


def _ok(answer: Any) -> bytes:
    assert answer.status_code == 200, f"{answer.request.url}: {answer.status_code} {answer.text[:300]}"
    return answer.content


def test_every_json_file_and_reply_parses_strictly_in_python_and_node(finished_runs, tmp_path):
    root, store = finished_runs
    files = sorted(path for path in root.rglob("*.json") if path.is_file())
    written = {str(path.relative_to(root)) for path in files}
    assert {"out/demo-like/report.json", "out/faulty/report.json"} <= written
    assert any(name.startswith("out/demo-like/regrade-") for name in written)
    assert any(name.endswith("trajectory.json") for name in written)
    assert any(name.endswith("grade.json") for name in written)
    refused = []
    for path in files:
        try:
            loads_strict(path.read_bytes())
        except ValueError as exc:
            refused.append(f"{path.relative_to(root)}: {exc}")
    replies = _api_replies(root, store)
    saved = tmp_path / "replies"
    saved.mkdir()
    for index, (what, body) in enumerate(replies.items()):
        try:
            loads_strict(body)
        except ValueError as exc:
            refused.append(f"{what}: {exc}")
        (saved / f"{index}.json").write_bytes(body)
    assert not refused, "\n".join(refused)

    if not Path(NODE).exists():
        pytest.skip("node is not installed: Python's strict parser alone checked the files")
    every = [*files, *sorted(saved.iterdir())]
    node = subprocess.run(
        [NODE, "-e", _NODE_CHECK],
        input="\n".join(str(path) for path in every),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    verdict = json.loads(node.stdout)
    assert verdict == {"parsed": len(every), "bad": []}


def _undefined_entries(value: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    """Every object that carries an ``undefined`` map, with its path."""
    found = []
    if isinstance(value, dict):
        if "undefined" in value:
            found.append((path, value))
        for key, item in value.items():
            found += _undefined_entries(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _undefined_entries(item, f"{path}[{index}]")
    return found


def test_an_undefined_metric_is_null_with_its_reason_beside_it(finished_runs):
    root, _store = finished_runs
    demo = json.loads((root / "out" / "demo-like" / "report.json").read_text())
    (law,) = (m["oracle"] for m in demo["metrics"]["by_domain"].values() if not m["oracle"]["tasks_graded"])
    assert law["pass_at_1"]["value"] is None and law["pass_at_1"]["tasks"] == 0
    assert law["pass_at_1"]["undefined"]["value"] == "no graded trial (pass or fail) on any of its 1 task(s)"
    faulty = json.loads((root / "out" / "faulty" / "report.json").read_text())
    broken = faulty["metrics"]["overall"]["broken"]
    assert broken["mean_score"]["undefined"]["ci_low"].startswith("no graded trial")
    assert broken["pass_at_k"]["3"]["value"] is None
    for report in (demo, faulty):
        entries = _undefined_entries(report)
        assert entries
        for path, entry in entries:
            for field, reason in entry["undefined"].items():
                assert entry[field] is None and reason, f"{path}.{field}"
    # The Markdown (and so the HTML) shows a dash and the reason.
    markdown = (root / "out" / "faulty" / "report.md").read_text()
    assert "— (no graded trial (pass or fail) on any of its 4 task(s))" in markdown
    assert "— (no graded trial" in (root / "out" / "faulty" / "report.html").read_text()


def test_a_metric_defined_on_no_task_with_k_runs_says_so(finished_runs):
    root, _store = finished_runs
    faulty = json.loads((root / "out" / "faulty" / "report.json").read_text())
    at_3 = faulty["metrics"]["overall"]["flaky"]["pass_at_k"]["3"]
    # t0 and t3 have three graded runs each (t1 failed as infrastructure, t2 was ungradeable):
    # Pass@3 is defined for flaky, over those two tasks.
    assert at_3["tasks"] == 2 and at_3["value"] is not None
    assert "NaN" not in (root / "out" / "faulty" / "report.json").read_text()


def test_reports_of_runs_with_ungradeable_and_infra_error_trials_are_what_the_api_declares(finished_runs):
    """GET /runs/{name}/report serves report.json as written; its OpenAPI model (metrics and
    usage field by field) holds for runs with undefined metrics, several agents and pairs."""
    from atoll.report_document import ReportDocument

    root, _store = finished_runs
    for name in ("demo-like", "faulty"):
        report = ReportDocument.model_validate_json((root / "out" / name / "report.json").read_bytes())
        assert report.metrics.overall and report.agents
    faulty = ReportDocument.model_validate_json((root / "out" / "faulty" / "report.json").read_bytes())
    assert faulty.metrics.pairwise  # several agents: McNemar pairs, typed
    # And the JSON Schema committed for it (docs/schemas/report.schema.json, generated from the model).
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "docs/schemas/report.schema.json").read_text())
    for name in ("demo-like", "faulty"):
        jsonschema.validate(json.loads((root / "out" / name / "report.json").read_text()), schema)


def test_records_written_with_nan_before_still_read(tmp_path):
    """Stores written before strict JSON may hold NaN (Python's json wrote it): they read as
    before; what is written now refuses it."""
    store = TrialStore(f"sqlite:///{tmp_path / 'old.db'}")
    store.save_experiment("old", {"name": "old", "runs": 1})
    with store.engine.begin() as connection:
        connection.execute(
            update(experiments).values(spec_json='{"name": "old", "runs": 1, "threshold": NaN}')
        )
    assert math.isnan(store.run_record("old").spec["threshold"])
    with pytest.raises(NonFiniteNumber, match=r"\$\.threshold is nan"):
        store.save_experiment("new", {"name": "new", "threshold": float("nan")})
    # Results are read by pydantic, which accepts NaN too.
    assert math.isnan(
        TrialResult.model_validate_json('{"trial_id": "t", "outcome": "fail", "score": NaN}').score
    )
    store.dispose()


def test_the_viewer_comparison_says_why_a_delta_is_undefined(finished_runs):
    _root, store = finished_runs
    opened = TrialStore(store)
    try:
        with TestClient(create_viewer(opened)) as client:
            compared = loads_strict(_ok(client.get("/api/compare?a=faulty&b=faulty")))
    finally:
        opened.dispose()
    (broken,) = (pair for pair in compared["pairs"] if pair["agent_a"] == "broken")
    delta = broken["metrics"]["pass_at_1"]
    assert delta["a"] is None and delta["b"] is None and delta["delta"] is None
    assert delta["undefined"]["a"] == "no graded trial (pass or fail) on any of its 4 task(s)"
    assert delta["undefined"]["delta"].startswith("a: no graded trial")
    (flaky,) = (pair for pair in compared["pairs"] if pair["agent_a"] == "flaky")
    assert flaky["metrics"]["pass_at_1"]["delta"] == 0.0 and "undefined" not in flaky["metrics"]["pass_at_1"]
