"""A small HTTP stand-in for the Jobs and Pods endpoints of the Kubernetes API, on loopback.

No cluster is available on the machines this project is tested on. The stand-in answers the
calls the official ``kubernetes`` client makes for the executor (create/read/list/patch/delete
Jobs, list Pods with label and field selectors) with API-shaped objects, and lets a test drive
each Job through the states a cluster would (pending, unschedulable, image pull errors,
running, succeeded, OOMKilled, deadline exceeded). ``on_create`` plays the kubelet.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

_JOBS = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?(/status)?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _matches(labels: dict[str, str], selector: str | None) -> bool:
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def container_status(name: str, *, waiting: str | None = None, running: bool = False,
                     terminated: tuple[int, str] | None = None, message: str = "") -> dict[str, Any]:
    state: dict[str, Any] = {}
    if waiting:
        state["waiting"] = {"reason": waiting, "message": message}
    elif running:
        state["running"] = {"startedAt": _now()}
    elif terminated:
        state["terminated"] = {"exitCode": terminated[0], "reason": terminated[1], "message": message}
    return {"name": name, "image": f"example/{name}:1", "imageID": "", "ready": running,
            "restartCount": 0, "state": state}


class StandInCluster:
    def __init__(self, namespace: str = "atoll") -> None:
        self.namespace = namespace
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.on_create: Callable[[StandInCluster, dict[str, Any]], None] | None = None
        self.lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StandInCluster:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- what a test (the "kubelet") does ------------------------------------------------

    def add_job(self, manifest: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            job = copy.deepcopy(manifest)
            meta = job.setdefault("metadata", {})
            meta.update({"uid": f"uid-{len(self.jobs)}", "creationTimestamp": _now(),
                         "namespace": self.namespace})
            job["status"] = {}
            self.jobs[meta["name"]] = job
            labels = {**((job.get("spec", {}).get("template", {}).get("metadata") or {}).get("labels") or {}),
                      "job-name": meta["name"], "batch.kubernetes.io/job-name": meta["name"]}
            self.pods[meta["name"]] = {
                "metadata": {"name": f"{meta['name']}-pod", "namespace": self.namespace, "labels": labels,
                             "creationTimestamp": _now()},
                "status": {"phase": "Pending", "startTime": _now()},
            }
            return job

    def set_pod(self, job_name: str, *, phase: str | None = None, containers: list[dict[str, Any]] | None = None,
                conditions: list[dict[str, Any]] | None = None) -> None:
        with self.lock:
            status = self.pods[job_name]["status"]
            if phase:
                status["phase"] = phase
            if containers is not None:
                status["containerStatuses"] = containers
            if conditions is not None:
                status["conditions"] = conditions

    def finish(self, job_name: str, *, succeeded: bool, reason: str = "", message: str = "") -> None:
        with self.lock:
            status = self.jobs[job_name]["status"]
            if succeeded:
                status.update({"succeeded": 1, "conditions": [
                    {"type": "Complete", "status": "True", "lastTransitionTime": _now()}]})
                self.pods[job_name]["status"]["phase"] = "Succeeded"
            else:
                status.update({"failed": 1, "conditions": [
                    {"type": "Failed", "status": "True", "reason": reason or "BackoffLimitExceeded",
                     "message": message, "lastTransitionTime": _now()}]})
                self.pods[job_name]["status"]["phase"] = "Failed"

    # --- the API --------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def _not_found(self) -> None:
                self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                 "code": 404})

            def do_POST(self) -> None:  # noqa: N802
                match = _JOBS.match(urlparse(self.path).path)
                if not match or match.group(2):
                    return self._not_found()
                manifest = self._body()
                with cluster.lock:
                    if manifest["metadata"]["name"] in cluster.jobs:
                        return self._send(409, {"kind": "Status", "status": "Failure", "reason": "AlreadyExists",
                                                "code": 409})
                    job = cluster.add_job(manifest)
                    cluster.created.append(copy.deepcopy(manifest))
                if cluster.on_create:
                    cluster.on_create(cluster, job)
                self._send(201, job)

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                query = {key: values[0] for key, values in parse_qs(url.query).items()}
                with cluster.lock:
                    if match := _JOBS.match(url.path):
                        if match.group(2):
                            job = cluster.jobs.get(match.group(2))
                            return self._send(200, job) if job else self._not_found()
                        items = [job for job in cluster.jobs.values()
                                 if _matches(job["metadata"].get("labels") or {}, query.get("labelSelector"))]
                        return self._send(200, {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {},
                                                "items": items})
                    if _PODS.match(url.path):
                        phase = (query.get("fieldSelector") or "").removeprefix("status.phase=") or None
                        items = [pod for pod in cluster.pods.values()
                                 if _matches(pod["metadata"]["labels"], query.get("labelSelector"))
                                 and (phase is None or pod["status"].get("phase") == phase)]
                        return self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                                "items": items})
                self._not_found()

            def do_PATCH(self) -> None:  # noqa: N802
                match = _JOBS.match(urlparse(self.path).path)
                patch = self._body()
                with cluster.lock:
                    job = cluster.jobs.get(match.group(2)) if match else None
                    if job is None:
                        return self._not_found()
                    annotations = (patch.get("metadata") or {}).get("annotations") or {}
                    job["metadata"].setdefault("annotations", {}).update(annotations)
                    cluster.patches.append((match.group(2), patch))
                    self._send(200, job)

            def do_DELETE(self) -> None:  # noqa: N802
                match = _JOBS.match(urlparse(self.path).path)
                with cluster.lock:
                    if not match or match.group(2) not in cluster.jobs:
                        return self._not_found()
                    del cluster.jobs[match.group(2)]
                    cluster.pods.pop(match.group(2), None)
                    cluster.deleted.append(match.group(2))
                self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

        return Handler


def later(delay_s: float, action: Callable[[], None]) -> None:
    """Run ``action`` after ``delay_s`` in a daemon thread (a state change of the cluster)."""
    def run() -> None:
        time.sleep(delay_s)
        action()

    threading.Thread(target=run, daemon=True).start()
