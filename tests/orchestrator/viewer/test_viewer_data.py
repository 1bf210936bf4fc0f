"""The viewer's data over stores written directly (no sandbox): one record per (agent, task,
run) as the report counts, the per-run cache that a change in the store invalidates, the
indexed trial lookup, and the comparison of two runs."""

import sqlite3

import pytest
from sqlalchemy import inspect

from atoll.errors import AtollError
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.report import collect
from orchestrator.stats import mcnemar_exact
from orchestrator.store import TrialStore
from orchestrator.viewer import data
from orchestrator.viewer.compare import compare_runs


def _spec(run: str, agent: str, task: str, index: int, steps: int = 10) -> TrialSpec:
    return TrialSpec(
        experiment=run,
        task_id=task,
        world_id="w",
        world_digest="d",
        agent_name=agent,
        agent="replay",
        model="m",
        agent_config={"max_steps": steps},
        run_index=index,
        domain="Law",
    )


def _finish(store: TrialStore, specs: list[TrialSpec], passed) -> None:
    """Enqueue ``specs`` and record each with outcome pass when ``passed(spec)``."""
    store.enqueue(specs)
    by_id = {spec.trial_id: spec for spec in specs}
    for lease in store.lease("w", limit=len(specs), lease_s=60, experiment=specs[0].experiment):
        ok = passed(by_id[lease.trial_id])
        store.complete(
            lease,
            "w",
            TrialResult(
                trial_id=lease.trial_id, outcome=Outcome.passed if ok else Outcome.failed, score=float(ok)
            ),
        )


def _run(store: TrialStore, name: str, agents: list[str]) -> None:
    store.save_experiment(
        name,
        {"name": name, "benchmark": "b", "agents": [{"name": a} for a in agents]},
        fingerprint=f"fp-{name}",
        identity={"name": name},
    )


@pytest.fixture
def store(tmp_path):
    store = TrialStore(str(tmp_path / "atoll.db"))
    yield store
    store.dispose()


def test_the_viewer_counts_one_trial_per_agent_task_and_run_as_the_report_does(store):
    # A store written before fingerprints: two configurations of each (agent, task, run).
    _run(store, "legacy", ["a"])
    _finish(store, [_spec("legacy", "a", f"t{i}", 0, steps=10) for i in range(3)], lambda s: False)
    _finish(store, [_spec("legacy", "a", f"t{i}", 0, steps=20) for i in range(3)], lambda s: True)
    trials = data.run_trials(store, "legacy")
    assert len(trials) == 3 and {t["outcome"] for t in trials} == {"pass"}  # the later one, once
    detail = data.run_detail(store, "legacy")
    assert detail["duplicate_trials"] == 3
    assert detail["outcomes"] == {"pass": 3} and detail["matrix"]["cells"]["a"]["t0"]["runs"] == 1
    assert detail["failures"] == []  # the earlier, failed configuration is not counted
    # The same choice as the report's, trial for trial.
    records = collect(store, "legacy")[0]
    assert sorted((r.task_id, r.outcome.value) for r in records) == sorted(
        (t["task_id"], t["outcome"]) for t in trials
    )


def test_a_cached_run_is_reused_until_the_store_changes_then_recomputed(store):
    _run(store, "r", ["a"])
    specs = [_spec("r", "a", f"t{i}", 0) for i in range(2)]
    _finish(store, specs, lambda s: s.task_id == "t0")
    cache = data.RunCache()
    first = data.run_detail(store, "r", cache=cache)
    assert data.run_detail(store, "r", cache=cache) is first  # unchanged store: not recomputed
    assert first["leaderboard"][0]["pass_at_1"]["value"] == 0.5
    # A regrade changes an outcome: the next read shows it.
    store.replace_result(
        "r",
        specs[1].trial_id,
        TrialResult(trial_id=specs[1].trial_id, outcome=Outcome.passed, score=1.0),
        note="regrade",
    )
    second = data.run_detail(store, "r", cache=cache)
    assert second is not first and second["leaderboard"][0]["pass_at_1"]["value"] == 1.0
    # A run in progress: a new trial enqueued and leased shows as running at once.
    store.enqueue([_spec("r", "a", "t2", 0)])
    assert data.run_detail(store, "r", cache=cache)["status"] == "incomplete"
    store.lease("w", limit=1, lease_s=60, experiment="r")
    assert data.run_detail(store, "r", cache=cache)["status"] == "running"
    assert [t["state"] for t in data.run_trials(store, "r", cache=cache) if t["task_id"] == "t2"] == [
        "leased"
    ]
    assert data.list_runs(store, cache=cache)[0]["counts"]["leased"] == 1


