"""A model that spent tokens without a price shows "unknown" cost, never "$0.0000"."""

from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.progress import ProgressView
from orchestrator.report import build_report, render_markdown
from orchestrator.store import Lease, TrialStore

USAGE = {  # agent: (prompt tokens, agent cost)
    "unpriced": (1200, 0.0),
    "priced": (1200, 0.01),
    "oracle": (0, 0.0),  # replays a solution: no tokens, really free
}


def _store(tmp_path) -> TrialStore:
    store = TrialStore(f"sqlite:///{tmp_path / 'atoll.db'}")
    store.save_experiment("exp", {"name": "exp"})
    store.enqueue(
        [
            TrialSpec(
                experiment="exp",
                task_id=f"t{i}",
                world_id="w",
                world_digest="d",
                agent_name=agent,
                agent="replay",
                model=f"m-{agent}",
                run_index=0,
            )
            for agent in USAGE
            for i in range(2)
        ]
    )
    for lease in store.lease("w", limit=100, lease_s=60):
        tokens, cost = USAGE[lease.spec.agent_name]
        store.complete(
            lease,
            "w",
            TrialResult(
                trial_id=lease.trial_id,
                outcome=Outcome.passed,
                score=1.0,
                prompt_tokens=tokens,
                completion_tokens=tokens // 10,
                agent_cost_usd=cost,
            ),
        )
    return store


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
    assert _row(usage, "unpriced").endswith("| unknown | $0.0000 |")
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
