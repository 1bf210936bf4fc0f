"""API requests the Kubernetes executor makes per trial, against the in-test stand-in.

N trials run at once, each pod "running" for ``--run-s`` seconds; every request the official
client sends is counted by kind. Before the shared list-and-watch each trial cost a Job GET
and a pod LIST every ``ATOLL_K8S_POLL_S`` (at 512 trials and 5 s: ~205 requests/s); now the
watches are two per executor and the per-trial calls are two LISTs of the trial's Jobs (the
adoption checks, before admission and right before the create), the create, admission's
pending-pod count, Events reads while a pod is pending, one pod LIST at the end and the delete
(16 trials of 3 s: 137 requests, 8.6 per trial; docs/deploy.md).

    .venv/bin/python benchmarks/kubernetes_api.py [--trials 32] [--run-s 3]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from atoll.loader import load_benchmark  # noqa: E402
from orchestrator.executors.kubernetes import KubernetesExecutor  # noqa: E402
from orchestrator.planner import plan_trials  # noqa: E402
from tests.atoll.factories import make_task, write_benchmark  # noqa: E402
from tests.deploy.kube_standin import StandInCluster  # noqa: E402
from tests.orchestrator.test_kubernetes_api import _healthy_kubelet  # noqa: E402
from tests.orchestrator.test_kubernetes_executor import _settings, _spec  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--run-s", type=float, default=3.0)
    parser.add_argument(
        "--poll-s", type=float, default=0.5, help="ATOLL_K8S_POLL_S (timers only, no API call)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, StandInCluster() as cluster:
        tmp_path = Path(tmp)
        bench = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(args.trials)])
        spec = _spec(tmp_path, bench)
        benchmark = load_benchmark(spec.benchmark)
        trials = plan_trials(benchmark, spec)
        # Production cadences for Events and the reaper (the tests' settings make them fast).
        executor = KubernetesExecutor(
            benchmark,
            spec,
            _settings(cluster, poll_s=args.poll_s, events_s=15.0, reap_s=60.0, max_pending=args.trials + 1),
        )
        cluster.on_create = _healthy_kubelet(run_s=args.run_s)

        async def run_all():
            try:
                return await asyncio.gather(*(executor.run(trial, attempt=1) for trial in trials))
            finally:
                await executor.aclose()

        started = time.monotonic()
        results = asyncio.run(run_all())
        elapsed = time.monotonic() - started

        def kind(path: str) -> str:
            return next((name for name in ("leases", "events", "pods", "jobs") if f"/{name}" in path), path)

        kinds = collections.Counter(
            f"{method} {kind(path)}" for _at, method, path, _status in cluster.requests
        )
        print(
            f"{len(results)} trials of {args.run_s:.1f} s in {elapsed:.1f} s: {len(cluster.requests)} API requests "
            f"({len(cluster.requests) / len(results):.1f} per trial, {len(cluster.requests) / elapsed:.1f}/s)"
        )
        for kind, count in kinds.most_common():
            print(f"  {count:5d}  {kind}")
        print(
            f"per-trial polling (a Job GET and a pod LIST every 5 s) would add {2 * len(results) / 5.0:.1f} "
            f"requests/s for as long as these trials run; the watches add none"
        )


if __name__ == "__main__":
    main()