def test_a_trial_is_found_by_id_through_an_index_in_every_run_holding_it(store, tmp_path):
    for name in ("older", "newer"):
        _run(store, name, ["a"])
        _finish(store, [_spec(name, "a", "t0", 0)], lambda s, name=name: name == "newer")
    trial_id = _spec("x", "a", "t0", 0).trial_id  # the identity does not include the run
    (spec, result, _state, _attempts), holders = data.find_trial(store, trial_id)
    assert holders == ["newer", "older"] and spec.experiment == "newer" and result.outcome is Outcome.passed
    (spec, result, _state, _attempts), _ = data.find_trial(store, trial_id, "older")
    assert spec.experiment == "older" and result.outcome is Outcome.failed
    with pytest.raises(AtollError, match="in run 'nope'"):
        data.find_trial(store, trial_id, "nope")
    with pytest.raises(AtollError, match="no trial 'ffff'"):
        data.find_trial(store, "ffff")
    assert "ix_trials_trial_id" in {ix["name"] for ix in inspect(store.engine).get_indexes("trials")}


def test_a_store_made_before_the_trial_id_index_gets_it_when_opened(tmp_path):
    path = tmp_path / "old.db"
    TrialStore(str(path)).dispose()
    with sqlite3.connect(path) as connection:
        connection.execute("DROP INDEX ix_trials_trial_id")
    store = TrialStore(str(path))
    try:
        assert "ix_trials_trial_id" in {ix["name"] for ix in inspect(store.engine).get_indexes("trials")}
    finally:
        store.dispose()


def test_compare_matches_agents_pairs_runs_and_tests_them(store):
    tasks = [f"t{i}" for i in range(8)]
    _run(store, "base", ["a", "b"])
    _run(store, "next", ["a", "b", "c"])
    # Agent a: passes t0..t1 in base; passes t0..t6 in next (5 fixed, none broken).
    _finish(
        store,
        [_spec("base", agent, t, 0) for agent in "ab" for t in tasks],
        lambda s: s.agent_name == "a" and s.task_id in ("t0", "t1") or s.agent_name == "b",
    )
    _finish(
        store,
        [_spec("next", agent, t, 0) for agent in "abc" for t in tasks + ["t8"]],
        lambda s: s.agent_name == "a" and s.task_id < "t7" or s.agent_name == "b" and s.task_id != "t3",
    )
    result = compare_runs(store, "base", "next")
    assert [(p["agent_a"], p["agent_b"]) for p in result["pairs"]] == [
        ("a", "a"),
        ("b", "b"),
    ]  # c is in one run
    a, b = result["pairs"]
    assert {k: a["mcnemar"][k] for k in ("pairs", "a_only", "b_only")} == {
        "pairs": 8,
        "a_only": 0,
        "b_only": 5,
    }
    assert a["mcnemar"]["p_value"] == pytest.approx(mcnemar_exact(0, 5))
    assert b["mcnemar"]["b_only"] == 0 and b["mcnemar"]["a_only"] == 1
    assert a["mcnemar"]["q_value"] >= a["mcnemar"]["p_value"]  # Benjamini–Hochberg across the two pairs
    assert a["changes"] == {"same": 3, "better": 5, "only in b": 1}
    assert {t["task_id"]: t["change"] for t in b["tasks"]}["t3"] == "worse"
    assert a["metrics"]["pass_at_1"]["a"] == pytest.approx(2 / 8)
    assert a["metrics"]["pass_at_1"]["delta"] == pytest.approx(
        7 / 9 - 2 / 8
    )  # t8 counts in next's own Pass@1
    with pytest.raises(AtollError) as missing:
        compare_runs(store, "base", "nope")
    assert missing.value.code == "unknown_run"


def test_compare_two_single_agent_runs_whatever_their_agent_names(store):
    _run(store, "gpt", ["gpt"])
    _run(store, "claude", ["claude"])
    _finish(store, [_spec("gpt", "gpt", "t0", 0)], lambda s: False)
    _finish(store, [_spec("claude", "claude", "t0", 0)], lambda s: True)
    [pair] = compare_runs(store, "gpt", "claude")["pairs"]
    assert (pair["agent_a"], pair["agent_b"]) == ("gpt", "claude") and pair["mcnemar"]["b_only"] == 1
    _run(store, "two", ["x", "y"])
    assert compare_runs(store, "gpt", "two")["notes"][0].startswith("no agent to compare")


