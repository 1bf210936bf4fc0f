"""The run lifecycle over HTTP: idempotent submission, paged and filtered lists of runs and
trials, a run's status and one trial, and the control verbs (cancel, pause, resume, requeue,
re-size, archive), each obeyed by real workers sharing the store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import yaml

from atoll.grade import CriterionVerdict, Grade, Verdict
from atoll.trial import Outcome, TrialResult
from orchestrator.api import ApiSettings, create_app
from orchestrator.runner import run_worker
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark


@pytest.fixture
def benchmark_dir(tmp_path):
    return write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(3)])


@pytest.fixture
def settings(tmp_path):
    return ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path),
    )


def _experiment(benchmark_dir, name="life", config=None, **overrides) -> str:
    fields = {
        "name": name,
        "benchmark": str(benchmark_dir),
        "runs": 2,
        "executor": "instant",
        "agents": [{"name": "oracle", "agent": "replay", "model": "replay", "config": config or {}}],
        "infra_retry_backoff_s": 0,
    }
    fields.update(overrides)
    return yaml.safe_dump(fields)


def _scenario(settings, body):
    """Run ``body(client)`` against the app over ASGI, in one event loop with any workers."""

    async def main():
        app = create_app(settings)
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                return await body(client)
        finally:
            app.state.store.dispose()

    return asyncio.run(main())


async def _post(client, text, **headers):
    return await client.post("/runs", content=text, headers={"Content-Type": "application/yaml", **headers})


async def _until(condition, timeout=30.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


def test_the_same_idempotency_key_and_request_get_the_first_reply_and_another_request_a_409(
    settings, benchmark_dir
):
    async def body(client):
        # A submission that fails frees its key: the client fixes the request and sends it again.
        bad = await _post(client, _experiment(benchmark_dir, runs=0), **{"Idempotency-Key": "k-1"})
        assert bad.status_code == 400
        first = await _post(client, _experiment(benchmark_dir), **{"Idempotency-Key": "k-1"})
        assert first.status_code == 202 and first.json()["enqueued"] == 6
        # A second submission would say "enqueued 0": the stored reply is served instead.
        again = await _post(client, _experiment(benchmark_dir), **{"Idempotency-Key": "k-1"})
        assert again.status_code == 202 and again.json() == first.json()
        other = await _post(client, _experiment(benchmark_dir, runs=3), **{"Idempotency-Key": "k-1"})
        assert other.status_code == 409
        assert other.json()["error"]["code"] == "idempotency_conflict"
        assert "'k-1'" in other.json()["error"]["message"]
        # Without a key, posting again is a (harmless) second submission.
        plain = await _post(client, _experiment(benchmark_dir))
        assert plain.status_code == 202 and plain.json()["enqueued"] == 0
        assert (await _post(client, "x", **{"Idempotency-Key": "bad key"})).status_code == 400

    _scenario(settings, body)


def test_runs_are_listed_in_pages_filtered_by_state_and_prefix(settings, benchmark_dir):
    async def body(client):
        for name in ("alpha-1", "alpha-2", "beta-1"):
            assert (await _post(client, _experiment(benchmark_dir, name=name))).status_code == 202
        first = (await client.get("/runs", params={"limit": 2})).json()
        assert [run["name"] for run in first["runs"]] == ["alpha-1", "alpha-2"]
        assert first["total"] == 3 and first["next_offset"] == 2
        last = (await client.get("/runs", params={"limit": 2, "offset": 2})).json()
        assert [run["name"] for run in last["runs"]] == ["beta-1"] and last["next_offset"] is None
        prefixed = (await client.get("/runs", params={"prefix": "alpha"})).json()
        assert prefixed["total"] == 2 and {run["state"] for run in prefixed["runs"]} == {"queued"}
        await run_worker(settings.store, experiment="beta-1", executor_name="instant", quiet=True)
        finished = (await client.get("/runs", params={"state": "finished"})).json()
        assert [run["name"] for run in finished["runs"]] == ["beta-1"]
        assert finished["runs"][0]["counts"]["done"] == 6
        assert (await client.get("/runs", params={"state": "nonsense"})).status_code == 422
        assert (await client.get("/runs", params={"limit": 0})).status_code == 422

    _scenario(settings, body)


def test_status_says_progress_eta_cost_judge_and_fingerprint(settings, benchmark_dir):
    async def body(client):
        text = _experiment(
            benchmark_dir, config={"instant_cost_usd": 0.25}, judge={"model": "openai/judge-model"}
        )
        assert (await _post(client, text)).status_code == 202
        queued = (await client.get("/runs/life")).json()
        assert queued["state"] == "queued" and queued["progress"] == {"done": 0, "total": 6, "fraction": 0.0}
        assert queued["eta"] == {"seconds": None, "reason": "no trial has finished yet"}
        assert queued["judge"]["model"] == "openai/judge-model" and len(queued["judge_id"]) == 16
        assert len(queued["fingerprint"]) == 64
        await run_worker(settings.store, executor_name="instant", quiet=True)
        done = (await client.get("/runs/life")).json()
        assert done["state"] == "finished" and done["progress"]["fraction"] == 1.0
        assert done["eta"]["seconds"] == 0.0 and done["cost_usd"] == pytest.approx(1.5)
        missing = await client.get("/runs/nope")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_run"

    _scenario(settings, body)


def test_trials_are_paged_and_filtered_and_one_trial_has_verdicts_and_artifact_links(
    settings, benchmark_dir, tmp_path
):
    async def body(client):
        text = _experiment(benchmark_dir, config={"instant_pass_rate": 0.5})
        assert (await _post(client, text)).status_code == 202
        await run_worker(settings.store, executor_name="instant", quiet=True)
        page = (await client.get("/runs/life/trials", params={"limit": 4})).json()
        assert page["total"] == 6 and len(page["trials"]) == 4 and page["next_offset"] == 4
        rest = (await client.get("/runs/life/trials", params={"offset": 4})).json()
        every = page["trials"] + rest["trials"]
        assert len({trial["trial_id"] for trial in every}) == 6
        passed = [trial for trial in every if trial["outcome"] == "pass"]
        only_passed = (await client.get("/runs/life/trials", params={"outcome": "pass"})).json()
        assert only_passed["total"] == len(passed)
        assert {trial["outcome"] for trial in only_passed["trials"]} <= {"pass"}
        task = (await client.get("/runs/life/trials", params={"task": "t1", "agent": "oracle"})).json()
        assert task["total"] == 2 and {trial["task_id"] for trial in task["trials"]} == {"t1"}
        assert (await client.get("/runs/life/trials", params={"agent": "nobody"})).json()["total"] == 0

        # One trial, its result pointing at a real grade file.
        trial_id = every[0]["trial_id"]
        grade_path = tmp_path / "grade.json"
        grade = Grade(
            task_id="t0",
            criteria=[
                CriterionVerdict(
                    verifier_id="v1", criterion="names the parties", verdict=Verdict.met, rationale="it does"
                )
            ],
            passed=True,
            score=1.0,
        )
        grade_path.write_text(grade.model_dump_json())
        store = TrialStore(settings.store)
        try:
            result = TrialResult(
                trial_id=trial_id,
                outcome=Outcome.passed,
                score=1.0,
                run_status="completed",
                grade_uri=grade_path.as_uri(),
                trajectory_uri="file:///nowhere/trajectory.json",
                finished_at=datetime.now(UTC),
            )
            store.replace_result("life", trial_id, result, note="test")
        finally:
            store.dispose()
        detail = (await client.get(f"/runs/life/trials/{trial_id}")).json()
        assert detail["outcome"] == "pass" and detail["end_reason"] == "completed"
        assert detail["verdicts"][0]["verifier_id"] == "v1" and detail["verdicts"][0]["verdict"] == "met"
        assert detail["artifacts"]["grade"] == grade_path.as_uri()
        assert detail["artifacts"]["trajectory"] == "file:///nowhere/trajectory.json"
        unknown = await client.get("/runs/life/trials/abc")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_trial"

    _scenario(settings, body)


def test_a_paused_run_gives_no_trial_to_workers_and_a_resumed_one_does(settings, benchmark_dir):
    async def body(client):
        assert (await _post(client, _experiment(benchmark_dir))).status_code == 202
        paused = await client.post("/runs/life/pause")
        assert paused.status_code == 200 and paused.json()["state"] == "paused"
        store = TrialStore(settings.store)
        try:
            # Neither a worker of this run nor one of every run leases anything of it.
            assert store.lease("w", limit=10, lease_s=60, experiment="life") == []
            assert store.lease("w", limit=10, lease_s=60) == []
            assert (await client.get("/runs/life")).json()["eta"]["reason"] == "the run is paused"
            resumed = await client.post("/runs/life/resume")
            assert resumed.json()["state"] == "queued"
            leased = store.lease("w", limit=1, lease_s=60)
            assert len(leased) == 1
            store.release(leased)
        finally:
            store.dispose()
        summary = await run_worker(settings.store, executor_name="instant", quiet=True)
        assert summary.completed == 6
        assert (await client.post("/runs/nope/pause")).status_code == 404

    _scenario(settings, body)


def test_cancel_with_stop_ends_the_running_trial_and_cancels_the_pending_ones(settings, benchmark_dir):
    async def body(client):
        text = _experiment(benchmark_dir, config={"instant_delay_s": 600})
        assert (await _post(client, text)).status_code == 202
        worker = asyncio.create_task(
            run_worker(settings.store, executor_name="instant", concurrency=2, quiet=True)
        )

        async def two_running():
            return (await client.get("/runs/life")).json()["counts"]["leased"] == 2

        await _until(two_running)
        cancelled = await client.post("/runs/life/cancel", json={"in_flight": "stop"})
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["trials_changed"] == 4 and cancelled.json()["stopped"] == 2
        # The worker stops its two trials (they would run ten minutes) and exits: nothing left.
        summary = await asyncio.wait_for(worker, timeout=30)
        assert summary.cancelled == 2 and summary.completed == 0
        status = (await client.get("/runs/life")).json()
        assert status["state"] == "cancelled" and status["counts"]["cancelled"] == 6
        assert status["stop"]["reason"] == "cancelled"
        assert status["eta"] == {"seconds": None, "reason": "the run is cancelled"}
        banner = (await client.get("/runs/life/report")).json()["banner"]
        assert banner["title"] == "CANCELLED" and banner["unfinished"] == 6
        assert "`atoll resume RUN`" in banner["message"]
        # Resume undoes it: the cancelled trials are pending again.
        resumed = (await client.post("/runs/life/resume")).json()
        assert resumed["trials_changed"] == 6 and resumed["counts"]["pending"] == 6

    _scenario(settings, body)


def test_cancel_lets_running_trials_finish_by_default(settings, benchmark_dir):
    async def body(client):
        text = _experiment(benchmark_dir, config={"instant_delay_s": 1.0})
        assert (await _post(client, text)).status_code == 202
        worker = asyncio.create_task(run_worker(settings.store, executor_name="instant", concurrency=1))

        async def one_running():
            return (await client.get("/runs/life")).json()["counts"]["leased"] == 1

        await _until(one_running)
        cancelled = (await client.post("/runs/life/cancel")).json()
        assert cancelled["trials_changed"] == 5 and cancelled["stopped"] == 0
        summary = await asyncio.wait_for(worker, timeout=30)
        assert summary.completed == 1 and summary.cancelled == 0
        counts = (await client.get("/runs/life")).json()["counts"]
        assert counts["done"] == 1 and counts["cancelled"] == 5
        # A finished run has nothing to cancel.
        await client.post("/runs/life/resume")
        await run_worker(settings.store, executor_name="instant", quiet=True)
        refused = await client.post("/runs/life/cancel")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_not_active"

    _scenario(settings, body)


def test_cancelling_again_keeps_what_the_first_cancel_did_and_a_retry_logs_nothing(settings, benchmark_dir):
    async def body(client):
        text = _experiment(benchmark_dir, config={"instant_delay_s": 600})
        assert (await _post(client, text)).status_code == 202
        worker = asyncio.create_task(run_worker(settings.store, executor_name="instant", concurrency=1))

        async def one_running():
            return (await client.get("/runs/life")).json()["counts"]["leased"] == 1

        await _until(one_running)
        first = (await client.post("/runs/life/cancel")).json()
        assert first["trials_changed"] == 5
        stop = (await client.get("/runs/life")).json()["stop"]
        assert stop["detail"] == "cancelled: 5 trials not run, 1 running trials left to finish"
        # A client retrying its cancel changes nothing: the stop and the event log stay.
        again = (await client.post("/runs/life/cancel")).json()
        assert again["state"] == "cancelled" and again["trials_changed"] == 0
        assert (await client.get("/runs/life")).json()["stop"] == stop
        # Then stopping the trial it let finish: both cancels counted.
        stopped = (await client.post("/runs/life/cancel", json={"in_flight": "stop"})).json()
        assert stopped["stopped"] == 1
        await asyncio.wait_for(worker, timeout=30)
        after = (await client.get("/runs/life")).json()["stop"]
        assert after["detail"] == "cancelled: 5 trials not run, 1 running trials stopped"
        assert after["at"] == stop["at"]
        events = (await client.get("/runs/life/events?format=json")).json()["events"]
        cancels = [event["payload"] for event in events if event["type"] == "run.cancelled"]
        assert [(item["cancelled"], item["stopped"]) for item in cancels] == [(5, 0), (0, 1)]

    _scenario(settings, body)


def test_requeue_makes_errored_trials_pending_again(settings, benchmark_dir):
    async def body(client):
        text = _experiment(benchmark_dir, config={"instant_infra_error_tasks": ["t0"]}, max_infra_retries=0)
        assert (await _post(client, text)).status_code == 202
        await run_worker(settings.store, executor_name="instant", quiet=True)
        assert (await client.get("/runs/life")).json()["counts"]["infra_error"] == 2
        requeued = await client.post("/runs/life/requeue")
        assert requeued.status_code == 200
        assert requeued.json()["trials_changed"] == 2 and requeued.json()["counts"]["pending"] == 2
        errored = (await client.get("/runs/life/trials", params={"state": "pending"})).json()
        assert {trial["task_id"] for trial in errored["trials"]} == {"t0"}

    _scenario(settings, body)


def test_concurrency_can_be_changed_while_running_and_every_worker_obeys_it(settings, benchmark_dir):
    async def body(client):
        assert (await _post(client, _experiment(benchmark_dir))).status_code == 202
        resized = await client.patch("/runs/life", json={"concurrency": 2})
        assert resized.status_code == 200 and resized.json()["action"] == "concurrency"
        assert (await client.get("/runs/life")).json()["concurrency"] == 2
        store = TrialStore(settings.store)
        try:
            assert len(store.lease("w1", limit=5, lease_s=60, experiment="life")) == 2
            assert store.lease("w2", limit=5, lease_s=60, experiment="life") == []  # another worker too
            await client.patch("/runs/life", json={"concurrency": 3})
            assert len(store.lease("w2", limit=5, lease_s=60, experiment="life")) == 1
            await client.patch("/runs/life", json={"concurrency": None})
            assert len(store.lease("w2", limit=5, lease_s=60, experiment="life")) == 3
        finally:
            store.dispose()
        assert (await client.patch("/runs/life", json={"concurrency": 0})).status_code == 422
        assert (await client.patch("/runs/life", json={})).status_code == 422

    _scenario(settings, body)


def test_an_archived_run_is_not_resumed_or_requeued_behind_the_run_list(settings, benchmark_dir):
    async def body(client):
        text = _experiment(benchmark_dir, config={"instant_infra_error_tasks": ["t0"]}, max_infra_retries=0)
        assert (await _post(client, text)).status_code == 202
        assert (await client.post("/runs/life/pause")).status_code == 200
        assert (await client.post("/runs/life/archive")).status_code == 200  # paused: nothing runs
        for verb in ("resume", "requeue"):
            refused = await client.post(f"/runs/life/{verb}")
            assert refused.status_code == 409, verb
            assert refused.json()["error"]["code"] == "run_not_active" and "archived" in refused.text
        status = (await client.get("/runs/life")).json()
        assert status["state"] == "paused" and status["counts"]["pending"] == 6
        store = TrialStore(settings.store)
        try:
            assert store.lease("w", limit=6, lease_s=60, experiment="life") == []
        finally:
            store.dispose()

    _scenario(settings, body)


def test_an_archived_run_leaves_the_default_list_and_keeps_its_data(settings, benchmark_dir):
    async def body(client):
        assert (await _post(client, _experiment(benchmark_dir))).status_code == 202
        refused = await client.post("/runs/life/archive")
        assert refused.status_code == 409 and "cancel or pause it first" in refused.json()["error"]["message"]
        await run_worker(settings.store, executor_name="instant", quiet=True)
        archived = await client.post("/runs/life/archive")
        assert archived.status_code == 200
        assert (await client.get("/runs")).json()["runs"] == []
        listed = (await client.get("/runs", params={"include_archived": True})).json()["runs"]
        assert [run["name"] for run in listed] == ["life"] and listed[0]["archived"] is True
        status = (await client.get("/runs/life")).json()
        assert status["archived"] is True and status["counts"]["done"] == 6
        assert (await client.get("/runs/life/trials")).json()["total"] == 6

    _scenario(settings, body)


def test_a_finished_run_is_deleted_with_its_artifact_folders_once_and_only_with_the_token(tmp_path):
    from orchestrator.artifacts import ArtifactStore
    from tests.orchestrator.stored_worlds import run_trials, spec_for

    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}", benchmark_roots=str(tmp_path), api_token="s3cret"
    )
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    store = TrialStore(settings.store)
    try:
        stored = run_trials(store, artifacts, "life", [spec_for("life", "t1", "w1")], {"w1": {"a": b"1"}})
        store.enqueue([spec_for("life", "t2", "w1")])  # pending: the run is queued
    finally:
        store.dispose()
    folder = Path(artifacts.root, stored.folders[0])
    token = {"Authorization": "Bearer s3cret"}

    async def body(client):
        queued = await client.delete("/runs/life", headers=token)
        assert queued.status_code == 409 and queued.json()["error"]["code"] == "run_not_active"
        assert "queued" in queued.json()["error"]["message"] and folder.is_dir()
        cancelled = await client.post("/runs/life/cancel", json={"in_flight": "stop"}, headers=token)
        assert cancelled.status_code == 200

        assert (await client.delete("/runs/life")).status_code == 401
        assert (await client.get("/runs/life", headers=token)).status_code == 200  # untouched
        deleted = await client.delete("/runs/life", params={"gc": "false"}, headers=token)
        assert deleted.status_code == 200, deleted.text
        report = deleted.json()
        assert report["rows"]["trials"] == 2 and report["rows"]["experiments"] == 1
        assert report["folders"] == [artifacts.uri(stored.folders[0])] and report["gc"] is None
        assert not folder.exists()
        assert (await client.get("/runs/life", headers=token)).status_code == 404
        again = await client.delete("/runs/life", headers=token)
        assert again.status_code == 404 and again.json()["error"]["code"] == "unknown_run"

    _scenario(settings, body)


def test_every_lifecycle_route_needs_the_token_when_one_is_set(tmp_path, benchmark_dir):
    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}", benchmark_roots=str(tmp_path), api_token="s3cret"
    )

    async def body(client):
        routes = [
            ("GET", "/runs"),
            ("GET", "/runs/life"),
            ("GET", "/runs/life/trials"),
            ("GET", "/runs/life/trials/abc"),
            ("POST", "/runs/life/cancel"),
            ("POST", "/runs/life/pause"),
            ("POST", "/runs/life/resume"),
            ("POST", "/runs/life/requeue"),
            ("POST", "/runs/life/archive"),
            ("PATCH", "/runs/life"),
            ("DELETE", "/runs/life"),
        ]
        for method, path in routes:
            refused = await client.request(method, path, json={"concurrency": 2})
            assert refused.status_code == 401, (method, path)
        allowed = await client.post("/runs/life/pause", headers={"Authorization": "Bearer s3cret"})
        assert allowed.status_code == 404  # past the token: no such run

    _scenario(settings, body)


def test_offsets_and_event_ids_beyond_the_stores_integers_are_refused_not_a_500(settings, benchmark_dir):
    huge = 10**30

    async def body(client):
        assert (await _post(client, _experiment(benchmark_dir))).status_code == 202
        for path in (
            f"/runs?offset={huge}",
            f"/runs/life/trials?offset={huge}",
            f"/runs/life/trials?offset={2**63}",
            f"/runs/life/events?format=json&after={huge}",
            f"/runs/life/webhooks/deliveries?after={huge}",
        ):
            refused = await client.get(path)
            assert refused.status_code == 422, path
        for header in ("9" * 40, "9" * 5000, "\u00b2"):
            refused = await client.get(
                "/runs/life/events?format=json", headers=[(b"Last-Event-ID", header.encode())]
            )
            assert refused.status_code == 400, header[:10]
            assert refused.json()["error"]["code"] == "bad_last_event_id"
        # The largest position the store takes is still a (last, empty) page.
        last = await client.get(f"/runs/life/trials?offset={2**63 - 1}")
        assert last.status_code == 200 and last.json()["trials"] == []

    _scenario(settings, body)


def test_every_route_but_health_needs_the_token_when_one_is_set(tmp_path):
    """Read from the served OpenAPI document, so a route added later is covered too."""
    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}", benchmark_roots=str(tmp_path), api_token="s3cret"
    )

    async def body(client):
        paths = (await client.get("/openapi.json")).json()["paths"]
        asked = 0
        for template, operations in paths.items():
            path = template.replace("{name}", "life").replace("{trial_id}", "abc")
            for method in operations:
                answer = await client.request(method.upper(), path + "?format=json", json={"url": "x"})
                if template == "/health":
                    assert answer.status_code == 200
                    continue
                assert answer.status_code == 401, (method, template)
                asked += 1
        assert asked >= 16  # runs, status, trials, verbs, report, events, webhooks, deliveries

    _scenario(settings, body)
