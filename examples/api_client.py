"""A small client of atoll's orchestrator API (docs/api.md), as an external scheduler would
write one: submit an experiment once, follow its events, cancel it when too many trials
error, and fetch the results. Only httpx; the API's OpenAPI document is
docs/schemas/openapi/orchestrator.json.

    ATOLL_URL=http://127.0.0.1:8000 ATOLL_API_TOKEN=... python examples/api_client.py EXPERIMENT.yaml
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import httpx


def client(url: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # No read timeout: an event stream stays quiet between events (keep-alives every 15 s).
    return httpx.Client(base_url=url, headers=headers, timeout=httpx.Timeout(30, read=None))


def submit(api: httpx.Client, experiment_yaml: str, key: str) -> dict[str, Any]:
    """Enqueue the experiment; sending it again with the same key changes nothing."""
    reply = api.post(
        "/runs",
        content=experiment_yaml,
        headers={"Content-Type": "application/yaml", "Idempotency-Key": key},
    )
    if reply.status_code != 202:
        error = reply.json()["error"]  # every refusal: {"error": {"code", "message"}}
        raise RuntimeError(f"{error['code']}: {error['message']}")
    return reply.json()


def events(api: httpx.Client, run: str, after: int = 0) -> Iterator[dict[str, Any]]:
    """The run's events, oldest first, until it finishes, aborts or is cancelled (SSE)."""
    with api.stream("GET", f"/runs/{run}/events", params={"after": after}) as stream:
        stream.raise_for_status()
        for line in stream.iter_lines():
            if line.startswith("data:"):
                yield json.loads(line[len("data:") :])


def follow(api: httpx.Client, run: str, max_errors: int = 3) -> dict[str, int]:
    """Count finished trials by outcome; cancel the run (stopping running trials) once more
    than ``max_errors`` trials end in ``infra_error``."""
    outcomes: dict[str, int] = {}
    for event in events(api, run):
        if event["type"] == "trial.finished":
            outcome = event["payload"]["outcome"]
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            print(f"{event['payload']['task']}: {outcome}", file=sys.stderr)
            if outcomes.get("infra_error", 0) > max_errors:
                api.post(f"/runs/{run}/cancel", json={"in_flight": "stop"}).raise_for_status()
        elif event["type"] in ("run.finished", "run.aborted", "run.cancelled"):
            print(f"{run}: {event['type']}", file=sys.stderr)
    return outcomes


def failed_trials(api: httpx.Client, run: str) -> list[dict[str, Any]]:
    """Every failed trial of the run with its verdicts, page by page."""
    failed, offset = [], 0
    while offset is not None:
        page = api.get(f"/runs/{run}/trials", params={"outcome": "fail", "offset": offset}).json()
        failed += [api.get(f"/runs/{run}/trials/{row['trial_id']}").json() for row in page["trials"]]
        offset = page["next_offset"]
    return failed


def main(path: str) -> None:
    with open(path, encoding="utf-8") as file:
        experiment = file.read()
    with client(
        os.environ.get("ATOLL_URL", "http://127.0.0.1:8000"), os.environ.get("ATOLL_API_TOKEN")
    ) as api:
        run = submit(api, experiment, key=os.path.basename(path))["name"]
        print(json.dumps(follow(api, run)))
        status = api.get(f"/runs/{run}").json()
        print(f"{run}: {status['state']}, {status['progress']['done']} of {status['progress']['total']} done")
        for trial in failed_trials(api, run):
            unmet = [v["criterion"] for v in trial["verdicts"] if v["verdict"] != "met"]
            print(f"failed {trial['task_id']}: {unmet}")
        report = api.get(f"/runs/{run}/report").json()
        print(report["outcome"])


if __name__ == "__main__":
    main(sys.argv[1])
