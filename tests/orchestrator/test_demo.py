"""`atoll demo` end to end, offline: sample benchmark, oracle agent, programmatic checks."""

import json
import subprocess
import sys

import pytest

from orchestrator.demo import configured_model, demo_experiment
from orchestrator.store import TrialStore


@pytest.mark.slow
def test_demo_end_to_end(tmp_path):
    output = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "demo", "--output", str(output), "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**_clean_environment(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "## Leaderboard" in result.stdout and "| oracle |" in result.stdout
    report = json.loads((output / "demo" / "report.json").read_text())
    oracle = report["agents"]["oracle"]
    assert oracle["trials"] == 18 and oracle["finished"] == 18
    # The oracle replays reference solutions: nothing fails, nothing breaks in our machinery.
    assert "fail" not in oracle["outcomes"] and "infra_error" not in oracle["outcomes"]
    metrics = report["metrics"]["overall"]["oracle"]
    assert metrics["checks_pass"]["value"] == 1.0 and metrics["checks_pass"]["tasks"] == 18
    assert metrics["pass_at_1"]["value"] == 1.0
    for name in ("report.md", "report.html"):
        assert (output / "demo" / name).stat().st_size > 1000
    # Running it again resumes: nothing is re-run, the same leaderboard comes back.
    store = TrialStore(str(output / "atoll.db"))
    attempts = len(store.attempt_history("demo"))
    again = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "demo", "--output", str(output), "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**_clean_environment(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(store.attempt_history("demo")) == attempts == 18
    # With a judge configured, the trials kept from the checks-only demo are judged too (never
    # reported as "ungradeable: no judge configured"), without running any agent again.
    from atoll.testing.scripted_llm import ScriptedLLM

    met = {"content": json.dumps({"rationale": "the work shows it", "verdict": "met"})}
    with ScriptedLLM(lambda request: met) as judge:
        judged = subprocess.run(
            [sys.executable, "-m", "atoll_cli", "demo", "--output", str(output), "--quiet"],
            capture_output=True,
            text=True,
            timeout=600,
            env={
                **_clean_environment(),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "ATOLL_JUDGE_MODEL": "hosted_vllm/judge",
                "ATOLL_JUDGE_API_BASE": judge.api_base,
            },
        )
        assert judged.returncode == 0, judged.stderr[-3000:]
        assert judge.requests
    assert "judged 18 trials kept from an earlier demo with hosted_vllm/judge" in judged.stdout
    history = store.attempt_history("demo")
    runs = [entry for entry in history if not str(entry["worker"]).startswith("regrade")]
    assert len(runs) == 18 and len(history) == 36  # no agent ran again; each old grade kept
    store.dispose()
    report = json.loads((output / "demo" / "report.json").read_text())
    assert report["agents"]["oracle"]["outcomes"] == {"pass": 18}
    assert report["judge"]["model"] == "hosted_vllm/judge"


def _clean_environment():
    import os

    return {
        k: v
        for k, v in os.environ.items()
        if k
        not in {"ATOLL_MODEL", "ATOLL_JUDGE_MODEL", "ATOLL_API_BASE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    }


def test_demo_adds_a_react_agent_and_judge_when_a_model_is_configured(tmp_path):
    spec = demo_experiment(
        tmp_path, environ={"ATOLL_MODEL": "openai/local", "ATOLL_API_BASE": "http://127.0.0.1:9/v1"}
    )
    assert [a.name for a in spec.agents] == ["oracle", "react"]
    assert spec.agents[1].model == "openai/local" and spec.agents[1].api_base == "http://127.0.0.1:9/v1"
    assert spec.judge.model == "openai/local" and spec.judge.api_base == "http://127.0.0.1:9/v1"
    offline = demo_experiment(tmp_path, environ={})
    assert [a.name for a in offline.agents] == ["oracle"] and offline.judge.model is None
    assert configured_model({"OPENAI_API_KEY": "sk"}) == "openai/gpt-4o-mini"


@pytest.mark.slow
def test_the_sample_experiment_file_runs_as_documented(tmp_path):
    """README: `atoll bench sample atoll-out/sample-benchmark` then `atoll run examples/sample-experiment.yaml`,
    with the relative paths of the file resolved against the working directory."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "sample-experiment.yaml"
    env = {**_clean_environment(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    sample = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "bench", "sample", "atoll-out/sample-benchmark"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert sample.returncode == 0, sample.stderr
    run = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "run", str(example), "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    import json

    tasks = json.loads((tmp_path / "atoll-out" / "sample-benchmark" / "tasks_and_rubrics.json").read_text())
    # The sample experiment grades with programmatic checks alone, so the criteria only a judge
    # can decide leave trials ungradeable: the run finishes, and its exit status says it is
    # incomplete, naming why on the last line, for a pipeline that must not take it as whole.
    assert run.returncode == 4, run.stderr[-3000:]
    last_line = run.stderr.strip().splitlines()[-1]
    assert last_line.startswith("run sample: incomplete:") and "ungradeable" in last_line
    assert f"sample: {len(tasks)} of {len(tasks)} trials done" in run.stdout
    assert (tmp_path / "atoll-out" / "sample" / "report.md").exists()
    assert any((tmp_path / "atoll-out" / "artifacts" / "sample").iterdir())


@pytest.mark.slow
def test_demo_validates_the_judge_on_every_gold_output_when_one_is_configured(tmp_path, monkeypatch, capsys):
    from atoll.testing.scripted_llm import ScriptedLLM
    from atoll_cli.commands.demo import _validate_gold
    from tests.shared_sample import fresh_sample_benchmark

    met = {"content": json.dumps({"rationale": "the gold output shows it", "verdict": "met"})}
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with ScriptedLLM(lambda request: met) as judge:
        spec = demo_experiment(
            tmp_path / "demo", environ={"ATOLL_MODEL": "openai/judge", "ATOLL_API_BASE": judge.api_base}
        )
        fresh_sample_benchmark(tmp_path / "demo" / "sample-benchmark")
        _validate_gold(spec, quiet=True)
        assert judge.requests  # the judge itself was asked, not only the checks
    report = json.loads((tmp_path / "demo" / "gold-validation.json").read_text())
    tasks = json.loads((tmp_path / "demo" / "sample-benchmark" / "tasks_and_rubrics.json").read_text())
    assert {r["task_id"] for r in report["gold_results"]} == {t["task_id"] for t in tasks}
    assert all(r["passed"] for r in report["gold_results"]), [
        r for r in report["gold_results"] if not r["passed"]
    ]
    assert "18 of 18 tasks fully met" in capsys.readouterr().out
