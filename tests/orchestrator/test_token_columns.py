"""Reasoning and cached tokens reach the trial results, the report (per trial and per agent) and the
viewer (trial rows, leaderboard), added up as providers bill them."""

import json

from atoll.trajectory import Usage
from orchestrator.report import build_report, leaderboard_rows, render_markdown
from orchestrator.store import TrialStore
from orchestrator.viewer import data
from orchestrator.viewer.trial import trial_detail

from .test_unknown_cost import _completed_store, _row

TOKENS = {  # agent: its usage in each of its two trials
    "thinker": Usage(
        prompt_tokens=5000,
        completion_tokens=800,
        reasoning_tokens=600,
        cached_tokens=4096,
        cache_write_tokens=300,
        cost_usd=0.02,
    ),
    "plain": Usage(prompt_tokens=1000, completion_tokens=100, cost_usd=0.01),
}


def _store(tmp_path):
    grade = tmp_path / "grade.json"
    grade.write_text(
        json.dumps(
            {
                "task_id": "t0",
                "criteria": [],
                "passed": True,
                "score": 1.0,
                "judge_cost_usd": 0.003,
                "judge_prompt_tokens": 3000,
                "judge_completion_tokens": 300,
                "judge_reasoning_tokens": 250,
                "judge_cached_tokens": 2048,
            }
        )
    )

    def result(agent: str) -> dict:
        usage = TOKENS[agent]
        return {
            "grade_uri": grade.as_uri(),
            "judge_cost_usd": 0.003,
            "judge_prompt_tokens": 3000,
            "judge_completion_tokens": 300,
            "judge_reasoning_tokens": 250,
            "judge_cached_tokens": 2048,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "agent_cost_usd": usage.cost_usd,
        }

    return _completed_store(tmp_path, "atoll.db", "exp", TOKENS, result)


def test_the_report_shows_reasoning_and_cached_tokens_per_agent_and_per_trial(tmp_path):
    store = _store(tmp_path)
    try:
        report = build_report(store, "exp")
    finally:
        store.dispose()
    thinker = report["agents"]["thinker"]
    assert (thinker["reasoning_tokens"], thinker["cached_tokens"], thinker["cache_write_tokens"]) == (
        1200,
        8192,
        600,
    )
    assert report["agents"]["plain"]["reasoning_tokens"] == 0
    markdown = render_markdown(report)
    usage = markdown.split("## Usage and cost", 1)[1].split("\n## ", 1)[0]
    assert "| Prompt tokens | Cached | Cache writes | Completion tokens | Reasoning |" in usage
    assert "| 10000 | 8192 | 600 | 1600 | 1200 |" in _row(usage, "thinker")
    trials = markdown.split("## Trials", 1)[1].split("\n## ", 1)[0]
    assert "| 5800 (600 reasoning, 4096 cached) |" in _row(trials, "thinker")
    assert "| 1100 |" in _row(trials, "plain")
    rows = {row["agent"]: row for row in leaderboard_rows(report)}
    assert rows["thinker"]["tokens"] == {
        "prompt_tokens": 10000,
        "completion_tokens": 1600,
        "reasoning_tokens": 1200,
        "cached_tokens": 8192,
        "cache_write_tokens": 600,
    }
    trial_rows = [row for row in report["trial_rows"] if row["agent"] == "thinker"]
    assert all(row["reasoning_tokens"] == 600 and row["cached_tokens"] == 4096 for row in trial_rows)
    # the judge's, per agent and per trial
    assert (thinker["judge_reasoning_tokens"], thinker["judge_cached_tokens"]) == (500, 4096)
    assert all(
        row["judge_reasoning_tokens"] == 250 and row["judge_cached_tokens"] == 2048 for row in trial_rows
    )


def test_the_viewer_rows_carry_reasoning_and_cached_tokens(tmp_path):
    store = _store(tmp_path)
    try:
        trials = data.run_trials(store, "exp", cache=data._uncached())
        detail = data.run_detail(store, "exp", cache=data._uncached())
    finally:
        store.dispose()
    thinker = [row for row in trials if row["agent"] == "thinker"]
    assert all(
        (row["tokens"], row["reasoning_tokens"], row["cached_tokens"]) == (5800, 600, 4096) for row in thinker
    )
    store = TrialStore(f"sqlite:///{tmp_path / 'atoll.db'}")
    try:
        trial = trial_detail(store, thinker[0]["trial_id"])
    finally:
        store.dispose()
    assert trial["grade"]["judge_tokens_text"] == "3300 (250 reasoning, 2048 cached)"
    board = {row["agent"]: row for row in detail["leaderboard"]}
    assert board["thinker"]["tokens"]["reasoning_tokens"] == 1200
    assert board["plain"]["tokens"]["cached_tokens"] == 0
