"""Run events over HTTP: the SSE stream of a run (and its JSON pages), resumption, the stream
bound, and webhooks signed, retried, logged and confined to the operator's allow-list."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import Response

from orchestrator.api import ApiSettings, create_app
from orchestrator.runner import run_worker
from orchestrator.store import TrialStore
from orchestrator.webhooks import SIGNATURE_HEADER, verify_signature
from tests.atoll.factories import make_task, write_benchmark
from tests.served_app import ServedApp
from tests.shared_sample import fresh_sample_benchmark

SECRET = "webhook-key"


def _settings(tmp_path, **overrides) -> ApiSettings:
    return ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path),
        events_poll_s=0.05,
        **overrides,
    )


def _instant_run(tmp_path, name="events-run", tasks=3) -> str:
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(tasks)])
    return yaml.safe_dump(
        {
            "name": name,
            "benchmark": str(benchmark),
            "executor": "instant",
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
        }
    )


def _work(store_url: str, executor_name: str | None = None) -> threading.Thread:
    """A worker sharing the store, in a thread of its own (as `atoll worker` would be)."""
    worker = threading.Thread(
        target=lambda: asyncio.run(run_worker(store_url, executor_name=executor_name, quiet=True)),
        daemon=True,
    )
    worker.start()
    return worker


def _frames(response: httpx.Response) -> list[dict]:
    """The SSE frames of a streamed reply, each as {id, event, data}; comments kept as {comment}."""
    frames, current = [], {}
    for line in response.iter_lines():
        if line.startswith(":"):
            frames.append({"comment": line[1:].strip()})
        elif line == "":
            if current:
                frames.append(current)
            current = {}
        else:
            field, _, value = line.partition(": ")
            current[field] = value
    return frames


def _events(frames: list[dict]) -> list[dict]:
    return [{**frame, "data": json.loads(frame["data"])} for frame in frames if "event" in frame]


@pytest.mark.slow
def test_the_stream_delivers_every_trials_finish_of_a_sample_run_then_ends(tmp_path):
    """Checks-only sample benchmark, oracle agent, local executor: a worker runs the trials while
    a client streams the run's events over real HTTP; the stream ends after run.finished."""
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = ["keystone-01-packaging-baseline", "keystone-02-update-targets"]
    experiment = {
        "name": "sample-events",
        "benchmark": str(benchmark),
        "tasks": {"ids": tasks},
        "runs": 2,
        "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
        "judge": {"model": None},
        "executor": "local",
    }
    settings = _settings(tmp_path)
    with ServedApp(create_app(settings)) as served, httpx.Client(base_url=served.url, timeout=300) as client:
        posted = client.post("/runs", content=yaml.safe_dump(experiment))
        assert posted.status_code == 202, posted.text
        worker = _work(settings.store)
        with client.stream("GET", "/runs/sample-events/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            frames = _frames(response)
        worker.join(timeout=300)
    events = _events(frames)
    assert frames[0] == {"retry": "1000"}
    assert [int(event["id"]) for event in events] == sorted(int(event["id"]) for event in events)
    assert all(
        event["event"] == event["data"]["type"] and int(event["id"]) == event["data"]["id"]
        for event in events
    )
    finished = [event["data"]["payload"] for event in events if event["event"] == "trial.finished"]
    store = TrialStore(settings.store)
    recorded = {spec.trial_id: result for spec, result, _state, _attempts in store.results("sample-events")}
    store.dispose()
    # Every trial's finish, once, with the outcome and score the store recorded.
    assert sorted(item["trial_id"] for item in finished) == sorted(recorded)
    for item in finished:
        assert (item["outcome"], item["score"]) == (
            recorded[item["trial_id"]].outcome.value,
            recorded[item["trial_id"]].score,
        )
    assert sorted((item["task"], item["run_index"]) for item in finished) == sorted(
        (task, index) for task in tasks for index in range(2)
    )
    leased = [event["data"]["payload"] for event in events if event["event"] == "trial.leased"]
    assert {item["trial_id"] for item in leased} == set(recorded)
    assert all(item["agent"] == "oracle" and item["attempt"] == 1 and item["worker"] for item in leased)
    assert events[0]["event"] == "run.enqueued" and events[0]["data"]["payload"] == {"trials": 4}
    assert events[-1]["event"] == "run.finished"
    outcomes: dict[str, int] = {}
    for result in recorded.values():
        outcomes[result.outcome.value] = outcomes.get(result.outcome.value, 0) + 1
    assert events[-1]["data"]["payload"] == {"outcomes": outcomes}


def test_resume_after_last_event_id_json_pages_and_the_end(tmp_path):
    settings = _settings(tmp_path)
    with ServedApp(create_app(settings)) as served, httpx.Client(base_url=served.url, timeout=60) as client:
        assert client.post("/runs", content=_instant_run(tmp_path)).status_code == 202
        _work(settings.store, "instant").join(timeout=60)
        with client.stream("GET", "/runs/events-run/events") as response:
            every = _events(_frames(response))
        assert [event["event"] for event in every].count("trial.finished") == 3
        # A client that saw the first four events reconnects with the last id it saw.
        seen = every[3]["id"]
        with client.stream("GET", "/runs/events-run/events", headers={"Last-Event-ID": seen}) as response:
            rest = _events(_frames(response))
        assert [event["id"] for event in rest] == [event["id"] for event in every[4:]]
        with client.stream("GET", f"/runs/events-run/events?after={every[-1]['id']}") as response:
            assert _events(_frames(response)) == []  # at the end of a finished run: nothing, then the end
        page = client.get("/runs/events-run/events", params={"format": "json", "limit": 2}).json()
        assert [event["id"] for event in page["events"]] == [int(event["id"]) for event in every[:2]]
        assert page["last_id"] == int(every[1]["id"]) and page["ended"] is False
        tail = client.get(
            "/runs/events-run/events", params={"format": "json", "after": page["last_id"]}
        ).json()
        assert len(tail["events"]) == len(every) - 2 and tail["ended"] is True
        assert client.get("/runs/events-run/events", headers={"Last-Event-ID": "x"}).status_code == 400
        assert client.get("/runs/nope/events").status_code == 404
        # A run recorded before the event log (none of its events kept), with nothing left to run.
        store = TrialStore(settings.store)
        store.prune_events("events-run")
        store.dispose()
        with client.stream("GET", "/runs/events-run/events") as response:
            assert _frames(response) == [{"retry": "1000"}]


def test_follow_keeps_the_stream_open_with_heartbeats_and_new_events(tmp_path):
    settings = _settings(tmp_path, events_heartbeat_s=0.1)
    with ServedApp(create_app(settings)) as served, httpx.Client(base_url=served.url, timeout=60) as client:
        assert client.post("/runs", content=_instant_run(tmp_path, tasks=1)).status_code == 202
        _work(settings.store, "instant").join(timeout=60)
        seen: list[str] = []
        with client.stream("GET", "/runs/events-run/events?follow=true") as response:
            lines = response.iter_lines()
            while "event: run.finished" not in seen:
                seen.append(next(lines))
            # Open after the end: a keep-alive comment, then a new event as it is committed.
            while ": keep-alive" not in seen:
                seen.append(next(lines))
            store = TrialStore(settings.store)
            store.record_event("events-run", "run.cancelled", {"reason": "test"})
            store.dispose()
            while "event: run.cancelled" not in seen:
                seen.append(next(lines))


def test_a_stream_ends_after_its_longest_time_and_resumes_where_it_was(tmp_path):
    settings = _settings(tmp_path, events_max_stream_s=0.3)
    with ServedApp(create_app(settings)) as served, httpx.Client(base_url=served.url, timeout=60) as client:
        assert client.post("/runs", content=_instant_run(tmp_path, tasks=1)).status_code == 202
        started = time.monotonic()
        with client.stream("GET", "/runs/events-run/events?follow=true") as response:
            first = _events(_frames(response))  # ends by itself: nothing ran yet
        assert time.monotonic() - started < 10
        assert [event["event"] for event in first] == ["run.enqueued"]
        _work(settings.store, "instant").join(timeout=60)
        with client.stream(
            "GET", "/runs/events-run/events", headers={"Last-Event-ID": first[-1]["id"]}
        ) as response:
            rest = _events(_frames(response))
        assert rest[0]["event"] == "trial.leased" and rest[-1]["event"] == "run.finished"


def test_streams_beyond_the_limit_are_refused_and_a_closed_one_frees_its_slot(tmp_path):
    settings = _settings(tmp_path, events_max_streams=1, api_token="s3cret")
    auth = {"Authorization": "Bearer s3cret"}
    with ServedApp(create_app(settings)) as served, httpx.Client(base_url=served.url, timeout=60) as client:
        assert client.get("/runs/events-run/events").status_code == 401
        assert client.post("/runs", content=_instant_run(tmp_path, tasks=1), headers=auth).status_code == 202
        with client.stream("GET", "/runs/events-run/events", headers=auth) as first:
            assert first.status_code == 200
            refused = client.get("/runs/events-run/events", headers=auth)
            assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_streams"
            # JSON pages are not streams: still served.
            assert client.get("/runs/events-run/events?format=json", headers=auth).status_code == 200
        deadline = time.monotonic() + 10
        while True:  # the server notices the closed stream and frees its slot
            with client.stream("GET", "/runs/events-run/events", headers=auth) as again:
                if again.status_code == 200:
                    break
            assert time.monotonic() < deadline
            time.sleep(0.1)


class _Receiver:
    """A webhook receiver on loopback: answers each POST with the next scripted status (or
    status and headers), and notes when each came."""

    def __init__(self, statuses: list[int | tuple[int, dict[str, str]]]) -> None:
        self.statuses = statuses
        self.received: list[tuple[dict, bool]] = []
        self.times: list[float] = []
        app = FastAPI()

        @app.post("/hooks/{name}")
        async def hook(request: Request) -> Response:
            body = await request.body()
            signed = verify_signature(SECRET, request.headers.get(SIGNATURE_HEADER), body)
            self.received.append((json.loads(body), signed))
            self.times.append(time.monotonic())
            answer = self.statuses.pop(0) if self.statuses else 200
            status, headers = answer if isinstance(answer, tuple) else (answer, {})
            return Response(status_code=status, headers=headers)

        self.served = ServedApp(app)

    def __enter__(self) -> _Receiver:
        self.served.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.served.__exit__(*exc)


def _count_reads(store) -> list[str | None]:
    """Record every read of the event log (the run read, None for every run)."""
    reads: list[str | None] = []
    events = store.events

    def counted(run=None, **kwargs):
        reads.append(run)
        return events(run, **kwargs)

    store.events = counted
    return reads


def _wait_for(condition, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_webhooks_are_signed_retried_after_a_429_and_a_500_and_logged(tmp_path):
    # The 429's Retry-After (1 s) replaces the 0.05 s backoff for that wait only.
    with _Receiver([(429, {"Retry-After": "1"}), 500]) as receiver:
        settings = _settings(
            tmp_path,
            webhook_allow=f"{receiver.served.url}/hooks",
            webhook_secret=SECRET,
            webhook_backoff_s=0.05,
        )
        hook = f"{receiver.served.url}/hooks/team-a"
        app = create_app(settings)
        reads = _count_reads(app.state.store)
        with ServedApp(app) as served, httpx.Client(base_url=served.url, timeout=60) as client:
            assert client.post("/runs", content=_instant_run(tmp_path, tasks=2)).status_code == 202
            registered = client.post("/runs/events-run/webhooks", json={"url": hook})
            assert registered.status_code == 201 and registered.json()["webhooks"] == [hook]
            assert client.get("/runs/events-run/webhooks").json()["webhooks"] == [hook]
            _work(settings.store, "instant").join(timeout=60)
            _wait_for(lambda: any(body["type"] == "run.finished" for body, _ in receiver.received))
            deliveries = client.get("/runs/events-run/webhooks/deliveries").json()["deliveries"]
            # Idle, the webhook's task reads nothing (it is woken when its run has new events).
            time.sleep(0.3)
            reads.clear()
            time.sleep(1.0)
            assert reads == []
    bodies = [body for body, _ in receiver.received]
    assert all(signed for _, signed in receiver.received)
    # The first event was refused with a 429 and a 500, then delivered: at least once, in order.
    assert bodies[0] == bodies[1] == bodies[2] and bodies[0]["type"] == "run.enqueued"
    asked, backed_off = receiver.times[1] - receiver.times[0], receiver.times[2] - receiver.times[1]
    assert asked >= 0.95 and backed_off < 0.9  # the Retry-After honoured once, then the backoff
    types = [body["type"] for body in bodies[2:]]
    assert types.count("trial.finished") == 2 and types[-1] == "run.finished"
    first = [item for item in deliveries if item["event_id"] == bodies[0]["id"]]
    assert [(item["attempt"], item["status_code"], item["error"]) for item in first] == [
        (1, 429, "HTTP 429"),
        (2, 500, "HTTP 500"),
        (3, 200, None),
    ]
    assert all(item["target"] == "run" and item["url"] == hook for item in deliveries)
    assert len(deliveries) == len(bodies)


def test_a_restarted_api_resumes_deliveries_after_its_cursor(tmp_path):
    with _Receiver([]) as receiver:
        settings = _settings(tmp_path, webhook_urls=f"{receiver.served.url}/hooks/ops", webhook_secret=SECRET)
        with (
            ServedApp(create_app(settings)) as served,
            httpx.Client(base_url=served.url, timeout=60) as client,
        ):
            time.sleep(0.3)  # the operator's webhook starts at the newest event: let it start
            assert client.post("/runs", content=_instant_run(tmp_path, tasks=1)).status_code == 202
            _work(settings.store, "instant").join(timeout=60)
            _wait_for(lambda: any(body["type"] == "run.finished" for body, _ in receiver.received))
            before = len(receiver.received)
            deliveries = client.get("/runs/events-run/webhooks/deliveries").json()["deliveries"]
            assert {(item["target"], item["url"]) for item in deliveries} == {("operator", None)}
        with ServedApp(create_app(settings)):
            time.sleep(1.0)
        assert len(receiver.received) == before  # nothing sent twice


def test_a_webhook_off_the_allow_list_is_refused(tmp_path):
    settings = _settings(tmp_path, webhook_allow="https://hooks.example.org/atoll/", webhook_secret=SECRET)
    with ServedApp(create_app(settings)) as served, httpx.Client(base_url=served.url, timeout=60) as client:
        assert client.post("/runs", content=_instant_run(tmp_path, tasks=1)).status_code == 202
        for url in (
            "https://evil.example.com/atoll/x",
            "https://hooks.example.org/atollx",
            "https://hooks.example.org/atoll/../other",
            "http://hooks.example.org/atoll/x",  # another scheme is another endpoint
            "file:///etc/passwd",
        ):
            refused = client.post("/runs/events-run/webhooks", json={"url": url})
            assert refused.status_code == 403, url
            assert refused.json()["error"]["code"] == "webhook_not_allowed"
        assert client.get("/runs/events-run/webhooks").json()["webhooks"] == []
        allowed = client.post(
            "/runs/events-run/webhooks", json={"url": "https://hooks.example.org/atoll/team"}
        )
        assert allowed.status_code == 201
        # A run registers a bounded number of them (each is a delivery task of the API).
        for index in range(7):
            extra = client.post(
                "/runs/events-run/webhooks", json={"url": f"https://hooks.example.org/atoll/{index}"}
            )
            assert extra.status_code == 201
        again = client.post("/runs/events-run/webhooks", json={"url": "https://hooks.example.org/atoll/team"})
        assert again.status_code == 201 and len(again.json()["webhooks"]) == 8  # the same one: no new entry
        ninth = client.post("/runs/events-run/webhooks", json={"url": "https://hooks.example.org/atoll/9"})
        assert ninth.status_code == 409 and ninth.json()["error"]["code"] == "too_many_webhooks"
    # With no allow-list a run registers nothing at all.
    with ServedApp(create_app(_settings(tmp_path))) as served, httpx.Client(base_url=served.url) as client:
        refused = client.post(
            "/runs/events-run/webhooks", json={"url": "https://hooks.example.org/atoll/team"}
        )
        assert refused.status_code == 403


def test_webhooks_need_the_operators_secret(tmp_path):
    from atoll.errors import AtollError

    with pytest.raises(AtollError, match="ATOLL_WEBHOOK_SECRET"):
        create_app(_settings(tmp_path, webhook_urls="https://hooks.example.org/ops"))


def test_a_signature_is_bound_to_its_body_key_and_time():
    from orchestrator.webhooks import sign

    body = b'{"id":1}'
    header = sign(SECRET, 1_000_000, body)
    assert verify_signature(SECRET, header, body, now=1_000_010)
    assert not verify_signature(SECRET, header, body + b" ", now=1_000_010)
    assert not verify_signature("other", header, body, now=1_000_010)
    assert not verify_signature(SECRET, header, body, now=1_000_000 + 301)  # a replay, later
    assert not verify_signature(SECRET, None, body)


def test_a_webhook_that_redirects_sends_the_event_nowhere_else_and_no_reply_shows_the_secret(tmp_path):
    """SSRF: a receiver under the allow-list answering 302 to an internal address (here another
    loopback service) does not make the API post there; internal addresses are refused outright."""
    with _Receiver([]) as internal:
        bouncer = FastAPI()

        @bouncer.post("/hooks/{name}")
        async def bounce() -> Response:
            return Response(status_code=302, headers={"Location": f"{internal.served.url}/hooks/stolen"})

        with ServedApp(bouncer) as outside:
            settings = _settings(
                tmp_path,
                webhook_allow=f"{outside.url}/hooks/",
                webhook_secret=SECRET,
                webhook_max_attempts=2,
                webhook_backoff_s=0.05,
            )
            with (
                ServedApp(create_app(settings)) as served,
                httpx.Client(base_url=served.url, timeout=60) as client,
            ):
                assert client.post("/runs", content=_instant_run(tmp_path, tasks=1)).status_code == 202
                for url in (
                    "http://127.0.0.1/hooks/x",
                    "http://169.254.169.254/latest/meta-data",
                    "http://[::1]/hooks/x",
                    "http://[fe80::1]/hooks/x",
                    f"{internal.served.url}/hooks/x",
                ):
                    refused = client.post("/runs/events-run/webhooks", json={"url": url})
                    assert refused.status_code == 403, url
                hook = f"{outside.url}/hooks/team"
                assert client.post("/runs/events-run/webhooks", json={"url": hook}).status_code == 201
                _work(settings.store, "instant").join(timeout=60)

                def logged():
                    page = client.get("/runs/events-run/webhooks/deliveries").json()["deliveries"]
                    return page if any(item["event_id"] > 1 for item in page) else None

                _wait_for(logged)
                deliveries = logged()
                replies = [
                    client.get(path).text
                    for path in (
                        "/runs/events-run/webhooks",
                        "/runs/events-run/webhooks/deliveries",
                        "/runs/events-run/events?format=json",
                        "/runs/events-run",
                    )
                ]
    assert internal.received == []  # the redirect was not followed
    # A 3xx is a refusal, not a failure to retry: one try per event, logged as such.
    assert all(item["status_code"] == 302 and item["error"] == "HTTP 302" for item in deliveries)
    assert all(item["attempt"] == 1 for item in deliveries)
    assert not any(SECRET in reply for reply in replies)