def test_the_viewer_groups_failures_exactly_as_report_json_does(store):
    from orchestrator.report import build_report

    _run(store, "mixed", ["a", "b"])
    specs = [_spec("mixed", agent, f"t{i}", 0) for agent in ("a", "b") for i in range(5)]
    store.enqueue(specs + [_spec("mixed", "a", "t9", 0)])  # t9 is leased and never finishes
    results = [
        {"outcome": Outcome.passed, "score": 1.0, "run_status": "completed"},
        {"outcome": Outcome.failed, "run_status": "completed"},
        {"outcome": Outcome.failed, "run_status": "max_steps"},
        {"outcome": Outcome.ungradeable, "error": "c2: judge call failed: no answer within 60 s"},
        {"outcome": Outcome.infra_error, "error": "infrastructure: sandbox did not start"},
    ]
    leases = store.lease("w", limit=100, lease_s=60, experiment="mixed")
    by_id = {spec.trial_id: spec for spec in specs}
    for lease in (lease for lease in leases if lease.trial_id in by_id):
        index = int(by_id[lease.trial_id].task_id[1:])
        store.complete(lease, "w", TrialResult(trial_id=lease.trial_id, **results[index]))
    viewer = data.run_detail(store, "mixed")["failures"]
    report = build_report(store, "mixed")["failures"]
    assert [{**g, "trials": [t["trial_id"] for t in g["trials"]]} for g in viewer] == report
    reasons = {g["reason"]: g["count"] for g in report}
    assert reasons == {
        "fail: criteria not met": 2,
        "fail: run ended max_steps": 2,
        "ungradeable: judge call failed: no answer within 60 s": 2,
        "infra_error: sandbox did not start": 2,
    }
    named = {t["task_id"] for g in viewer for t in g["trials"]}
    assert named == {"t1", "t2", "t3", "t4"}  # t9 is running: not a failure


def test_the_viewer_and_report_json_give_a_trial_the_same_error_kind_and_groups(store):
    """One rule for a trial's error kind (report_trials.error_kind): an ungradeable trial's
    error starts with a criterion id, and its kind is the code after it in both."""
    from orchestrator.report import build_report

    _run(store, "kinds", ["a"])
    specs = [_spec("kinds", "a", f"t{i}", 0) for i in range(3)]
    store.enqueue(specs)
    errors = {
        "t0": (Outcome.ungradeable, "c2: judge_unavailable: judge answered 503"),
        "t1": (Outcome.infra_error, "infrastructure: sandbox did not start"),
        "t2": (Outcome.failed, None),
    }
    by_id = {spec.trial_id: spec for spec in specs}
    for lease in store.lease("w", limit=10, lease_s=60, experiment="kinds"):
        outcome, error = errors[by_id[lease.trial_id].task_id]
        store.complete(lease, "w", TrialResult(trial_id=lease.trial_id, outcome=outcome, error=error))
    viewer = {row["task_id"]: row["error_kind"] for row in data.run_trials(store, "kinds")}
    report = build_report(store, "kinds")
    assert viewer == {row["task_id"]: row["error_kind"] for row in report["trial_rows"]}
    assert viewer == {"t0": "judge_unavailable", "t1": "infrastructure", "t2": None}
    analysis = data.run_detail(store, "kinds")["failure_analysis"]
    assert analysis == report["failure_analysis"]
    kinds = {g["key"]: [by_id_task(specs, t) for t in g["trials"]] for g in analysis["error_kind"]}
    assert kinds == {"judge_unavailable": ["t0"], "infrastructure": ["t1"], "(none)": ["t2"]}
    # No grade recorded, so no missed criterion: each is under (none) for its target kind.
    assert analysis["target_kind"] == [
        {"key": "(none)", "count": 3, "trials": [by_id_task_id(specs, t) for t in ("t0", "t1", "t2")]}
    ]


def test_failures_group_by_the_grading_target_kind_of_each_criterion_they_missed():
    from atoll.report_rows import ReportTrial
    from orchestrator.report_trials import failure_analysis

    def trial(trial_id: str, outcome: str) -> ReportTrial:
        row = ReportTrial(
            trial_id=trial_id,
            run="r",
            task_id=trial_id,
            domain="",
            agent="a",
            model="m",
            run_index=0,
            state="done",
            attempts=1,
            outcome=outcome,
        )
        row.failure = None if outcome == "pass" else outcome
        return row

    missed = {"x": [("c1", "sheet right"), ("c2", "answer says so")], "y": [("c1", "sheet right")], "z": []}
    analysis = failure_analysis(
        [trial("x", "fail"), trial("y", "fail"), trial("z", "infra_error"), trial("w", "pass")],
        target_kinds={"c1": "file_type"},
        criteria_of=lambda row: missed.get(row.trial_id, []),
    )
    assert analysis["target_kind"] == [
        {"key": "file_type", "count": 2, "trials": ["x", "y"]},
        {"key": "(none)", "count": 1, "trials": ["z"]},
        {"key": "unknown", "count": 1, "trials": ["x"]},
    ]
    assert analysis["criterion"][0] == {"key": "c1: sheet right", "count": 2, "trials": ["x", "y"]}


