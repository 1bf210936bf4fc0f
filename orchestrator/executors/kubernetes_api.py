"""The Kubernetes API as the executor uses it: one bounded attempt per call, and around it
retries, backoff and a client-side rate limit.

:class:`KubernetesCluster` makes the few Jobs/Pods/Events calls through the official client,
each with a connect and read timeout and no hidden retries; a failure raises
:class:`ApiError`, which says whether it is transient (429, 5xx, a reset connection, a
timeout) and what ``Retry-After`` the server asked for. :class:`ResilientApi` runs those
blocking calls in threads under a token-bucket rate limit and retries transient failures
with jittered exponential backoff (:mod:`atoll.retry`; a ``Retry-After`` replaces the backoff
for that wait, up to a bound), within a time budget per call. The waiting happens on the
event loop, never in a worker thread, so a throttled or failing API server cannot starve the
threads the store's heartbeats need.

:meth:`KubernetesCluster.stream` is the blocking half of a watch (``?watch=true`` from a
resourceVersion, with bookmarks); :mod:`kubernetes_watch` runs it in a thread of its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_before_delay

from atoll.errors import AtollError, ErrorCode
from atoll.retry import backoff, parse_retry_after, wait_retry_after
from orchestrator.executors.base import InfraError

log = logging.getLogger("atoll.orchestrator.kubernetes")

# 429 and the server-side 5xx are worth retrying; other 4xx will answer the same again.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class ApiError(InfraError):
    """A Kubernetes API call that failed. ``transient`` failures may succeed when retried."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        transient: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ApiPolicy:
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    retry_budget_s: float = 60.0  # how long one call keeps retrying transient failures
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 10.0
    retry_after_max_s: float = 30.0  # a Retry-After longer than this is cut to it
    qps: float = 50.0
    burst: int = 100


