"""The orchestrator's HTTP API: enqueue experiments, read counts and reports."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from fastapi.testclient import TestClient

from atoll.judge import CHECKS_ONLY_IDENTITY, PROMPT_VERSION
from orchestrator.api import ApiSettings, create_app
from orchestrator.runner import run_worker
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


def _experiment(benchmark_dir, **overrides) -> str:
    fields = {
        "name": "api-run",
        "benchmark": str(benchmark_dir),
        "runs": 2,
        "executor": "instant",
        "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
    }
    fields.update(overrides)
    return yaml.safe_dump(fields)


def test_post_enqueues_then_workers_execute_and_the_report_is_built_on_demand(settings, benchmark_dir):
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").json() == {"status": "ok"}
        posted = client.post(
            "/runs", content=_experiment(benchmark_dir), headers={"Content-Type": "application/yaml"}
        )
        assert posted.status_code == 202, posted.text
        assert posted.json()["planned"] == 6 and posted.json()["enqueued"] == 6
        assert posted.json()["counts"]["pending"] == 6
        # Posting the same experiment again plans the same trials and enqueues nothing new.
        again = client.post("/runs", content=_experiment(benchmark_dir))
        assert again.json()["enqueued"] == 0

        runs = client.get("/runs").json()["runs"]
        assert [(run["name"], run["counts"]) for run in runs] == [("api-run", posted.json()["counts"])]
        # A worker sharing the store executes the trials (dry-run executor here).
        summary = asyncio.run(run_worker(settings.store, executor_name="instant", quiet=True))
        assert summary.completed == 6
        run = client.get("/runs/api-run").json()
        assert run["counts"]["done"] == 6 and run["artifacts"] == settings.artifacts
        report = client.get("/runs/api-run/report")
        assert report.status_code == 200
        body = report.json()
        assert body["agents"]["oracle"]["trials"] == 6
        assert body["agents"]["oracle"]["finished"] == 6


def test_bad_experiment_and_unknown_run_are_clear_errors(settings, benchmark_dir):
    with TestClient(create_app(settings)) as client:
        bad = client.post("/runs", content=_experiment(benchmark_dir, runs=0, colour="red"))
        assert bad.status_code == 400
        message = bad.json()["error"]["message"]
        assert "runs: " in message and "colour: Extra inputs are not permitted" in message
        assert client.post("/runs", content="[1, 2").status_code == 400
        slurm = client.post("/runs", content=_experiment(benchmark_dir, executor="slurm"))
        assert slurm.status_code == 400 and "unknown executor 'slurm'" in slurm.json()["error"]["message"]
        assert client.get("/runs").json()["runs"] == []  # nothing was stored for it
        missing = client.get("/runs/nope")
        assert missing.status_code == 404 and "no run named 'nope'" in missing.json()["error"]["message"]
        assert client.get("/runs/nope/report").status_code == 404


def test_token_protects_everything_but_health(tmp_path, benchmark_dir):
    settings = ApiSettings(store=f"sqlite:///{tmp_path / 'api.db'}", api_token="s3cret")
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/runs").status_code == 401
        assert client.get("/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_a_changed_configuration_is_a_conflict_unless_replace_is_asked(settings, benchmark_dir):
    with TestClient(create_app(settings)) as client:
        assert client.post("/runs", content=_experiment(benchmark_dir)).status_code == 202
        edited = _experiment(
            benchmark_dir,
            agents=[{"name": "oracle", "agent": "replay", "model": "replay", "config": {"max_steps": 7}}],
        )
        refused = client.post("/runs", content=edited)
        assert refused.status_code == 409
        assert "already exists with another configuration" in refused.json()["error"]["message"]
        replaced = client.post("/runs?replace=true", content=edited)
        assert replaced.status_code == 202 and replaced.json()["archived"] == 6
        assert replaced.json()["counts"]["pending"] == 6 and replaced.json()["counts"]["total"] == 6


def test_another_judge_is_a_conflict_naming_the_judge_change_and_regrade(settings, benchmark_dir):
    with TestClient(create_app(settings)) as client:
        assert client.post("/runs", content=_experiment(benchmark_dir)).status_code == 202
        refused = client.post("/runs", content=_experiment(benchmark_dir, judge={"model": "openai/judge-b"}))
        assert refused.status_code == 409
        message = refused.json()["error"]["message"]
        checks_only = CHECKS_ONLY_IDENTITY.describe()
        assert f"judge: {checks_only} → openai/judge-b ({PROMPT_VERSION}" in message
        assert "atoll regrade api-run --judge-model openai/judge-b" in message and "--new-run NAME" in message


def test_a_flood_of_report_requests_costs_a_build_or_two_and_none_is_stale(
    settings, benchmark_dir, monkeypatch
):
    """A report is seconds of CPU on a large run; twelve clients asking at once used to start
    twelve builds side by side. Now builds go one at a time and a request is answered by a build
    that began after it arrived: a build or two for the flood, and a later request sees the
    trials finished since."""
    import httpx

    from orchestrator import report

    builds = []
    real_write_report = report.write_report

    def counted(*args, **kwargs):
        builds.append(args[1])
        return real_write_report(*args, **kwargs)

    monkeypatch.setattr(report, "write_report", counted)
    app = create_app(settings)

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            posted = await client.post("/runs", content=_experiment(benchmark_dir, runs=1))
            assert posted.status_code == 202, posted.text
            first = await client.get("/runs/api-run/report")
            assert first.json()["agents"]["oracle"]["finished"] == 0
            await run_worker(settings.store, executor_name="instant", quiet=True)
            flood = await asyncio.gather(*(client.get("/runs/api-run/report") for _ in range(12)))
            assert {answer.status_code for answer in flood} == {200}
            assert {answer.json()["agents"]["oracle"]["finished"] for answer in flood} == {3}

    asyncio.run(scenario())
    assert 2 <= len(builds) <= 3  # the first request's, then one or two for the twelve
