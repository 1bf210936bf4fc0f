"""A report counts only the trials it describes: fingerprints, archives, one outcome per
(agent, task, run), and every exclusion stated — through the real CLI and PostgreSQL."""

import json
import subprocess
import sys

import yaml

from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark


def _atoll(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "atoll_cli", *args], capture_output=True, text=True, timeout=timeout
    )


def _experiment(tmp_path, store_url, *, tasks=3, runs=2, max_steps=10, agents=None, **fields) -> dict:
    benchmark = tmp_path / "bench"
    if not benchmark.exists():
        write_benchmark(
            benchmark, tasks=[make_task(f"t{i}", domain=["Law", "Banking"][i % 2]) for i in range(tasks)]
        )
    experiment = {
        "name": "exp",
        "benchmark": str(benchmark),
        "agents": agents or [{"name": "alpha", "agent": "replay", "model": "replay"}],
        "runs": runs,
        "limits": {"max_steps": max_steps},
        "executor": "instant",
        "store": store_url,
        "output_dir": str(tmp_path / "out"),
    }
    experiment.update(fields)
    return experiment


def _write(tmp_path, experiment: dict, name: str = "exp.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(experiment))
    return path


def _report(tmp_path, run: str) -> dict:
    return json.loads((tmp_path / "out" / run / "report.json").read_text())


def test_edited_experiment_is_refused_and_new_run_or_replace_keep_configurations_apart(
    tmp_path, postgres_url
):
    path = _write(tmp_path, _experiment(tmp_path, postgres_url, max_steps=10))
    first = _atoll("run", str(path), "-q")
    assert first.returncode == 0, first.stderr

    # More runs only add trials: accepted as an extension, nothing re-run.
    more = _write(tmp_path, _experiment(tmp_path, postgres_url, max_steps=10, runs=3))
    extended = _atoll("run", str(more), "-q")
    assert extended.returncode == 0, extended.stderr
    assert (
        "3 run now" in extended.stdout
        and _report(tmp_path, "exp")["metrics"]["overall"]["alpha"]["trials_graded"] == 9
    )

    edited = _write(tmp_path, _experiment(tmp_path, postgres_url, max_steps=20, runs=2))
    refused = _atoll("run", str(edited), "-q")
    assert refused.returncode == 2
    message = refused.stderr.strip()
    assert message.count("\n") == 0, message  # one line, no traceback
    assert "run 'exp' already exists with another configuration" in message
    assert "agent alpha config.max_steps: 10 → 20" in message and "runs 3 → 2" in message
    assert "--new-run NAME" in message and "--replace" in message
    store = TrialStore(postgres_url)
    try:
        assert store.counts("exp")["total"] == 9  # nothing was enqueued by the refused run

        beside = _atoll("run", str(edited), "-q", "--new-run", "exp-steps20")
        assert beside.returncode == 0, beside.stderr
        assert store.counts("exp-steps20")["done"] == 6 and store.counts("exp")["done"] == 9

        replaced = _atoll("run", str(edited), "-q", "--replace")
        assert replaced.returncode == 0, replaced.stderr
        assert "archived 9 trials of the earlier configuration" in replaced.stdout
        report = _report(tmp_path, "exp")
        alpha = report["metrics"]["overall"]["alpha"]
        assert alpha["trials_graded"] == 6  # only max_steps=20, runs=2
        assert report["left_out"]["archived_trials"] == 9
        (archive,) = store.archives("exp")
        assert archive["trials"] == 9 and archive["archive"].startswith("replaced-")
        assert store.counts("exp")["total"] == 6
        markdown = (tmp_path / "out" / "exp" / "report.md").read_text()
        assert "## Left out of this report" in markdown and "| 9 |" in markdown
        # The archived rows are still there, with their results.
        assert sum(archive["by_outcome"].values()) == 9
    finally:
        store.dispose()

    # Resuming the replaced configuration is a plain resume.
    again = _atoll("run", str(edited), "-q")
    assert again.returncode == 0, again.stderr
    assert "0 run now" in again.stdout


def test_report_counts_one_outcome_per_agent_task_and_run(tmp_path, postgres_url):
    """A store written before fingerprints holds two configurations of one (agent, task,
    run); the report counts one of them, in every metric, and says what it left out."""
    store = TrialStore(postgres_url)
    try:
        store.save_experiment(
            "legacy",
            {"name": "legacy", "benchmark": "b", "runs": 2, "agents": [{"name": "a"}, {"name": "b"}]},
        )

        def spec(agent: str, task: str, run: int, steps: int) -> TrialSpec:
            return TrialSpec(
                experiment="legacy",
                task_id=task,
                world_id="w",
                world_digest="d",
                agent_name=agent,
                agent="replay",
                model="m",
                agent_config={"max_steps": steps},
                run_index=run,
                domain="Law",
            )

        old = [spec(agent, f"t{i}", run, 10) for agent in "ab" for i in range(4) for run in range(2)]
        new = [spec(agent, f"t{i}", run, 20) for agent in "ab" for i in range(4) for run in range(2)]
        for batch, outcome in ((old, Outcome.failed), (new, Outcome.passed)):
            store.enqueue(batch)
            for lease in store.lease("w", limit=100, lease_s=60):
                passed = outcome is Outcome.passed and lease.spec.agent_name == "a"
                store.complete(
                    lease,
                    "w",
                    TrialResult(
                        trial_id=lease.trial_id,
                        outcome=Outcome.passed if passed else Outcome.failed,
                        score=float(passed),
                    ),
                )
    finally:
        store.dispose()
    result = _atoll("report", "legacy", "--store", postgres_url, "--output", str(tmp_path / "out" / "legacy"))
    assert result.returncode == 0, result.stderr
    report = _report(tmp_path, "legacy")
    a = report["metrics"]["overall"]["a"]
    assert a["trials_graded"] == 8 and a["trials_passed"] == 8  # the later configuration, once
    assert a["pass_at_k"]["2"]["value"] == 1.0 and a["pass_hat_k"]["2"]["value"] == 1.0
    (pair,) = report["metrics"]["pairwise"]
    assert (pair["pairs"], pair["a_only"], pair["b_only"]) == (8, 8, 0)
    assert report["left_out"]["duplicate_trials"] == 16
    assert any("16 trial(s) repeat an (agent, task, run)" in warning for warning in report["warnings"])


def test_report_states_every_exclusion_and_tests_pairs_per_domain(tmp_path, postgres_url):
    agents = [
        {
            "name": "alpha",
            "agent": "replay",
            "model": "replay",
            "config": {"instant_pass_rate": 1.0, "instant_ungradeable_tasks": ["t0", "t1"]},
        },
        {
            "name": "beta",
            "agent": "replay",
            "model": "other",
            "config": {
                "instant_pass_rate": 0.0,
                "instant_infra_error_tasks": ["t2"],
                "instant_ungradeable_criteria": 1,
            },
        },
    ]
    experiment = _experiment(
        tmp_path,
        postgres_url,
        tasks=6,
        runs=2,
        agents=agents,
        max_infra_retries=0,
        infra_error_abort_rate=1.0,
    )
    result = _atoll("run", str(_write(tmp_path, experiment)), "-q")
    # Infra errors and ungradeable trials: the run is reported whole, and exits 4 saying why.
    assert result.returncode == 4, result.stderr
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        "run exp: incomplete: 2 trials ended in an infra error, 4 trials are ungradeable"
    )
    relaxed = _atoll("run", str(_write(tmp_path, experiment)), "-q", "--allow-incomplete")
    assert relaxed.returncode == 0, relaxed.stderr
    assert "(--allow-incomplete: exit status 0)" in relaxed.stderr
    report = _report(tmp_path, "exp")
    alpha, beta = report["metrics"]["overall"]["alpha"], report["metrics"]["overall"]["beta"]
    assert alpha["tasks_graded"] == 4 and alpha["tasks_total"] == 6
    assert alpha["tasks_without_graded_runs"] == {
        "t0": {"ungradeable: simulated judge failure": 2},
        "t1": {"ungradeable: simulated judge failure": 2},
    }
    assert beta["tasks_without_graded_runs"] == {"t2": {"infra_error: simulated infrastructure failure": 2}}
    assert alpha["excluded_trials"] == {"ungradeable": 4} and beta["excluded_trials"] == {"infra_error": 2}
    # Fewer than 10 tasks behind an interval: flagged.
    assert "warning" in alpha["pass_at_1"] and any("only 4 task(s)" in w for w in report["warnings"])
    # beta fails everything with one ungradeable criterion in each failed trial: stated.
    assert beta["failed_trials_with_ungradeable_criteria"] == 10
    assert beta["ungradeable_criteria_in_failed_trials"] == 10
    # Pairwise per domain, each domain its own BH family.
    by_domain = report["metrics"]["pairwise_by_domain"]
    assert set(by_domain) == {"Law", "Banking"}
    (law,) = by_domain["Law"]
    # Law = t0, t2, t4: paired graded runs only where both have one — t4 (2 runs).
    assert (law["pairs"], law["a_only"], law["b_only"]) == (2, 2, 0)
    assert law["q_value"] == law["p_value"]  # a family of one pair
    markdown = (tmp_path / "out" / "exp" / "report.md").read_text()
    assert "## Exclusions" in markdown and "Tasks with no graded run" in markdown
    assert "| alpha | t0 | 2 ungradeable: simulated judge failure |" in markdown
    assert "### Law" in markdown and "### Banking" in markdown
    assert "here 10 criteria in 10 failed trials" in markdown
    assert "| alpha | 1 | " in markdown and "4 of 6 | 2, 0 |" in markdown
