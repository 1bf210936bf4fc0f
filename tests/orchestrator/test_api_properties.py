"""The orchestrator's HTTP API against its published OpenAPI document, by schemathesis
(tests/api_properties.py): no 5xx, replies as declared, forbidden requests refused. A temporary
SQLite store holding one finished run, which half the generated run names name, so the run
routes (status, trials, events, the lifecycle verbs, webhooks) answer for a real run too, not
only 404; no webhook URL is allowed, so none is ever called."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from hypothesis import strategies as st

from orchestrator.api import ApiSettings, create_app
from orchestrator.runner import run_worker
from tests.api_properties import bearer, exercise, operations, published_schema
from tests.atoll.factories import make_task, write_benchmark
from tests.served_app import ServedApp

TOKEN = "orchestrator-property-token"
RUN = "demo"


@pytest.fixture(scope="module")
def served_orchestrator(tmp_path_factory):
    root = tmp_path_factory.mktemp("orchestrator-api")
    benchmark = write_benchmark(root / "bench", tasks=[make_task("t1"), make_task("t2")])
    settings = ApiSettings(
        store=f"sqlite:///{root / 'api.db'}",
        output_dir=str(root / "out"),
        artifacts=(root / "artifacts").as_uri(),
        benchmark_roots=str(root),
        api_token=TOKEN,
        # A generated ?follow=true stream of the run would otherwise stay open for an hour.
        events_max_stream_s=2.0,
        events_poll_s=0.1,
    )
    experiment = {
        "name": RUN,
        "benchmark": str(benchmark),
        "executor": "instant",
        "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
    }
    with ServedApp(create_app(settings)) as served:
        import httpx

        posted = httpx.post(
            f"{served.url}/runs", content=yaml.safe_dump(experiment), headers=bearer(TOKEN), timeout=60
        )
        assert posted.status_code == 202, posted.text
        asyncio.run(run_worker(settings.store, executor_name="instant", quiet=True))
        yield served


schema = published_schema("orchestrator")


@schema.hook
def flatmap_path_parameters(_context, parameters):
    if isinstance(parameters, dict) and "name" in parameters:
        return st.sampled_from([parameters, {**parameters, "name": RUN}])
    return st.just(parameters)


@schema.hook
def map_query(context, query):
    # ?follow=true keeps a run's event stream open for good: the tester reads whole replies.
    if context.operation.path.endswith("/events") and isinstance(query, dict) and query.get("follow") is True:
        return {**query, "follow": False}
    return query


@pytest.mark.parametrize("operation", operations(schema))
def test_the_orchestrator_keeps_its_published_contract(operation, served_orchestrator):
    exercise(operation, served_orchestrator.url, bearer(TOKEN))
