r"""The orchestrator's HTTP API (``atoll orchestrator serve``, port 8000): thin routes over the
runner, store and report functions. Trials are executed by ``atoll worker`` processes that
share the store; the API plans, enqueues and reports.

| method path | does |
|---|---|
| ``GET /health`` | 200 when serving and the store answers |
| ``POST /runs`` | body: an experiment (JSON or YAML) → validate, plan, enqueue; 202 with counts; 409 when the run exists with another configuration (``?replace=true`` archives its trials, as ``atoll run --replace``). With ``Idempotency-Key: K``: the same key and request again get the first reply (nothing planned or enqueued again); the key with another request is 409 ``idempotency_conflict`` |
| ``GET /runs`` | runs, oldest first, with state and counts; ``?state=``, ``?prefix=``, ``?include_archived=true``; pages of ``?limit=`` (100, at most 500) from ``?offset=`` (the reply's ``next_offset``, null on the last page) |
| ``GET /runs/{name}`` | the run's state, counts, progress, elapsed time, ETA (null with its reason when unknown), cost so far, concurrency cap, judge, fingerprint |
| ``GET /runs/{name}/trials`` | its trials, paged as above; ``?state=``, ``?outcome=``, ``?agent=``, ``?task=`` |
| ``GET /runs/{name}/trials/{trial_id}`` | one trial: outcome, score, how it ended, the grade's verdicts, its artifacts' URIs |
| ``POST /runs/{name}/cancel`` | body ``{"in_flight": "finish" \| "stop"}`` (default finish): pending trials cancelled, running ones finish or are stopped (their leases taken back) |
| ``POST /runs/{name}/pause`` / ``/resume`` | workers lease nothing of a paused run / it is leasable again (a cancelled run too, its cancelled trials pending again) |
| ``POST /runs/{name}/requeue`` | trials in ``infra_error`` pending again; the reply counts them |
| ``PATCH /runs/{name}`` | body ``{"concurrency": N \| null}``: cap on the run's trials in flight across every worker, from the next lease |
| ``POST /runs/{name}/archive`` | hide a run that is not running from the default list (its data kept) |
| ``DELETE /runs/{name}`` | delete a run with no trial pending or leased: its rows, its trials' artifact folders, then the stored worlds no trial uses (``?gc=false`` skips that; :mod:`orchestrator.run_deletion`) |
| ``GET /runs/{name}/report`` | report.json, built on demand (report.md/html written beside it); one build at a time, requests waiting together share the next |
| ``GET /runs/{name}/events``, ``/runs/{name}/webhooks…`` | the run's events and webhooks (:mod:`orchestrator.api_events`) |

Unknown runs and trials are 404 (``unknown_run``, ``unknown_trial``); a verb that does not
apply to the run as it stands (cancel a finished run, archive a running one) is 409
``run_not_active``. The lifecycle is :mod:`orchestrator.lifecycle` (the CLI's ``atoll runs``,
``cancel``, ``pause``, ``resume``, ``requeue``, ``resize``, ``archive``, ``delete`` call the same functions);
its routes are in :mod:`orchestrator.api_lifecycle`.

With ``ATOLL_API_TOKEN`` set, every route but ``/health`` needs ``Authorization: Bearer …``
(and ``atoll orchestrator serve`` refuses to listen beyond loopback without it). A submitted
experiment never chooses where the service writes, and its benchmark must lie under the
operator's roots (:mod:`orchestrator.submission`); bodies are bounded
(``ATOLL_MAX_BODY_BYTES``) and parsed off the event loop with YAML aliases bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, SecretStr, field_validator

from atoll import telemetry
from atoll.experiment import ExperimentSpec
from atoll.http import ERROR_RESPONSES, Health, add_error_handler, bearer_guard, document_models
from atoll.http_guard import guard
from atoll.llm.admission import check_experiment
from atoll.report_document import ReportDocument
from atoll.settings import require_non_empty, secret_text
from orchestrator import idempotency, lifecycle
from orchestrator.api_events import install_events
from orchestrator.api_lifecycle import lifecycle_router
from orchestrator.events import EventSettings
from orchestrator.submission import ExperimentParser, benchmark_roots, submitted_experiment

# bad_experiment, bad_run_name, operator_setting and benchmark_not_allowed are 400s.
# A report is seconds of CPU on a large run (a 10,000-resample bootstrap per metric): they are
# built one at a time, and a request is answered by a build that began after it arrived, so a
# flood of requests costs a build or two, never one each, and no answer is older than its request.
_REPORTS_KEPT = 16

# POST /runs reads its body itself (YAML or JSON, parsed off the event loop): declared here.
_EXPERIMENT_BODY = {
    "requestBody": {
        "required": True,
        "description": "the experiment (docs/schemas/experiment.schema.json), as JSON or YAML",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/ExperimentSpec"}},
            "application/yaml": {"schema": {"type": "string"}},
        },
    }
}
_DEFAULTS = ExperimentSpec.model_fields


class ApiSettings(EventSettings):
    """``ATOLL_STORE``, ``ATOLL_ARTIFACTS``, ``ATOLL_OUTPUT_DIR``, ``ATOLL_BENCHMARK_ROOTS``,
    ``ATOLL_API_TOKEN``, ``ATOLL_MAX_BODY_BYTES``, ``ATOLL_MAX_TRIALS``, ``ATOLL_MAX_PLAN_BYTES``,
    and the events' and webhooks' (:class:`orchestrator.events.EventSettings`)."""

    store: str = Field(_DEFAULTS["store"].default, description="trial store every worker shares")
    artifacts: str = Field(
        _DEFAULTS["artifacts"].default, description="artifact store URL of every posted experiment"
    )
    output_dir: str = Field(
        _DEFAULTS["output_dir"].default, description="reports and caches of every posted experiment"
    )
    benchmark_roots: str = Field(
        "",
        description="comma-separated folders a posted experiment's local benchmark must lie under "
        "(none: hf:// benchmarks only)",
    )
    api_token: SecretStr | None = Field(None, description="bearer token of the API")
    max_body_bytes: int = Field(1024**2, ge=1024, description="largest request body (an experiment)")
    max_trials: int = Field(100_000, ge=1, description="most trials one posted experiment may plan")
    max_plan_bytes: int = Field(
        256 * 1024**2,
        ge=1024,
        description="most bytes of agent configuration one posted experiment may store (its size "
        "times the trials that copy it)",
    )

    @field_validator("api_token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        return require_non_empty(value, "ATOLL_API_TOKEN")

    def token(self) -> str | None:
        """The API token as text (None: no token, which only loopback allows)."""
        return secret_text(self.api_token)


Counts = dict[str, int]
_COUNTS = "trials per state (pending, leased, done, infra_error, cancelled) and total"


class RunEnqueued(BaseModel):
    """``POST /runs``: what was planned and enqueued."""

    name: str = Field(description="the experiment's name, the run's key in the store")
    planned: int = Field(description="trials the experiment plans")
    enqueued: int = Field(description="trials newly enqueued by this request")
    archived: int = Field(description="trials archived by ?replace=true")
    counts: Counts = Field(description=_COUNTS)


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """The API over the store named by ``settings.store`` (default: from ``ATOLL_*``)."""
    from orchestrator.store import TrialStore

    settings = settings or ApiSettings()
    store = TrialStore(settings.store)
    token = settings.token()
    imposed = {"store": settings.store, "artifacts": settings.artifacts, "output_dir": settings.output_dir}
    roots = benchmark_roots(settings.benchmark_roots)
    app = FastAPI(title="atoll orchestrator", **telemetry.service_options("atoll-orchestrator"))
    # Host allow-list, cross-site refusal and the body limit (atoll.http_guard)
    guard(app, max_body_bytes=settings.max_body_bytes)
    app.state.store = store
    app.router.add_event_handler("shutdown", store.dispose)
    # Submissions (parse, check, plan) get threads of their own: a flood of them queues here
    # and never takes the default pool's threads, which /health's store check uses.
    submissions = ThreadPoolExecutor(max_workers=2, thread_name_prefix="atoll-submission")
    app.router.add_event_handler("shutdown", lambda: submissions.shutdown(wait=False, cancel_futures=True))
    parser = ExperimentParser()  # YAML in a child process: it never holds this interpreter
    # /health's store check has a thread of its own: reports and run lists being built on the
    # shared pool (one per request, as many as clients ask) never make it wait.
    health_check = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atoll-health")
    app.router.add_event_handler("shutdown", lambda: health_check.shutdown(wait=False, cancel_futures=True))
    app.router.add_event_handler("shutdown", parser.close)

    authorize = bearer_guard(token)
    add_error_handler(app)
    document_models(app, ExperimentSpec)
    report_builds = asyncio.Lock()
    recent_reports: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    def known(name: str) -> dict[str, Any]:
        return lifecycle.require_run(store, name).spec  # the name checked before a folder sees it

    @app.get("/health", responses=ERROR_RESPONSES)
    async def health() -> Health:
        await asyncio.get_running_loop().run_in_executor(health_check, store.experiments)
        return Health(status="ok")

    @app.post(
        "/runs",
        status_code=202,
        dependencies=[Depends(authorize)],
        responses=ERROR_RESPONSES,
        openapi_extra=_EXPERIMENT_BODY,
    )
    async def create_run(
        request: Request,
        replace: bool = False,
        idempotency_key: str | None = Header(
            None,
            max_length=200,
            description="the same key and request again get the first reply; another request with it is a 409",
        ),
    ) -> RunEnqueued:
        body = await request.body()

        async def submit() -> RunEnqueued:
            return await _submit(body.decode("utf-8", errors="replace"), replace)

        if idempotency_key is None:
            return await submit()
        digest = idempotency.request_digest(body, f"replace={replace}")
        return await idempotency.submit_once(
            store, idempotency_key, digest, submit, RunEnqueued, call=asyncio.to_thread
        )

    async def _submit(text: str, replace: bool) -> RunEnqueued:
        from orchestrator.runner import run_experiment

        # Parsing (YAML, bounded: atoll.bounded_yaml), checking the benchmark path, loading a
        # benchmark and planning thousands of trials are blocking work: keep the event loop
        # (and /health) answering meanwhile.
        loop = asyncio.get_running_loop()
        parsed = await loop.run_in_executor(submissions, parser.parse, text)
        # No endpoint off the key allow-list (atoll.llm.admission); litellm may load: a thread.
        await loop.run_in_executor(submissions, check_experiment, parsed)
        spec = await loop.run_in_executor(submissions, submitted_experiment, parsed, imposed, roots)
        outcome = await loop.run_in_executor(
            submissions,
            asyncio.run,
            run_experiment(
                spec,
                quiet=True,
                enqueue_only=True,
                replace=replace,
                max_trials=settings.max_trials,
                max_plan_bytes=settings.max_plan_bytes,
            ),
        )
        return RunEnqueued(
            name=outcome.experiment,
            planned=outcome.planned,
            enqueued=outcome.newly_enqueued,
            archived=outcome.archived,
            counts=outcome.counts,
        )

    app.include_router(lifecycle_router(store, authorize))

    @app.get(
        "/runs/{name}/report",
        dependencies=[Depends(authorize)],
        response_class=Response,
        responses={200: {"model": ReportDocument, "content": {"application/json": {}}}, **ERROR_RESPONSES},
    )
    async def run_report(name: str) -> Response:
        from orchestrator import report

        spec = known(name)
        asked = time.monotonic()
        async with report_builds:
            built = recent_reports.get(name)
            if built is None or built[0] < asked:  # none begun since this request came
                began = time.monotonic()
                output = Path(settings.output_dir) / name
                seed = int(spec.get("seed", 0) or 0)
                paths = await asyncio.to_thread(report.write_report, store, name, output, seed=seed)
                built = recent_reports[name] = (began, paths["json"].read_bytes())
                while len(recent_reports) > _REPORTS_KEPT:
                    recent_reports.popitem(last=False)
            recent_reports.move_to_end(name)
        # Served as written: strict JSON (undefined metrics are null with a reason: atoll.jsonio).
        return Response(content=built[1], media_type="application/json")

    install_events(app, settings, authorize, known)
    return app


__all__ = ["ApiSettings", "ReportDocument", "RunEnqueued", "create_app"]