def by_id_task(specs: list[TrialSpec], trial_id: str) -> str:
    return next(spec.task_id for spec in specs if spec.trial_id == trial_id)


def by_id_task_id(specs: list[TrialSpec], task_id: str) -> str:
    return next(spec.trial_id for spec in specs if spec.task_id == task_id)


def test_a_running_run_has_no_banner_but_its_progress_and_its_running_trial_is_no_failure(store):
    _run(store, "live", ["a"])
    specs = [_spec("live", "a", f"t{i}", 0) for i in range(3)]
    store.enqueue(specs)
    first, _second = store.lease("w", limit=2, lease_s=60, experiment="live")
    store.complete(first, "w", TrialResult(trial_id=first.trial_id, outcome=Outcome.failed))
    detail = data.run_detail(store, "live")
    assert detail["status"] == "running" and detail["banner"] is None
    assert detail["progress"]["text"] == "1 of 3 trials ended, 1 running, 1 waiting"
    assert [g["reason"] for g in detail["failures"]] == ["fail: criteria not met"]
    assert [t["trial_id"] for g in detail["failures"] for t in g["trials"]] == [first.trial_id]
    store.record_stop("live", "interrupted", "the orchestrator was stopped")
    assert data.run_detail(store, "live")["banner"]["kind"] == "interrupted"  # a stop still shows


def _half_done(store: TrialStore) -> dict[str, str]:
    """``done`` (t0 pass, t1 fail, t2 pass) against ``half`` (t0 fail, t1 pass, t2 still
    pending): the trial id of each (run, task)."""
    _run(store, "done", ["a"])
    _run(store, "half", ["a"])
    _finish(store, [_spec("done", "a", f"t{i}", 0) for i in range(3)], lambda s: s.task_id != "t1")
    _finish(store, [_spec("half", "a", f"t{i}", 0) for i in range(2)], lambda s: s.task_id == "t1")
    store.enqueue([_spec("half", "a", "t2", 0)])
    return {
        f"{run}/{task}": _spec(run, "a", task, 0).trial_id
        for run in ("done", "half")
        for task in ("t0", "t1", "t2")
    }


def test_compare_links_both_sides_trials_flags_an_unfinished_run_and_a_pending_task(store):
    ids = _half_done(store)
    compared = compare_runs(store, "done", "half")
    assert compared["unfinished"] == ["half"]
    assert compared["notes"][0].startswith("run b (half) is not finished (incomplete: 2 of 3 trials ended")
    [pair] = compared["pairs"]
    tasks = {t["task_id"]: t for t in pair["tasks"]}
    assert tasks["t2"]["change"] == "pending in b"  # not "only in a": it has not run yet
    assert tasks["t2"]["b"]["trials"] == [
        {"trial_id": ids["half/t2"], "run_index": 0, "outcome": None, "state": "pending"}
    ]
    assert [t["trial_id"] for t in tasks["t0"]["a"]["trials"]] == [ids["done/t0"]]
    assert [t["trial_id"] for t in tasks["t0"]["b"]["trials"]] == [ids["half/t0"]]
    assert (tasks["t0"]["change"], tasks["t1"]["change"]) == ("worse", "better")


def test_atoll_compare_prints_the_changes_and_the_paired_test_and_answers_json(store, tmp_path):
    import json

    from typer.testing import CliRunner

    from atoll_cli.cli import app

    _half_done(store)
    text = CliRunner().invoke(app, ["compare", "done", "half", "--store", store.url])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0] == "a: done · finished · 3/3 done · 2 pass, 1 fail"
    assert lines[2].startswith("note: run b (half) is not finished")
    assert any(
        line.startswith(
            "  McNemar exact test on 2 paired (task, run) outcomes: 1 passed only in a, 1 only in b; p = 1.000"
        )
        for line in lines
    )
    changed = [line.split()[:3] for line in lines if line.startswith(("  worse", "  better", "  pending"))]
    assert changed == [["worse", "t0", "a"], ["better", "t1", "a"], ["pending", "in", "b"]]
    assert lines[-1].split() == ["pending", "in", "b", "t2", "a", "1/1", "(pass)", "b", "0/0", "(—)"]
    answered = CliRunner().invoke(app, ["compare", "done", "half", "--store", store.url, "--json"])
    assert json.loads(answered.output) == json.loads(json.dumps(compare_runs(store, "done", "half")))
    missing = CliRunner().invoke(app, ["compare", "done", "nope", "--store", store.url])
    assert missing.exit_code != 0 and "nope" in str(missing.exception)