class KubernetesCluster:
    """The Jobs/Pods/Events calls the executor makes, through the official client (blocking;
    called from threads). One attempt each, with a timeout; failures raise :class:`ApiError`."""

    def __init__(self, api_url: str | None, policy: ApiPolicy | None = None) -> None:
        from kubernetes import client, config

        self.policy = policy or ApiPolicy()
        if api_url:
            configuration = client.Configuration()
            configuration.host = api_url
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                try:
                    config.load_kube_config()
                except (config.ConfigException, OSError) as exc:
                    raise AtollError(
                        ErrorCode.no_cluster, f"no Kubernetes configuration (in-cluster or kubeconfig): {exc}"
                    ) from None
            configuration = client.Configuration.get_default_copy()
        configuration.retries = False  # retries are ResilientApi's, with backoff and a budget
        self._api = client.ApiClient(configuration)
        self._batch = client.BatchV1Api(self._api)
        self._core = client.CoreV1Api(self._api)
        self._coordination = client.CoordinationV1Api(self._api)

    def _call(self, what: str, function: Any, *args: Any, missing_ok: bool = False, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        kwargs.setdefault("_request_timeout", (self.policy.connect_timeout_s, self.policy.read_timeout_s))
        try:
            return function(*args, **kwargs)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise ApiError(
                f"Kubernetes API {what}: HTTP {exc.status} {exc.reason}",
                status=exc.status,
                transient=exc.status in TRANSIENT_STATUSES or not exc.status,
                retry_after_s=parse_retry_after(exc.headers),
            ) from exc
        except (HTTPError, OSError) as exc:  # timeouts, refused and reset connections
            raise ApiError(
                f"Kubernetes API {what}: {type(exc).__name__}: {str(exc)[:200]}", transient=True
            ) from exc

    def _plain(self, value: Any) -> Any:
        return self._api.sanitize_for_serialization(value)

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        self._call("create job", self._batch.create_namespaced_job, namespace, manifest)

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._call(
            "read job", self._batch.read_namespaced_job_status, name, namespace, missing_ok=True
        )
        return None if found is None else self._plain(found)

    def jobs(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        found = self._call("list jobs", self._batch.list_namespaced_job, namespace, label_selector=selector)
        return self._plain(found.items)

    def pods(self, namespace: str, selector: str, field_selector: str | None = None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {"label_selector": selector}
        if field_selector:
            kwargs["field_selector"] = field_selector
        found = self._call("list pods", self._core.list_namespaced_pod, namespace, **kwargs)
        return self._plain(found.items)

    def events(self, namespace: str, object_name: str) -> list[dict[str, Any]]:
        found = self._call(
            "list events",
            self._core.list_namespaced_event,
            namespace,
            field_selector=f"involvedObject.name={object_name}",
        )
        return self._plain(found.items)

    def list(self, kind: str, namespace: str, selector: str) -> tuple[list[dict[str, Any]], str]:
        """Jobs or Pods under ``selector`` and the list's resourceVersion (to watch from)."""
        function = self._batch.list_namespaced_job if kind == "Job" else self._core.list_namespaced_pod
        found = self._call(f"list {kind.lower()}s", function, namespace, label_selector=selector)
        return self._plain(found.items), found.metadata.resource_version

    def stream(
        self,
        kind: str,
        namespace: str,
        selector: str,
        resource_version: str,
        timeout_s: float,
        on_event: Callable[[str, dict[str, Any]], None],
        opened: Callable[[Any], None],
    ) -> None:
        """Watch Jobs or Pods from ``resource_version`` until the server ends the stream
        (``timeout_s``), calling ``on_event(type, object)`` for each change and bookmark.
        An ERROR event raises :class:`ApiError` with its code (410: the version is too old,
        list again). Blocking; ``opened`` gets the response, so another thread can close it."""
        from kubernetes.watch.watch import iter_resp_lines

        function = self._batch.list_namespaced_job if kind == "Job" else self._core.list_namespaced_pod
        what = f"watch {kind.lower()}s"
        # The server ends the stream after timeout_s; the read timeout only catches a dead socket.
        response = self._call(
            what,
            function,
            namespace,
            label_selector=selector,
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=max(1, int(timeout_s)),
            _preload_content=False,
            _request_timeout=(self.policy.connect_timeout_s, timeout_s + self.policy.read_timeout_s),
        )
        opened(response)
        try:
            from urllib3.exceptions import HTTPError

            try:
                for line in iter_resp_lines(response):
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind_of = event.get("type")
                    obj = event.get("object") or {}
                    if kind_of == "ERROR":
                        code = obj.get("code")
                        raise ApiError(
                            f"Kubernetes API {what}: {code} {obj.get('reason')}: {obj.get('message')}",
                            status=code,
                            transient=code in TRANSIENT_STATUSES,
                        )
                    on_event(kind_of, obj)
            except (HTTPError, OSError, ValueError) as exc:
                raise ApiError(
                    f"Kubernetes API {what}: {type(exc).__name__}: {str(exc)[:200]}", transient=True
                ) from exc
        finally:
            response.release_conn()

    def lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._call(
            "read lease", self._coordination.read_namespaced_lease, name, namespace, missing_ok=True
        )
        return None if found is None else self._plain(found)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> None:
        self._call("create lease", self._coordination.create_namespaced_lease, namespace, lease)

    def renew_lease(self, namespace: str, name: str, spec: dict[str, Any]) -> bool:
        """Patch the Lease's spec; False when it no longer exists."""
        found = self._call(
            "renew lease",
            self._coordination.patch_namespaced_lease,
            name,
            namespace,
            {"spec": spec},
            missing_ok=True,
        )
        return found is not None

    def delete_lease(self, namespace: str, name: str) -> None:
        self._call(
            "delete lease", self._coordination.delete_namespaced_lease, name, namespace, missing_ok=True
        )

    def label_job(
        self, namespace: str, name: str, labels: dict[str, str], annotations: dict[str, str]
    ) -> bool:
        """Merge labels and annotations into a Job; False when it no longer exists."""
        found = self._call(
            "label job",
            self._batch.patch_namespaced_job,
            name,
            namespace,
            {"metadata": {"labels": labels, "annotations": annotations}},
            missing_ok=True,
        )
        return found is not None

    def delete_job(self, namespace: str, name: str, resource_version: str | None = None) -> None:
        """Delete a Job (gone already is fine). With ``resource_version``, only that version of
        it: a Job changed since it was read (e.g. adopted: relabelled) answers 409 Conflict."""
        body = {"preconditions": {"resourceVersion": resource_version}} if resource_version else None
        self._call(
            "delete job",
            self._batch.delete_namespaced_job,
            name,
            namespace,
            body=body,
            propagation_policy="Background",
            missing_ok=True,
        )


class RateLimiter:
    """A token bucket shared by every call of one executor: ``qps`` on average, ``burst`` at once."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:  # first come, first served
            while True:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
                self._stamp = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.qps)


class ResilientApi:
    """Calls :class:`KubernetesCluster` methods under the rate limit, retrying transient
    failures. When a call's retry budget is spent the last :class:`ApiError` is raised (still
    marked transient: the caller decides whether the trial can wait)."""

    def __init__(self, cluster: KubernetesCluster, policy: ApiPolicy) -> None:
        self.cluster = cluster
        self.policy = policy
        self.limiter = RateLimiter(policy.qps, policy.burst)
        self.retries = 0  # transient failures retried, for logs and tests

    async def __call__(
        self, function: Callable[..., Any], *args: Any, conflict_ok_on_retry: bool = False, **kwargs: Any
    ) -> Any:
        policy = self.policy
        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, ApiError) and exc.transient),
            # jitter: many trials must not retry in step
            wait=wait_retry_after(
                backoff(policy.backoff_initial_s, policy.backoff_max_s), policy.retry_after_max_s
            ),
            stop=stop_before_delay(policy.retry_budget_s),
            before_sleep=self._retrying,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                await self.limiter.acquire()
                try:
                    return await asyncio.to_thread(function, *args, **kwargs)
                except ApiError as error:
                    if (
                        conflict_ok_on_retry
                        and attempt.retry_state.attempt_number > 1
                        and error.status == 409
                    ):
                        return None  # an earlier attempt was applied; only its answer was lost
                    raise
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    def _retrying(self, state: RetryCallState) -> None:
        self.retries += 1
        error = state.outcome.exception() if state.outcome is not None else None
        log.info("%s; retry %d in %.1f s", error, state.attempt_number, state.upcoming_sleep)


__all__ = ["ApiError", "ApiPolicy", "KubernetesCluster", "RateLimiter", "ResilientApi"]
