"""A model that spent tokens without a price shows "unknown" cost, never "$0.0000"."""

import pytest

from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.progress import ProgressView
from orchestrator.report import build_report, render_markdown
from orchestrator.store import Lease, TrialStore

USAGE = {  # agent: (prompt tokens, agent cost)
    "unpriced": (1200, 0.0),
    "priced": (1200, 0.01),
    "oracle": (0, 0.0),  # replays a solution: no tokens, really free
}


def _completed_store(tmp_path, db: str, run: str, agents, result, *, model=lambda agent: "m") -> TrialStore:
    """Run ``run`` in a fresh SQLite store ``tmp_path/db``: two trials per agent, each completed as passed with
    the fields ``result(agent)`` gives (tokens, costs)."""
    store = TrialStore(f"sqlite:///{tmp_path / db}")
    store.save_experiment(run, {"name": run})
    store.enqueue(
        [
            TrialSpec(
                experiment=run,
                task_id=f"t{i}",
                world_id="w",
                world_digest="d",
                agent_name=agent,
                agent="replay",
                model=model(agent),
                run_index=0,
            )
            for agent in agents
            for i in range(2)
        ]
    )
    for lease in store.lease("w", limit=100, lease_s=60):
        store.complete(
            lease,
            "w",
            TrialResult(
                trial_id=lease.trial_id,
                outcome=Outcome.passed,
                score=1.0,
                **result(lease.spec.agent_name),
            ),
        )
    return store


