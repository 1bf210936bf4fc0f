"""A small HTTP stand-in for the Jobs and Pods endpoints of the Kubernetes API, on loopback.

No cluster is available on the machines this project is tested on. The stand-in answers the
calls the official ``kubernetes`` client makes for the executor (create/read/list/patch/delete
Jobs, list Pods with label and field selectors) with API-shaped objects, and lets a test drive
each Job through the states a cluster would (pending, unschedulable, image pull errors,
running, succeeded, OOMKilled, deadline exceeded, evicted, sidecar restarts). ``on_create``
plays the kubelet: a test's function (a pod as a thread, or only state changes), or
:class:`tests.deploy.kube_pods.ProcessKubelet`, which runs each pod as a process and deletes one
with SIGKILL (a pod that dies mid-trial).

An API server under load misbehaves; :meth:`StandInCluster.fault` makes chosen requests answer
429/503 with ``Retry-After``, stall, reset the connection, or be applied and then lose their
answer, and ``error_rate`` fails that share of all requests with 503. Every request is logged
in ``requests`` (monotonic time, method, path, status answered).

Every change of a Job, Pod or Lease gets the next ``resourceVersion`` and goes to a change
log, which ``?watch=true`` streams from the version asked for (with BOOKMARK events when
``allowWatchBookmarks`` is set, ending after ``timeoutSeconds``). :meth:`compact` forgets the
log, so a watch from an older version is answered with the API server's 410 Gone ERROR
event; :meth:`drop_watches` cuts every open watch (an API server restarting). Leases
(coordination.k8s.io/v1) can be created, read, patched, replaced and deleted.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

_JOBS = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?(/status)?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")
_LEASES = re.compile(r"^/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _matches(labels: dict[str, str], selector: str | None) -> bool:
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


@dataclass
class Fault:
    """What to do to requests matching ``method`` and the ``path`` regex, ``times`` times
    (None: until ``until_s``, a monotonic time, or for ever)."""

    method: str
    path: str
    status: int | None = None  # answer this status instead of handling the request
    retry_after: str | None = None
    stall_s: float = 0.0  # sleep before handling
    reset: bool = False  # close the connection without an answer, before handling
    lose_answer: bool = False  # handle, then close the connection without an answer
    times: int | None = 1
    until_s: float | None = None
    watch: bool | None = None  # True: only watch requests; False: only plain reads; None: both

    def applies(self, method: str, path: str, watch: bool = False) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.until_s is not None and time.monotonic() >= self.until_s:
            return False
        if self.watch is not None and self.watch != watch:
            return False
        return method == self.method and re.search(self.path, path) is not None


def container_status(
    name: str,
    *,
    waiting: str | None = None,
    running: bool = False,
    terminated: tuple[int, str] | None = None,
    message: str = "",
    restart_count: int = 0,
    last_terminated: tuple[int, str] | None = None,
    finished_at: str | None = None,
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if waiting:
        state["waiting"] = {"reason": waiting, "message": message}
    elif running:
        state["running"] = {"startedAt": _now()}
    elif terminated:
        state["terminated"] = {"exitCode": terminated[0], "reason": terminated[1], "message": message}
    status = {
        "name": name,
        "image": f"example/{name}:1",
        "imageID": "",
        "ready": running,
        "restartCount": restart_count,
        "state": state,
    }
    if last_terminated:
        status["lastState"] = {
            "terminated": {
                "exitCode": last_terminated[0],
                "reason": last_terminated[1],
                "finishedAt": finished_at or _now(),
            }
        }
    return status


class StandInCluster:
    def __init__(self, namespace: str = "atoll") -> None:
        self.namespace = namespace
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.leases: dict[str, dict[str, Any]] = {}
        self.retired: list[dict[str, Any]] = []  # pods a Job replaced (they stay listed, like failed pods)
        self.version = 0  # the last resourceVersion given
        self.changes: list[tuple[int, str, str, dict[str, Any]]] = []  # (version, kind, type, object)
        self.compacted = 0  # watches from a version below this are told 410 Gone
        self.bookmark_s = 0.2
        self.watches: list[tuple[float, str, str]] = []  # (monotonic time, kind, resourceVersion asked)
        self._watch_epoch = 0  # drop_watches() ends streams opened in an earlier epoch
        self.on_create: Callable[[StandInCluster, dict[str, Any]], None] | None = None
        self.create_pods = True  # False: the job controller never makes a pod (add one with make_pod)
        self.faults: list[Fault] = []
        self.error_rate = 0.0
        self.random = random.Random(20)
        self.requests: list[tuple[float, str, str, int | None]] = []
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.block_on_close = False  # open watch streams must not hold the test's end
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StandInCluster:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop_watches()
        self._server.shutdown()
        self._server.server_close()

    # --- the change log (for watches) ----------------------------------------------------

    def _record(self, kind: str, type_: str, obj: dict[str, Any]) -> None:
        """Give ``obj`` the next resourceVersion and log the change (caller holds the lock)."""
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.changes.append((self.version, kind, type_, copy.deepcopy(obj)))
        self.changed.notify_all()

    def touch_job(self, job_name: str) -> None:
        with self.lock:
            if job_name in self.jobs:
                self._record("Job", "MODIFIED", self.jobs[job_name])

    def touch_pod(self, job_name: str) -> None:
        with self.lock:
            if job_name in self.pods:
                self._record("Pod", "MODIFIED", self.pods[job_name])

    def compact(self) -> None:
        """Forget the change log (etcd compaction): older watches get 410 Gone."""
        with self.lock:
            self.changes.clear()
            self.compacted = self.version + 1

    def drop_watches(self) -> None:
        with self.lock:
            self._watch_epoch += 1
            self.changed.notify_all()

    # --- what a test (the "kubelet") does ------------------------------------------------

    def fault(self, method: str, path: str, **how: Any) -> Fault:
        with self.lock:
            self.faults.append(fault := Fault(method, path, **how))
        return fault

    def add_event(
        self, object_name: str, reason: str, message: str, *, kind: str = "Job", type_: str = "Warning"
    ) -> None:
        with self.lock:
            self.events.append(
                {
                    "metadata": {"name": f"{object_name}.{len(self.events)}", "namespace": self.namespace},
                    "involvedObject": {"kind": kind, "name": object_name, "namespace": self.namespace},
                    "reason": reason,
                    "message": message,
                    "type": type_,
                    "count": 1,
                    "firstTimestamp": _now(),
                    "lastTimestamp": _now(),
                }
            )

    def add_job(self, manifest: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            job = copy.deepcopy(manifest)
            meta = job.setdefault("metadata", {})
            meta.update(
                {"uid": f"uid-{len(self.jobs)}", "creationTimestamp": _now(), "namespace": self.namespace}
            )
            job["status"] = {}
            self.jobs[meta["name"]] = job
            self._record("Job", "ADDED", job)
            if self.create_pods:
                self.make_pod(meta["name"])
            return job

    def make_pod(self, job_name: str) -> None:
        with self.lock:
            job = self.jobs[job_name]
            meta = job["metadata"]
            labels = {
                **((job.get("spec", {}).get("template", {}).get("metadata") or {}).get("labels") or {}),
                "job-name": meta["name"],
                "batch.kubernetes.io/job-name": meta["name"],
            }
            earlier = sum(1 for pod in self.retired if pod["metadata"]["labels"]["job-name"] == job_name)
            self.pods[meta["name"]] = {
                "metadata": {
                    "name": f"{meta['name']}-pod" + (f"-{earlier + 1}" if earlier else ""),
                    "namespace": self.namespace,
                    "labels": labels,
                    "creationTimestamp": _now(),
                },
                "spec": copy.deepcopy((job.get("spec") or {}).get("template", {}).get("spec") or {}),
                "status": {"phase": "Pending", "startTime": _now()},
            }
            self._record("Pod", "ADDED", self.pods[meta["name"]])

    def replace_pod(self, job_name: str) -> None:
        """The job controller under ``podFailurePolicy`` Ignore: the current (disrupted) pod
        stays as it is, listed, and a new pod is made for the Job."""
        with self.lock:
            if job_name in self.pods and job_name in self.jobs:
                self.retired.append(self.pods.pop(job_name))
                self.make_pod(job_name)

    def delete_pod(self, job_name: str) -> None:
        with self.lock:
            pod = self.pods.pop(job_name, None)
            if pod is not None:
                self._record("Pod", "DELETED", pod)

    def set_pod(
        self,
        job_name: str,
        *,
        phase: str | None = None,
        containers: list[dict[str, Any]] | None = None,
        conditions: list[dict[str, Any]] | None = None,
        sidecars: list[dict[str, Any]] | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        with self.lock:
            if job_name not in self.pods:
                return
            status = self.pods[job_name]["status"]
            if sidecars is not None:
                status["initContainerStatuses"] = sidecars
            if reason is not None:
                status["reason"] = reason
            if message is not None:
                status["message"] = message
            if phase:
                status["phase"] = phase
            if containers is not None:
                status["containerStatuses"] = containers
            if conditions is not None:
                status["conditions"] = conditions
            self._record("Pod", "MODIFIED", self.pods[job_name])

    def finish(self, job_name: str, *, succeeded: bool, reason: str = "", message: str = "") -> None:
        with self.lock:
            if job_name not in self.jobs:
                return  # deleted meanwhile (the executor gave up on it)
            status = self.jobs[job_name]["status"]
            if succeeded:
                status.update(
                    {
                        "succeeded": 1,
                        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": _now()}],
                    }
                )
                if job_name in self.pods:
                    self.pods[job_name]["status"]["phase"] = "Succeeded"
            else:
                status.update(
                    {
                        "failed": 1,
                        "conditions": [
                            {
                                "type": "Failed",
                                "status": "True",
                                "reason": reason or "BackoffLimitExceeded",
                                "message": message,
                                "lastTransitionTime": _now(),
                            }
                        ],
                    }
                )
                if job_name in self.pods:
                    self.pods[job_name]["status"]["phase"] = "Failed"
            if job_name in self.pods:
                self._record("Pod", "MODIFIED", self.pods[job_name])
            self._record("Job", "MODIFIED", self.jobs[job_name])

    def add_lease(self, name: str, *, holder: str, renewed_s_ago: float = 0.0, duration_s: int = 60) -> None:
        renewed = datetime.fromtimestamp(time.time() - renewed_s_ago, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self.lock:
            self.leases[name] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": duration_s,
                    "acquireTime": renewed,
                    "renewTime": renewed,
                },
            }
            self._record("Lease", "ADDED", self.leases[name])

    # --- the API --------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            lose_answer = False

            def _drop(self) -> None:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

            def _intercept(self) -> bool:
                """Apply the first matching fault (or the random error rate): True when
                the request is answered (or dropped) without being handled."""
                method, path = self.command, urlparse(self.path).path
                watch = parse_qs(urlparse(self.path).query).get("watch", [""])[0] in ("true", "1")
                with cluster.lock:
                    fault = next((f for f in cluster.faults if f.applies(method, path, watch)), None)
                    if fault and fault.times is not None:
                        fault.times -= 1
                    random_error = (
                        fault is None and cluster.error_rate and cluster.random.random() < cluster.error_rate
                    )
                if random_error:
                    fault = Fault(method, path, status=503)  # as a load balancer says it: no Retry-After
                if fault is None:
                    return False
                if fault.stall_s:
                    time.sleep(fault.stall_s)
                if fault.lose_answer:
                    self.lose_answer = True
                    return False
                if not (fault.reset or fault.status):
                    return False  # only stalled
                self.rfile.read(int(self.headers.get("Content-Length") or 0))  # keep the connection in step
                if fault.reset:
                    cluster.requests.append((time.monotonic(), method, path, None))
                    self._drop()
                    return True
                if fault.status:
                    headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                    self._send(
                        fault.status,
                        {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "status": "Failure",
                            "code": fault.status,
                            "reason": "Injected",
                        },
                        headers,
                    )
                    return True
                return False

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                cluster.requests.append(
                    (
                        time.monotonic(),
                        self.command,
                        urlparse(self.path).path,
                        None if self.lose_answer else status,
                    )
                )
                if self.lose_answer:
                    return self._drop()
                data = json.dumps(body).encode()
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that timed out
                    self.wfile.write(data)

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def _not_found(self) -> None:
                self._send(
                    404,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "NotFound",
                        "code": 404,
                    },
                )

            def _lease(self) -> tuple[re.Match | None, str | None]:
                match = _LEASES.match(urlparse(self.path).path)
                return match, (match.group(2) if match else None)

            def do_POST(self) -> None:  # noqa: N802
                if self._intercept():
                    return None
                lease_match, _ = self._lease()
                if lease_match:
                    lease = self._body()
                    with cluster.lock:
                        name = lease["metadata"]["name"]
                        if name in cluster.leases:
                            return self._send(
                                409,
                                {
                                    "kind": "Status",
                                    "status": "Failure",
                                    "reason": "AlreadyExists",
                                    "code": 409,
                                },
                            )
                        lease["metadata"]["namespace"] = cluster.namespace
                        cluster.leases[name] = lease
                        cluster._record("Lease", "ADDED", lease)
                        return self._send(201, lease)
                match = _JOBS.match(urlparse(self.path).path)
                if not match or match.group(2):
                    return self._not_found()
                manifest = self._body()
                with cluster.lock:
                    if manifest["metadata"]["name"] in cluster.jobs:
                        return self._send(
                            409,
                            {"kind": "Status", "status": "Failure", "reason": "AlreadyExists", "code": 409},
                        )
                    job = cluster.add_job(manifest)
                    cluster.created.append(copy.deepcopy(manifest))
                if cluster.on_create:
                    cluster.on_create(cluster, job)
                self._send(201, job)

            def _watch(self, kind: str, query: dict[str, str]) -> None:
                """Stream changes of ``kind`` after ``resourceVersion`` as JSON lines until
                ``timeoutSeconds`` (HTTP/1.0: the end of the answer is the end of the stream)."""
                selector = query.get("labelSelector")
                since = int(query.get("resourceVersion") or 0)
                ends = time.monotonic() + float(query.get("timeoutSeconds") or 30)
                bookmarks = query.get("allowWatchBookmarks") == "true"
                with cluster.lock:
                    cluster.watches.append((time.monotonic(), kind, str(since)))
                    cluster.requests.append((time.monotonic(), "WATCH", urlparse(self.path).path, 200))
                    epoch = cluster._watch_epoch
                # Chunked, as the API server streams a watch (one event, one chunk).
                self.protocol_version = "HTTP/1.1"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.close_connection = True

                def write(event: dict[str, Any] | None) -> bool:
                    data = b"" if event is None else json.dumps(event).encode() + b"\n"
                    try:
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                        return True
                    except OSError:
                        return False

                if since and since < cluster.compacted:
                    write(
                        {
                            "type": "ERROR",
                            "object": {
                                "kind": "Status",
                                "apiVersion": "v1",
                                "metadata": {},
                                "status": "Failure",
                                "message": f"too old resource version: {since} ({cluster.compacted})",
                                "reason": "Expired",
                                "code": 410,
                            },
                        }
                    )
                    write(None)
                    return
                sent, last_bookmark = since, time.monotonic()
                while time.monotonic() < ends:
                    with cluster.lock:
                        if epoch != cluster._watch_epoch:
                            return self._drop()
                        pending = [
                            (version, type_, obj)
                            for version, k, type_, obj in cluster.changes
                            if version > sent
                            and k == kind
                            and _matches((obj.get("metadata") or {}).get("labels") or {}, selector)
                        ]
                        sent = max([sent, cluster.version])
                        if not pending:
                            cluster.changed.wait(min(0.05, max(0.0, ends - time.monotonic())))
                    for _version, type_, obj in pending:
                        if not write({"type": type_, "object": obj}):
                            return None
                    if bookmarks and time.monotonic() - last_bookmark >= cluster.bookmark_s:
                        last_bookmark = time.monotonic()
                        if not write(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": kind,
                                    "apiVersion": "v1",
                                    "metadata": {"resourceVersion": str(sent)},
                                },
                            }
                        ):
                            return None
                write(None)  # the last chunk: the server ended the watch (timeoutSeconds)
                return None

            def do_GET(self) -> None:  # noqa: N802
                if self._intercept():
                    return None
                url = urlparse(self.path)
                query = {key: values[0] for key, values in parse_qs(url.query).items()}
                watch = query.get("watch") in ("true", "1")
                with cluster.lock:
                    version = str(cluster.version)
                    if match := _JOBS.match(url.path):
                        if match.group(2):
                            job = cluster.jobs.get(match.group(2))
                            return self._send(200, job) if job else self._not_found()
                        if not watch:
                            items = [
                                job
                                for job in cluster.jobs.values()
                                if _matches(job["metadata"].get("labels") or {}, query.get("labelSelector"))
                            ]
                            return self._send(
                                200,
                                {
                                    "kind": "JobList",
                                    "apiVersion": "batch/v1",
                                    "metadata": {"resourceVersion": version},
                                    "items": items,
                                },
                            )
                    elif _PODS.match(url.path):
                        if not watch:
                            phase = (query.get("fieldSelector") or "").removeprefix("status.phase=") or None
                            items = [
                                pod
                                for pod in [*cluster.retired, *cluster.pods.values()]
                                if _matches(pod["metadata"]["labels"], query.get("labelSelector"))
                                and (phase is None or pod["status"].get("phase") == phase)
                            ]
                            return self._send(
                                200,
                                {
                                    "kind": "PodList",
                                    "apiVersion": "v1",
                                    "metadata": {"resourceVersion": version},
                                    "items": items,
                                },
                            )
                    elif _EVENTS.match(url.path):
                        name = (query.get("fieldSelector") or "").removeprefix("involvedObject.name=")
                        items = [event for event in cluster.events if event["involvedObject"]["name"] == name]
                        return self._send(
                            200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items}
                        )
                    elif (lease_match := _LEASES.match(url.path)) and lease_match.group(2):
                        lease = cluster.leases.get(lease_match.group(2))
                        return self._send(200, lease) if lease else self._not_found()
                    else:
                        return self._not_found()
                return self._watch("Job" if _JOBS.match(url.path) else "Pod", query)

            def do_PATCH(self) -> None:  # noqa: N802
                if self._intercept():
                    return None
                patch = self._body()
                lease_match, lease_name = self._lease()
                with cluster.lock:
                    if lease_match:
                        lease = cluster.leases.get(lease_name or "")
                        if lease is None:
                            return self._not_found()
                        lease["spec"].update(patch.get("spec") or {})
                        cluster._record("Lease", "MODIFIED", lease)
                        return self._send(200, lease)
                    match = _JOBS.match(urlparse(self.path).path)
                    job = cluster.jobs.get(match.group(2)) if match else None
                    if job is None:
                        return self._not_found()
                    for field in ("annotations", "labels"):
                        values = (patch.get("metadata") or {}).get(field) or {}
                        job["metadata"].setdefault(field, {}).update(values)
                    cluster.patches.append((match.group(2), patch))
                    cluster._record("Job", "MODIFIED", job)
                    self._send(200, job)

            def do_DELETE(self) -> None:  # noqa: N802
                if self._intercept():
                    return None
                lease_match, lease_name = self._lease()
                with cluster.lock:
                    if lease_match:
                        lease = cluster.leases.pop(lease_name or "", None)
                        if lease is None:
                            return self._not_found()
                        cluster._record("Lease", "DELETED", lease)
                        return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                    match = _JOBS.match(urlparse(self.path).path)
                    if not match or match.group(2) not in cluster.jobs:
                        return self._not_found()
                    preconditions = (self._body() or {}).get("preconditions") or {}
                    metadata = cluster.jobs[match.group(2)]["metadata"]
                    for field in ("resourceVersion", "uid"):
                        if preconditions.get(field) and preconditions[field] != metadata.get(field):
                            return self._send(
                                409,
                                {
                                    "kind": "Status",
                                    "apiVersion": "v1",
                                    "status": "Failure",
                                    "reason": "Conflict",
                                    "message": f"Precondition failed: {field} in precondition differs",
                                    "code": 409,
                                },
                            )
                    job = cluster.jobs.pop(match.group(2))
                    cluster._record("Job", "DELETED", job)
                    for retired in [
                        pod
                        for pod in cluster.retired
                        if pod["metadata"]["labels"].get("job-name") == match.group(2)
                    ]:
                        cluster.retired.remove(retired)
                        cluster._record("Pod", "DELETED", retired)
                    pod = cluster.pods.pop(match.group(2), None)
                    if pod is not None:
                        cluster._record("Pod", "DELETED", pod)
                    cluster.deleted.append(match.group(2))
                self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

        return Handler


def later(delay_s: float, action: Callable[[], None]) -> None:
    """Run ``action`` after ``delay_s`` in a daemon thread (a state change of the cluster)."""

    def run() -> None:
        time.sleep(delay_s)
        action()

    threading.Thread(target=run, daemon=True).start()
