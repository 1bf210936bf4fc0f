"""Trial pods that can die: a kubelet for the Kubernetes stand-in that runs each pod as a process.

:class:`~tests.deploy.kube_standin.StandInCluster` answers the API; what runs a Job's pod is up to
its ``on_create`` hook, and threads cannot be killed. :class:`ProcessKubelet` runs every pod as
a child process: an environment server of its own, on a fresh empty world (the pod's sidecar and
its ``emptyDir`` volumes), and ``atoll trial run --input <the Job's input>`` against it (the
pod's trial container, through the real CLI entry point). The pod's exit sets its state and the
Job's, as the kubelet and the Job controller would: exit 0 succeeds the Job, another status
fails it.

:meth:`ProcessKubelet.delete_pod` is what deleting a pod does to the trial: the process gets
SIGKILL, so nothing of the trial runs after it — no ``finally`` block, no background thread
storing a checkpoint, no outcome written — and its environment (its world) goes with it, as a
pod's containers and volumes do (``kubectl delete pod --grace-period=0 --force``, a node lost;
a trial container ignores the grace period's SIGTERM no better: ``atoll trial run`` has no
handler, so SIGTERM ends it as abruptly). Then the API shows what a cluster shows: a pod deleted
outright is gone and its Job (backoffLimit 0) failed; an evicted pod (``disruption``, e.g.
``EvictionByEvictionAPI``, a drain) has a DisruptionTarget condition and the Job, whose
podFailurePolicy ignores disruptions, gets a new pod, which this kubelet starts.

What it does not model: the pod process is forked from the test process (so it starts in
milliseconds, with the modules already imported, instead of a fresh interpreter's seconds), so
it begins with a copy of the test process's memory; it shares no thread, event loop, socket in
use or file it writes with it. Image pulls, scheduling and the sidecar's start-up probe are not
played (the environment is up before the trial starts).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.deploy.kube_standin import StandInCluster, container_status


def _input_of(job: dict[str, Any]) -> str:
    return job["spec"]["template"]["spec"]["containers"][0]["args"][-1]


def preload_trial_pod() -> None:
    """Import what a trial pod runs (the agent, its model client and tokenizer, the HTTP
    transports, the environment, the grader), once, in the test process: every pod forked
    after starts with it loaded, as a pod's image starts with its packages installed."""
    import httpx
    import litellm

    import agents_runner.agents.react_toolbelt  # noqa: F401
    import agents_runner.runner  # noqa: F401
    import atoll_cli.cli  # noqa: F401
    import environment  # noqa: F401
    import grader  # noqa: F401
    import orchestrator.executors.kubernetes_trial  # noqa: F401

    httpx.Client().close()  # imports the transports
    litellm.token_counter(model="atoll-pod-preload", text="x")  # loads the default tokenizer


def run_trial_pod(job: dict[str, Any]) -> int:
    """The pod's two containers, in this (child) process: an environment on an empty world of
    its own, and ``atoll trial run`` against it; the trial container's exit status."""
    from atoll_cli.cli import main
    from environment import EnvironmentServer, EnvironmentSettings

    roots = Path(tempfile.mkdtemp(prefix="atoll-pod-"))
    (roots / "filesystem").mkdir()
    (roots / ".apps_data").mkdir()
    environment = EnvironmentServer(
        EnvironmentSettings(
            fs_root=roots / "filesystem",
            apps_data_root=roots / ".apps_data",
            json_logs=False,
            log_level="WARNING",
        )
    ).start()
    sys.argv = ["atoll", "trial", "run", "--input", _input_of(job), "--environment-url", environment.url]
    try:
        main()
    except SystemExit as exited:
        return exited.code if isinstance(exited.code, int) else 1
    return 0


class ProcessKubelet:
    """The stand-in's ``on_create``: each Job's pod runs ``pod_main(job)`` in a child process
    (default :func:`run_trial_pod`) whose exit status ends the pod and its Job. Use it as a
    context manager: pods still running at its end are killed."""

    def __init__(
        self,
        pod_main: Callable[[dict[str, Any]], int] = run_trial_pod,
        preload: Callable[[], None] | None = preload_trial_pod,
    ) -> None:
        if preload is not None:
            preload()
        self.pod_main = pod_main
        self.pods: dict[str, int] = {}  # Job name -> the pid of its current pod
        self.jobs: dict[str, dict[str, Any]] = {}
        self.exits: dict[int, int] = {}  # pid -> exit status (negative: killed by that signal)
        self.killed: list[int] = []  # pids ended by delete_pod
        self._ended: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> ProcessKubelet:
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in list(self.pods.values()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for ended in list(self._ended.values()):
            ended.wait(10)

    def __call__(self, cluster: StandInCluster, job: dict[str, Any]) -> None:
        self.jobs[job["metadata"]["name"]] = job
        self._start(cluster, job["metadata"]["name"])

    def _start(self, cluster: StandInCluster, name: str) -> None:
        job = self.jobs[name]
        cluster.set_pod(name, phase="Running", containers=[container_status("trial", running=True)])
        pid = os.fork()
        if pid == 0:  # the pod
            status = 1
            try:
                status = self.pod_main(job)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(status)  # nothing of the test process's own exit runs here
        with self._lock:
            self.pods[name] = pid
            self._ended[pid] = threading.Event()
        threading.Thread(target=self._wait, args=(cluster, name, pid), daemon=True).start()

    def _wait(self, cluster: StandInCluster, name: str, pid: int) -> None:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        with self._lock:
            self.exits[pid] = code
            deleted = pid in self.killed
        self._ended[pid].set()
        if deleted:  # delete_pod says what the cluster shows
            return
        if code == 0:
            cluster.finish(name, succeeded=True)
            return
        cluster.set_pod(
            name, phase="Failed", containers=[container_status("trial", terminated=(code, "Error"))]
        )
        cluster.finish(name, succeeded=False)

    def delete_pod(self, cluster: StandInCluster, name: str, *, disruption: str | None = None) -> int:
        """Delete the Job's running pod: SIGKILL its process (waiting until it is gone), then
        show it as a cluster would (module docstring); with ``disruption`` the pod was evicted
        and the Job's replacement pod starts. The killed pod's pid."""
        with self._lock:
            pid = self.pods[name]
            self.killed.append(pid)
        os.kill(pid, signal.SIGKILL)
        if not self._ended[pid].wait(30):
            raise RuntimeError(f"pod process {pid} of Job {name} did not end after SIGKILL")
        if disruption is None:
            cluster.delete_pod(name)
            cluster.finish(name, succeeded=False)  # backoffLimit 0: the Job fails
            return pid
        cluster.set_pod(
            name,
            phase="Failed",
            conditions=[
                {"type": "DisruptionTarget", "status": "True", "reason": disruption, "message": "deleted"}
            ],
            containers=[container_status("trial", terminated=(137, "Error"))],
        )
        cluster.replace_pod(name)  # podFailurePolicy Ignore: the Job makes a new pod
        self._start(cluster, name)
        return pid


__all__ = ["ProcessKubelet", "preload_trial_pod", "run_trial_pod"]