def _store(tmp_path) -> TrialStore:
    def usage(agent: str) -> dict:
        tokens, cost = USAGE[agent]
        return {"prompt_tokens": tokens, "completion_tokens": tokens // 10, "agent_cost_usd": cost}

    return _completed_store(tmp_path, "atoll.db", "exp", USAGE, usage, model=lambda agent: f"m-{agent}")


def _row(markdown: str, agent: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith("| ") and f" {agent} |" in line)


def test_the_report_says_unknown_for_tokens_without_a_price(tmp_path):
    store = _store(tmp_path)
    try:
        report = build_report(store, "exp")
    finally:
        store.dispose()
    markdown = render_markdown(report)
    leaderboard = markdown.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert _row(leaderboard, "unpriced").endswith("| unknown |")
    assert _row(leaderboard, "priced").endswith("| $0.0200 |")
    assert _row(leaderboard, "oracle").endswith("| $0.0000 |")
    usage = markdown.split("## Usage and cost", 1)[1]
    assert _row(usage, "unpriced").endswith("| unknown | $0.0000 | $0.0000 |")  # agent, personas, judge
    assert report["agents"]["unpriced"]["agent_cost_known"] is False
    assert report["agents"]["oracle"]["agent_cost_known"] is True


def test_the_progress_line_says_cost_unknown_once_unpriced_tokens_were_spent(tmp_path):
    store = _store(tmp_path)
    try:
        view = ProgressView("exp", store, quiet=True)
        rows = {row.spec.agent_name: row for row in store.trial_rows("exp")}
    finally:
        store.dispose()
    leases = {agent: Lease("exp", row.result.trial_id, "token", 1, row.spec) for agent, row in rows.items()}
    view.event("finished", leases["oracle"], rows["oracle"].result)
    assert "· $0.0000 ·" in view._render().plain
    view.event("finished", leases["unpriced"], rows["unpriced"].result)
    assert "· cost unknown ·" in view._render().plain
    view.event("finished", leases["priced"], rows["priced"].result)
    assert "· $0.0100 + unknown ·" in view._render().plain


def _judged_store(tmp_path) -> TrialStore:
    """Agent "judged" is priced ($0.01 a trial) and its judge spent tokens with no price;
    agent "free-judge" has a priced judge ($0.002 a trial)."""
    judge_cost = {"judged": 0.0, "free-judge": 0.002}
    return _completed_store(
        tmp_path,
        "judged.db",
        "judged",
        judge_cost,
        lambda agent: {
            "prompt_tokens": 1000,
            "completion_tokens": 100,
            "agent_cost_usd": 0.01,
            "judge_prompt_tokens": 800,
            "judge_completion_tokens": 20,
            "judge_cost_usd": judge_cost[agent],
        },
    )


def test_an_unpriced_judge_is_unknown_cost_in_the_report_and_the_viewer(tmp_path):
    from orchestrator.viewer import data

    store = _judged_store(tmp_path)
    try:
        report = build_report(store, "judged")
        trials = data.run_trials(store, "judged")
        detail = data.run_detail(store, "judged")
    finally:
        store.dispose()
    markdown = render_markdown(report)
    usage = markdown.split("## Usage and cost", 1)[1].split("\n## ", 1)[0]
    assert _row(usage, "judged").endswith("| $0.0200 | $0.0000 | unknown |")  # agent, personas, judge
    assert _row(usage, "free-judge").endswith("| $0.0200 | $0.0000 | $0.0040 |")
    leaderboard = markdown.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert _row(leaderboard, "judged").endswith("| unknown |")  # every trial has an unknown part
    assert _row(leaderboard, "free-judge").endswith("| $0.0240 |")
    assert report["agents"]["judged"]["judge_cost_known"] is False
    assert report["agents"]["judged"]["judge_prompt_tokens"] == 1600
    assert report["agents"]["free-judge"]["mean_cost_usd"] == pytest.approx(0.012)
    rows = {row["agent"]: row for row in report["trial_rows"]}
    assert rows["judged"]["judge_cost_usd"] is None and rows["judged"]["cost_usd"] is None
    assert rows["judged"]["agent_cost_usd"] == 0.01 and rows["judged"]["judge_prompt_tokens"] == 800
    assert rows["free-judge"]["cost_usd"] == pytest.approx(0.012)
    assert "unknown" in report["outcome"]
    # The viewer says the same, by the same rule.
    viewer = {row["agent"]: row for row in trials}
    assert viewer["judged"]["cost"] == "unknown" and viewer["judged"]["cost_usd"] is None
    assert viewer["free-judge"]["cost"] == "$0.0120"
    board = {row["agent"]: row for row in detail["leaderboard"]}
    assert board["judged"]["cost"] == "unknown" and board["free-judge"]["cost"] == "$0.0240"
    # Sums are of what was priced (the judged agent's own cost included), "+ unknown" beside it.
    assert detail["cost"] == "$0.0440 + unknown (2 unpriced trials)"
    assert report["cost"] == {"known_usd": pytest.approx(0.044), "unpriced_trials": 2, "finished_trials": 4}


def test_the_progress_line_counts_an_unpriced_judge_as_unknown_cost(tmp_path):
    store = _judged_store(tmp_path)
    try:
        view = ProgressView("judged", store, quiet=True)
        rows = {row.spec.agent_name: row for row in store.trial_rows("judged")}
    finally:
        store.dispose()
    leases = {
        agent: Lease("judged", row.result.trial_id, "token", 1, row.spec) for agent, row in rows.items()
    }
    view.event("finished", leases["free-judge"], rows["free-judge"].result)
    assert "· $0.0120 ·" in view._render().plain
    view.event("finished", leases["judged"], rows["judged"].result)
    assert "· $0.0220 + unknown ·" in view._render().plain


def test_the_compare_page_says_unknown_for_an_unpriced_cost(tmp_path):
    from orchestrator.viewer.compare import compare_runs

    store = _judged_store(tmp_path)
    try:
        pairs = {pair["agent_a"]: pair for pair in compare_runs(store, "judged", "judged")["pairs"]}
    finally:
        store.dispose()
    unpriced = pairs["judged"]["metrics"]["cost_usd"]
    assert (unpriced["a_text"], unpriced["b_text"], unpriced["delta"]) == ("unknown", "unknown", None)
    priced = pairs["free-judge"]["metrics"]["cost_usd"]
    assert (priced["a_text"], priced["delta"]) == ("$0.0240", 0)


def test_the_personas_replies_count_in_every_cost(tmp_path):
    """A world's personas answer the agent through a model of their own (docs/coworkers.md):
    what they cost is part of the trial's cost in the report, its trial rows, the viewer and the
    progress line; their tokens with no price make the cost unknown, as the agent's do."""
    personas = {"talks": (300, 0.005), "talks-unpriced": (300, 0.0), "quiet": (0, 0.0)}
    store = _completed_store(
        tmp_path,
        "personas.db",
        "personas",
        personas,
        lambda agent: {
            "prompt_tokens": 1000,
            "completion_tokens": 100,
            "agent_cost_usd": 0.01,
            "coworker_prompt_tokens": personas[agent][0],
            "coworker_completion_tokens": personas[agent][0] // 10,
            "coworker_cost_usd": personas[agent][1],
        },
    )
    try:
        report = build_report(store, "personas")
        rows = {row.spec.agent_name: row for row in store.trial_rows("personas")}
        view = ProgressView("personas", store, quiet=True)
    finally:
        store.dispose()
    assert rows["talks"].result.cost_usd == pytest.approx(0.015)
    talks = report["agents"]["talks"]
    assert talks["coworker_cost_usd"] == pytest.approx(0.01) and talks["mean_cost_usd"] == pytest.approx(
        0.015
    )
    trials = {t["agent"]: t for t in report["trial_rows"]}
    assert trials["talks"]["coworker_cost_usd"] == pytest.approx(0.005)
    assert trials["talks"]["cost_usd"] == pytest.approx(0.015)
    assert trials["talks-unpriced"]["cost_usd"] is None  # persona tokens without a price: unknown
    unpriced = report["agents"]["talks-unpriced"]
    assert unpriced["coworker_unpriced_trials"] == 2 and unpriced["mean_cost_usd"] is None
    assert unpriced["agent_cost_known"] is True  # the agent's own cost still is
    assert report["agents"]["quiet"]["coworker_unpriced_trials"] == 0
    assert report["cost"]["known_usd"] == pytest.approx(2 * 0.015 + 2 * 0.01 + 2 * 0.01)
    markdown = render_markdown(report)
    leaderboard = markdown.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert _row(leaderboard, "talks").endswith("| $0.0300 |")
    usage = markdown.split("## Usage and cost", 1)[1]
    assert _row(usage, "talks").endswith("| $0.0200 | $0.0100 | $0.0000 |")
    assert _row(usage, "talks-unpriced").endswith("| $0.0200 | unknown | $0.0000 |")
    lease = Lease("personas", rows["talks"].result.trial_id, "token", 1, rows["talks"].spec)
    view.event("finished", lease, rows["talks"].result)
    assert "· $0.0150 ·" in view._render().plain


def test_the_cost_ceiling_counts_what_the_personas_cost(tmp_path):
    """The run's spent money, which its cost ceiling is held to across workers, includes the
    personas' replies: a run of chatty worlds cannot spend past its ceiling unseen."""
    store = _completed_store(
        tmp_path,
        "ceiling.db",
        "ceiling",
        ["talks"],
        lambda agent: {"agent_cost_usd": 0.01, "judge_cost_usd": 0.002, "coworker_cost_usd": 0.005},
    )
    try:
        assert store.spent_usd("ceiling") == pytest.approx(2 * 0.017)
    finally:
        store.dispose()
