"""Tasks whose world lists an app atoll cannot serve are never run silently: skipped and
reported (skip_unavailable_apps), or failed as infra_error naming the app."""

from __future__ import annotations

import json
from pathlib import Path

from atoll.experiment import ExperimentSpec
from orchestrator.executors.instant import InstantExecutor
from orchestrator.runner import run_experiment
from tests.atoll import apex_replica as replica


def _spec(tmp_path: Path, benchmark: Path, **fields) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "apps",
            "benchmark": str(benchmark),
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
            "store": f"sqlite:///{tmp_path / 'atoll.db'}",
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
            **fields,
        }
    )


async def test_skipped_tasks_are_reported_as_excluded_with_the_reason(tmp_path):
    benchmark = replica.write_directory(tmp_path / "apex")
    spec = _spec(tmp_path, benchmark, skip_unavailable_apps=True)
    outcome = await run_experiment(spec, executor_factory=lambda b, s: InstantExecutor(b, s), quiet=True)
    assert outcome.planned == 2  # the two tasks of the law world
    report = json.loads(outcome.report_paths["json"].read_text())
    assert set(report["excluded_tasks"]) == {replica.IB_TASK, replica.NULL_OUTPUT_TASK}
    assert "Edgar SEC" in report["excluded_tasks"][replica.IB_TASK]
    markdown = outcome.report_paths["md"].read_text()
    assert "skip_unavailable_apps" in markdown and replica.IB_TASK in markdown


async def test_without_skipping_they_fail_as_infra_error_naming_the_app(tmp_path):
    benchmark = replica.write_directory(tmp_path / "apex")
    spec = _spec(
        tmp_path,
        benchmark,
        tasks={"ids": [replica.IB_TASK]},
        max_infra_retries=0,
        infra_error_abort_rate=1.0,
        infra_retry_backoff_s=0,
    )
    outcome = await run_experiment(spec, quiet=True)
    assert outcome.counts["infra_error"] == 1
    report = json.loads(outcome.report_paths["json"].read_text())
    reasons = " ".join(report["agents"]["oracle"]["exclusion_reasons"])
    assert "Edgar SEC" in reasons and "market_data" in reasons


async def test_the_kubernetes_executor_fails_them_before_creating_a_job(tmp_path):
    import pytest

    from atoll.loader import load_benchmark
    from orchestrator.executors.base import InfraError
    from orchestrator.executors.kubernetes import KubernetesExecutor, KubernetesSettings
    from orchestrator.planner import plan_trials
    from tests.deploy.kube_standin import StandInCluster

    benchmark_dir = replica.write_directory(tmp_path / "apex")
    spec = _spec(tmp_path, benchmark_dir, executor="kubernetes", tasks={"ids": [replica.IB_TASK]})
    benchmark = load_benchmark(benchmark_dir)
    template = Path(__file__).resolve().parents[2] / "k8s" / "base" / "trial-job.yaml"
    with StandInCluster() as cluster:
        settings = KubernetesSettings(
            namespace="atoll", job_template=template, api_url=cluster.url, poll_s=0.05
        )
        executor = KubernetesExecutor(benchmark, spec, settings)
        (trial,) = plan_trials(benchmark, spec)
        try:
            with pytest.raises(InfraError, match="lists apps atoll cannot serve: Edgar SEC"):
                await executor.run(trial, attempt=1)
        finally:
            await executor.aclose()
        assert not cluster.jobs
